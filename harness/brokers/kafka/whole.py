"""When a Kafka cluster is whole again after the faults were lifted (issue 52, item 3): the
metadata quorum serves (ZooKeeper's, or a raft leader a majority of the nodes' quorum-state
files agree on), every broker is registered (a ZooKeeper ephemeral node under /brokers/ids /
an unfenced registration in the Admin metadata; a restarted KRaft broker once its own log
says it was unfenced), and replication is restored: every partition of the run's topics
has a leader and its full ISR again (the ISR equals the replica set). A broker that is
registered but still fetching its way back into the ISR is not yet whole: the run's
decision window (harness.windows ``effect``) ends only once it is back, so what the rejoin
does (a truncation, the ISR growing back) falls inside it.

The run's topics are every topic the metadata lists but Kafka's own (``__consumer_offsets``,
``__transaction_state``: the clients' bookkeeping, not what a run writes and reads): the
run's topic and the health topic in a cluster brought up for the run.
"""
from __future__ import annotations

from typing import Any, Callable

from harness.util import wait_until

INTERNAL_PREFIX = "__"  # Kafka's internal topics (Topic.isInternal's names start so)


def waited_for(quorum_what: str) -> str:
    """What ``whole`` waits for, in words (run.json ``whole_waited_for``, the window's)."""
    return (f"{quorum_what}, every broker registered and every partition's ISR full (equal to its replicas) "
            "of every topic but Kafka's internal ones")


def run_topics(cluster: Any) -> list[str]:
    return [t for t in cluster.topics() if not t.startswith(INTERNAL_PREFIX)]


def out_of_sync(cluster: Any) -> dict[str, list[str]]:
    """Per partition (``TOPIC/P``) of the run's topics that is not whole: the replicas missing
    from its ISR (every replica when it has no leader)."""
    out: dict[str, list[str]] = {}
    for topic in run_topics(cluster):
        for p in cluster.partitions(topic):
            missing = [r for r in p["replicas"] if r not in p["isr"]] if p["leader"] else list(p["replicas"])
            if missing:
                out[f"{topic}/{p['partition']}"] = missing
    return out


def replication_restored(cluster: Any) -> bool:
    return not out_of_sync(cluster)


def is_whole(cluster: Any) -> bool:
    """The quorum, every broker registered, then (read only once those hold) every partition's
    full ISR."""
    return (cluster.quorum() and cluster.registered_brokers() == cluster.brokers()
            and replication_restored(cluster))


def _unregistered(cluster: Any) -> list[str]:
    registered = set(cluster.registered_brokers())
    return [n for n in cluster.brokers() if n not in registered]


def stuck(cluster: Any) -> list[str]:
    """The brokers an operator would restart: those not registered; when every one is, those
    still missing from a partition's ISR (their replica does not catch up)."""
    unregistered = _unregistered(cluster)
    if unregistered:
        return unregistered
    lagging = {n for missing in out_of_sync(cluster).values() for n in missing}
    return [n for n in cluster.brokers() if n in lagging]


def wait(cluster: Any, timeout: float, steady: Callable[[Callable[[], Any]], Callable[[], bool]]) -> None:
    """Until ``is_whole`` holds steadily (TimeoutError after ``timeout``, saying what was still
    missing: the runner's operator recovery then restarts ``stuck``)."""
    what = waited_for(cluster.quorum_what)
    try:
        wait_until(steady(lambda: is_whole(cluster)), timeout, what, 1.0)
    except TimeoutError as e:
        raise TimeoutError(f"{e}; {still_missing(cluster)}") from None


def still_missing(cluster: Any) -> str:
    """What kept the cluster from being whole, read once more (for the timeout's message)."""
    try:
        unregistered = _unregistered(cluster)
        if unregistered:
            return f"not registered: {', '.join(unregistered)}"
        missing = out_of_sync(cluster)
        return ("out of the ISR: " + "; ".join(f"{p}: {', '.join(ns)}" for p, ns in missing.items())
                if missing else "every partition's ISR full when read again")
    except Exception as e:  # noqa: BLE001 - the message only: an unanswered read says so
        return f"unread: {type(e).__name__}: {e}"[:300]


__all__ = ["INTERNAL_PREFIX", "is_whole", "out_of_sync", "replication_restored", "run_topics", "still_missing", "stuck",
           "wait", "waited_for"]
