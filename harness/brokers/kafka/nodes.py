"""Kafka's nodes: the brokers (kafka1..3, broker id N for kafka<N>) and ZooKeeper's (zk1..3),
and the ports they are reached on."""
from __future__ import annotations

ZK_NODES = ["zk1", "zk2", "zk3"]
BROKERS = ["kafka1", "kafka2", "kafka3"]
KAFKA_PORTS = {"kafka1": 9092, "kafka2": 9093, "kafka3": 9094}
ZK_PORTS = {"zk1": 2181, "zk2": 2182, "zk3": 2183}
INTERNAL_PORT = 19092


def broker_id(node: str) -> int:
    if node not in BROKERS:
        raise ValueError(f"{node} is not a broker ({BROKERS})")
    return int(node.removeprefix("kafka"))


def broker_node(bid: int | str | None) -> str | None:
    if bid is None or int(bid) < 0:
        return None
    return f"kafka{int(bid)}"
