"""Seeded exploration (harness/explore.py): draws reproducible from their seed, drawn
scenarios valid and without a prediction, and the shrink keeping the shortest schedule that
still finds anomalies (a fake runner stands in for the real runs)."""
import json

import pytest

from harness import explore as X
from harness.scenario import parse, read
from harness.verdicts import EXIT_INVALID, EXIT_VALID

FAULTS = ["kill", "pause", "partition", "pause_kill", "part_kill", "power_loss", "corrupt"]


def test_a_draw_is_its_seed():
    a, b = X.draw(FAULTS, 11, 200, files="segment"), X.draw(FAULTS, 11, 200, files="segment")
    assert a.groups == b.groups and len(a.groups) >= 4
    assert X.draw(FAULTS, 12, 200, files="segment").groups != a.groups
    starts = [g[0]["at"] for g in a.groups]
    assert starts == sorted(starts) and starts[0] == 5.0


def test_the_drawn_scenario_loads_and_decides_by_the_checker():
    base = read("scenarios/K3-acks-all-minisr2.yaml")
    d = X.draw(FAULTS, 3, 150, files="segment")
    data = X.scenario_of(base, d.steps(), 3, "test")
    sc = parse(data, "drawn")
    assert sc.expect == {} and sc.require == {} and sc.name.endswith("-explore-3")
    assert len(sc.steps) >= len(d.steps()) and sc.timing.duration >= max(s["at"] for s in d.steps())
    with pytest.raises(ValueError, match="cannot draw"):
        X.draw(["bitrot"], 1, 10)


def test_shrink_keeps_the_shortest_schedule_that_still_finds_anomalies(tmp_path):
    base = read("scenarios/K3-acks-all-minisr2.yaml")
    d = X.draw(["kill", "pause", "partition"], 5, 200)
    culprit = d.groups[2][0]["at"]
    seen = []

    def run(data):  # anomalies exactly when the culprit group is in the schedule
        seen.append(data["nemesis"])
        return (EXIT_INVALID if any(s["at"] == culprit for s in data["nemesis"]) else EXIT_VALID), f"run{len(seen)}"
    code, record = X.explore(base, ["kill", "pause", "partition"], 5, 200, run, tmp_path, shrink_budget=10)
    assert code == EXIT_INVALID and record["shortest"]["groups"] == [2]
    assert [s["at"] for s in record["shortest"]["steps"]][0] == culprit
    assert json.loads((tmp_path / "explore.json").read_text())["seed"] == 5
    assert all(a["exit"] in (EXIT_VALID, EXIT_INVALID) for a in record["shrink"])
    _, clean = X.explore(base, ["kill"], 5, 60, lambda data: (EXIT_VALID, "r"), tmp_path / "c")
    assert clean["shrink"] == [] and "shortest" not in clean


def test_the_record_keeps_each_runs_figures_and_the_table_shows_the_shortest(tmp_path, monkeypatch):
    from harness import store

    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path))
    base = read("scenarios/K3-acks-all-minisr2.yaml")
    d = X.draw(["kill", "pause"], 5, 120)
    culprit = d.groups[1][0]["at"]

    def run(data):  # a run directory with a check.json and a run.json, as the runner leaves them
        name = f"r{len(list(tmp_path.glob('r*')))}"
        bad = any(s["at"] == culprit for s in data["nemesis"])
        (tmp_path / name / "history").mkdir(parents=True)
        (tmp_path / name / "history" / "produce-p0.jsonl").write_text("x" * 10)
        store.write_check(tmp_path / name, {"valid": not bad, "reason": "lost=3" if bad else "ok", "attempted": 9,
                                            "ok": 8, "lost": 3 if bad else 0, "produce_records": 9, "deliveries": 5})
        store.write_run(tmp_path / name, {"version": {"version": "4.1"}, "phases": {"check": 10.0, "end": 12.5}})
        return (EXIT_INVALID if bad else EXIT_VALID), name
    code, rec = X.explore(base, ["kill", "pause"], 5, 120, run, tmp_path / "out", shrink_budget=10)
    main = rec["checks"][rec["run"]]
    assert main["lost"] == 3 and main["version"] == "4.1" and main["check_s"] == 2.5 and main["history_bytes"] == 10
    assert set(rec["checks"]) == {rec["run"], *(a["run"] for a in rec["shrink"])}
    # each group from its first step to its lift: a kill until its start, a pause until its unpause
    assert rec["fault_s"] == X.fault_seconds(d.groups) == round(sum(g[-1]["at"] - g[0]["at"] for g in d.groups), 3)
    row = X.table_lines([rec])[2]
    assert "K3-acks-all-minisr2 @ 4.1" in row and "anomalies (lost=3)" in row
    assert f"at {culprit:g} s: lost=3" in row  # the shortest schedule and what its own run found
    assert "| 14 |" in row  # history records: produce + deliveries


def test_the_report_says_how_big_the_history_was_and_how_long_its_check_took(tmp_path):
    from harness import report, store

    (tmp_path / store.HISTORY).mkdir()
    (tmp_path / store.HISTORY / "produce-p0.jsonl").write_text("x" * 2_000_000)
    text = report.history_text(tmp_path, {"produce_records": 1_000_000, "deliveries": 900_000},
                               {"check_timing": {"check_s": 41.5}})
    assert text.startswith("1,900,000 records") and "2.0 MB in 1 files" in text and "checked in 41.5 s" in text
    assert "checked" not in report.history_text(tmp_path, {}, {})


def test_an_unshrunk_long_schedule_is_named_not_spelled_out():
    d = X.draw(["kill", "pause"], 7, 900)
    rec = {"base": "S1", "seed": 7, "faults": ["kill", "pause"], "groups": d.groups, "duration": 900, "exit": EXIT_INVALID,
           "run": "r0", "shrink": [], "shortest": {"groups": list(range(len(d.groups))), "steps": []},
           "checks": {"r0": {"reason": "lost=400", "lost": 400, "version": "4.3"}}}
    assert len(d.groups) > X.SPELLED_OUT
    row = X.table_lines([rec])[2]
    assert f"not shrunk: the whole schedule ({len(d.groups)} groups, in the record)" in row
    assert "anomalies (lost=400)" in row and " at " not in row.split("anomalies (lost=400)")[1]
