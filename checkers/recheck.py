"""Check runs again and compare the figures with their stored check.json: a change to the
checker must give the same figures on real histories as the checker that wrote them.

    mqchaos recheck [results/ ...]           (default results/)
    python -m bench.recheck [results/ ...]   (the same function)

Every run with a check.json and a produce history is checked again from its JSONL, ten runs
per job; the figures both results have are compared. Exit 0: all identical; 1: some differ
(each difference printed); 2: nothing to compare."""
from __future__ import annotations

import json
import time
from typing import Callable

from checkers import analysis as A
from checkers.check import check_runs
from checkers.history import open_runs
from checkers.spark import session
from harness import store

FIGURES = (*A.COUNT_FIELDS, "samples", "lost_window", "ordering", "ordering_violations", "unavailable",
           "unavailable_s", "unavailable_by_producer", "unavailable_s_producer_max", "read_gaps",
           "read_gap_max_s", "lost_by_node", "lost_by_producer", "kept_before_lost_last", "valid", "reason")


def differences(old: dict, new: dict) -> list[str]:
    """The figures both results have and disagree on (compared as JSON)."""
    same = (lambda a, b: json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True))
    return [k for k in FIGURES if k in old and k in new and not same(old[k], new[k])]


def stored_checks(paths: list[str]) -> dict[str, dict]:
    """Each run's stored check.json, by run directory (runs whose check.json is missing or
    unreadable have nothing to compare)."""
    dirs, _ = store.find_runs(paths)
    stored = {}
    for d in dirs:
        check, err = store.read_json(d / store.CHECK_JSON)
        if check and not err:
            stored[str(d)] = check
    return stored


def recheck(paths: list[str], echo: Callable[[str], None] = print) -> int:
    """Check the runs under ``paths`` again and compare; the exit code (0 identical, 1 some
    differ, 2 nothing to compare)."""
    stored = stored_checks(paths)
    runs, _ = open_runs(sorted(stored), prefer_parquet=False)  # runs with no produce history drop out
    spark = session(app="mqchaos-recheck")
    t0 = time.monotonic()
    identical, differing, compared = 0, 0, 0
    for i in range(0, len(runs), 10):
        for run_dir, new in check_runs(spark, runs[i:i + 10]).items():
            old = stored[run_dir]
            compared += sum(1 for k in FIGURES if k in old and k in new)
            bad = differences(old, new)
            if bad:
                differing += 1
                echo(f"DIFFERS {run_dir}: " + "; ".join(f"{k}: {old[k]!r} -> {new[k]!r}" for k in bad))
            else:
                identical += 1
    echo(f"{len(runs)} runs checked again in {time.monotonic() - t0:.0f} s ({len(stored) - len(runs)} with "
         f"a check.json but no produce history skipped): {identical} identical, {differing} differing; "
         f"{compared} figures compared")
    return 2 if not runs else 1 if differing else 0
