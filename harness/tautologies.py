"""Predictions that cannot fail (issue 52): the known ones, refused when a scenario file is
loaded (``harness.scenario.load``), each refusal naming the field and why.

A verdict needs evidence: a figure that decides it must be able to come out the other way.
Each row of ``TABLE`` is a figure and a kind of prediction that something other than the
broker's behaviour forces: a setting the broker enforces on the very figure measured, the
harness's own fault (verified to have taken effect, else the run is undecided anyway),
another check of the same prediction, or the scenario's own ``require:``. Such a check
holds whatever the broker does (or fails only when another check fails too), so it is
either re-encoded from the source's text into one the broker could fail, or shown under
``measure:`` (no verdict). The table holds the cases found in the catalogue; it is not a
proof that every other check can fail.

A run's recorded scenario (``harness.scenario.parse_recorded``) is not checked: a stored run
of an old encoding must still be readable and judged again as it was.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from harness.expect import COMPARISON, expectations, judge
from nemesis import faults

# faults whose nodes stay down (not running, or frozen) until lifted (nemesis.faults' registry);
# the observer counts either as down (harness.measures.nodes_down_s); and the steps that lift
DOWN_FAULTS = frozenset(faults.DOWNS)
CLOSING = frozenset(faults.CLOSING)
NODE = re.compile(r"^(?:rabbit|kafka|zk)[0-9]+$")
EVERY = "*"  # a target expression that takes every node (all, brokers)
# the client's own reaction to a node that is gone (harness.brokers.*.clients): a reconnect
# after 0.5 s, a connect that waits up to 3 s, a failure counted once it spans 1 s (the
# checker's unavailability threshold): a stretch shorter than this is not surely seen
CLIENT_SLACK_S = 5.0


# ---- what a prediction says ------------------------------------------------------------------
def _cmp(expected: Any) -> bool:
    """A number or comparison string (not a bool, list or mapping)."""
    return (isinstance(expected, (int, float)) and not isinstance(expected, bool)) or \
        (isinstance(expected, str) and bool(COMPARISON.match(expected)))


def only_zero(expected: Any) -> bool:
    """Holds at 0 and not at 1: ``0``, ``"==0"``, ``"<1"``."""
    return _cmp(expected) and judge(expected, 0) is True and judge(expected, 1) is False


def excludes_zero(expected: Any) -> bool:
    """Fails at 0 (for a count or share: says it is positive): ``">0"``, ``">=1"``, ``1``."""
    return _cmp(expected) and judge(expected, 0) is False


def lower_bound(expected: Any) -> float | None:
    """x of ``"> x"`` / ``">= x"``, else None."""
    m = COMPARISON.match(expected) if isinstance(expected, str) else None
    return float(m.group(2)) if m and m.group(1) in (">", ">=") else None


def _figure(key: str) -> str:
    """The figure a key names, without its window (``after_heal.isr_shrink_lag_s``)."""
    return key.rsplit(".", 1)[-1]


def _sibling(key: str, figure: str) -> str:
    """The key of ``figure`` over the same window as ``key``."""
    return key[: len(key) - len(_figure(key))] + figure


# ---- what the scenario sets up ---------------------------------------------------------------
def _setting(sc: Any, *path: str) -> Any:
    obj = sc
    for name in path:
        obj = getattr(obj, name, None)
    return obj


def _lag_s(sc: Any) -> float | None:
    ms = _setting(sc, "cluster", "replica_lag_time_max_ms")
    return ms / 1000 if isinstance(ms, (int, float)) else None


def _static(expr: Any) -> set[str] | None:
    """The nodes a target expression names whatever the run (``EVERY`` for all / brokers);
    None when it depends on the run (roles, random picks, cuts)."""
    if expr is None or expr in ("all", "brokers"):
        return {EVERY}
    if isinstance(expr, str) and NODE.match(expr):
        return {expr}
    if isinstance(expr, list):
        parts = [_static(e) for e in expr]
        return None if any(p is None for p in parts) else set().union(*parts)
    return None


def _steps(sc: Any) -> tuple:
    try:
        return tuple(sc.steps)
    except RuntimeError:  # a model built by hand: no parsed schedule, nothing to say of it
        return ()


def _down_timeline(sc: Any) -> list[tuple[float, frozenset[str]]]:
    """(time, the nodes down from then on) at each change, by the schedule alone: the down
    faults with static targets, lifted by their duration, a start / unpause, or the heal
    at the end of the faults phase (``timing.duration``)."""
    events: list[tuple[float, int, str, set[str]]] = []
    for st in _steps(sc):
        # a down fault without targets takes its type's default (a random pick): not known here
        nodes = _static(st.targets) if st.targets is not None or st.fault not in DOWN_FAULTS else None
        if st.fault in DOWN_FAULTS and nodes and not st.when:
            events.append((st.at, 1, "down", nodes))
            if st.duration:
                events.append((st.at + st.duration, 0, "up", nodes))
        elif st.fault in CLOSING:
            lifts_all = faults.FAULT_TYPES[st.fault].closes == faults.ALL  # a heal
            events.append((st.at, 0, "up", nodes if not lifts_all and nodes else {EVERY}))
    end = float(_setting(sc, "timing", "duration") or 0)
    down: set[str] = set()
    out = [(0.0, frozenset())]
    for at, _, kind, nodes in sorted((e for e in events if e[0] < end), key=lambda e: (e[0], e[1])):
        if kind == "down":
            down |= nodes
        elif EVERY in nodes:
            down = set()
        else:  # some nodes back: of "every node down" only the nodes named down are known
            down = down - nodes - {EVERY}
        out.append((at, frozenset(down)))
    out.append((end, frozenset()))
    return out


def _covers(down: frozenset[str], nodes: set[str] | None) -> bool:
    return EVERY in down or (bool(nodes) and set(nodes) <= down)


def _client_nodes(sc: Any) -> set[str] | None:
    """The nodes the producers connect to, where the scenario says (RabbitMQ); None: every
    node (only a target of every node then takes them all)."""
    pick = getattr(sc, "client_nodes", None)
    return set(pick("produce")) if callable(pick) else None


def all_clients_down_s(sc: Any) -> float:
    """The longest stretch, by the schedule, in which every node the producers use is down."""
    clients, line, longest, since = _client_nodes(sc), _down_timeline(sc), 0.0, None
    for at, down in line:
        if _covers(down, clients):
            since = at if since is None else since
        elif since is not None:
            longest, since = max(longest, at - since), None
    return longest


def down_at(sc: Any, t: float) -> frozenset[str]:
    """The nodes down at ``t`` s into the faults phase, by the schedule."""
    now: frozenset[str] = frozenset()
    for at, down in _down_timeline(sc):
        if at <= t:
            now = down
    return now


def _freezes_followers(sc: Any) -> bool:
    """A step that takes every follower of the partition down (Kafka's ``followers``): frozen,
    killed, stopped or cut from power."""
    return any(st.fault in DOWN_FAULTS and st.targets == "followers" for st in _steps(sc))


def _follower_drop_s(sc: Any) -> float | None:
    """The soonest Kafka can drop a frozen follower from the ISR: its metadata session's
    expiry or the replica lag time, whichever is shorter (KRaft's broker session, 9 s by
    default, is longer than ZooKeeper's here)."""
    times = [v / 1000 for v in (_setting(sc, "cluster", "zookeeper_session_timeout_ms"),
                                _setting(sc, "cluster", "replica_lag_time_max_ms")) if isinstance(v, (int, float))]
    return min(times) if times else None


# ---- the table -------------------------------------------------------------------------------
Applies = Callable[[Any, str, Any, dict, dict], bool]  # (scenario, key, predicted, expect, require)


@dataclass(frozen=True)
class Tautology:
    figures: tuple[str, ...]  # the figures it is about ("*": any)
    comparison: str           # the predictions it refuses, in words
    forced_by: str            # the setting, fault or other check that forces it
    why: str                  # why the check then cannot fail
    applies: Applies


def _shrink_lag(sc, key, exp, e, r) -> bool:
    lag, x = _lag_s(sc), lower_bound(exp)
    return lag is not None and x is not None and x <= lag


def _shrink_after_cut(sc, key, exp, e, r) -> bool:
    steps = [st for st in _steps(sc) if st.fault not in CLOSING]
    # a cut (every packet, or a share: followers lag either way) of the leader from a follower
    only_cuts = bool(steps) and all(faults.FAULT_TYPES[st.fault].cut and isinstance(st.targets, dict)
                                    and "partial" in st.targets and "leader" in st.targets["partial"]
                                    for st in steps)
    return only_cuts and _shrink_lag(sc, key, exp, e, r)


def _no_dead_letter(sc, key, exp, e, r) -> bool:
    return only_zero(exp) and _setting(sc, "queue", "dead_letter") is None


def _down_fault(sc, key, exp, e, r) -> bool:
    return excludes_zero(exp) and any(st.fault in DOWN_FAULTS for st in _steps(sc))


def _acks_all_frozen(sc, key, exp, e, r) -> bool:
    drop = _follower_drop_s(sc)
    timeout = _setting(sc, "workload", "delivery_timeout_ms")
    return (excludes_zero(exp) and str(_setting(sc, "workload", "acks")) == "all" and _freezes_followers(sc)
            and drop is not None and isinstance(timeout, (int, float)) and timeout / 1000 < drop)


def _clients_down(sc, key, exp, e, r) -> bool:
    span, x = all_clients_down_s(sc), lower_bound(exp)
    return x is not None and span >= CLIENT_SLACK_S and x <= span - CLIENT_SLACK_S


def _all_clients_paused(sc, key, exp, e, r) -> bool:
    paused, clients = e.get("paused_nodes"), _client_nodes(sc)
    return (excludes_zero(exp) and isinstance(paused, list) and clients is not None
            and clients <= set(paused))


def _probe_on_down_nodes(sc, key, exp, e, r) -> bool:
    probe = _setting(sc, "probes", "metadata")
    if not (isinstance(exp, list) and exp and probe is not None):
        return False
    down = down_at(sc, float(probe.at))
    return all(_covers(down, {n}) for n in exp)


ELECTED = {"new_leader_elected": "leader_changes", "new_master_elected": "master_changes",
           "new_controller_elected": "controller_changes"}


def _elected_by_changes(sc, key, exp, e, r) -> bool:
    sib = e.get(_sibling(key, ELECTED[_figure(key)]))
    return exp is True and sib is not None and excludes_zero(sib)


def _lost_by_sibling(sc, key, exp, e, r) -> bool:
    share, nodes = e.get(_sibling(key, "lost_share")), e.get(_sibling(key, "lost_nodes"))
    return excludes_zero(exp) and ((share is not None and excludes_zero(share))
                                   or (isinstance(nodes, list) and bool(nodes)))


def _queue_gone_unread(sc, key, exp, e, r) -> bool:
    return (excludes_zero(exp) and e.get("queue_present") is False
            and _setting(sc, "workload", "consumers") == 0)


def _same_as_require(sc, key, exp, e, r) -> bool:
    return key in r and r[key] == exp


def _fetches_to_leaders(sc, key, exp, e, r) -> bool:
    read = r.get("fetch_messages_read")
    return (excludes_zero(exp) and e.get("fetch_requests_to_non_leaders") is not None
            and only_zero(e["fetch_requests_to_non_leaders"]) and read is not None and excludes_zero(read))


TABLE: tuple[Tautology, ...] = (
    Tautology(("isr_shrink_lag_s",), "a lower bound at or under replica.lag.time.max.ms",
              "replica.lag.time.max.ms (Kafka)",
              "the figure is the leader's own record of the removed replica's lag at the shrink, and the "
              "leader removes a replica only once that lag has passed replica.lag.time.max.ms (K4)",
              _shrink_lag),
    Tautology(("isr_shrink_s",), "a lower bound at or under replica.lag.time.max.ms",
              "replica.lag.time.max.ms, with the only fault a cut of the leader from a follower (Kafka)",
              "the cut follower keeps its metadata session, so only the leader can drop it, and only once it "
              "has not caught up for replica.lag.time.max.ms; its last fetch precedes the cut by at most "
              "replica.fetch.wait.max.ms (K13)",
              _shrink_after_cut),
    Tautology(("dead_lettered",), "zero", "no queue.dead_letter",
              "the harness reads a dead-letter queue only when the scenario declares one: with none, "
              "nothing is ever recorded dead-lettered (D1, D1b)",
              _no_dead_letter),
    Tautology(("nodes_down_count",), "positive", "a kill, stop, pause or power_loss in the schedule",
              "the harness's own fault leaves its targets stopped or frozen (its evidence says so, else the "
              "run is undecided), and the observer counts a stopped or frozen container as down",
              _down_fault),
    Tautology(("fail",), "positive",
              "acks=all, every follower frozen or killed, delivery.timeout.ms under the time Kafka needs to "
              "drop them from the ISR",
              "a write then needs a frozen follower's fetch, which cannot come before the ISR shrinks: the "
              "producer gives up first, whatever the broker does (K3)",
              _acks_all_frozen),
    Tautology(("unavailable_s", "unavailable_longest_producer_s", "unavailable_s_producer_max"),
              f"a lower bound at least {CLIENT_SLACK_S:g} s under the time every client node is down",
              "the schedule takes down every node the producers use at once",
              "with no node to connect to every publish fails, whatever the broker would have done (R34)",
              _clients_down),
    Tautology(("unavailable_s", "unavailable_longest_producer_s", "unavailable_s_producer_max"), "positive",
              "paused_nodes predicted to name every node the producers use, in the same expect:",
              "a paused node stops its app: it closes its clients' connections and refuses new ones until it "
              "resumes, so every publish fails while all of them are paused: the check fails only when the "
              "other does (R32)",
              _all_clients_paused),
    Tautology(("metadata_write_failed",), "nodes the schedule has down when the probe declares",
              "probes.metadata.at inside a kill, stop, pause or power_loss of those nodes",
              "a client of a node that is down cannot connect: its declare fails whatever the broker does "
              "(R45)",
              _probe_on_down_nodes),
    Tautology(tuple(ELECTED), "true", "the matching *_changes predicted positive in the same expect:",
              "at least one change of leader, master or controller is a new one elected: the check fails "
              "only when the other does (K9-kraft)",
              _elected_by_changes),
    Tautology(("lost",), "positive", "lost_share predicted positive, or lost_nodes a non-empty list, in the "
              "same expect:",
              "lost_share is lost over ok, and lost_nodes lists the nodes with a lost message: the check "
              "fails only when the other does (R4, R7)",
              _lost_by_sibling),
    Tautology(("lost", "lost_share"), "positive", "queue_present: false predicted, and no consumer during "
              "the load (workload.consumers 0)",
              "nothing reads the queue during the load and the drain reads only a queue that exists: once it "
              "is gone every confirmed message is lost (R4d, R22)",
              _queue_gone_unread),
    Tautology(("fetch_requests_to_leaders",), "positive",
              "fetch_requests_to_non_leaders predicted 0 and fetch_messages_read required positive",
              "the consumer read messages, so it sent Fetch requests, and none went to a non-leader: only "
              "statistics that missed the fetches can fail it, and that is the evidence failing, not the "
              "broker (a require:, K17)",
              _fetches_to_leaders),
    Tautology(("*",), "the same as require:", "the scenario's require:",
              "a run where it does not hold is undecided by the require:, never false",
              _same_as_require),
)


def problems(sc: Any) -> list[str]:
    """``expect.KEY: VALUE cannot fail: why (forced by ...)`` for each prediction of ``sc``
    that a row of ``TABLE`` covers."""
    e, r = expectations(sc), expectations(sc, "require")
    out = []
    for key, exp in e.items():
        for row in TABLE:
            if ("*" in row.figures or _figure(key) in row.figures) and row.applies(sc, key, exp, e, r):
                out.append(f"expect.{key}: {exp!r} cannot fail: {row.why} (forced by {row.forced_by}); "
                           "re-encode it from the source's text or move it to measure:")
                break
    return out
