"""The roles a fault can target in a Kafka cluster (``leader:T/P``, ``controller`` ...), and
how a cluster resolves one to its nodes."""
from __future__ import annotations

from harness.brokers.protocol import Role, RoleError

ROLES = {r.name: r for r in (
    Role("leader", "the broker leading partition P (default 0) of topic T", "T[/P]"),
    Role("followers", "the partition's other replicas", "T[/P]"),
    Role("isr", "the partition's in-sync replicas", "T[/P]"),
    Role("controller", "the controller broker"),
    Role("txn_coordinator", "the broker coordinating the first transactional producer's transactions "
                            "(transactional.id mqchaos-p0): the leader of its __transaction_state partition"),
)}
TRANSACTION_STATE = "__transaction_state"
TRANSACTION_STATE_PARTITIONS = 50  # transaction.state.log.num.partitions, Kafka's default


def transactional_id(producer: str) -> str:
    """A transactional producer's transactional.id (harness/brokers/kafka/txn.py)."""
    return f"mqchaos-{producer}"


def java_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(transactional_id: str, partitions: int = TRANSACTION_STATE_PARTITIONS) -> int:
    """The __transaction_state partition whose leader coordinates ``transactional_id``
    (Kafka's TransactionStateManager.partitionFor: Utils.abs(hashCode) % partitions)."""
    h = java_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def resolve_role(cluster, name: str, arg: str | None) -> list[str]:
    """The nodes that hold role ``name`` (of topic partition ``arg``) in ``cluster``, a
    KafkaCluster: its ``roles``, ``controller``, ``role_nodes`` and ``role_partitions``."""
    if name not in cluster.roles:
        raise RoleError(f"a kafka cluster has no role {name!r} (roles: {', '.join(cluster.roles)})")
    if name == "controller":
        c = cluster.controller()
        return [c] if c else []
    if name == "txn_coordinator":
        p = cluster.partitions(TRANSACTION_STATE)[coordinator_partition(transactional_id("p0"))]
        return [p["leader"]] if p["leader"] else []
    if not cluster.roles[name].arg:
        return cluster.role_nodes(name)
    if not arg:
        raise RoleError(f"{name} needs a topic ({name}:TOPIC[/PARTITION])")
    topic, _, part = arg.partition("/")
    p = cluster.role_partitions(topic)[int(part or 0)]
    if name == "leader":
        return [p["leader"]] if p["leader"] else []
    if name == "isr":
        return list(p["isr"])
    return [r for r in p["replicas"] if r != p["leader"]]
