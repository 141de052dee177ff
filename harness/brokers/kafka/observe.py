"""Kafka observation: each second, the partition's leader and ISR and the controller with its
epoch (ZooKeeper's record, or in KRaft mode the active controller's broker's metadata and the
nodes' quorum state: kraft_cluster.py; no view without a quorum leader, no leader epoch
there), every broker's own view beside them (``views``, each from a client pinned to that
broker), the ELR where the version has one (4.1: kafka-topics, in the background, rarely);
afterwards, the leader changes, ISR shrinks and log truncations, two brokers each naming
itself the leader (``split_brain_s``: K19) and how long a returning broker took to catch up
from the nodes' states and the ISR (``catch_up_s``: K20a/b)."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from harness.brokers.kafka.nodes import is_broker
from harness.measures import ack_latency_max, changes, duration, timeline


def min_isr(sc) -> int:
    return int(sc.topic.config.get("min.insync.replicas", sc.cluster.min_insync_replicas))


# a broker that does not answer its own metadata request (paused, or gone) costs this once a
# sample: the brokers are asked at once, and a healthy one answers in milliseconds
VIEW_TIMEOUT = 2.0


def sample(cluster, sc) -> dict:
    """The partition's leader and ISR as the cluster sees them (``view_from``: ZooKeeper, or
    in KRaft mode the active controller's broker; no leader and no ISR when that view is
    unknown), every broker's own view beside it (``views``; ``view_errors``: why a broker gave
    none, an answer from another broker included), the controller and its epoch."""
    topic = sc.topic.name
    with ThreadPoolExecutor(1) as pool:  # the quorum's reading alongside the brokers' answers
        source = pool.submit(cluster.view_source)
        views, errors = cluster.node_views(topic, VIEW_TIMEOUT)
        view_from, controller, epoch = source.result()
    s = {"view_from": view_from, "views": {n: {"leader": ps[0]["leader"], "isr": ps[0]["isr"]}
                                           for n, ps in views.items() if ps},
         "controller": controller, "controller_epoch": epoch}
    if errors:
        s["view_errors"] = errors
    parts = cluster.view_partitions(view_from, topic, views)
    if not parts:  # whose view is unknown: no "isr" key, so the ISR measures pass it over
        return {"leader": None, "epoch": None, **s}
    p = parts[0]
    s = {"leader": p["leader"], "isr": p["isr"], "epoch": p.get("leader_epoch"), **s}
    # KIP-966: the ELR can be non-empty only while the ISR is below min.insync.replicas
    elr, age = cluster.elr(topic, p["partition"], len(p["isr"]) < min_isr(sc))
    if age is not None:  # read at least once (a version with ELR): the last read, its age in s
        s["elr"], s["elr_age_s"] = elr, age
    return s


def self_leaders(sample: dict) -> list[str]:
    """The brokers that name themselves the partition's leader in their own metadata."""
    return sorted(n for n, v in (sample.get("views") or {}).items() if v.get("leader") == n)


def split_brain(samples: list[dict]) -> dict:
    """Seed 002, scenario 7 (a controller that cannot reach a broker cannot tell it of a
    leadership change: a brief split brain): for how long two brokers at once each named
    itself the leader in its own metadata, and which (nothing when no broker was asked)."""
    viewed = [s for s in samples if "views" in s]
    if not viewed:
        return {}
    both = [s for s in viewed if len(self_leaders(s)) > 1]
    return {"split_brain_s": duration(viewed, lambda s: len(self_leaders(s)) > 1),
            "split_brain_brokers": sorted({n for s in both for n in self_leaders(s)})}


def catch_up_s(samples: list[dict]) -> float | None:
    """Seed 002 (followers replicating at once share the leader's bandwidth): seconds from the
    last moment a broker's container was running again after it was not (a restart) until the
    ISR was as large again as when the samples began; None without a restart or a full ISR."""
    back, last = None, {}
    for s in samples:
        for n, state in (s.get("nodes") or {}).items():
            if state == "running" and last.get(n, "running") != "running":
                back = s["t"]
            last[n] = state
    ok = [s for s in samples if "isr" in s]
    if back is None or not ok:
        return None
    full = len(ok[0]["isr"])
    again = next((s["t"] for s in ok if s["t"] >= back and len(s["isr"]) >= full), None)
    return round(again - back, 2) if again is not None else None


def partition_measures(samples: list[dict], fault_start: float | None, min_isr: int = 1) -> dict:
    ok = [s for s in samples if "isr" in s]
    if not ok:
        return split_brain(samples)
    leaders, lchanges = changes(s["leader"] for s in ok)
    _, cchanges = changes(s.get("controller") for s in ok)
    m = {"isr_min": min(len(s["isr"]) for s in ok),
         "isr_below_2_s": duration(ok, lambda s: len(s["isr"]) < 2),
         "leaderless_s": duration(ok, lambda s: s["leader"] is None),
         # the broker's own view of unavailability: no leader, or too few in sync for acks=all
         "isr_below_min_s": duration(ok, lambda s: len(s["isr"]) < min_isr),
         "leaders_seen": leaders, "leader_changes": lchanges, "new_leader_elected": lchanges > 0,
         "controller_changes": cchanges, "new_controller_elected": cchanges > 0,
         # seed 002, scenario 8: once its cut heals, a replaced controller is an ordinary broker
         "first_controller_at_end": _same_ends(s.get("controller") for s in ok),
         # ... and serves as one: back in the partition's ISR, not the controller (issue 52: a
         # replaced controller that stays out, or takes the role back, fails it)
         "first_controller_ordinary_at_end": _ordinary_at_end(ok),
         # seed 002, scenario 7: whether each leader elected was the controller broker itself
         "new_leaders_on_controller": _elected_on_controller(ok),
         # the smallest ISR the window's first leader had while it led (K1u: the leader alone
         # in the ISR before it is killed; an ISR that shrank only after a failover is not it)
         "first_leader_isr_min": _first_leader_isr_min(ok),
         **split_brain(samples),
         "catch_up_s": catch_up_s(samples),
         "isr_timeline": timeline(ok, lambda s: f"isr={','.join(s['isr'])} leader={s['leader']} "
                                  f"controller={s.get('controller')}")}
    if fault_start is not None:
        full = len(ok[0]["isr"])
        shrunk = [s["t"] for s in ok if s["t"] >= fault_start and len(s["isr"]) < full]
        m["isr_shrink_s"] = round(shrunk[0] - fault_start, 2) if shrunk else None
        # seed 002: a replica that comes back is outside the ISR until it has caught up, then
        # rejoins it; None when the ISR never shrank
        m["isr_rejoined"] = (any(s["t"] > shrunk[0] and len(s["isr"]) >= full for s in ok)
                             if shrunk else None)
        # the placement when the faults began: the claims of K4-K9 turn on it (since 2.7 an
        # ISR change goes through the controller, so a leader cut from it cannot shrink the ISR)
        before = [s for s in ok if s["t"] <= fault_start] or ok[:1]
        last = before[-1]
        m["leader_is_controller"] = (last["leader"] == last.get("controller")
                                     if last["leader"] and last.get("controller") else None)
        # K5a/K8b/K14e's premise (issue 52): a leader cut from the other brokers alone still
        # reaches the controller: it is the controller, or the controller is a node apart from
        # the brokers (KRaft's dedicated controllers; ZooKeeper mode's controller is a broker)
        m["leader_reaches_controller"] = (m["leader_is_controller"] or not is_broker(last.get("controller"))
                                          if m["leader_is_controller"] is not None else None)
    return m


def _first_leader_isr_min(samples: list[dict]) -> int | None:
    first = next((s["leader"] for s in samples if s["leader"]), None)
    sizes = [len(s["isr"]) for s in samples if first and s["leader"] == first]
    return min(sizes) if sizes else None


def _elected_on_controller(samples: list[dict]) -> bool | None:
    """Whether every leader that replaced another (a change to a new, known leader) was the
    controller broker of that sample; None when no leader was replaced."""
    new, last = [], None
    for s in samples:
        if s["leader"] and last and s["leader"] != last:
            new.append(s["leader"] == s.get("controller"))
        last = s["leader"] or last
    return all(new) if new else None


def _ordinary_at_end(samples: list[dict]) -> bool | None:
    """Whether the first known controller is, in the last sample, an in-sync replica and not
    the controller (None: no controller known)."""
    first = next((s.get("controller") for s in samples if s.get("controller")), None)
    if first is None:
        return None
    last = samples[-1]
    return first in last["isr"] and last.get("controller") not in (None, first)


def _same_ends(values) -> bool | None:
    """Whether the last known value is the first one (None: none known)."""
    known = [v for v in values if v]
    return known[0] == known[-1] if known else None


# A replica's log truncated (issue 52, item 5): UnifiedLog.truncateTo's line when the target
# offset is below the log end offset, i.e. when it removes something:
#   [UnifiedLog partition=mqchaos-0, dir=/var/lib/kafka/data] Truncating to offset 120 (kafka.log.UnifiedLog)
# 3.9: core/src/main/scala/kafka/log/UnifiedLog.scala (branch 3.9, truncateTo: info(s"Truncating
# to offset $targetOffset"), logIdent "[UnifiedLog partition=$topicPartition, dir=$parentDir] ");
# 4.1: storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java (4.1.1's
# kafka-storage jar: logger.info("Truncating to offset {}"), through a LogContext of the same
# "[UnifiedLog partition=..., dir=...] " prefix; logger org.apache.kafka.storage.internals.log.UnifiedLog).
# Not counted: "Truncating to N has no effect as the largest offset in the log is M" (the same
# method when nothing is removed), AbstractFetcherThread's "Truncating partition T-P with
# OffsetTruncationState(...) due to ..." (3.9; 4.1.1: "... with TruncationState(offset=0,
# completed=true) due to local high watermark 0", seen in a real 4.1 broker's log) logged before
# every truncation attempt, whether or not it removes anything, ReplicaFetcherThread's
# "Truncating T-P to offset N below high watermark M" (the same truncation's warning, already
# counted by its UnifiedLog line), LogLoader's recovery of a segment's torn tail at start-up (not a
# replica giving up records to its leader). "[Log partition=": Kafka 2.x's spelling of the prefix.
def truncation_pattern(topic: str) -> re.Pattern:
    return re.compile(rf"\[(?:Unified)?Log partition={re.escape(topic)}-\d+, dir=[^\]]*\] Truncating to offset \d+")


def log_measures(logs: dict[str, str], topic: str) -> dict:
    pat = truncation_pattern(topic)
    return {"log_truncations": sum(len(pat.findall(t)) for n, t in logs.items() if n.startswith("kafka")),
            **shrink_lag(logs, topic)}


# The leader's own record of an ISR shrink: its log time and each removed replica's last
# caught-up time, both on the leader's clock (kafka.cluster.Partition, 2.x-4.x).
_SHRINK = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] INFO \[Partition (\S+)-\d+ broker=\d+\] "
                     r"Shrinking ISR from .*?Out of sync replicas: (.*)$", re.M)
_CAUGHT_UP = re.compile(r"lastCaughtUpTimeMs: (\d+)")


def shrink_lag(logs: dict[str, str], topic: str) -> dict:
    """``isr_shrink_lag_s``: over the ISR shrinks the logs hold, the least time between a shrink
    and the last caught-up fetch of a replica it removed, from the leader's own record (seed
    002: a follower leaves the ISR once it has not caught up for replica.lag.time.max.ms).
    Nothing when no shrink was logged."""
    lags = []
    for text in logs.values():
        for day, ms, part, removed in _SHRINK.findall(text):
            if part != topic:
                continue
            at = datetime.fromisoformat(day + "+00:00").timestamp() * 1000 + int(ms)
            lags += [(at - int(c)) / 1000 for c in _CAUGHT_UP.findall(removed)]
    return {"isr_shrink_lag_s": round(min(lags), 3)} if lags else {}


def latency_measures(samples: list[dict], produce: list[dict], fault_start: float | None,
                     isr_shrink_s: float | None) -> dict:
    """How long acks=all writes waited once the faults began, and once the ISR had shrunk
    (seed 002: the leader waits for the slowest ISR member until it is dropped)."""
    ok = [s for s in samples if "isr" in s]
    if fault_start is None or not ok:
        return {}
    m = {"ack_latency_max_s": ack_latency_max(produce, fault_start, ok[-1]["t"])}
    if isr_shrink_s is not None:
        shrunk_at = fault_start + isr_shrink_s
        full = len(ok[0]["isr"])
        # while it stays shrunk: the writes of the smaller ISR
        back = [s["t"] for s in ok if s["t"] > shrunk_at and len(s["isr"]) >= full]
        m["ack_latency_after_isr_shrink_max_s"] = ack_latency_max(produce, shrunk_at,
                                                                  back[0] if back else ok[-1]["t"])
    return m


def measure(sc, samples: list[dict], logs: dict[str, str], fault_start: float | None,
            produce: list[dict] = ()) -> dict:
    m = partition_measures(samples, fault_start, min_isr(sc))
    return {**m, **latency_measures(samples, list(produce), fault_start, m.get("isr_shrink_s")),
            **log_measures(logs, sc.topic.name)}
