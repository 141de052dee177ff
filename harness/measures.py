"""Pure measurements over a run's samples and history, shared by the broker plug-ins'
observation and the run loop (no I/O: unit-tested on synthetic inputs)."""
from __future__ import annotations

from math import floor, sqrt
from statistics import NormalDist, mean, median, stdev
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


def ack_latency_max(produce: list[dict], start: float, end: float) -> float | None:
    """The longest a write invoked in [start, end] waited for its acknowledgement (writes
    that were confirmed): acks=all waits for the slowest member of the ISR (K13)."""
    waits = [r["t_complete"] - r["t_invoke"] for r in produce if r.get("outcome") == "ok"
             and isinstance(r.get("t_invoke"), (int, float)) and isinstance(r.get("t_complete"), (int, float))
             and start <= r["t_invoke"] <= end]
    return round(max(waits), 3) if waits else None


# Repetitions a "falls" needs: if the settings made no difference, each repetition would fall
# by chance with probability 1/2 per adjacent pair, so all of 5 falling has p = 1/32 per pair
# (a sign test), while the runs of a 2-core machine vary too much for their ranges to part.
PAIRED_MIN = 5


def falls(runs: list[list[float]]) -> bool | None:
    """Whether a figure falls along a sequence of settings, each measured once per repetition,
    the repetitions interleaved (R13: throughput as mirrors are added). False when a median
    does not fall; True when it falls within every repetition, over at least PAIRED_MIN of
    them; else None (too few repetitions, or one that did not fall)."""
    if any(not r for r in runs):
        return None
    meds = [median(r) for r in runs]
    if any(b >= a for a, b in zip(meds, meds[1:])):
        return False
    n = min(len(r) for r in runs)
    every = all(all(b[i] < a[i] for a, b in zip(runs, runs[1:])) for i in range(n))
    return True if every and n >= PAIRED_MIN else None


# Student's t, two-sided 95 %, by degrees of freedom (1..9): the repetitions are few.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262)


def mean_ci95(xs: list[float]) -> dict | None:
    """The mean of ``xs`` and its 95 % t-interval (at least two values, at most ten)."""
    n = len(xs)
    if n < 2 or n > len(T95) + 1:
        return None
    m = mean(xs)
    half = T95[n - 2] * stdev(xs) / n ** 0.5
    return {"mean": round(m, 3), "ci95": [round(m - half, 3), round(m + half, 3)]}


def grows(intervals: list[dict | None]) -> bool | None:
    """Whether a difference grows along a sequence (R6: blocked seconds, automatic minus
    manual, by queue size), judged by the first and last 95 % intervals: True when the last
    lies above zero and above the first, False when the last lies at or below zero or below
    the first; else None (the intervals overlap: the repetitions do not decide)."""
    if len(intervals) < 2 or intervals[0] is None or intervals[-1] is None:
        return None
    (lo0, hi0), (lo1, hi1) = intervals[0]["ci95"], intervals[-1]["ci95"]
    if lo1 > 0 and lo1 > hi0:
        return True
    if hi1 <= 0 or hi1 < lo0:
        return False
    return None


# The two-sided 95 % normal quantile (1.959964...), for Wilson's interval.
Z95 = NormalDist().inv_cdf(0.975)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson's score interval for a share of ``k`` in ``n`` (95 % by default): the shares p
    for which k/n lies within z standard errors of p. Unlike the normal approximation it
    stays inside [0, 1] and is not empty at 0/n or n/n. None when n is 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"wilson: {k} of {n}")
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # at 0/n and n/n the bound is exactly 0 or 1 (the formula leaves a rounding error)
    return (0.0 if k == 0 else max(0.0, centre - half)), (1.0 if k == n else min(1.0, centre + half))


def percentile(xs: list[float], q: float) -> float | None:
    """The ``q``-quantile (0..1) of ``xs`` by linear interpolation between the closest ranks
    (numpy's default, Spark's ``percentile``: what ``mqchaos analyze`` reports); None if empty."""
    if not xs:
        return None
    s = sorted(xs)
    r = q * (len(s) - 1)
    lo = floor(r)
    return s[lo] if lo + 1 >= len(s) else s[lo] + (r - lo) * (s[lo + 1] - s[lo])
