"""`mqchaos cluster engine | images | up | down | status | logs | heal | nemesis`: the real
clusters from the shell (heal and nemesis are nemesis.cli's)."""
from __future__ import annotations

import json
import sys
import time

import click
from pydantic import ValidationError

from harness import brokers
from harness.engine import compose_cmd, engine_answers, ensure_engine
from harness.images import ensure_images
from nemesis.cli import COMMANDS as nemesis_commands

KIND = click.Choice(list(brokers.KINDS))


def _parse_sets(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint="--set")
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _image_versions(kinds: list[str], values: tuple[str, ...]) -> dict[str, list[str]]:
    """``mqchaos cluster images --version``: the versions to build, by broker (the usual rule when
    none is given; ``all``: every generation)."""
    from harness.scenario import versions_option

    if "all" in values:
        return {k: list(brokers.get(k).generations) for k in kinds}
    try:
        chosen = versions_option(values)
        return {k: [chosen[k] if k in chosen else brokers.get(k).version()[0]] for k in kinds}
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--version") from None


@click.command()
def engine():
    """Make sure a Docker engine answers (install docker.io/docker-compose, start dockerd)."""
    ensure_engine()
    click.echo(f"docker engine answers; compose: {' '.join(compose_cmd())}")


@click.command()
@click.argument("kinds", nargs=-1, type=KIND)
@click.option("--force", is_flag=True, help="Rebuild even if the inputs did not change.")
@click.option("--version", "versions", multiple=True, metavar="[BROKER=]VERSION|all",
              help="The versions to build (default: each broker's version by the usual rule: "
                   "$MQCHAOS_<BROKER>_VERSION, else the default); 'all': every version.")
def images(kinds, force, versions):
    """Build the base images (debootstrap, one per Debian suite) and the broker images,
    if their inputs changed."""
    kinds = list(kinds) or list(brokers.KINDS)
    wanted = _image_versions(kinds, versions)
    t0 = time.monotonic()
    for kind, refs in ensure_images(kinds, force=force, versions=wanted).items():
        for version, ref in refs.items():
            click.echo(f"{kind} {version}: {ref}")
    click.echo(f"images ready in {time.monotonic() - t0:.0f}s")


@click.command()
@click.argument("kind", type=KIND)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Broker setting, as in a scenario's cluster: block: a settings field (e.g. "
                   "partition_handling=pause_minority, min_insync_replicas=2) or a raw "
                   "rabbitmq.conf / server.properties key (e.g. min.insync.replicas=2).")
@click.option("--timeout", type=float, default=None, help="Seconds to wait for a healthy cluster.")
@click.option("--version", default=None, metavar="VERSION",
              help="The broker's version (default: $MQCHAOS_<BROKER>_VERSION, else the default one).")
def up(kind, sets, timeout, version):
    """Bring up a fresh three-node cluster and wait until it is healthy."""
    plugin = brokers.get(kind)
    values = _parse_sets(sets)
    if "version" in values:
        raise click.BadParameter("the version is --version, not a setting", param_hint="--set")
    try:
        version, _ = plugin.version(cli=version)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--version") from None
    try:
        cfg = plugin.settings(values)
    except ValidationError as e:
        raise click.BadParameter(str(e), param_hint="--set") from None
    cfg.version = version
    ensure_engine()
    ensure_images([kind], versions={kind: [version]})
    if timeout:
        cfg.healthy_timeout = timeout
    cluster = plugin.cluster(version=version)
    t0 = time.monotonic()
    cluster.up(cfg)
    click.echo(f"{kind} {version} healthy in {time.monotonic() - t0:.1f}s")
    for node, ep in cluster.client_endpoints().items():
        click.echo(f"  {node}: {ep} ({cluster.address(node)})")


@click.command()
@click.argument("kind", type=click.Choice([*brokers.KINDS, "all"]), default="all")
def down(kind):
    """Remove a cluster's containers, network and volumes."""
    if not engine_answers():
        click.echo("no Docker engine answers: nothing to take down")
        return
    for k in (brokers.KINDS if kind == "all" else [kind]):
        brokers.get_cluster(k).down()
        click.echo(f"{k}: down")


@click.command()
@click.option("--json", "as_json", is_flag=True)
def status(as_json):
    """Nodes, their state and address, and each cluster's health."""
    if not engine_answers():
        click.echo("no Docker engine answers")
        sys.exit(1)
    report = {}
    for kind in brokers.KINDS:
        c = brokers.get_cluster(kind)
        st = c.status()
        entry: dict = {"nodes": {}}
        node_images = c.node_images() if isinstance(c, brokers.ComposeCluster) else {}
        for node, s in st.items():
            addr = None
            if s != "absent":
                try:
                    addr = c.address(node)
                except Exception:  # noqa: BLE001
                    pass
            entry["nodes"][node] = {"state": s, "address": addr, **node_images.get(node, {})}
        if any(s == "running" for s in st.values()):
            try:
                entry.update(c.describe())
            except Exception as exc:  # noqa: BLE001
                entry["error"] = str(exc).splitlines()[0]
        report[kind] = entry
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    for kind, entry in report.items():
        extra = {k: v for k, v in entry.items() if k != "nodes"}
        click.echo(f"{kind}: {json.dumps(extra) if extra else 'not up'}")
        for node, info in entry["nodes"].items():
            runs = f"{info.get('image') or ''}" + (f" (version {info['version']})" if info.get("version") else "")
            click.echo(f"  {node:8s} {info['state']:10s} {info['address'] or '':15s} {runs}")


@click.command()
@click.argument("kind", type=KIND)
@click.argument("run_dir")
def logs(kind, run_dir):
    """Write each node's log to RUN_DIR/logs/<node>.log."""
    brokers.get_cluster(kind).collect_logs(run_dir)
    click.echo(f"logs written to {run_dir}/logs")


@click.group("cluster", short_help="Clusters: up, down, status, logs, heal, images, engine, nemesis.")
def cluster_group() -> None:
    """The real clusters (three nodes in Docker, built from the project's own images): bring
    one up, look at it, collect its logs, lift every fault, run a fault schedule by hand."""


for command in (engine, images, up, down, status, logs, *nemesis_commands):
    cluster_group.add_command(command)
