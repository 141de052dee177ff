"""Recovery of a RabbitMQ cluster: the documented repair of a partition entry that outlives
the cut, a survivor forgetting a wiped node, and telling a node whose broker will not come
up by itself (a failed or hung boot). Each function that acts takes the ``RabbitCluster``
to act on."""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone

from harness.brokers.protocol import ClusterError, Recorder, Steady
from harness.brokers.rabbitmq import ctl
from harness.brokers.rabbitmq.nodes import NODES, erlang_node
from harness.util import wait_until

log = logging.getLogger(__name__)


def wait_whole(cluster, timeout: float, steady: Steady, record: Recorder, stale_after: float | None = None) -> None:
    """Wait for "no partitions, every node running". If a partition entry outlives the
    network cut, run the documented recovery (``stop_app``/``start_app`` on the node
    holding it, the most-partitioned first) and record it as a finding."""
    t0 = time.monotonic()
    handling = cluster.partition_handling()
    # under `ignore` RabbitMQ never heals itself; other modes get time to do their job
    patience = stale_after if stale_after is not None else (20.0 if handling == "ignore" else 90.0)
    whole = "RabbitMQ: no partitions, all nodes running"
    try:
        wait_until(steady(cluster.healthy), min(patience, timeout), whole, 1.0)
        return
    except TimeoutError:
        pass
    for _ in range(len(NODES)):
        parts = cluster.partitions()
        holders = sorted((n for n, p in parts.items() if p), key=lambda n: (-len(parts[n]), n))
        if not holders:
            break
        node = holders[0]
        log.warning("partition entries %s %.0fs after the heal; recovering %s", parts, time.monotonic() - t0, node)
        try:
            record({"finding": "stale_partition", "node": node, "partitions": parts,
                    "partition_handling": handling, "waited_s": round(time.monotonic() - t0, 1),
                    "expected": handling == "ignore",
                    "recovery": f"rabbitmqctl stop_app && rabbitmqctl start_app on {node}"},
                   lambda n=node: ctl.restart_app(cluster, n))
        except ClusterError as exc:
            # 3.10.8 on Erlang 25 (R7s, twice): the app's start hung in Erlang's global name
            # server ("Faking nodedown/nodeup", then nothing). The guide's recovery from a
            # split brain stops the untrusted partition's nodes and starts them again: the node.
            log.warning("start_app on %s did not return (%s); stopping and starting the node", node, exc)
            record({"finding": "start_app_hung", "node": node, "error": str(exc)[:300],
                    "partition_handling": handling, "expected": False,
                    "recovery": f"{node} stopped and started (its app's start hung)"},
                   lambda n=node: (cluster.stop(n), cluster.start(n)))
        try:
            wait_until(steady(cluster.healthy), 60, "RabbitMQ whole after stop_app/start_app", 1.0)
            return
        except TimeoutError:
            continue
    left = max(10.0, timeout - (time.monotonic() - t0))
    wait_until(steady(cluster.healthy), left, whole, 1.0)


def forget(cluster, node: str) -> None:
    """A running survivor forgets ``node`` (``rabbitmqctl forget_cluster_node``), so that it
    rejoins as new."""
    survivors = [n for n in NODES if n != node and cluster.running(n)]
    if not survivors:
        raise ClusterError(f"no running node to forget {node}")
    # the survivor must have seen the node go down first: retry for a bounded while
    wait_until(lambda: cluster.rabbitmqctl(survivors[0], "forget_cluster_node", erlang_node(node),
                                           check=False, timeout=60)[0] == 0,
               60, f"{survivors[0]} to forget {node}", interval=2.0)
    log.info("%s forgot %s", survivors[0], node)


def boot_failures(cluster, nodes: list[str]) -> dict[str, str]:
    """Those of ``nodes`` whose container runs but whose broker will not come up by itself
    (``boot_failed``), with why."""
    out: dict[str, str] = {}
    for node in nodes:
        if not cluster.running(node) or cluster.app_serving(node):
            continue
        # since the container's last start: a node restarted since has not failed yet
        why = boot_failed(cluster.logs(node, tail=400, since=cluster.state(node).get("StartedAt")), time.time())
        if why:
            out[node] = f"still running, its broker not: {why}"
    return out


BOOT_STARTED, BOOT_DONE, BOOT_FAILED = "Starting RabbitMQ", "Server startup complete", "BOOT FAILED"
# A boot that has logged nothing for this long is hung (3.10.8, R9: a node resuming after a
# pause_minority pause started booting, logged Erlang's global "Faking nodedown/nodeup"
# workaround and then nothing for 3 minutes). A boot's longest legitimate silence is its wait
# for the Mnesia tables of its peers: rabbit_table logs "Waiting for Mnesia tables for 30000
# ms, N retries left" before each wait of mnesia_table_loading_retry_timeout (30 s by default;
# the harness never sets it), so twice that without a line is no wait the broker knows of.
TABLE_WAIT_S = 30.0
BOOT_SILENCE_S = 2 * TABLE_WAIT_S


def boot_failed(log: str, now: float | None = None, silence: float = BOOT_SILENCE_S) -> str | None:
    """Why the node's broker will not come up by itself: its last boot ended in BOOT FAILED,
    or (given ``now``, a Unix time) it started and has logged nothing for ``silence``
    seconds; None otherwise. ``log``: its lines, each after docker's timestamp or not."""
    stamps, lines = [], []
    for line in log.splitlines():
        head, _, rest = line.partition(" ")
        dated = head[:4].isdigit() and head.endswith("Z")
        stamps.append(_docker_time(head) if dated else None)
        lines.append(rest if dated else line)
    last = None
    for i, line in enumerate(lines):
        for marker in (BOOT_STARTED, BOOT_DONE, BOOT_FAILED):
            if marker in line:
                last = (marker, i)
    if not last or last[0] == BOOT_DONE:
        return None
    if last[0] == BOOT_FAILED:
        after = [ln.strip() for ln in lines[last[1] + 1:] if ln.strip() and not set(ln.strip()) <= {"="}]
        return (BOOT_FAILED + ": " + " ".join(after[:12]))[:600]
    latest = max((t for t in stamps if t is not None), default=None)
    if now is not None and latest is not None and now - latest >= silence:
        tail = [ln.strip() for ln in lines[last[1]:] if ln.strip()][-3:]
        return (f"boot hung: started, then nothing logged for {now - latest:.0f}s; last: "
                + " | ".join(tail))[:600]
    return None


def _docker_time(stamp: str) -> float | None:
    """A docker log timestamp (RFC 3339, nanoseconds, UTC) as a Unix time."""
    try:
        return datetime.strptime(stamp[:26].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None
