"""Issue 37's claim table: the seed claims a row asserts (its scenario's ``claims:``), with the
tally of the row's published runs; a claim no row asserts is shown as such."""
import pytest

from harness import rows as R
from harness.scenario import ScenarioError, parse, read


def _row(name, sid, version, verdict_valid, run):
    return {"id": sid, "scenario": name, "version": version, "valid": verdict_valid, "prediction": verdict_valid,
            "status": "completed", "exit": 0 if verdict_valid else 1, "run": run, "expect": {"lost": 0}}


def test_each_claim_shows_the_rows_asserting_it_and_their_tally():
    rows = [_row("R9r-x", "R9r", "3.10", True, "a/1"), _row("R9r-x", "R9r", "3.10", False, "a/2"),
            _row("other", "Z", "3.10", True, "b/1")]
    lines = R.claim_lines([("R9r", "R9r-x", [2], None), ("K7r", "K7r-y", [2, 3], None)], rows, 4)
    assert len(lines) == 2 + 4
    one, two, three = lines[2], lines[3], lines[4]
    assert "| 1 |" in one and "no row yet" in one
    assert "R9r, K7r" in two or "K7r, R9r" in two
    assert "R9r @ 3.10: held 1 of 2" in two and "other" not in two
    assert "K7r" in three and "not run yet" in three
    assert R.claim_seed(1) .startswith("000") and R.claim_seed(43).startswith("002") and R.claim_seed(76).startswith("004")


def test_only_the_runs_of_the_files_present_prediction_count_for_its_claims():
    """A row re-encoded (K9 given claim 57's assertion) shows none of its older runs: they did
    not test what the file asserts now."""
    old = _row("K9-x", "K9", "3.9", True, "a/1")
    new = dict(_row("K9-x", "K9", "3.9", False, "a/2"), expect={"lost": 0, "whole_run": {"first": False}})
    present = R.prediction_text({"lost": 0, "whole_run": {"first": False}}, None)
    [line] = R.claim_lines([("K9", "K9-x", [1], present)], [old, new], 1)[2:]
    assert "held 0 of 1" in line
    [line] = R.claim_lines([("K9", "K9-x", [1], present)], [old], 1)[2:]
    assert "not run yet" in line
    assert R.prediction_text({"lost": 0}, {}) == R.prediction_text({"lost": 0}, None) == "expect=lost=0"


def test_a_claim_number_outside_the_list_is_refused_naming_the_field():
    data = read("scenarios/R9r-pause-minority-resumes.yaml")
    assert parse(dict(data), "ok").claims == [17]
    with pytest.raises(ScenarioError, match="claims"):
        parse(dict(data, claims=[0, 77]), "bad")


def test_a_transient_queue_is_classic_only_and_declared_as_such():
    data = read("scenarios/R22-transient-queue-node-restart.yaml")
    sc = parse(dict(data), "ok")
    assert sc.queue.durable is False and "queue_present" in sc.measurement_names() and sc.claims == [29]
    with pytest.raises(ScenarioError, match="durable: false: classic queues only"):
        parse(dict(data, queue=dict(data["queue"], type="quorum", declare_on=None)), "bad")


def test_unknown_lost_counts_the_writes_with_no_known_outcome_never_read():
    from harness.expect import measured

    m = measured({"ok": 0, "lost": 0, "info": 10, "recovered": 7, "recovered_fail": 2}, {})
    assert m["unknown_lost"] == 5  # 10 unknown, 5 of them read (7 recovered, 2 of which had failed)
    sc = parse(dict(read("scenarios/R27-no-confirms-master-killed.yaml")), "ok")
    assert sc.workload.confirms is False and sc.claims == [3]
