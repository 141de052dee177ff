"""A slow step (an operator's change, a restart waited for) runs on the schedule's operations
lane (nemesis/scheduler.py): the faults and lifts due while it runs keep their times, and
slow steps still follow one another. Before, a finalize retrying for a minute held a 20 s
cut for far longer (U3b), and a kill waited for a removal to return (M4)."""
from __future__ import annotations

import json
import threading
import time

from fakes import FakeRabbit
from harness.history import RunClock
from nemesis import faults as F
from nemesis.core import LOG_FILE, Nemesis
from nemesis.schedule import Step

SLOW_S = 0.6


def test_a_slow_step_holds_back_neither_faults_nor_lifts(tmp_path, monkeypatch):
    seen: list[tuple[str, str, float]] = []

    def slow(ctx, f, params):
        seen.append(("begin", f.targets[0], time.monotonic()))
        time.sleep(SLOW_S)
        f.details["evidence"] = {"done": True}
        seen.append(("end", f.targets[0], time.monotonic()))

    monkeypatch.setitem(F.FAULT_TYPES, "slow_op", F.FaultType("slow_op", F.plan_nodes, slow, operation=True))
    c = FakeRabbit(tmp_path)
    steps = [Step(0.0, "partition", {"isolate": "rabbit1"}, 0.3),
             Step(0.05, "slow_op", "rabbit2"), Step(0.1, "slow_op", "rabbit3"),
             Step(0.2, "kill", "rabbit1")]
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        nem.run(steps)
        # the run returns once the lane is empty: both operations over, neither left active
        assert not [f for f in nem.active_faults() if f.fault == "slow_op"]
    recs = [json.loads(x) for x in (tmp_path / LOG_FILE).read_text().splitlines()]
    cut = next(r for r in recs if r["fault"] == "partition")
    kill = next(r for r in recs if r["fault"] == "kill")
    ops = [r for r in recs if r["fault"] == "slow_op"]
    # the lift came at its own time although two operations of 0.6 s each ran from 0.05
    assert cut["t_end"] - cut["t_start"] < SLOW_S
    assert kill["t_start"] - cut["t_start"] < SLOW_S
    # one after the other, in the schedule's order, each recorded once with its evidence
    assert [(what, node) for what, node, _ in seen] == [("begin", "rabbit2"), ("end", "rabbit2"),
                                                        ("begin", "rabbit3"), ("end", "rabbit3")]
    assert seen[2][2] >= seen[1][2]
    assert [r["targets"] for r in ops] == [["rabbit2"], ["rabbit3"]]
    assert all(r["details"]["evidence"] == {"done": True} for r in ops)


def test_a_stopped_run_starts_no_queued_operation(tmp_path, monkeypatch):
    started: list[str] = []

    def slow(ctx, f, params):
        started.append(f.targets[0])
        time.sleep(SLOW_S)

    monkeypatch.setitem(F.FAULT_TYPES, "slow_op", F.FaultType("slow_op", F.plan_nodes, slow, operation=True))
    c = FakeRabbit(tmp_path)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()  # while the first operation runs
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        t0 = time.monotonic()
        nem.run([Step(0.0, "slow_op", "rabbit2"), Step(0.01, "slow_op", "rabbit3")], stop=stop, duration=0.2)
        assert time.monotonic() - t0 < SLOW_S  # the stop ends the wait for the lane
        time.sleep(SLOW_S + 0.3)
    assert started == ["rabbit2"]


def test_a_slow_kind_lifts_nothing():
    import pytest
    with pytest.raises(ValueError, match="instant"):
        F.FaultType("x", F.plan_nodes, lambda *a: None, "start", slow=True)
    assert F.FAULT_TYPES["upgrade"].slow and F.FAULT_TYPES["rolling_restart"].slow
    assert not F.FAULT_TYPES["kill"].slow and not F.FAULT_TYPES["partition"].slow


def test_a_failed_slow_step_is_recorded_once(tmp_path, monkeypatch):
    def failing(ctx, f, params):
        raise RuntimeError("the request timed out")

    monkeypatch.setitem(F.FAULT_TYPES, "slow_op", F.FaultType("slow_op", F.plan_nodes, failing, operation=True))
    with Nemesis(FakeRabbit(tmp_path), tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        nem.run([Step(0.0, "slow_op", "rabbit2")])
    recs = [json.loads(x) for x in (tmp_path / LOG_FILE).read_text().splitlines()]
    ops = [r for r in recs if r["fault"] == "slow_op"]
    assert len(ops) == 1 and ops[0]["targets"] == ["rabbit2"]
    assert "the request timed out" in ops[0]["details"]["error"]


def test_on_error_raise_hands_a_slow_steps_failure_to_the_caller(tmp_path, monkeypatch):
    import pytest

    def failing(ctx, f, params):
        raise RuntimeError("refused")

    monkeypatch.setitem(F.FAULT_TYPES, "slow_op", F.FaultType("slow_op", F.plan_nodes, failing, operation=True))
    with Nemesis(FakeRabbit(tmp_path), tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        with pytest.raises(RuntimeError, match="refused"):
            nem.run([Step(0.0, "slow_op", "rabbit2")], on_error="raise")
