"""What a queue's management record says (its master or leader, mirrors, members), and the
roles a fault can target by it (``queue_master:Q`` ...)."""
from __future__ import annotations

from typing import Any

from harness.brokers.protocol import Role, RoleError
from harness.brokers.rabbitmq.nodes import REPLICATED, short_node

ROLES = {r.name: r for r in (
    Role("queue_master", "node of classic queue Q's master, or quorum queue / stream Q's leader", "queue"),
    Role("quorum_leader", "the same (reads better for quorum queues and streams)", "queue"),
    Role("queue_mirrors", "nodes of Q's mirrors (classic) / followers (quorum queue, stream)", "queue"),
)}


def master_of(q: dict) -> str | None:
    """A queue's master / leader from a node's management record: a quorum queue's
    ``leader`` (none while it elects one); a stream's ``leader``, or on 3.10, which reports
    none for a stream, its ``node`` (the writer's); a classic queue's ``node``."""
    if q.get("type") == "quorum":
        return short_node(q.get("leader"))
    return short_node(q.get("leader") or q.get("node"))


def mirrors_of(q: dict) -> dict[str, list[str]]:
    """Classic mirrored queue: {"master": node, "mirrors": [...], "synchronised": [...]}."""
    return {
        "master": short_node(q.get("node")),
        "mirrors": sorted(short_node(n) for n in q.get("slave_nodes") or []),
        "synchronised": sorted(short_node(n) for n in q.get("synchronised_slave_nodes") or []),
    }


def members_of(q: dict) -> dict[str, Any]:
    """Quorum queue or stream: {"leader": node, "members": [...], "online": [...]}."""
    return {
        "leader": short_node(q.get("leader")),
        "members": sorted(short_node(n) for n in q.get("members") or []),
        "online": sorted(short_node(n) for n in q.get("online") or []),
    }


def resolve_role(cluster, name: str, arg: str | None) -> list[str]:
    """The nodes that hold role ``name`` of queue ``arg`` in ``cluster`` (a RabbitCluster)."""
    if name not in cluster.roles:
        raise RoleError(f"a rabbitmq cluster has no role {name!r} (roles: {', '.join(cluster.roles)})")
    if not arg:
        raise RoleError(f"{name} needs a queue ({name}:QUEUE)")
    if name == "queue_mirrors":
        q = cluster.queue(arg) or {}
        if q.get("type") in REPLICATED:
            # no leader named (an election under way): which members follow is not known, and
            # every member is not the answer (S1x on 3.10: a follower's kill took the leader too)
            if not q.get("leader"):
                return []
            leader = short_node(q.get("leader"))
            return [n for n in (short_node(m) for m in q.get("members") or []) if n != leader]
        return cluster.queue_mirrors(arg)["mirrors"]
    master = cluster.queue_master(arg)
    return [master] if master else []
