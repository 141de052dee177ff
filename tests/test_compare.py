"""Comparisons (claims about two rows, harness.compare): pairing the sides' runs of one batch and
version, each side's run counted only when it decided its own row, checked against sums taken
by hand."""
import pytest

from harness import compare as C
from harness import rows as R
from harness.identity import Catalogue, Entry

C21 = {"name": "C-x", "id": "C1", "description": "d", "claims": [21], "sides": {"fast": "A", "slow": "B"},
       "figure": ["lost", "failed"], "expect": "fast < slow"}


# the sides' files as the catalogue has them now (harness.identity): A-x tests "dA", B-x "dB"
CAT = Catalogue([Entry("A-x", "A", "dA"), Entry("B-x", "B", "dB")])


def _row(sid, lost, failed, version="3.10", decided=True, run=None, digest=None):
    return {"id": sid, "scenario": f"{sid}-x", "version": version, "lost": lost, "failed": failed,
            "prediction": True if decided else None, "run": run or f"{sid}/{lost}-{failed}", "measurement": {},
            "digest": digest or f"d{sid}"}


def test_pairs_are_taken_per_batch_and_version_in_run_order_and_judged_on_the_summed_figure():
    c = C.parse(C21, "t")
    batches = [("b1", [_row("A", 10, 5), _row("B", 0, 40), _row("A", 30, 20), _row("B", 0, 45),
                       _row("A", 1, 1, version="4.0")]),  # no B at 4.0: no pair
               ("b2", [_row("A", 50, 0), _row("B", 0, 20, decided=False), _row("B", 0, 10)])]
    got = C.pairs(c, batches, CAT)
    # by hand: b1 3.10: (15 vs 40) held, (50 vs 45) not; b2: the undecided B is skipped, (50 vs 10) not
    assert [(s["batch"], s["values"]["fast"], s["values"]["slow"], s["held"]) for s in got] == [
        ("b1", 15, 40, True), ("b1", 50, 45, False), ("b2", 50, 10, False)]
    assert got[2]["runs"] == ["A/50-0", "B/0-10"]
    rows = C.sample_rows(c, got)
    [t] = R.tally(rows, CAT.with_entries([C.entry(c, CAT)]))
    assert (t["id"], t["held"], t["decided"], t["version"], t["superseded"]) == ("C1", 1, 3, "3.10", False)


def test_a_sample_of_a_sides_older_encoding_is_superseded_and_counted_apart():
    c = C.parse(C21, "t")
    old = [_row("A", 10, 5, run="A/old", digest="dA-before"), _row("B", 0, 40, run="B/old")]
    got = C.pairs(c, [("b0", old), ("b1", [_row("A", 10, 5), _row("B", 0, 40)])], CAT)
    cat = CAT.with_entries([C.entry(c, CAT)])
    now, before = sorted(R.tally(C.sample_rows(c, got), cat), key=lambda t: t["superseded"])
    assert (now["superseded"], now["held"], now["decided"]) == (False, 1, 1)
    assert (before["superseded"], before["held"], before["decided"]) == (True, 1, 1)
    assert R.tally_text(before).startswith("superseded (digest ")
    assert [R.shown_verdict(r, cat) for r in C.sample_rows(c, got)] == ["superseded (held)", "held"]


def test_a_factor_scales_the_left_side():
    c = C.parse(dict(C21, expect="fast * 2 < slow"), "t")
    got = C.pairs(c, [("b", [_row("A", 10, 0), _row("B", 25, 0), _row("A", 10, 0), _row("B", 20, 0)])], CAT)
    assert [s["held"] for s in got] == [True, False]  # 20 < 25; 20 < 20 is not
    assert c.relation() == ("fast", 2.0, "<", "slow")


def test_a_figure_a_run_did_not_measure_leaves_its_pair_undecided():
    c = C.parse(dict(C21, figure=["lost", "read_gap_max_s"]), "t")
    a = dict(_row("A", 1, 0), measurement={"read_gap_max_s": 2.5})
    [s] = C.pairs(c, [("b", [a, _row("B", 1, 0)])], CAT)
    assert s["values"] == {"fast": 3.5, "slow": None} and s["held"] is None
    assert R.verdict_word({"prediction": s["held"]}) == "undecided"


@pytest.mark.parametrize("change,field", [
    ({"expect": "fast < fast"}, "expect"), ({"expect": "fast << slow"}, "expect"), ({"expect": "fast * x < slow"}, "expect"),
    ({"expect": "fast < other"}, "expect"), ({"claims": [77]}, "claims"),
    ({"sides": {"a": "A"}}, "sides"), ({"figure": []}, "figure"), ({"extra": 1}, "extra")])
def test_a_malformed_comparison_is_refused_naming_the_field(change, field):
    with pytest.raises(C.ComparisonError, match=f"bad: {field}"):
        C.parse(dict(C21, **change), "bad")


def test_every_committed_comparison_loads_and_names_rows_of_the_catalogue():
    from harness.scenario import read

    ids = {read(str(p)).get("id") for p in R.store.ROOT.glob("scenarios/*.yaml")}
    found = C.load_all()
    assert found, "no comparison file"
    for c in found:
        assert C.unknown_rows(c, ids) == [], c.name
    assert C.unknown_rows(C.parse(dict(C21, sides={"fast": "A", "slow": "R2"}), "t"), ids) == [
        "sides.fast: no scenario has id A"]


# ---- a figure against another figure of the same run (harness.expect.FIGURE_REF) ----------------
def test_a_prediction_may_compare_two_figures_of_one_run():
    from harness import expect

    held = expect._check("ratio.q", "> ratio.m", {"ratio.q": 0.9, "ratio.m": 0.4})
    assert held == {"key": "ratio.q", "expected": "> ratio.m", "actual": 0.9, "than": 0.4, "held": True}
    assert expect._check("ratio.q", "<= ratio.m", {"ratio.q": 0.9, "ratio.m": 0.4})["held"] is False
    assert expect._check("ratio.q", "> ratio.m", {"ratio.q": 0.9})["held"] is None  # the other unmeasured
    assert expect._check("ratio.q", "> ratio.m", {"ratio.q": 0.9, "ratio.m": True})["held"] is None
    assert expect.referenced("> a.b_c") == "a.b_c" and expect.referenced(">0.5") is None
    assert expect.checkable("> a.b") and R.decided_by(
        {"held": True, "checks": [held]}) == "ratio.q=0.9 vs > ratio.m (0.4)"


def test_a_comparison_with_a_figure_the_run_does_not_measure_is_refused_at_load():
    from harness.scenario import ScenarioError, parse, read

    data = read("scenarios/Q9-quorum-keeps-publish-rate-under-backlog.yaml")
    sc = parse(dict(data), "ok")
    assert "throughput_ratio.mirrored_backlog_vs_mirrored" in sc.measurement_names()
    with pytest.raises(ScenarioError, match="throughput_ratio.nothing"):
        parse(dict(data, expect={"throughput_ratio": {"quorum_backlog_vs_quorum": "> throughput_ratio.nothing"}}),
              "bad")


def test_a_throughput_probe_variant_naming_no_policy_or_a_mirrored_quorum_queue_is_refused():
    from harness.scenario import ScenarioError, parse, read

    data = read("scenarios/Q9-quorum-keeps-publish-rate-under-backlog.yaml")
    probe = data["probes"]["throughput"]
    for change, words in (({"vs": {"quorum": "quorum"}}, "vs"), ({"backlog": {"other": 5}}, "backlog"),
                          ({"queue_type": {"mirrored": "quorum"}}, "no ha- .mirroring. policy")):
        with pytest.raises(ScenarioError, match=words):
            parse(dict(data, probes={"throughput": dict(probe, **change)}), "bad")


def test_a_comparison_file_that_is_not_yaml_is_refused_naming_the_file(tmp_path):
    bad = tmp_path / "C9-bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(C.ComparisonError, match="C9-bad.yaml: not valid YAML"):
        C.load(bad)
    with pytest.raises(C.ComparisonError, match="cannot read"):
        C.load(tmp_path / "missing.yaml")
