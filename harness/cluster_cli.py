"""`mqchaos engine | images | up | down | status | logs`: the real clusters from the shell."""
from __future__ import annotations

import json
import sys
import time

import click

KIND = click.Choice(["rabbitmq", "kafka"])


def _parse_sets(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"expected key=value, got {pair!r}", param_hint="--set")
        k, v = pair.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def make_config(kind: str, partition_handling: str | None, net_ticktime: int | None,
                sets: dict[str, str]):
    if kind == "rabbitmq":
        from harness.db.rabbitmq import RabbitConfig
        settings: dict = dict(sets)
        if partition_handling:
            settings["partition_handling"] = partition_handling
        if net_ticktime is not None:
            settings["net_ticktime"] = net_ticktime
        if "pause_if_all_down_nodes" in settings and isinstance(settings["pause_if_all_down_nodes"], str):
            settings["pause_if_all_down_nodes"] = [n for n in settings["pause_if_all_down_nodes"].split(",") if n]
        if "net_ticktime" in settings:
            settings["net_ticktime"] = int(settings["net_ticktime"])
        return RabbitConfig.from_settings(settings)
    from harness.db.kafka import KafkaConfig
    if partition_handling or net_ticktime is not None:
        raise click.UsageError("--partition-handling / --net-ticktime are RabbitMQ settings")
    return KafkaConfig.from_settings(sets)


def register(main: click.Group) -> None:
    @main.command()
    def engine():
        """Make sure a Docker engine answers (install docker.io/docker-compose, start dockerd)."""
        from harness.engine import compose_cmd, ensure_engine
        ensure_engine()
        click.echo(f"docker engine answers; compose: {' '.join(compose_cmd())}")

    @main.command()
    @click.argument("kinds", nargs=-1, type=KIND)
    @click.option("--force", is_flag=True, help="Rebuild even if the inputs did not change.")
    def images(kinds, force):
        """Build the base image (debootstrap) and the broker images, if their inputs changed."""
        from harness.images import ensure_images
        t0 = time.monotonic()
        for kind, ref in ensure_images(list(kinds) or None, force=force).items():
            click.echo(f"{kind}: {ref}")
        click.echo(f"images ready in {time.monotonic() - t0:.0f}s")

    @main.command()
    @click.argument("kind", type=KIND)
    @click.option("--partition-handling", type=click.Choice(["ignore", "autoheal", "pause_minority",
                                                             "pause_if_all_down"]), default=None,
                  help="RabbitMQ cluster_partition_handling (default ignore).")
    @click.option("--net-ticktime", type=int, default=None, help="RabbitMQ net_ticktime (default 10).")
    @click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                  help="Broker setting: a config field (e.g. min_insync_replicas=2) or a raw "
                       "rabbitmq.conf / server.properties key (e.g. min.insync.replicas=2).")
    @click.option("--timeout", type=float, default=None, help="Seconds to wait for a healthy cluster.")
    def up(kind, partition_handling, net_ticktime, sets, timeout):
        """Bring up a fresh three-node cluster and wait until it is healthy."""
        from harness.db import get_cluster
        from harness.engine import ensure_engine
        from harness.images import ensure_images
        ensure_engine()
        ensure_images([kind])
        cfg = make_config(kind, partition_handling, net_ticktime, _parse_sets(sets))
        if timeout:
            cfg.healthy_timeout = timeout
        cluster = get_cluster(kind)
        t0 = time.monotonic()
        cluster.up(cfg)
        click.echo(f"{kind} healthy in {time.monotonic() - t0:.1f}s")
        for node, ep in cluster.client_endpoints().items():
            click.echo(f"  {node}: {ep} ({cluster.address(node)})")

    @main.command()
    @click.argument("kind", type=click.Choice(["rabbitmq", "kafka", "all"]), default="all")
    def down(kind):
        """Remove a cluster's containers, network and volumes."""
        from harness.db import KINDS, get_cluster
        from harness.engine import engine_answers
        if not engine_answers():
            click.echo("no Docker engine answers: nothing to take down")
            return
        for k in (KINDS if kind == "all" else [kind]):
            get_cluster(k).down()
            click.echo(f"{k}: down")

    @main.command()
    @click.option("--json", "as_json", is_flag=True)
    def status(as_json):
        """Nodes, their state and address, and each cluster's health."""
        from harness.db import KINDS, get_cluster
        from harness.engine import engine_answers
        if not engine_answers():
            click.echo("no Docker engine answers")
            sys.exit(1)
        report = {}
        for kind in KINDS:
            c = get_cluster(kind)
            st = c.status()
            entry: dict = {"nodes": {}}
            for node, s in st.items():
                addr = None
                if s != "absent":
                    try:
                        addr = c.address(node)
                    except Exception:  # noqa: BLE001
                        pass
                entry["nodes"][node] = {"state": s, "address": addr}
            if any(s == "running" for s in st.values()):
                try:
                    if kind == "rabbitmq":
                        entry["partitions"] = c.partitions()
                        entry["healthy"] = c.healthy()
                    else:
                        entry["registered_brokers"] = c.registered_brokers()
                        entry["controller"] = c.controller()
                        entry["healthy"] = c.healthy()
                        c.close()
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
                click.echo(f"  {node:8s} {info['state']:10s} {info['address'] or ''}")

    @main.command()
    @click.argument("kind", type=KIND)
    @click.argument("run_dir")
    def logs(kind, run_dir):
        """Write each node's log to RUN_DIR/logs/<node>.log."""
        from harness.db import get_cluster
        get_cluster(kind).collect_logs(run_dir)
        click.echo(f"logs written to {run_dir}/logs")
