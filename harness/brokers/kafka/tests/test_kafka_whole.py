"""When a Kafka cluster is whole again (issue 52, item 3), without Docker: not once every
broker is registered, but once replication is restored (every partition of the run's topics
with its full ISR), so the decision window (harness.windows ``effect``) holds the rejoin; the
broker that does not catch up is the one an operator restarts; what "whole" waited for is
said in run.json and beside the windows."""
from __future__ import annotations

import json

import pytest

from fakes import FakeAdmin, fake_kraft
from harness import brokers, windows
from harness.brokers.protocol import SaysWhole

KAFKA = brokers.get("kafka")


def state(leader: int, epoch: int) -> str:
    return json.dumps({"leaderId": leader, "leaderEpoch": epoch, "votedId": -1, "data_version": 1})


QUORUM = {n: state(2, 3) for n in ("kafka1", "kafka2", "kafka3")}


def steady(cond):
    return cond


def record(finding, action):
    action()


def full(topic_partitions: int = 1) -> list[tuple]:
    return [(p, 1, [1, 2, 3], [1, 2, 3]) for p in range(topic_partitions)]


def test_every_broker_registered_is_not_whole_while_a_replica_is_out_of_the_isr(monkeypatch):
    # kafka3 back and registered (unfenced), but its replica of mqchaos/0 still catching up
    admin = FakeAdmin([1, 2, 3], {"mqchaos": [(0, 1, [1, 2, 3], [1, 2])], "mqchaos-health": full(3)})
    c = fake_kraft(monkeypatch, QUORUM, admin)
    assert c.quorum() and c.registered_brokers() == c.brokers()  # what "whole" meant before
    with pytest.raises(TimeoutError, match=r"ISR full.*out of the ISR: mqchaos/0: kafka3"):
        c.wait_whole(0.3, steady, record)
    assert c.stuck_nodes() == ["kafka3"]  # the replica that does not catch up: what an operator restarts
    admin.parts["mqchaos"] = [(0, 1, [1, 2, 3], [1, 2, 3])]
    c.wait_whole(2, steady, record)
    assert c.stuck_nodes() == []


def test_a_partition_without_a_leader_is_not_whole_and_internal_topics_are_not_the_runs(monkeypatch):
    admin = FakeAdmin([1, 2, 3], {"mqchaos": [(0, -1, [1, 2, 3], [1])], "mqchaos-health": full(3),
                                  "__consumer_offsets": [(0, 1, [1, 2, 3], [1])]})
    c = fake_kraft(monkeypatch, QUORUM, admin)
    with pytest.raises(TimeoutError, match=r"mqchaos/0: kafka1, kafka2, kafka3"):
        c.wait_whole(0.3, steady, record)
    admin.parts["mqchaos"] = full()
    c.wait_whole(2, steady, record)  # __consumer_offsets's ISR of one does not hold it back


def test_an_unregistered_broker_is_still_what_is_missing_first(monkeypatch):
    admin = FakeAdmin([1, 2], {"mqchaos": [(0, 1, [1, 2, 3], [1, 2])]})
    c = fake_kraft(monkeypatch, QUORUM, admin)
    with pytest.raises(TimeoutError, match="not registered: kafka3"):
        c.wait_whole(0.3, steady, record)
    assert c.stuck_nodes() == ["kafka3"]


def test_zookeeper_mode_waits_for_the_full_isr_too(monkeypatch):
    c = KAFKA.cluster(version="3.9")
    parts = {"mqchaos": [{"partition": 0, "leader": "kafka2", "isr": ["kafka2", "kafka3"],
                          "replicas": ["kafka1", "kafka2", "kafka3"]}]}
    monkeypatch.setattr(c, "quorum", lambda: True)
    monkeypatch.setattr(c, "registered_brokers", lambda: ["kafka1", "kafka2", "kafka3"])
    monkeypatch.setattr(c, "topics", lambda timeout=10: ["mqchaos"])
    monkeypatch.setattr(c, "partitions", lambda topic: parts[topic])
    with pytest.raises(TimeoutError, match="out of the ISR: mqchaos/0: kafka1"):
        c.wait_whole(0.3, steady, record)
    assert c.stuck_nodes() == ["kafka1"]
    parts["mqchaos"][0]["isr"] = ["kafka2", "kafka3", "kafka1"]  # order is not membership
    c.wait_whole(2, steady, record)


def test_what_whole_waited_for_is_said_and_shown_beside_the_windows():
    for version in ("3.9", "4.1"):
        c = KAFKA.cluster(version=version)
        assert isinstance(c, SaysWhole)
        assert "every broker registered and every partition's ISR full" in c.whole_condition()
    assert "ZooKeeper quorum" in KAFKA.cluster(version="3.9").whole_condition()
    phases = {"faults": 10.0, "heal": 40.0, "whole": 47.0, "stop-producers": 60.0}
    w = windows.of_run(phases, [], waited_for="every partition's ISR full")
    assert w.effect == (10.0, 47.0) and w.to_json()["whole"] == "every partition's ISR full"
    assert "whole" not in windows.of_run(phases, []).to_json()  # a run that did not say
