"""Issue 37's claim table: the seed claims a row asserts (its scenario's ``claims:``), with the
tally of the row's published runs; a claim no row asserts is shown as such."""
import pytest

from harness import rows as R
from harness.identity import Catalogue, Entry
from harness.scenario import ScenarioError, parse, read


def _row(name, sid, version, verdict_valid, run, digest="d-" + "x"):
    return {"id": sid, "scenario": name, "version": version, "valid": verdict_valid, "prediction": verdict_valid,
            "status": "completed", "exit": 0 if verdict_valid else 1, "run": run, "expect": {"lost": 0},
            "digest": digest}


def _cat(*entries):
    return Catalogue([Entry(*e) for e in entries])


def test_each_claim_shows_the_rows_asserting_it_and_their_tally():
    rows = [_row("R9r-x", "R9r", "3.10", True, "a/1", "dR9r"), _row("R9r-x", "R9r", "3.10", False, "a/2", "dR9r"),
            _row("other", "Z", "3.10", True, "b/1", "dZ")]
    cat = _cat(("R9r-x", "R9r", "dR9r"), ("K7r-y", "K7r", "dK7r"), ("other", "Z", "dZ"))
    lines = R.claim_lines([("R9r-x", [2]), ("K7r-y", [2, 3])], rows, 4, cat)
    assert len(lines) == 2 + 4
    one, two, three = lines[2], lines[3], lines[4]
    assert "| 1 |" in one and "no row yet" in one
    assert "R9r, K7r" in two or "K7r, R9r" in two
    assert "R9r @ 3.10: held 1 of 2" in two and "other" not in two
    assert "K7r" in three and "not run yet" in three
    assert R.claim_seed(1) .startswith("000") and R.claim_seed(43).startswith("002") and R.claim_seed(76).startswith("004")


def test_only_the_runs_of_the_files_present_digest_count_for_its_claims():
    """A row re-encoded (K9 given claim 57's assertion; R48's producers 3 -> 6, same
    prediction) shows none of its older runs as held or not: they did not test what the file
    asserts now. They are counted beside, as superseded."""
    old = _row("K9-x", "K9", "3.9", True, "a/1", "d-before")
    new = _row("K9-x", "K9", "3.9", False, "a/2", "d-now")
    cat = _cat(("K9-x", "K9", "d-now"))
    [line] = R.claim_lines([("K9-x", [1])], [old, new], 1, cat)[2:]
    assert "K9 @ 3.9: held 0 of 1" in line and "K9: 1 superseded run(s), not counted" in line
    [line] = R.claim_lines([("K9-x", [1])], [old], 1, cat)[2:]
    assert "K9: not run yet; K9: 1 superseded run(s), not counted" in line
    assert R.prediction_text({"lost": 0}, {}) == R.prediction_text({"lost": 0}, None) == "expect=lost=0"


def test_a_claim_shows_the_runs_of_its_set_up_under_another_prediction_and_pools_one_digest():
    """Claim 17: R9r asserts it; R9's runs had R9r's set-up with another prediction, and their
    rows show R9r's figure (self_healed): both lines show, R9's never counted for the claim,
    also once R9 itself was re-encoded. Two files of one digest are one test."""
    def rows(name, sid, digest, n, **kw):
        return [dict(_row(name, sid, "3.10", True, f"{sid}/{i}", digest), setup_digest="set-up", **kw)
                for i in range(n)]

    r9r = rows("R9r-x", "R9r", "dR9r", 2)
    r9 = rows("R9-x", "R9", "dR9", 2, measurement={"self_healed": False}) + rows("R9-x", "R9", "dR9", 1)[:1]
    r9[-1]["run"] = "R9/last"
    cat = _cat(("R9r-x", "R9r", "dR9r", "set-up", {"self_healed": True}), ("R9-x", "R9", "dR9", "set-up"),
               ("Q1-x", "Q1", "dQ1", "another"))
    [line] = R.claim_lines([("R9r-x", [1])], r9r + r9, 1, cat)[2:]
    assert "R9r @ 3.10: held 2 of 2" in line
    assert "R9 (same set-up, another prediction) @ 3.10: held 3 of 3" in line
    assert "its runs show self_healed=False in 2 of 3 runs" in line and "Q1" not in line
    # R9 re-encoded since (another set-up now): its runs still ran R9r's set-up
    moved = _cat(("R9r-x", "R9r", "dR9r", "set-up", {"self_healed": True}), ("R9-x", "R9", "dR9-now", "moved"))
    [line] = R.claim_lines([("R9r-x", [1])], r9r + r9, 1, moved)[2:]
    assert "R9 (same set-up, another prediction, an older encoding) @ 3.10: held 3 of 3" in line
    # the same digest: the same test, whichever file a run recorded
    same = _cat(("R9r-x", "R9r", "dR9", "set-up", {"self_healed": True}), ("R9-x", "R9", "dR9", "set-up"))
    r9r = [dict(r, digest="dR9") for r in r9r]
    [line] = R.claim_lines([("R9r-x", [1])], r9r + r9, 1, same)[2:]
    assert "R9r = R9 @ 3.10: held 5 of 5" in line and "same set-up" not in line and "superseded" not in line


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
