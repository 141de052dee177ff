"""Kafka's nodes: the brokers (kafka1..N, broker id N for kafka<N>; three unless a scenario
asks for up to five: ``cluster.brokers``) and ZooKeeper's (zk1..3), and the ports they are
reached on."""
from __future__ import annotations

import re

ZK_NODES = ["zk1", "zk2", "zk3"]
MAX_BROKERS = 5  # seed 002's "replication factor 5, min.insync.replicas 3"


def broker_names(count: int = 3) -> list[str]:
    return [f"kafka{i}" for i in range(1, count + 1)]


BROKERS = broker_names(3)  # the default cluster's
KAFKA_PORTS = {n: 9091 + i for i, n in enumerate(broker_names(MAX_BROKERS), 1)}
ZK_PORTS = {"zk1": 2181, "zk2": 2182, "zk3": 2183}
INTERNAL_PORT = 19092


def broker_id(node: str) -> int:
    m = re.fullmatch(r"kafka([1-9][0-9]*)", node or "")
    if not m or int(m.group(1)) > MAX_BROKERS:
        raise ValueError(f"{node} is not a broker (kafka1..kafka{MAX_BROKERS})")
    return int(m.group(1))


def broker_node(bid: int | str | None) -> str | None:
    if bid is None or int(bid) < 0:
        return None
    return f"kafka{int(bid)}"
