"""Kafka's nodes: the brokers (kafka1..N, broker id N for kafka<N>; three unless a scenario
asks for up to five: ``cluster.brokers``), ZooKeeper's (zk1..3), the dedicated controllers a
ZooKeeper-to-KRaft migration adds (ctrl1..3, node id 3000+N: ``migration``), and the ports
they are reached on."""
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


CONTROLLERS = ["ctrl1", "ctrl2", "ctrl3"]
CONTROLLER_ID_BASE = 3000  # KIP-866's example ids: never a broker's


def controller_id(node: str) -> int:
    if node not in CONTROLLERS:
        raise ValueError(f"{node} is not a dedicated controller ({', '.join(CONTROLLERS)})")
    return CONTROLLER_ID_BASE + int(node.removeprefix("ctrl"))


def broker_node(bid: int | str | None) -> str | None:
    """The node of a broker id or, above CONTROLLER_ID_BASE, of a dedicated controller's (a
    migration's KRaft controller writes its own id into ZooKeeper's /controller)."""
    if bid is None or int(bid) < 0:
        return None
    if int(bid) > CONTROLLER_ID_BASE:
        return f"ctrl{int(bid) - CONTROLLER_ID_BASE}"
    return f"kafka{int(bid)}"


def is_broker(node: str | None) -> bool:
    """Is ``node`` a broker (not ZooKeeper's, not a dedicated controller)?"""
    try:
        broker_id(node or "")
    except ValueError:
        return False
    return True


def node_id(node: str) -> int:
    """A broker's broker id, a dedicated controller's node id (KRaft's ``node.id``)."""
    return controller_id(node) if node in CONTROLLERS else broker_id(node)
