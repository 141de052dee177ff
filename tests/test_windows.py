"""harness.windows (issue 34): the decision window, the harness's own hand left out, log lines
and samples cut by window, at-risk counts; and the rules of harness.expect that use them."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from harness import expect, windows
from harness.brokers.rabbitmq.observe import log_measures, majority_view

PHASES = {"faults": 10.0, "heal": 40.0, "whole": 47.0, "recovery": 47.5, "stop-producers": 60.0}


def test_self_healed_run_decides_from_fault_start_to_whole():
    w = windows.of_run(PHASES, [{"id": "f1", "fault": "partition", "t_start": 10.0, "t_end": 40.0}])
    assert w.fault == (10.0, 40.0)
    assert w.effect == (10.0, 47.0)
    assert w.after_heal == (47.0, 60.0)
    assert w.operator == ()


def test_operator_event_ends_the_effect_and_is_no_window_but_its_own():
    # R9 on a fresh clone: the heal timed out at 100 s, the harness restarted the nodes 100-130 s
    phases = {**PHASES, "whole": 130.0, "recovery": 130.5, "stop-producers": 160.0}
    recs = [{"id": "f1", "fault": "partition", "t_start": 10.0, "t_end": 40.0},
            {"fault": "operator", "action": "restart", "targets": ["rabbit1"], "t_start": 100.0, "t_end": 130.0}]
    w = windows.of_run(phases, recs)
    assert w.effect == (10.0, 100.0)
    assert w.operator == ((100.0, 130.0),)
    assert w.after_heal == (130.0, 160.0)  # after the operator's window, never inside it


def test_old_recover_records_are_operator_events_and_before_the_faults_do_not_count():
    recs = [{"fault": "recover", "t_start": 2.0, "t_end": 3.0},   # the initial heal's repair
            {"fault": "recover", "t_start": 44.0, "t_end": 46.0}]
    w = windows.of_run(PHASES, recs)
    assert w.effect == (10.0, 44.0)
    assert w.operator == ((44.0, 46.0),)
    assert w.after_heal == (47.0, 60.0)


def test_no_faults_no_effect_window():
    w = windows.of_run({"stop-producers": 30.0}, [])
    assert w.effect is None and w.whole_run == (0.0, 30.0)


def test_samples_in_keeps_the_state_when_the_window_opened():
    samples = [{"t": float(t), "leader": "k1" if t < 15 else "k2"} for t in range(0, 30)]
    got = windows.samples_in(samples, (10.0, 20.0))
    assert [s["t"] for s in got] == [9.0] + [float(t) for t in range(10, 21)]


def _stamp(unix: float) -> str:
    return datetime.fromtimestamp(unix, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


def test_log_lines_by_docker_timestamp_with_continuations():
    t0 = 1_700_000_000.0
    text = (f"{_stamp(t0 + 5)} 2026 [info] starting\n"
            f"{_stamp(t0 + 20)} [warning] Cluster minority/secondary status detected\n"
            "  continuation of that line\n"
            f"{_stamp(t0 + 120)} [warning] Cluster minority/secondary status detected\n")
    inside = windows.log_in(text, t0, (10.0, 47.0))
    assert inside.count("minority") == 1 and "continuation" in inside and "starting" not in inside
    assert windows.line_time(text.splitlines()[1]) == pytest.approx(t0 + 20.000000123, abs=1e-6)
    assert windows.log_in(text, None, (10.0, 47.0)) == text  # no clock origin: whole log


def test_a_pause_after_the_operator_restart_is_not_the_answer_to_the_partition():
    # the issue's R9: rabbit1 paused under the cut; rabbit3 logged a pause 93 s after the heal,
    # after the harness restarted the others: counted after the heal only
    t0 = 1_700_000_000.0
    logs = {"rabbit1": f"{_stamp(t0 + 20)} Cluster minority/secondary status detected\n",
            "rabbit2": f"{_stamp(t0 + 5)} started\n",
            "rabbit3": f"{_stamp(t0 + 133)} Cluster minority/secondary status detected\n"}
    phases = {**PHASES, "whole": 130.0, "stop-producers": 160.0}
    w = windows.of_run(phases, [{"fault": "operator", "t_start": 100.0, "t_end": 130.0}])
    assert log_measures(windows.logs_in(logs, t0, w.effect))["paused_nodes"] == ["rabbit1"]
    assert log_measures(windows.logs_in(logs, t0, w.after_heal))["paused_nodes"] == ["rabbit3"]
    assert log_measures(logs)["paused_count"] == 2  # what the whole run showed before issue 34


def _p(mid, t, outcome="ok"):
    return {"msg_id": mid, "outcome": outcome, "t_invoke": t - 0.01, "t_complete": t}


def _c(mid, t, **kw):
    return {"msg_id": mid, "t": t, **kw}


def test_at_risk_by_identity():
    produce = [_p("a", 5.0), _p("b", 8.0), _p("c", 9.0), _p("d", 20.0), _p("e", 50.0), _p("x", 6.0, "fail"),
               {"msg_id": "b", "outcome": "invoke", "t_invoke": 7.9}]
    consume = [_c("a", 6.0), _c("b", 12.0), _c("d", 21.0), _c("c", 9.5, rejected=True), _c("c", 30.0)]
    got = windows.at_risk(produce, consume, {"f1": {"start": 10.0, "end": 40.0}}, (10.0, 47.0))
    # at f1's start: b and c confirmed, not consumed (c's rejected line is no delivery)
    assert got["at_risk_at_start"] == {"f1": 2}
    # in the broker's hands while faulted: b, c (before), d (confirmed during); not a (consumed
    # before), not e (confirmed after the effect), not x (never confirmed)
    assert got["at_risk"] == 3
    assert got["at_risk_at_fault"] == 2


def test_a_run_still_publishing_with_nothing_exposed_when_the_fault_struck_is_undecided():
    # issue 52: consumers keep up, so every confirmed message is read before the fault; the
    # old guard (at_risk) counted every message confirmed during the fault and passed
    produce = [_p(f"m{i}", 1.0 + i) for i in range(30)]
    consume = [_c(f"m{i}", 1.2 + i) for i in range(30)]
    got = windows.at_risk(produce, consume, {"f1": {"start": 10.5, "end": 20.0}}, (10.5, 25.0))
    assert got["at_risk"] > 0 and got["at_risk_at_fault"] == 0
    info = {"drain": {"complete": True}, "measurements": {"paused_count": 1, **got,
                                                         "after_heal": {"paused_count": 0}}}
    v = expect.verdict(_Sc(), _result(), info)
    assert v["held"] is None and "at_risk_at_fault=0" in v["reason"]
    # a backlog when the fault struck decides it
    backlog = windows.at_risk(produce, consume[:5], {"f1": {"start": 10.5, "end": 20.0}}, (10.5, 25.0))
    assert backlog["at_risk_at_fault"] == 5
    info["measurements"].update(backlog)
    assert expect.verdict(_Sc(), _result(), info)["held"] is True


def test_majority_view_never_takes_a_cut_nodes_stale_view():
    # R7q on 4.0: rabbit2 and rabbit3 named rabbit3, the isolated rabbit1 named itself
    assert majority_view({"rabbit1": "rabbit1", "rabbit2": "rabbit3", "rabbit3": "rabbit3"}, 3) == \
        ("rabbit3", ["rabbit2", "rabbit3"])
    assert majority_view({"rabbit2": "rabbit2"}, 3) == ("rabbit2", ["rabbit2"])  # the others are down
    assert majority_view({"rabbit1": "rabbit1", "rabbit2": "rabbit2"}, 3) == (None, [])  # a split
    assert majority_view({"rabbit1": None, "rabbit2": None, "rabbit3": "rabbit1"}, 3) == (None, ["rabbit1", "rabbit2"])


class _Sc:
    expect = {"lost": 0, "paused_count": 1, "after_heal": {"paused_count": 0}}
    require: dict = {}

    def measurement_names(self):
        return {"paused_count"}

    def prefill_names(self):
        return set()


def _result(**kw):
    return {"valid": True, "ok": 100, "lost": 0, "unexpected": 0, **kw}


def test_lost_zero_with_nothing_at_risk_is_undecided():
    info = {"drain": {"complete": True}, "measurements": {"paused_count": 1, "at_risk": 0,
                                                         "after_heal": {"paused_count": 0}}}
    v = expect.verdict(_Sc(), _result(), info)
    assert v["held"] is None and "at_risk=0" in v["reason"]
    info["measurements"]["at_risk"] = 12
    assert expect.verdict(_Sc(), _result(), info)["held"] is True


def test_a_window_named_in_the_prediction_is_judged_on_its_own_figure():
    info = {"drain": {"complete": True}, "measurements": {"paused_count": 1, "at_risk": 5,
                                                         "after_heal": {"paused_count": 1}}}
    v = expect.verdict(_Sc(), _result(), info)
    assert v["held"] is False and "after_heal.paused_count=1" in v["reason"]
    assert "after_heal.paused_count" in expect.decidable(_Sc())


def test_a_run_before_issue_34_has_no_at_risk_rule():
    info = {"drain": {"complete": True}, "measurements": {"paused_count": 1, "after_heal": {"paused_count": 0}}}
    assert expect.verdict(_Sc(), _result(), info)["held"] is True


class _Stuck:
    """A cluster whose rabbit1 hangs after the heal until restarted, and whose wait_whole
    needs one stale partition's repair (what the RabbitMQ plug-in does under ``ignore``)."""
    kind, project = "fake", "fake"

    def __init__(self):
        self.restarted: list[str] = []
        self.hung = True

    def nodes(self):
        return ["rabbit1", "rabbit2", "rabbit3"]

    def stuck_nodes(self):
        return ["rabbit1"] if self.hung else []

    def running(self, n):
        return True

    def stop(self, n):
        self.restarted.append(f"stop {n}")

    def start(self, n):
        self.restarted.append(f"start {n}")
        self.hung = False

    def wait_whole(self, timeout, steady, record, stale_after=None):
        record({"finding": "stale_partition", "node": "rabbit2", "recovery": "stop_app/start_app on rabbit2"},
               lambda: self.restarted.append("repair rabbit2"))


def test_the_harness_hand_is_an_operator_event_with_its_times(tmp_path):
    from harness import store
    from harness.history import RunClock
    from nemesis.core import Nemesis
    cluster = _Stuck()
    nem = Nemesis(cluster, tmp_path, clock=RunClock(), handle_signals=False)
    assert nem.restart_stuck(5, why="rabbit1 does not serve") == ["rabbit1"]
    nem.close()
    assert cluster.restarted == ["stop rabbit1", "start rabbit1", "repair rabbit2"]
    recs = store.read_jsonl(tmp_path / store.NEMESIS_LOG)
    # the repair ran inside the restart's wait: both are operator events, the restart's spans it
    assert [(r["fault"], r["action"], r["targets"]) for r in recs] == [
        ("operator", "stop_app/start_app on rabbit2", ["rabbit2"]), ("operator", "restart", ["rabbit1"])]
    assert recs[1]["t_start"] <= recs[0]["t_start"] <= recs[0]["t_end"] <= recs[1]["t_end"]
    assert recs[1]["details"]["reason"] == "rabbit1 does not serve"
    assert store.read_jsonl(tmp_path / store.FINDINGS)[0]["finding"] == "stale_partition"
    assert nem.operator_events == recs
    w = windows.of_run({"faults": -1.0, "heal": -0.5, "stop-producers": recs[1]["t_end"] + 100.0}, recs)
    assert w.effect == (-1.0, recs[1]["t_start"]) and w.operator[0][0] == recs[1]["t_start"]


def test_an_operator_action_that_fails_is_recorded_and_raised(tmp_path):
    from harness import store
    from harness.history import RunClock
    from nemesis.core import Nemesis
    nem = Nemesis(_Stuck(), tmp_path, clock=RunClock(), handle_signals=False)

    def fail():
        raise TimeoutError("still not whole")
    with pytest.raises(TimeoutError):
        nem.operator("restart", ["rabbit1"], {}, fail)
    nem.close()
    assert store.read_jsonl(tmp_path / store.NEMESIS_LOG)[0]["details"]["error"] == "TimeoutError: still not whole"


def test_unavailability_is_the_effect_windows_and_the_whole_runs_kept():
    class Sc(_Sc):
        expect = {"unavailable_s": "<=20", "whole_run": {"unavailable_s": ">20"}}
    # unavailable 12-30 s (the fault) and 100-125 s (the harness's restart of a hung node)
    result = _result(unavailable=[[12.0, 30.0], [100.0, 125.0]], unavailable_s=43.0)
    info = {"drain": {"complete": True},
            "measurements": {"at_risk": 5, "paused_count": 1, "windows": {"effect": [10.0, 100.0]}}}
    m = expect.measured(result, info)
    assert (m["unavailable_s"], m["unavailable_intervals"], m["unavailable_window"]) == (18.0, 1, [12.0, 30.0])
    assert (m["whole_run.unavailable_s"], m["whole_run.unavailable_intervals"]) == (43.0, 2)
    assert expect.clip([[5.0, 15.0], [90.0, 120.0]], [10.0, 100.0]) == [[10.0, 15.0], [90.0, 100.0]]
    assert expect.verdict(Sc(), result, info)["held"] is True
    # a run without windows (before issue 34): the checker's figure as it was
    del info["measurements"]["windows"]
    assert expect.measured(result, info)["unavailable_s"] == 43.0


def test_isr_shrink_lag_from_the_leaders_own_record():
    from harness.brokers.kafka.observe import shrink_lag
    # a real 3.9 line (K7, 2026-11-25): shrink at 17:43:32.132, both replicas last caught up at
    # 1795628597806 ms = 17:43:17.806, 14.326 s before
    line = ("2026-11-25T17:43:32.145557394Z [2026-11-25 17:43:32,132] INFO [Partition mqchaos-0 broker=1] "
            "Shrinking ISR from 1,3,2 to 1. Leader: (highWatermark: 5551, endOffset: 11277). Out of sync "
            "replicas: (brokerId: 3, endOffset: 5551, lastCaughtUpTimeMs: 1795628597806) (brokerId: 2, "
            "endOffset: 5551, lastCaughtUpTimeMs: 1795628599806). (kafka.cluster.Partition)\n")
    other = line.replace("mqchaos-0", "other-0").replace("1795628599806", "1795628611000")
    assert datetime(2026, 11, 25, 17, 43, 17, 806000, tzinfo=timezone.utc).timestamp() * 1000 == 1795628597806
    # the least lag over the removed replicas: broker 2's, 12.326 s; another topic's shrink left out
    assert shrink_lag({"kafka1": line + other, "kafka2": ""}, "mqchaos") == {"isr_shrink_lag_s": 12.326}
    assert shrink_lag({"kafka1": other}, "mqchaos") == {}


def test_a_restart_is_one_operator_event_in_the_published_evidence(tmp_path):
    import json as _json

    from harness import rows, store
    recovery = {"reason": "rabbit1 does not serve", "restarted": ["rabbit1"], "t": 100.0, "failed": None}
    # a run before issue 34: the restart is in run.json only
    assert rows.operator_events(tmp_path, {"operator_recovery": recovery}) == [
        {"fault": "operator_recovery", **recovery}]
    # since: nemesis.jsonl's record is the event; run.json's summary of it is not a second one
    rec = {"fault": "operator", "action": "restart", "targets": ["rabbit1"], "t_start": 100.0, "t_end": 120.0,
           "details": {"reason": recovery["reason"]}}
    (tmp_path / store.NEMESIS_LOG).write_text(_json.dumps(rec) + "\n")
    assert rows.operator_events(tmp_path, {"operator_recovery": recovery}) == [rec]


def test_a_power_loss_that_dropped_nothing_still_shows_the_writes_its_file_systems_saw():
    from harness.observe import power_loss_figures
    rec = {"fault": "power_loss", "details": {"evidence": {
        "unsynced_bytes_dropped": {"rabbit1": 0, "rabbit2": 0, "rabbit3": None},
        "writes_seen": {"rabbit1": 4100, "rabbit2": 3900, "rabbit3": None}}}}
    assert power_loss_figures([rec, {"fault": "kill", "details": {}}]) == {
        "unsynced_bytes_dropped": 0, "power_loss_writes_seen": 8000}
    # a run before the file system counted its writes has the dropped bytes only
    del rec["details"]["evidence"]["writes_seen"]
    assert power_loss_figures([rec]) == {"unsynced_bytes_dropped": 0}


def test_a_plugins_time_since_the_fault_counts_from_when_the_fault_acted():
    from harness.observe import first_applied
    records = [{"fault": "operator", "t_start": 3.0},  # no id: not a fault
               {"id": "f2", "fault": "kill", "t_start": 31.0}, {"id": "f1", "fault": "partition", "t_start": 21.2}]
    assert first_applied(records, 20.0) == 21.2  # the cut acted 1.2 s into the faults phase
    assert first_applied([], 20.0) == 20.0
