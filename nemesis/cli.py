"""`mqchaos heal` and `mqchaos nemesis`: lift every fault; run a schedule by hand."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import click

KINDS = ["rabbitmq", "kafka"]
ROOT = Path(__file__).resolve().parent.parent


def state_files() -> list[Path]:
    """State files of runs that died with faults active (results/<scenario>/<time>/)."""
    import os
    from nemesis.core import STATE_FILE
    results = Path(os.environ.get("MQCHAOS_RESULTS", ROOT / "results"))
    return sorted(results.glob(f"*/*/{STATE_FILE}"))[:100] + sorted(results.glob(f"nemesis/*/{STATE_FILE}"))[:100]


def _present(cluster) -> bool:
    return any(cluster.exists(n) for n in cluster.nodes())


def heal_kind(kind: str, wait: bool) -> str:
    from harness.db import get_cluster
    from nemesis import net
    from nemesis.core import Nemesis, heal_and_close
    cluster = get_cluster(kind)
    if not _present(cluster):
        return f"{kind}: no containers"
    heal_and_close(Nemesis(cluster, handle_signals=False), wait)
    left = sum(net.project_rules(cluster, n) for n in cluster.nodes() if cluster.running(n))
    paused = [n for n in cluster.nodes() if cluster.paused(n)]
    return f"{kind}: healed ({left} project rules left, paused containers: {paused or 'none'})"


def _alive(state_file: Path) -> bool:
    """Is the harness that wrote this state file still running? (Then it records its own.)"""
    import json
    import os
    try:
        pid = int(json.loads(state_file.read_text()).get("pid", 0))
        if pid <= 0 or pid == os.getpid():
            return False
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


def register(main: click.Group) -> None:
    @main.command()
    @click.argument("kind", type=click.Choice([*KINDS, "all"]), default="all")
    @click.option("--run-dir", type=click.Path(file_okay=False), default=None,
                  help="Run directory whose nemesis-state.json lists the faults to undo and record.")
    @click.option("--no-wait", is_flag=True, help="Do not wait until the cluster is whole.")
    def heal(kind, run_dir, no_wait):
        """Remove every project iptables rule and tc qdisc, unpause and start every node, and
        wait until the cluster is whole. Faults listed in a run's nemesis-state.json (--run-dir,
        or any under results/) are also written to that run's nemesis.jsonl. Idempotent."""
        from harness.engine import engine_answers
        from nemesis.core import heal_run_dir
        if not engine_answers():
            click.echo("no Docker engine answers: nothing to heal")
            return
        # without --run-dir: every run under results/ that died with faults active
        dirs = [Path(run_dir)] if run_dir else [p.parent for p in state_files() if not _alive(p)]
        for d in dirs:
            state = heal_run_dir(d, wait=not no_wait)
            click.echo(f"{d}: " + (f"undid and recorded {len(state['active'])} active fault(s) of "
                                   f"{state['kind']}" if state else "no active faults recorded"))
        for k in (KINDS if kind == "all" else [kind]):
            click.echo(heal_kind(k, wait=not no_wait))

    @main.command("nemesis")
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
        import threading
        from harness.db import get_cluster
        from harness.history import RunClock
        from nemesis.core import Nemesis
        from nemesis.schedule import load
        steps = load(schedule_file)
        run_dir = Path(run_dir or Path("results") / "nemesis" / time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime()))
        cluster = get_cluster(kind)
        with Nemesis(cluster, run_dir, clock=RunClock(), seed=seed) as nem:
            nem.run(steps)
            click.echo(f"schedule done; holding {hold:.0f}s", err=True)
            if hold > 0:
                threading.Event().wait(hold)  # a signal handler still runs during this wait
        click.echo(f"healed; records in {run_dir / 'nemesis.jsonl'}")
        sys.exit(0)
