"""What lets a row's verdict turn on the source's claim (issue 15): a step that waits for the
state its fault needs (``when``), requirements that make a run about something else
undecided (``require``), the Kafka leader's placement relative to the controller, and the
figures the re-encoded rows judge by. Synthetic inputs with known answers; fake clusters."""
from __future__ import annotations

import itertools
import threading

import pytest

from harness import expect
from harness.brokers.kafka import observe as kafka_observe
from harness.brokers.kafka import placement
from harness.history import RunClock
from harness.scenario import ScenarioError, parse
from harness.verdicts import EXIT_UNKNOWN, run_exit_code, undecided
from nemesis.core import Nemesis
from nemesis.schedule import ScheduleError
from nemesis.schedule import parse as parse_schedule
from test_grudge import FakeRabbit


# ---- when: the state a fault needs, observed before it acts -------------------------------
def test_when_is_parsed_and_its_errors_name_the_field():
    st, = parse_schedule([{"at": 1, "fault": "partition", "targets": {"isolate": "leader"},
                           "when": {"same": ["isr", "leader"], "within": 30}}])
    assert st.when == {"same": ["isr", "leader"], "within": 30.0}
    assert st.to_json()["when"] == st.when
    for bad, field in [({"same": ["isr"], "within": 3}, "'same'"), ({"same": ["isr", "leader"]}, "'within'"),
                       ({"same": ["isr", "leader"], "within": 0}, "'within'"),
                       ({"same": ["isr", "leader"], "within": 3, "until": 4}, "'until'")]:
        with pytest.raises(ScheduleError, match=f"steps\\[0\\].when.*{field}"):
            parse_schedule([{"at": 0, "fault": "kill", "when": bad}])


def test_a_scenario_whose_when_names_an_unknown_role_is_refused():
    with pytest.raises(ScenarioError, match="when.same: unknown target 'isrr'"):
        parse({"name": "k", "broker": "kafka", "nemesis": [
            {"at": 0, "fault": "kill", "targets": "leader", "when": {"same": ["isrr", "leader"], "within": 5}}]})


class ShrinkingRabbit(FakeRabbit):
    """queue_mirrors names rabbit1 and rabbit3 until ``shrink`` is set, then rabbit2 alone (the
    queue master): "the ISR is the leader alone" after a while."""

    def __init__(self, tmp_path):
        super().__init__(tmp_path)
        self.shrunk = threading.Event()

    def role(self, name, arg):
        if name == "queue_mirrors" and not self.shrunk.is_set():
            return ["rabbit1", "rabbit3"]
        return ["rabbit2"]


def test_a_step_waits_for_its_condition_and_records_it(tmp_path):
    c = ShrinkingRabbit(tmp_path)
    threading.Timer(0.6, c.shrunk.set).start()
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        nem.run([{"at": 0, "fault": "pause", "targets": "rabbit1", "duration": 0.2},
                 {"at": 0.1, "fault": "kill", "targets": "queue_master",
                  "when": {"same": ["queue_mirrors", "queue_master"], "within": 5}}])
    kill = next(r for r in nem.records if r["fault"] == "kill")
    pause = next(r for r in nem.records if r["fault"] == "pause")
    assert kill["details"]["when"]["nodes"] == ["rabbit2"]
    assert 0.4 <= kill["details"]["when"]["waited_s"] < 3 and kill["t_start"] >= 0.5
    assert pause["t_end"] - pause["t_start"] < 0.6  # a waiting step does not hold the others' lifts
    assert undecided({"status": "completed"}, nem.records) == []


def test_a_condition_that_never_holds_fails_its_step_and_the_run_is_undecided(tmp_path):
    c = ShrinkingRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        nem.run([{"at": 0, "fault": "kill", "targets": "queue_master",
                  "when": {"same": ["queue_mirrors", "queue_master"], "within": 0.4}}])
    rec, = nem.records
    assert ("kill", "rabbit2") not in c.calls  # the fault never acted
    assert "never held" in rec["details"]["error"] and rec["details"]["when"]["seen"] == [
        ["rabbit1", "rabbit3"], ["rabbit2"]]
    reasons = undecided({"status": "completed"}, nem.records)
    assert len(reasons) == 1 and "never held" in reasons[0]


# ---- require: the set-up the claim needs ---------------------------------------------------
def _kafka(require, expect_=None):
    return parse({"name": "k", "broker": "kafka", "expect": expect_ or {"lost": 0}, "require": require})


def test_a_run_whose_set_up_was_not_the_claims_is_undecided_not_held():
    sc = _kafka({"leader_is_controller": True})
    result = {"lost": 0, "ok": 10, "valid": True, "unavailable": []}
    held = expect.verdict(sc, result, {"drain": {"complete": True}, "measurements": {"leader_is_controller": True}})
    assert held["held"] is True and held["requirements"][0]["held"] is True
    other = expect.verdict(sc, result, {"drain": {"complete": True}, "measurements": {"leader_is_controller": False}})
    assert other["held"] is None and "leader_is_controller=False (required True)" in other["reason"]
    assert run_exit_code(dict(result, prediction=other)) == EXIT_UNKNOWN
    unmeasured = expect.verdict(sc, result, {"drain": {"complete": True}, "measurements": {}})
    assert unmeasured["held"] is None
    # a prediction that fails on a run about something else is no finding either
    lost = expect.verdict(sc, dict(result, lost=3), {"drain": {"complete": True},
                                                    "measurements": {"leader_is_controller": False}})
    assert lost["held"] is None


def test_a_requirement_nobody_measures_is_refused_by_name():
    with pytest.raises(ScenarioError, match="require.leader_is_contoller: no kafka run measures this"):
        _kafka({"leader_is_contoller": True})


def test_lost_share_is_lost_over_confirmed():
    m = expect.measured({"lost": 1753, "ok": 1753, "valid": False}, {})
    assert m["lost_share"] == 1
    assert expect.measured({"lost": 1, "ok": 3}, {})["lost_share"] == 0.3333
    assert "lost_share" not in expect.measured({"lost": 0, "ok": 0}, {})


# ---- the Kafka leader's place -------------------------------------------------------------
BROKERS = ["kafka1", "kafka2", "kafka3"]


@pytest.mark.parametrize("controller, rf", list(itertools.product(BROKERS, [1, 2, 3])))
def test_placement_puts_the_preferred_leader_where_asked(controller, rf):
    on = placement(BROKERS, controller, "controller", rf)
    off = placement(BROKERS, controller, "not_controller", rf)
    for replicas in (on, off):
        assert len(replicas) == rf == len(set(replicas)) and set(replicas) <= set(BROKERS)
    assert on[0] == controller
    assert off[0] != controller
    assert (controller in off) == (rf >= 2)  # the controller a follower whenever there is room


def test_placement_without_a_controller_says_so():
    with pytest.raises(RuntimeError, match="no controller"):
        placement(BROKERS, None, "controller", 3)


def test_leader_is_controller_is_read_when_the_faults_begin():
    s = lambda t, leader, controller: {"t": t, "leader": leader, "isr": BROKERS, "controller": controller}
    samples = [s(0, "kafka1", "kafka2"), s(1, "kafka1", "kafka1"), s(2, "kafka2", "kafka3")]
    assert kafka_observe.partition_measures(samples, 1.5)["leader_is_controller"] is True
    assert kafka_observe.partition_measures(samples, 0.5)["leader_is_controller"] is False
    assert kafka_observe.partition_measures([s(0, None, "kafka1")], 0)["leader_is_controller"] is None
    assert "leader_is_controller" not in kafka_observe.partition_measures(samples, None)


def test_every_pinned_kafka_row_requires_its_placement():
    """A row that places its leader says which placement its claim needs, so a controller
    that moved before the fault leaves the run undecided rather than judged."""
    from pathlib import Path
    from harness.scenario import load
    pinned = [sc for sc in map(load, sorted(Path("scenarios").glob("K*.yaml"))) if sc.topic.leader != "any"]
    assert len(pinned) >= 9
    for sc in pinned:
        assert sc.require.get("leader_is_controller") is (sc.topic.leader == "controller"), sc.name


# ---- how a verdict was decided, in the tables ----------------------------------------------
def test_decided_by_names_the_deciding_checks_and_the_set_up(tmp_path):
    from harness import rows as R
    sc = _kafka({"leader_is_controller": True}, {"lost": 0, "isr_min": 1})
    info = {"drain": {"complete": True}, "measurements": {"leader_is_controller": True, "isr_min": 3}}
    base = {"lost": 0, "ok": 10, "valid": True, "unavailable": []}
    failed = expect.verdict(sc, base, info)
    assert R.decided_by(failed) == "isr_min=3 vs 1 (set-up: leader_is_controller=True)"
    held = expect.verdict(sc, base, dict(info, measurements={"leader_is_controller": True, "isr_min": 1}))
    assert R.decided_by(held) == "lost=0 vs 0; isr_min=1 vs 1 (set-up: leader_is_controller=True)"
    other = expect.verdict(sc, base, dict(info, measurements={"leader_is_controller": False, "isr_min": 1}))
    assert R.decided_by(other).startswith("could not decide: the set-up the claim needs did not happen")
    row = {"scenario": "k", "id": "K5", "prediction": False, "decided_by": "a | b", "harness_error": False,
           "retried": False}
    table = R.markdown([row], tmp_path / "x" / "summary.md", "t")
    assert "how decided" in table and "a / b" in table


def test_doc_tables_are_spliced_between_their_markers_only():
    from harness import rows as R
    doc = "intro\n<!-- table:cat -->\nold | row\n<!-- /table:cat -->\nafter\n"
    row = {"scenario": "K5a-x", "id": "K5", "attempted": 3, "prediction": True, "decided_by": "lost=0 vs 0",
           "harness_error": False, "retried": False, "report": "/r/K5a-x/t/report.md"}
    out = R.splice(doc, "cat", R.table_lines([row]), "results/catalogue/t/summary.json")
    assert out.startswith("intro\n<!-- table:cat -->\n<!-- generated by") and out.endswith("<!-- /table:cat -->\nafter\n")
    assert "old | row" not in out and "| K5 | K5a-x | 3 |" in out and "](" not in out  # no links in documents
    assert R.splice(out, "cat", R.table_lines([row]), "results/catalogue/t/summary.json") == out  # idempotent
    with pytest.raises(ValueError, match="table:other"):
        R.splice(doc, "other", [], "x")


def test_consumers_silent_are_those_that_stopped_receiving_after_the_heal():
    from harness.measures import consumers_silent
    rec = lambda c, t: {"consumer": c, "t": t, "msg_id": f"{c}-{t}"}
    consume = [rec("c0", 1), rec("c1", 2), rec("c2", 12),   # c2 starts only after the faults
               rec("c0", 25), rec("c1", 9), {"consumer": "c3", "t": None}, {"t": 30}]
    assert consumers_silent(consume, before=5, after=20, until=40) == ["c1"]
    assert consumers_silent(consume, before=5, after=30, until=40) == ["c0", "c1"]
    assert consumers_silent([], 5, 20, 40) == []


def test_a_step_still_waiting_when_the_schedule_ends_is_recorded_as_failed(tmp_path):
    c = ShrinkingRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        nem.run([{"at": 0, "fault": "kill", "targets": "queue_master",
                  "when": {"same": ["queue_mirrors", "queue_master"], "within": 60}}], duration=0.5)
    rec, = nem.records
    assert "the schedule ended before its condition held" in rec["details"]["error"]
    assert ("kill", "rabbit2") not in c.calls and undecided({"status": "completed"}, nem.records)
