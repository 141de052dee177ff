"""Issue 52: a run directory without run.json decides nothing. Its history may be whole or cut
anywhere and nothing says which, so the checker calls it undecided (valid null, exit 2) with
the reason named, as it refuses a run.json it cannot read. No Spark here: the decision is
``harness.verdicts.undecided`` and ``checkers.check._result``, over what ``open_runs`` found;
tests/test_checker.py runs `mqchaos check` on such a run end to end."""
from __future__ import annotations

import random

from checkers import analysis as A
from checkers import synth
from checkers.check import _result
from checkers.history import open_runs
from harness import store
from harness.results import COUNT_FIELDS
from harness.verdicts import NO_RECORD, undecided


def checked(run) -> dict:
    """The checker's result for a history whose figures find nothing (20 sent, 20 confirmed)."""
    ident = {k: 0 for k in COUNT_FIELDS} | {"attempted": 20, "ok": 20, "lost_window": None,
                                            "samples": {k: [] for k in A.ANOMALY_KINDS}}
    return _result(ident, run, "none", None, [], {}, None, None, 1.0, {})


def test_no_record_is_a_reason_to_decide_nothing():
    assert undecided(None, []) == [NO_RECORD]
    assert undecided({"status": "completed"}, []) == []
    failed = [{"fault": "kill", "targets": ["rabbit2"], "details": {"error": "boom"}}]
    assert undecided(None, failed) == [NO_RECORD, "fault kill rabbit2 failed: boom"]


def test_a_run_without_run_json_is_undecided_and_says_why(tmp_path):
    produce, consume = synth.build(random.Random(1), per_producer=10)[:2]
    recorded = synth.write_run(tmp_path / "recorded", produce, consume, meta={"status": "completed"})
    bare = synth.write_run(tmp_path / "bare", produce, consume)
    (bare / store.RUN_JSON).unlink()
    runs, errors = open_runs([str(recorded), str(bare)], prefer_parquet=False)
    assert errors == [] and [r.recorded for r in runs] == [True, False]
    ok, unknown = checked(runs[0]), checked(runs[1])
    assert ok["valid"] is True and ok["undecided"] == []
    assert unknown["valid"] is None and unknown["undecided"] == [NO_RECORD]
    assert unknown["reason"] == f"undecided: {NO_RECORD}"
