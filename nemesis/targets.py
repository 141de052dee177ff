"""Target expressions, resolved to node names at fault time (roles move: the queue master of a
minute ago may be a mirror now).

A target is a string or a list of them (a union, order kept):

=========================  =====================================================================
``rabbit1``, ``zk2`` ...   that node
``all`` / ``brokers``      every node / every broker (RabbitMQ: the same three)
``zk``                     the ZooKeeper nodes
``clients``                the host's client path (the bridge gateway); only in network faults
``queue_master[:Q]``      node of classic queue Q's master, or quorum queue Q's leader
``quorum_leader:Q``        the same (reads better for quorum queues)
``queue_mirrors:Q``        nodes of Q's mirrors (classic) / followers (quorum)
``leader:T[/P]``           Kafka: broker leading partition P (default 0) of topic T
``followers:T[/P]``        Kafka: the partition's other replicas
``isr:T[/P]``              Kafka: its in-sync replicas
``controller``             Kafka: the controller broker
``random:N[:EXPR]``        N nodes drawn (seeded) from EXPR (default ``brokers``)
``others:EXPR``            brokers not in EXPR
``EXPR except EXPR2``      EXPR's nodes that are not EXPR2's (K4: ``followers except controller``)
=========================  =====================================================================

A bare queue or topic role (``queue_master``, ``leader``, ``followers``...) refers to the run's
own queue / topic (the Nemesis's ``context``). A partition's ``targets`` is a grudge spec (see
``grudge_for``).
"""
from __future__ import annotations

import random
from typing import Any, Iterable

from nemesis import grudge as g

ROLE_HELP = __doc__


class TargetError(ValueError):
    """A target expression is malformed or names nothing."""


def _topic_partition(arg: str) -> tuple[str, int]:
    topic, _, part = arg.partition("/")
    return topic, int(part or 0)


def _need(cluster: Any, method: str, expr: str) -> Any:
    fn = getattr(cluster, method, None)
    if fn is None:
        raise TargetError(f"{expr!r}: a {cluster.kind} cluster has no {method}")
    return fn


def _mirrors(cluster: Any, queue: str) -> list[str]:
    q = cluster.queue(queue) or {}
    if q.get("type") == "quorum":
        leader = q.get("leader", "").split("@")[-1]
        return [m.split("@")[-1] for m in q.get("members") or [] if m.split("@")[-1] != leader]
    return cluster.queue_mirrors(queue)["mirrors"]


def resolve_one(cluster: Any, expr: str, rng: random.Random, ctx: dict | None = None) -> list[str]:
    ctx = ctx or {}
    if " except " in expr and not expr.startswith(("random:", "others:")):
        keep, _, drop = expr.partition(" except ")
        dropped = set(resolve(cluster, drop, rng, ctx))
        return _some(expr, [n for n in resolve(cluster, keep, rng, ctx) if n not in dropped])
    expr = _with_default(expr.strip(), ctx)
    nodes = cluster.nodes()
    if expr in nodes or expr == g.CLIENTS:
        return [expr]
    if expr == "all":
        return list(nodes)
    if expr == "brokers":
        return cluster.brokers()
    if expr == "zk":
        return list(_need(cluster, "zk_nodes", expr)())
    if expr == "controller":
        return _some(expr, [_need(cluster, "controller", expr)()])
    role, _, arg = expr.partition(":")
    if not arg:
        raise TargetError(f"unknown target {expr!r} (nodes: {nodes})")
    if role in ("queue_master", "quorum_leader"):
        return _some(expr, [_need(cluster, "queue_master", expr)(arg)])
    if role == "queue_mirrors":
        return _some(expr, _mirrors(cluster, arg))
    if role in ("leader", "followers", "isr"):
        topic, part = _topic_partition(arg)
        return _some(expr, _as_list(_need(cluster, role, expr)(topic, part)))
    if role == "random":
        count, _, pool = arg.partition(":")
        choices = resolve(cluster, pool or "brokers", rng, ctx)
        if int(count) > len(choices):
            raise TargetError(f"{expr!r}: only {len(choices)} nodes to draw from")
        return rng.sample(sorted(choices), int(count))
    if role == "others":
        excluded = set(resolve(cluster, arg, rng, ctx))
        return _some(expr, [n for n in cluster.brokers() if n not in excluded])
    raise TargetError(f"unknown target role {role!r} in {expr!r}")


def _as_list(value: Any) -> list[str]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _some(expr: str, found: Iterable[str | None]) -> list[str]:
    out = [n for n in found if n]
    if not out:
        raise TargetError(f"{expr!r} names no node right now")
    return out


def _with_default(expr: str, ctx: dict) -> str:
    """A bare role (``queue_master``, ``leader``...) means the run's own queue / topic."""
    if expr in QUEUE_ROLES and ctx.get("queue"):
        return f"{expr}:{ctx['queue']}"
    if expr in TOPIC_ROLES and ctx.get("topic"):
        return f"{expr}:{ctx['topic']}/{int(ctx.get('partition', 0))}"
    return expr


QUEUE_ROLES = ("queue_master", "quorum_leader", "queue_mirrors")
TOPIC_ROLES = ("leader", "followers", "isr")


def resolve(cluster: Any, targets: Any, rng: random.Random | None = None,
            ctx: dict | None = None) -> list[str]:
    """Node names for a target expression or a list of them (duplicates dropped)."""
    rng = rng or random.Random(0)
    if targets is None:
        return cluster.brokers()
    items = [targets] if isinstance(targets, str) else list(targets)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TargetError(f"a target is a string, not {item!r}")
        out += [n for n in resolve_one(cluster, item, rng, ctx) if n not in out]
    return out


def _one(cluster: Any, expr: Any, rng: random.Random, ctx: dict | None) -> str:
    found = resolve(cluster, expr, rng, ctx)
    if len(found) != 1:
        raise TargetError(f"{expr!r} must name exactly one node, names {found}")
    return found[0]


def grudge_for(cluster: Any, spec: Any, rng: random.Random, ctx: dict | None = None) -> g.Grudge:
    """A grudge from a partition spec:

    ``"halves"`` / ``"random_halves"`` / ``"bridge"`` / ``"majorities_ring"`` (over the brokers,
    or ``{halves: EXPR}`` over EXPR); ``{isolate: EXPR}`` (EXPR's nodes together, cut from every
    other node, ZooKeeper included); ``{partial: [X, Y]}``; ``{isolate_from: [EXPR_A, EXPR_B]}``;
    ``{clients: EXPR}`` (EXPR cut from the host's client path); ``{components: [EXPR, ...]}``;
    ``{grudge: {node: [nodes]}}`` (given as is).
    """
    if isinstance(spec, str):
        spec = {spec: None}
    if not isinstance(spec, dict) or len(spec) != 1:
        raise TargetError(f"a partition spec is a name or a one-key mapping, not {spec!r}")
    (kind, arg), = spec.items()
    if kind in ("halves", "bridge", "majorities_ring"):
        return g.BUILDERS[kind](resolve(cluster, arg or "brokers", rng, ctx))
    if kind == "random_halves":
        return g.random_halves(cluster.brokers(), rng.randrange(2**31) if arg is None else int(arg))
    if kind == "isolate":
        group = resolve(cluster, arg, rng, ctx)
        return g.complete([group, [n for n in cluster.nodes() if n not in group]])
    if kind == "partial":
        a, b = _pair(arg, kind)
        return g.partial(_one(cluster, a, rng, ctx), _one(cluster, b, rng, ctx))
    if kind == "isolate_from":
        a, b = _pair(arg, kind)
        return g.isolate_from(resolve(cluster, a, rng, ctx), resolve(cluster, b, rng, ctx))
    if kind == "clients":
        return g.isolate_from(resolve(cluster, arg, rng, ctx), [g.CLIENTS])
    if kind == "components":
        return g.complete([resolve(cluster, c, rng, ctx) for c in arg])
    if kind == "grudge":
        return g.from_json(arg)
    raise TargetError(f"unknown partition spec {kind!r}")


def _pair(arg: Any, kind: str) -> tuple[Any, Any]:
    if not isinstance(arg, (list, tuple)) or len(arg) != 2:
        raise TargetError(f"{kind} takes a list of two targets, not {arg!r}")
    return arg[0], arg[1]
