"""Fault choreographies (nemesis/schedule.py PACKAGES: pause_kill, part_kill): one step
that stands for several, the later parts bound to the nodes the earlier ones hit."""
import json

import pytest

from fakes import FakeRabbit
from harness.history import RunClock
from nemesis.core import LOG_FILE, Nemesis
from nemesis.schedule import ScheduleError, is_bound, parse


def test_pause_kill_expands_into_its_parts_in_order():
    steps = parse([{"at": 2, "fault": "pause_kill", "targets": {"first": "queue_master"},
                    "params": {"crash": "power_loss", "gap": 1, "down": 4, "after": 3}}])
    assert [(s.at, s.fault) for s in steps] == [(2, "pause"), (3, "power_loss"), (7, "start"), (10, "unpause")]
    assert steps[0].targets == "queue_master" and steps[0].label == "s0.first"
    assert steps[1].targets == "@pick:1:@s0.first" and steps[1].label == "s0.crash"
    assert [s.targets for s in steps[2:]] == ["@s0.crash", "@s0.first"]
    assert all(is_bound(s.targets) for s in steps[1:])


def test_part_kill_cuts_the_first_for_the_whole_choreography():
    steps = parse([{"at": 0, "fault": "part_kill", "targets": {"first": "rabbit1", "count": 1}}])
    assert [(s.at, s.fault, s.duration) for s in steps] == [(0, "partition", 21.0), (1, "kill", None),
                                                             (11, "start", None)]
    assert steps[0].targets == {"isolate": "rabbit1"}


@pytest.mark.parametrize("bad, field", [({"params": {"crash": "stop"}}, "crash"),
                                        ({"params": {"down": 0}}, "down"),
                                        ({"targets": {"first": "x", "other": 1}}, "other")])
def test_a_malformed_choreography_names_its_field(bad, field):
    with pytest.raises(ScheduleError, match=field):
        parse([{"at": 0, "fault": "pause_kill", **bad}])


def test_the_crash_never_hits_the_frozen_nodes_and_everything_comes_back(tmp_path):
    c = FakeRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q", seed=3) as nem:
        nem.run([{"at": 0, "fault": "pause_kill", "targets": {"first": "queue_master"},
                  "params": {"gap": 0.1, "down": 0.2, "after": 0.2}}])
        assert not nem.active_faults()
    recs = [json.loads(x) for x in (tmp_path / LOG_FILE).read_text().splitlines()]
    pause = next(r for r in recs if r["fault"] == "pause")
    kill = next(r for r in recs if r["fault"] == "kill")
    assert pause["targets"] == ["rabbit2"] and kill["targets"] and "rabbit2" not in kill["targets"]
    assert pause["t_start"] < kill["t_start"] < kill["t_end"] <= pause["t_end"]
    assert all(s == "running" for s in c.state.values())
    order = [call for call in c.calls if call[0] in ("pause", "kill", "start", "unpause")]
    assert order == [("pause", "rabbit2"), ("kill", kill["targets"][0]), ("start", kill["targets"][0]),
                     ("unpause", "rabbit2")]


def test_a_failed_first_part_leaves_the_rest_failed_not_aimed_elsewhere(tmp_path):
    c = FakeRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        nem.run([{"at": 0, "fault": "pause_kill", "targets": {"first": "nosuchnode"},
                  "params": {"gap": 0.05, "down": 0.05, "after": 0.05}}])
    recs = [json.loads(x) for x in (tmp_path / LOG_FILE).read_text().splitlines()]
    assert recs and all("error" in r["details"] for r in recs)
    assert not [call for call in c.calls if call[0] in ("kill", "pause")]


def test_any_step_may_name_an_earlier_steps_nodes():
    steps = parse([{"at": 5, "fault": "kill", "targets": "@hit"},
                   {"at": 1, "fault": "corrupt", "targets": "followers", "label": "hit",
                    "params": {"files": "segment"}}])
    assert [(s.fault, s.targets) for s in steps] == [("corrupt", "followers"), ("kill", "@hit")]
    with pytest.raises(ScheduleError, match="name no earlier step's label"):
        parse([{"at": 0, "fault": "kill", "targets": "@later"}, {"at": 1, "fault": "pause", "label": "later"}])
    with pytest.raises(ScheduleError, match="used twice"):
        parse([{"at": 0, "fault": "pause", "label": "a"}, {"at": 1, "fault": "kill", "label": "a"}])


def test_a_bound_target_is_read_in_one_place():
    from nemesis.schedule import ScheduleError, bound_ref, parse

    assert bound_ref("@m") == ("m", None) and bound_ref("@pick:2:@g0.first") == ("g0.first", 2)
    with pytest.raises(ScheduleError, match="@pick:N:@label"):
        parse([{"at": 0, "fault": "kill", "targets": "random:1", "label": "a"},
               {"at": 1, "fault": "kill", "targets": "@pick:x:@a"}])
