"""Kafka 3.9's ZooKeeper-to-KRaft migration (KIP-866) on a real cluster: each phase of the
``migrate_to_kraft`` operation takes effect as the nodes themselves show it, and what was
written on ZooKeeper is read back from the migrated cluster."""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer

from harness import brokers
from harness.brokers.kafka import migration
from harness.history import RunClock
from nemesis.core import Nemesis

pytestmark = pytest.mark.docker
COUNT = 300


def _write(bootstrap: str, topic: str) -> set[str]:
    acked: set[str] = set()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(COUNT):
        producer.produce(topic, value=f"m{i}".encode(),
                         on_delivery=lambda err, msg: err is None and acked.add(msg.value().decode()))
    assert producer.flush(60) == 0
    return acked


def _read(bootstrap: str, topic: str, want: int) -> set[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"migration-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: set[str] = set()
    try:
        for _ in range(600):  # bounded: at most 600 polls of 0.5 s
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.add(msg.value().decode())
            if len(seen) >= want:
                break
    finally:
        consumer.close()
    return seen


def test_each_phase_of_the_migration_takes_effect_and_the_data_stays(tmp_path):
    kafka = brokers.get("kafka")
    cluster = kafka.cluster(version="3.9")
    try:
        cluster.up(kafka.settings({"min.insync.replicas": 2}))
        cluster.create_topic("migrated", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        acked = _write(cluster.bootstrap_servers(), "migrated")
        assert len(acked) == COUNT
        seen = {}
        with Nemesis(cluster, tmp_path, clock=RunClock(), handle_signals=False) as nem:
            for phase in migration.PHASES:
                f = nem.apply("migrate_to_kraft", phase=phase)
                assert f.details["effective"] is True, (phase, f.details)
                seen[phase] = f.details["evidence"]["after"]
        assert seen["controllers"]["controller_leader"] in cluster.controllers() == ["ctrl1", "ctrl2", "ctrl3"]
        assert seen["controllers"]["broker_modes"] == {n: "zookeeper" for n in cluster.brokers()}
        assert seen["brokers"]["migrated"] is True
        assert seen["kraft"]["broker_modes"] == {n: "kraft" for n in cluster.brokers()}
        assert seen["kraft"]["controllers_migrating"] == cluster.controllers()
        assert seen["finalize"]["controllers_migrating"] == [] and seen["finalize"]["registered"] == cluster.brokers()
        # the cluster's readers now take the metadata from the controllers and the brokers
        assert cluster.controller() in cluster.controllers() and cluster.healthy()
        assert _read(cluster.bootstrap_servers(), "migrated", COUNT) >= acked
    finally:
        cluster.down()
    assert not cluster.leftovers()["containers"] and cluster.controllers() == []
