"""Verdicts a user can trust, on real clusters: a run killed mid-fault is undecided (and its
in-flight messages are never "unexpected"), a fault that did nothing makes a run undecided,
and a prediction that does not hold fails the main job's command."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness import store
from harness.brokers import get_cluster
from harness.runner import run_scenario
from harness.scenario import parse
from harness.util import wait_until
from harness.verdicts import EXIT_INVALID, EXIT_UNKNOWN

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_sigkill_mid_partition_is_undecided_and_never_unexpected(tmp_path):
    """The story of issue 14: a run SIGKILLed during its partition, healed by `mqchaos heal
    all`, then checked offline. Messages in flight when it died were invoked (written
    ahead) but never completed: unknown, not unexpected; the run itself is undecided."""
    scenario = tmp_path / "killed.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "killed", "broker": "rabbitmq", "cluster": {"partition_handling": "pause_minority"},
        "queue": {"name": "killedq", "type": "quorum"},
        "workload": {"producers": 2, "consumers": 1, "rate": 100, "confirm_timeout": 10},
        "timing": {"warmup": 2, "duration": 120},
        "nemesis": [{"at": 0, "fault": "partition", "targets": {"isolate": "queue_master"}}],
        "expect": {"lost": 0, "unexpected": 0}}))
    env = dict(os.environ, MQCHAOS_RESULTS=str(tmp_path / "results"))
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(scenario)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cluster = get_cluster("rabbitmq")
    try:
        runs = tmp_path / "results" / "killed"
        wait_until(lambda: list(runs.glob("*/nemesis-state.json")), 240, "the partition to be applied")
        run_dir = next(runs.glob("20*"))
        # let the partition bite: some publishes wait for their confirm when the harness dies
        wait_until(lambda: len(store.history_records(run_dir, "consume")) > 50, 60, "deliveries")

        pending_since: dict[str, float] = {}

        def in_flight() -> bool:
            # kill only once a publish has waited for its confirm a while: one seen pending for a
            # moment may be confirmed in the milliseconds before the kill lands (CI saw that)
            recs = store.history_records(run_dir, "produce")
            pending = ({r["msg_id"] for r in recs if r["outcome"] == "invoke"}
                       - {r["msg_id"] for r in recs if r["outcome"] != "invoke"})
            now = time.monotonic()
            for gone in set(pending_since) - pending:
                del pending_since[gone]
            for m in pending:
                pending_since.setdefault(m, now)
            return any(now - t >= 0.5 for t in pending_since.values())
        wait_until(in_flight, 90, "a publish waiting 0.5 s for its confirm", 0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        healed = _cli("cluster", "heal", "all", env=env)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        assert "undid and recorded 1 active fault" in healed.stdout
        checked = _cli("check", str(run_dir), env=env)
        result = json.loads((run_dir / store.CHECK_JSON).read_text())
        assert checked.returncode == EXIT_UNKNOWN, checked.stdout + checked.stderr
        assert result["unexpected"] == 0 and result["valid"] is None
        assert "the run did not complete (status: running)" in result["reason"]
        assert result["prediction"]["held"] is None
        records = store.history_records(run_dir, "produce")
        invoked = {r["msg_id"] for r in records if r["outcome"] == "invoke"}
        completed = {r["msg_id"] for r in records if r["outcome"] != "invoke"}
        assert invoked - completed, "nothing was in flight when the harness died"
        assert result["info"] >= len(invoked - completed)
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.down()


def test_a_fault_that_drops_no_packet_makes_the_run_undecided(tmp_path):
    """Packet loss so improbable that its rules match nothing: the fault's evidence (its
    iptables counters) shows no effect, so the run decides nothing, whatever it measured."""
    sc = parse({
        "name": "no-effect", "broker": "rabbitmq", "queue": {"name": "noeffect", "type": "quorum"},
        "workload": {"producers": 1, "consumers": 1, "rate": 50},
        "timing": {"warmup": 1, "duration": 8, "recovery": 0, "drain_idle": 2},
        "nemesis": [{"at": 0, "fault": "loss", "targets": {"partial": ["rabbit1", "rabbit2"]},
                     "params": {"probability": 1e-9}, "duration": 5}],
        "expect": {"lost": 0}})
    code, run = run_scenario(sc, results=tmp_path)
    assert run.info["status"] == "completed", run.info
    fault = store.read_jsonl(run.dir / store.NEMESIS_LOG)[0]
    assert fault["details"]["effective"] is False
    assert sum(fault["details"]["evidence"]["dropped_packets"].values()) == 0
    result = json.loads((run.dir / store.CHECK_JSON).read_text())
    assert code == EXIT_UNKNOWN and result["valid"] is None and "had no effect" in result["reason"]
    assert result["prediction"]["held"] is None


def test_main_job_fails_when_a_prediction_does_not_hold(tmp_path):
    """make test-partition's command on R9 with its prediction made false (no node paused,
    where pause_minority pauses the isolated master's node): the command exits 1 and the table
    says so. (Not a loss prediction: with R9's backlog, a run whose stale partition the harness
    repaired lost messages confirmed after that repair, so lost is no fixed point.)"""
    r9 = yaml.safe_load((ROOT / "scenarios" / "R9-pause-minority.yaml").read_text())
    r9["expect"] = {"paused_count": 0}
    r9["timing"] = {"warmup": 3, "duration": 25, "recovery": 5}
    r9["nemesis"] = [{"at": 0, "fault": "partition", "targets": {"isolate": "queue_master"}, "duration": 15}]
    f = tmp_path / "R9-false.yaml"
    f.write_text(yaml.safe_dump(r9))
    env = dict(os.environ, MQCHAOS_RESULTS=str(tmp_path / "results"))
    proc = subprocess.run(["make", "-s", "test-partition", f"PARTITION_SCENARIOS={f}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode != 0, proc.stdout[-3000:]
    summary = json.loads((tmp_path / "results" / "suites" / "latest" / "summary.json").read_text())
    assert [r["exit"] for r in summary] == [EXIT_INVALID] and summary[0]["prediction"] is False
    assert "paused_count=1 (predicted 0)" in summary[0]["reason"]
