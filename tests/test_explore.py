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
