"""Pure measurements over a run's samples and history, shared by the broker plug-ins'
observation and the run loop (no I/O: unit-tested on synthetic inputs)."""
from __future__ import annotations

from typing import Any, Callable, Iterable


def changes(values: Iterable) -> tuple[list, int]:
    """Distinct non-null values in order of appearance, and how many times it changed."""
    seen, n, last = [], 0, None
    for v in values:
        if v is None:
            continue
        if last is not None and v != last:
            n += 1
        if v not in seen:
            seen.append(v)
        last = v
    return seen, n


def duration(samples: list[dict], pred: Callable[[dict], Any]) -> float:
    """Seconds for which ``pred(sample)`` held, each sample standing until the next one."""
    total = 0.0
    for a, b in zip(samples, samples[1:]):
        if pred(a):
            total += b["t"] - a["t"]
    return round(total, 2)


def timeline(samples: list[dict], label: Callable[[dict], str]) -> list[list]:
    """[t, label] at each change: what a reader needs to see why a message was (not) lost."""
    out, last = [], None
    for s in samples:
        lab = label(s)
        if lab != last:
            out.append([s["t"], lab])
            last = lab
    return out


def nodes_down_s(samples: list[dict]) -> dict[str, float]:
    """Per node, the seconds its container was not running (stopped, frozen, absent), from
    the observer's samples: the nodes' side of unavailability."""
    ok = [s for s in samples if isinstance(s.get("nodes"), dict)]
    names = sorted({n for s in ok for n in s["nodes"]})
    return {n: duration(ok, lambda s, n=n: s["nodes"].get(n) != "running") for n in names}


def blocked_s(produce: list[dict], consume: list[dict], start: float, end: float) -> float:
    """The longest stretch within [start, end] in which no write was confirmed and nothing
    was delivered: how long the queue was blocked (R6), whatever the clients were told."""
    events = sorted([r["t_complete"] for r in produce if r.get("outcome") == "ok"
                     and isinstance(r.get("t_complete"), (int, float))] +
                    [r["t"] for r in consume if isinstance(r.get("t"), (int, float))])
    inside = [t for t in events if start <= t <= end]
    edges = [start] + inside + [end]
    return round(max(b - a for a, b in zip(edges, edges[1:])), 3) if end > start else 0.0


def consumers_silent(consume: list[dict], before: float, after: float, until: float) -> list[str]:
    """The consumers that received deliveries before ``before`` (the faults) and none in
    (``after``, ``until``] (from the heal to the producers' stop), although the load went on:
    a consumer left waiting for ever after a failover (seed 001, x-cancel-on-ha-failover)."""
    first: dict[str, float] = {}
    late: set[str] = set()
    for r in consume:
        t, c = r.get("t"), r.get("consumer")
        if not isinstance(t, (int, float)) or not isinstance(c, str):
            continue
        if t < before:
            first.setdefault(c, t)
        if after < t <= until:
            late.add(c)
    return sorted(c for c in first if c not in late)
