"""Power loss on a real cluster (issue 17): K10's set-up, shortened. Every replica of an acks=all
topic loses power at once with Kafka's default flush settings: the brokers had acknowledged
messages they never fsynced, and those are gone after the restart; the fault's evidence says
how many bytes each node dropped (K10c, the same set-up with kill -9, loses nothing: the
catalogue runs it)."""
from __future__ import annotations

import json

import pytest

from harness import store
from harness.runner import run_scenario
from harness.scenario import parse
from harness.verdicts import EXIT_VALID

pytestmark = pytest.mark.docker


def test_power_loss_of_every_replica_loses_acknowledged_messages(tmp_path):
    sc = parse({
        "name": "power-loss-all", "broker": "kafka",
        "cluster": {"min.insync.replicas": 2},
        "topic": {"name": "plost", "partitions": 1, "replication_factor": 3,
                  "config": {"min.insync.replicas": 2}},
        "workload": {"producers": 1, "rate": 300, "acks": "all", "retries": 0, "delivery_timeout_ms": 5000},
        "timing": {"warmup": 3, "duration": 10, "recovery": 5},
        "nemesis": [{"at": 5, "fault": "power_loss", "targets": "brokers"},
                    {"at": 8, "fault": "start", "targets": "all"}],
        "ordering": "fifo", "expect": {"lost": ">0"}})
    assert sc.cluster.fs == "lazy"  # a power cut brings its file system
    code, run = run_scenario(sc, results=tmp_path)
    assert code == EXIT_VALID, run.info.get("error")
    result = json.loads((run.dir / store.CHECK_JSON).read_text())
    (fault,) = [f for f in store.read_jsonl(run.dir / store.NEMESIS_LOG) if f.get("fault") == "power_loss"]
    assert fault["details"]["effective"] is True
    dropped = fault["details"]["evidence"]["unsynced_bytes_dropped"]
    assert set(dropped) == {"kafka1", "kafka2", "kafka3"} and all(b > 0 for b in dropped.values())
    # every message acknowledged before the cut was only in memory: gone from all replicas, by
    # identity (none of them is ever read again), and counted lost
    ok_before = {r["msg_id"] for r in store.history_records(run.dir, "produce")
                 if r.get("outcome") == "ok" and r["t_complete"] < fault["t_start"]}
    read = {r["msg_id"] for r in store.history_records(run.dir, "consume")}
    assert ok_before and not ok_before & read
    assert result["lost"] >= len(ok_before)
    assert result["prediction"]["held"] is True
