"""Judging a run: a function of its directory, its scenario and its record.

Jepsen's ``analyze!`` is apart from ``run!`` so a stored test can be analysed again; here
the run loop, the batch's check queue and ``mqchaos check`` (over stored runs) all judge
through ``judge``, and none of them needs the ``Run`` that produced the directory:

    check_history(spark, dir, ordering) -> the checker's result (checkers.check)
    judge(dir, scenario, record, result) -> decide, then check.json, the report, run.json
    decide(dir, scenario, result, record) -> the verdict: the prediction, the row, the exit code
    rejudge(dir)                         -> the same from what the directory holds
    keep_copy(spark, dir), draw(dir)     -> the Parquet copy, the report's pictures

The verdict is decided here and only here (``decide``); ``harness.report`` renders what was
decided and decides nothing.
"""
from __future__ import annotations

import logging
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from checkers.check import check_runs
from checkers.history import convert, open_runs
from harness import expect, report, rows, store
from harness.store import RunRecord
from harness.util import BACKGROUND_NICE
from harness.verdicts import run_exit_code


log = logging.getLogger(__name__)


def check_history(spark, run_dir: Path, ordering: str) -> dict | None:
    """The checker's result for the run's closed history, read from its JSONL files (None:
    the history could not be opened)."""
    runs, errors = open_runs([str(run_dir)], prefer_parquet=False)
    if errors:
        log.error("check: %s", errors)
        return None
    return check_runs(spark, runs, ordering=ordering)[str(run_dir)]


def judge(run_dir: Path, sc, record: RunRecord, result: dict, pictures: bool = True) -> int:
    """Judge ``result`` against the scenario's prediction (``decide``) and write what was
    decided: check.json, the report (without ``pictures``: ``draw`` adds them later), run.json
    (the ``record`` updated in place). Returns the run's exit code."""
    run_dir = Path(run_dir)
    code = decide(run_dir, sc, result, record)
    store.write_check(run_dir, result)
    report.write(run_dir, sc, result, record, pictures)
    store.write_run(run_dir, record)
    return code


def decide(run_dir: Path, sc, result: dict, record: RunRecord) -> int:
    """The run's verdict: the scenario's prediction judged against the checker's ``result`` and
    the run's record (``harness.expect.verdict``: check.json's "prediction", in ``result``), the
    run's row (run.json's "summary") and its exit code by the prediction
    (``harness.verdicts.run_exit_code``: run.json's "exit_code"), both in ``record``. Writes
    nothing; returns the exit code."""
    result.setdefault("checked_at", datetime.now(timezone.utc).isoformat(timespec="seconds"))
    result["prediction"] = expect.verdict(sc, result, record)
    record["summary"] = rows.run_row(sc, result, record, run_dir)
    record["exit_code"] = code = run_exit_code(result)
    return code


def rejudge(run_dir: Path) -> dict | None:
    """After an offline check: the run judged again from its own run.json (the scenario as
    run) and its new check.json; the prediction, None if it is no harness run or its
    scenario no longer validates."""
    got = report.recorded(run_dir)
    if got is None or got[0] is None:
        return None
    sc, result, record = got
    judge(Path(run_dir), sc, record, result)
    return result["prediction"]


def keep_copy(spark, run_dir: Path) -> None:
    """The history's Parquet copy (docs/history.md) for later Spark jobs over results/:
    written after the verdict, off its path; a run without one is read from JSONL."""
    try:
        convert(spark, str(run_dir))
    except Exception as e:  # noqa: BLE001 - the copy is a cache, the JSONL the record
        log.warning("no Parquet copy of %s: %s: %s", run_dir, type(e).__name__, e)


def draw(run_dir: Path) -> subprocess.Popen:
    """Start drawing the report again, with its pictures (after ``judge(...,
    pictures=False)``), in a process of its own at the lowest CPU priority: plotting holds
    the interpreter's lock, which the run beside it (a batch's next) needs."""
    return subprocess.Popen(["nice", "-n", str(BACKGROUND_NICE), sys.executable, "-m", "harness.report",
                             str(run_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
