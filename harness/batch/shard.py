"""A catalogue split across machines (``mqchaos batch --shard I/N``): every scenario goes
to exactly one of N shards, the shards' expected wall times as even as the rows allow, and
the split the same on every machine that has the same files and published batches (no
clock, no randomness). The shards' summaries become one with ``mqchaos batch --merge``
(``same_rows``: the merged shards against one batch); ``budget`` is the catalogue's wall time
per number of machines (``mqchaos docs table budget``).

A row's expected wall time is its newest published run's (docs/batches/*/summary.json,
``seconds``: the median of that batch's runs of it); a row never published counts as the
median of those known. The split is the longest-processing-time rule: rows from the longest
down, each to the shard with the least time so far (ties: the lower shard number), which is
within 4/3 of the best possible split's longest shard.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from statistics import median
from typing import Iterable

ROOT = Path(__file__).resolve().parent.parent.parent
PUBLISHED = ROOT / "docs" / "batches"
DEFAULT_S = 120.0  # a row's guess when nothing at all was published

log = logging.getLogger(__name__)

_SHARD = re.compile(r"^\s*([0-9]+)\s*/\s*([0-9]+)\s*$")


def parse(text: str) -> tuple[int, int]:
    """``I/N`` (1 <= I <= N): the shard to run and how many there are."""
    m = _SHARD.match(text or "")
    if not m:
        raise ValueError(f"--shard {text!r}: expected I/N, e.g. 2/4")
    i, n = int(m.group(1)), int(m.group(2))
    if not 1 <= i <= n:
        raise ValueError(f"--shard {text!r}: I must be between 1 and N")
    return i, n


def wall_times(batch_dirs: Iterable[Path] | None = None) -> dict[str, float]:
    """Each scenario's newest published wall time (s): the batches in name (timestamp) order,
    a later batch's figure replacing an earlier one's; a batch with several runs of a row
    gives their median."""
    dirs = sorted(batch_dirs if batch_dirs is not None else
                  (p for p in PUBLISHED.iterdir() if p.is_dir()) if PUBLISHED.is_dir() else [],
                  key=lambda p: p.name)
    out: dict[str, float] = {}
    for d in dirs:
        try:
            rows = json.loads((d / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        seen: dict[str, list[float]] = {}
        for r in rows if isinstance(rows, list) else []:
            s = r.get("seconds") if isinstance(r, dict) else None
            if isinstance(s, (int, float)) and s > 0 and r.get("scenario"):
                seen.setdefault(r["scenario"], []).append(float(s))
        out.update({name: median(v) for name, v in seen.items()})
    return out


def expected(names: list[str], times: dict[str, float]) -> tuple[dict[str, float], float]:
    """Each name's expected wall time: its published one, else the median of those known
    (else DEFAULT_S); and that guess."""
    known = [times[x] for x in names if x in times]
    guess = median(known) if known else DEFAULT_S
    return {x: times.get(x, guess) for x in names}, guess


def split(names: list[str], times: dict[str, float], n: int) -> list[list[str]]:
    """``names`` in ``n`` shards (each in the order given), balanced by ``times``."""
    if n < 1:
        raise ValueError("at least one shard")
    cost, _ = expected(names, times)
    load = [0.0] * n
    shard_of: dict[str, int] = {}
    for x in sorted(set(names), key=lambda x: (-cost[x], x)):
        k = min(range(n), key=lambda i: (load[i], i))
        shard_of[x] = k
        load[k] += cost[x]
    return [[x for x in names if shard_of[x] == k] for k in range(n)]


def pick(names: list[str], shard: tuple[int, int], times: dict[str, float] | None = None) -> list[str]:
    """The names of shard ``I`` of ``N``."""
    i, n = shard
    t = wall_times() if times is None else times
    parts = split(names, t, n)
    log.info("shard %d/%d: %d of %d rows, %.0f s expected (shards: %s)", i, n, len(parts[i - 1]), len(names),
             sum(t.get(x, 0.0) for x in parts[i - 1]),
             ", ".join(f"{sum(t.get(x, 0.0) for x in p):.0f}" for p in parts))
    return parts[i - 1]


# What two batches over the same files must agree on, row by row: which runs there are and
# their verdicts. The figures (attempted, lost, seconds...) are each run's own and differ.
ROW_KEY = ("scenario", "version", "repeat")
VERDICT = ("id", "broker", "status", "harness_error", "prediction", "valid", "exit")


def same_rows(whole: list[dict], merged: list[dict]) -> dict:
    """Whether ``merged`` (the shards' summaries made one) has the rows of ``whole`` (one
    batch over the same files) in the same order, with the same verdicts: {"same": bool,
    "rows": [key and verdict of each], "only_whole", "only_merged", "order_differs",
    "verdict_differs"}."""
    def key(r: dict) -> tuple:
        return tuple(r.get(k) for k in ROW_KEY)

    def verdict(r: dict) -> dict:
        return {k: r.get(k) for k in VERDICT}

    a, b = {key(r): r for r in whole}, {key(r): r for r in merged}
    both = [k for k in a if k in b]
    differs = [{"row": list(k), "whole": verdict(a[k]), "merged": verdict(b[k])}
               for k in both if verdict(a[k]) != verdict(b[k])]
    out = {"only_whole": [list(k) for k in a if k not in b],
           "only_merged": [list(k) for k in b if k not in a],
           "order_differs": [key(r) for r in whole if key(r) in b] != [key(r) for r in merged if key(r) in a],
           "verdict_differs": differs,
           "rows": [{"row": list(k), **verdict(a[k])} for k in both]}
    out["same"] = not (out["only_whole"] or out["only_merged"] or out["order_differs"] or differs)
    return out


def budget(load: dict[str, float], times: dict[str, float], machines: tuple[int, ...] = (1, 2, 4)) -> dict:
    """The catalogue's wall time, from the rows' declared load (``load``: warmup + duration +
    recovery, by scenario) and their newest published wall times (``times``): what is known,
    and per number of machines the longest shard's expected time and the floor no split can go
    under (the declared load alone, spread evenly, and never below the longest row's)."""
    names = list(load)
    known = [x for x in names if x in times]
    cost, guess = expected(names, times)
    out = {"rows": len(names), "published": len(known), "published_s": sum(times[x] for x in known),
           "published_load_s": sum(load[x] for x in known), "unpublished": len(names) - len(known),
           "guess_s": guess, "load_s": sum(load.values()), "machines": {}}
    for n in machines:
        parts = split(names, times, n)
        out["machines"][n] = {"expected_s": max((sum(cost[x] for x in p) for p in parts), default=0.0),
                              "floor_s": max(out["load_s"] / n, max(load.values(), default=0.0))}
    return out
