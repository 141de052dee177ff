"""`mqchaos cluster heal` and `mqchaos cluster nemesis`: lift every fault; run a schedule by
hand (the `cluster` group, harness.cluster_cli, adds them)."""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import click

from harness import brokers, store
from harness.brokers.protocol import Cluster
from harness.engine import engine_answers
from harness.history import RunClock
from nemesis import net
from nemesis.core import Nemesis, heal_and_close, heal_run_dir
from nemesis.schedule import load

KINDS = list(brokers.KINDS)


def _present(cluster: Cluster) -> bool:
    return any(cluster.exists(n) for n in cluster.nodes())


def heal_kind(kind: str, wait: bool) -> str:
    cluster = brokers.get_cluster(kind)
    if not _present(cluster):
        return f"{kind}: no containers"
    heal_and_close(Nemesis(cluster, handle_signals=False), wait)
    left = sum(net.project_rules(cluster, n) for n in cluster.nodes() if cluster.running(n))
    paused = [n for n in cluster.nodes() if cluster.paused(n)]
    return f"{kind}: healed ({left} project rules left, paused containers: {paused or 'none'})"


def _alive(state_file: Path) -> bool:
    """Is the harness that wrote this state file still running? (Then it records its own.)"""
    try:
        pid = int(json.loads(state_file.read_text()).get("pid", 0))
        if pid <= 0 or pid == os.getpid():
            return False
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


@click.command()
@click.argument("kind", type=click.Choice([*KINDS, "all"]), default="all")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Run directory whose nemesis-state.json lists the faults to undo and record.")
@click.option("--no-wait", is_flag=True, help="Do not wait until the cluster is whole.")
def heal(kind, run_dir, no_wait):
    """Remove every project iptables rule and tc qdisc, unpause and start every node, and
    wait until the cluster is whole. Faults listed in a run's nemesis-state.json (--run-dir,
    or any under results/) are also written to that run's nemesis.jsonl. Idempotent."""
    if not engine_answers():
        click.echo("no Docker engine answers: nothing to heal")
        return
    # without --run-dir: every run under results/ that died with faults active
    dirs = [Path(run_dir)] if run_dir else [p.parent for p in store.state_files() if not _alive(p)]
    for d in dirs:
        state = heal_run_dir(d, wait=not no_wait)
        click.echo(f"{d}: " + (f"undid and recorded {len(state['active'])} active fault(s) of "
                               f"{state['kind']}" if state else "no active faults recorded"))
    for k in (KINDS if kind == "all" else [kind]):
        click.echo(heal_kind(k, wait=not no_wait))


@click.command("nemesis")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("schedule_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Where nemesis.jsonl and the state file go (default results/nemesis/<time>).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--hold", type=float, default=0.0,
              help="Seconds to stay after the last step before healing (faults stay active).")
def nemesis_cmd(kind, schedule_file, run_dir, seed, hold):
    """Run a nemesis schedule (YAML: a list of steps, or a scenario with `nemesis:`) against
    a running cluster, then heal. Ctrl-C / SIGTERM heal too."""
    steps = load(schedule_file)
    run_dir = Path(run_dir) if run_dir else store.results_root() / "nemesis" / store.stamp()
    cluster = brokers.get_cluster(kind)
    with Nemesis(cluster, run_dir, clock=RunClock(), seed=seed) as nem:
        nem.run(steps)
        click.echo(f"schedule done; holding {hold:.0f}s", err=True)
        if hold > 0:
            threading.Event().wait(hold)  # a signal handler still runs during this wait
    click.echo(f"healed; records in {run_dir / store.NEMESIS_LOG}")
    sys.exit(0)


# The commands in the order `mqchaos cluster` adds them.
COMMANDS = (heal, nemesis_cmd)
