"""RabbitMQ observation: each second, the queue's master / leader (a quorum queue's or a
stream's) and its mirrors / members, the one more than half of the nodes name, or the one
every answering node names, else none (``majority_view``); afterwards, what partition
handling did (from the logs: paused nodes, autoheal losers), a mirrored queue's
synchronisation from its start to complete on the master's own log (``sync_durations``:
R38), the nodes whose connections the broker closed under the publishers
(``CONNECTION_FORCED`` with their in-flight messages: ``forced_close_nodes``) and through
which node deliveries came."""
from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from harness.brokers.rabbitmq.cluster import REPLICATED, master_of, short_node
from harness.measures import ack_latency_max, changes, duration, timeline


def _view(cluster, node: str, queue: str) -> dict | None:
    try:
        return cluster.api(f"queues/%2F/{queue}", node=node, timeout=2)
    except Exception:  # noqa: BLE001 - a node that does not answer has no view
        return None


def majority_view(views: dict[str, object], cluster_size: int) -> tuple[str | None, list[str]]:
    """The cluster's view of what the nodes name (a queue's master / leader): the one that more
    than half of the cluster's nodes hold, or, where fewer answer, the one every answering node
    holds (the others are down, not on another side). Nodes that disagree are stale or on the
    other side of a cut (R7q on 4.0: the isolated node kept naming itself): their views stay
    in ``views`` and never become the cluster's. Returns (the view's node, the nodes holding it);
    (None, []) when no view wins."""
    held: dict[str, list[str]] = {}
    for node, v in views.items():
        held.setdefault(v, []).append(node)  # type: ignore[arg-type]
    for v, nodes in held.items():
        if len(nodes) > cluster_size // 2 or len(held) == 1:
            return v, sorted(nodes)  # type: ignore[return-value]
    return None, []


def sample(cluster, sc) -> dict:
    """The queue as the majority of the nodes sees it (``view_from``: the nodes whose view it
    is), plus every node's own idea of its master (``views``): during a partition under
    ``ignore`` each side has its own (R7), and a cut node's is stale."""
    nodes = cluster.nodes()
    with ThreadPoolExecutor(len(nodes)) as pool:  # a paused node costs its timeout once, not per node
        answers = dict(zip(nodes, pool.map(lambda n: _view(cluster, n, sc.queue.name), nodes)))
    answers = {n: q for n, q in answers.items() if q}
    if not answers:
        return {"master": None, "view_from": []}
    views = {n: master_of(q) for n, q in answers.items()}
    master, holders = majority_view(views, len(nodes))
    q = answers[holders[0]] if holders else next(iter(answers.values()))
    out = {"views": {n: v for n, v in views.items() if v}, "view_from": holders}
    if q.get("type") in REPLICATED:
        return {"master": master, **out,
                "members": sorted(short_node(n) for n in q.get("members") or []),
                "online": sorted(short_node(n) for n in q.get("online") or [])}
    return {"master": master, **out,
            "mirrors": sorted(short_node(n) for n in q.get("slave_nodes") or []),
            "synchronised": sorted(short_node(n) for n in q.get("synchronised_slave_nodes") or [])}


def queue_measures(samples: list[dict]) -> dict:
    ok = [s for s in samples if "nodes" in s]
    if not ok:
        return {}
    masters, n = changes(s.get("master") for s in ok)
    m = {"masters_seen": masters, "master_changes": n, "new_master_elected": n > 0,
         # the broker's own view of unavailability: the queue had no master / leader
         "masterless_s": duration(ok, lambda s: s.get("master") is None),
         # split brain: the most masters the nodes named at once, each from its own side
         "masters_at_once_max": max((len({v for v in (s.get("views") or {}).values() if v}) for s in ok),
                                    default=0),
         "queue_timeline": timeline(ok, lambda s: f"master={s.get('master')} "
                                    f"sync={','.join(s.get('synchronised', s.get('online', [])) or [])}")}
    if any("mirrors" in s for s in ok):
        # seed 000: "RabbitMQ always tries to keep the replication factor": a node that was
        # neither master nor mirror when the window opened and holds a mirror later
        had = set(ok[0].get("mirrors") or []) | {ok[0].get("master")}
        added = sorted({n for s in ok for n in s.get("mirrors") or []} - had)
        m["mirrors_added"], m["mirrors_added_count"] = added, len(added)
        m["unsynchronised_s"] = duration(
            [s for s in ok if "mirrors" in s],
            lambda s: s.get("master") is not None and set(s["mirrors"]) - set(s["synchronised"]))
    return m


# RabbitMQ's own words (rabbit_node_monitor / mnesia, 3.8-3.10) for what partition handling did.
_PAUSED = re.compile(r"minority/secondary status detected|pause until the \*entire\* cluster recovers|"
                     r"We are about to pause")
_PARTITIONED = re.compile(r"inconsistent_database, (running|starting)_partitioned_network|Partial partition detected")
_LOSERS = re.compile(r"Losers:\s*\[([^\]]*)\]")


def log_measures(logs: dict[str, str]) -> dict:
    paused = sorted(n for n, text in logs.items() if _PAUSED.search(text))
    losers = sorted({x.strip().strip("'").split("@")[-1] for text in logs.values()
                     for group in _LOSERS.findall(text) for x in group.split(",") if x.strip()})
    return {"paused_nodes": paused, "paused_count": len(paused),
            "partition_detected": any(_PARTITIONED.search(t) for t in logs.values()),
            "autoheal_losers": losers, "autoheal_loser_count": len(losers)}


# A mirrored queue master's own record of a synchronisation (3.x): its start, with the count,
# and its end; the node's timestamp, not Docker's (the line's second one)
_SYNC = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d) \[\w+\] <[^>]*> Mirrored queue "
                   r"'([^']*)' in vhost '[^']*': Synchronising: (?:(\d+) messages to synchronise|(complete))")


def sync_durations(logs: dict[str, str], queue: str) -> list[float]:
    """Seed 001 (a synchronisation blocks its queue until it is over): each synchronisation of
    ``queue`` that synchronised something, start to complete, on its master's log (s)."""
    out = []
    for text in logs.values():
        started = None
        for m in _SYNC.finditer(text):
            if m.group(2) != queue:
                continue
            t = datetime.fromisoformat(m.group(1))
            if m.group(3) is not None:
                started = t if int(m.group(3)) > 0 else None
            elif started is not None:
                out.append(round((t - started).total_seconds(), 3))
                started = None
    return out


def delivery_nodes(consume: list[dict], samples: list[dict]) -> dict:
    """Which node each delivery came through, and the share that came through a node that
    was not the queue's leader at the time (Q5: a consumer attached to a follower)."""
    by_node = Counter(r.get("node") or "?" for r in consume)
    tl = [(s["t"], s.get("master")) for s in samples if s.get("master")]
    follower = known = 0
    i = 0
    for r in sorted(consume, key=lambda r: r.get("t") or 0):
        while i + 1 < len(tl) and tl[i + 1][0] <= (r.get("t") or 0):
            i += 1
        if not tl or not r.get("node"):
            continue
        known += 1
        follower += r["node"] != tl[i][1]
    return {"deliveries_by_node": dict(sorted(by_node.items())),
            "follower_delivery_fraction": round(follower / known, 4) if known else None}


# pika's record of a connection the broker closed with CONNECTION_FORCED (320): what a node
# does to its clients when it pauses or stops its app (seed 000, pause_minority)
_FORCED = "CONNECTION_FORCED"


def forced_close_nodes(produce: list[dict], start: float | None, end: float | None) -> list[str]:
    """The nodes that closed a publisher's connection themselves (CONNECTION_FORCED, the
    publisher's in-flight messages recorded with the reason) between ``start`` and ``end``."""
    if start is None or end is None:
        return []
    return sorted({r["node"] for r in produce if r.get("node") and _FORCED in str(r.get("error") or "")
                   and start <= (r.get("t_complete") or r.get("t_invoke") or -1) <= end})


def missing_at_a_site(produce: list[dict], consume: list[dict], sites: list[list[str]]) -> int:
    """Confirmed messages some cluster of ``sites`` never delivered (seed 003: exchanges
    federated both ways, each cluster gets what the other's publishers sent), a delivery's
    cluster being its consumer's node's."""
    site_of = {n: i for i, site in enumerate(sites) for n in site}
    seen: dict[str, set[int]] = {}
    for r in consume:
        if r.get("node") in site_of and r.get("msg_id"):
            seen.setdefault(r["msg_id"], set()).add(site_of[r["node"]])
    confirmed = {r["msg_id"] for r in produce if r.get("outcome") == "ok" and r.get("msg_id")}
    return sum(1 for m in confirmed if len(seen.get(m, ())) < len(sites))


def measure(samples: list[dict], logs: dict[str, str], consume: list[dict], produce: list[dict] = (),
            start: float | None = None) -> dict:
    end = samples[-1]["t"] if samples else None
    produce = list(produce)
    return {**queue_measures(samples), **log_measures(logs), **delivery_nodes(consume, samples),
            "forced_close_nodes": forced_close_nodes(produce, start, end),
            # a confirm waits for every mirror: how long one waited (seed 002: a mirror's loss
            # takes time to detect); a late confirm after a timeout counts at its arrival
            "confirm_latency_max_s": ack_latency_max(produce, start, end) if start is not None and end is not None
            else None}
