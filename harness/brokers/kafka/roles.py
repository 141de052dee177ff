"""The roles a fault can target in a Kafka cluster (``leader:T/P``, ``controller`` ...), and
how a cluster resolves one to its nodes."""
from __future__ import annotations

from harness.brokers.protocol import Role, RoleError

ROLES = {r.name: r for r in (
    Role("leader", "the broker leading partition P (default 0) of topic T", "T[/P]"),
    Role("followers", "the partition's other replicas", "T[/P]"),
    Role("isr", "the partition's in-sync replicas", "T[/P]"),
    Role("controller", "the controller broker"),
)}


def resolve_role(cluster, name: str, arg: str | None) -> list[str]:
    """The nodes that hold role ``name`` (of topic partition ``arg``) in ``cluster``, a
    KafkaCluster: its ``roles``, ``controller``, ``role_nodes`` and ``partitions``."""
    if name not in cluster.roles:
        raise RoleError(f"a kafka cluster has no role {name!r} (roles: {', '.join(cluster.roles)})")
    if name == "controller":
        c = cluster.controller()
        return [c] if c else []
    if not cluster.roles[name].arg:
        return cluster.role_nodes(name)
    if not arg:
        raise RoleError(f"{name} needs a topic ({name}:TOPIC[/PARTITION])")
    topic, _, part = arg.partition("/")
    p = cluster.partitions(topic)[int(part or 0)]
    if name == "leader":
        return [p["leader"]] if p["leader"] else []
    if name == "isr":
        return list(p["isr"])
    return [r for r in p["replicas"] if r != p["leader"]]
