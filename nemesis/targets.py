"""Target expressions, resolved to node names at fault time (roles move: the queue master of a
minute ago may be a mirror now).

A target is a string or a list of them (a union, order kept):

=========================  =====================================================================
``rabbit1``, ``zk2`` ...   that node
``all`` / ``brokers``      every node / every broker
``clients``                the host's client path (the bridge gateway); only in network faults
``ROLE[:ARG]``             the nodes holding one of the broker's roles (``Cluster.roles``: e.g.
                           ``queue_master:Q``, ``leader:T/P``, ``followers``, ``controller``,
                           ``zk``); a bare role that takes an argument means the run's own queue
                           or topic (the Nemesis's ``subject``)
``random:N[:EXPR]``        N nodes drawn (seeded) from EXPR (default ``brokers``)
``others:EXPR``            brokers not in EXPR
``EXPR except EXPR2``      EXPR's nodes that are not EXPR2's (K4: ``followers except controller``)
=========================  =====================================================================

A partition's ``targets`` is a grudge spec (see ``grudge_for``).
"""
from __future__ import annotations

import difflib
import random
from typing import Any, Iterable

from harness.brokers.protocol import Cluster, RoleError
from nemesis import grudge as g

ROLE_HELP = __doc__


class TargetError(ValueError):
    """A target expression is malformed or names nothing."""


class NoNodeNow(TargetError):
    """A role that names no node at this moment (a leader or controller being elected)."""


def resolve_one(cluster: Cluster, expr: str, rng: random.Random, subject: str | None = None) -> list[str]:
    if " except " in expr and not expr.startswith(("random:", "others:")):
        keep, _, drop = expr.partition(" except ")
        dropped = set(resolve(cluster, drop, rng, subject))
        return _some(expr, [n for n in resolve(cluster, keep, rng, subject) if n not in dropped])
    expr = expr.strip()
    nodes = cluster.nodes()
    if expr in nodes or expr == g.CLIENTS:
        return [expr]
    if expr == "all":
        return list(nodes)
    if expr == "brokers":
        return cluster.brokers()
    role, _, arg = expr.partition(":")
    if role in cluster.roles:
        if not arg and cluster.roles[role].arg:
            arg = subject or ""
        try:
            return _some(expr, cluster.role(role, arg or None))
        except RoleError as e:
            raise TargetError(f"{expr!r}: {e}") from None
    absent = getattr(cluster, "absent_targets", {}).get(role)
    if absent:
        raise TargetError(f"{expr!r}: {absent}")
    if not arg:
        raise TargetError(f"unknown target {expr!r} (nodes: {', '.join(nodes)}; roles: {', '.join(cluster.roles)})")
    if role == "random":
        count, _, pool = arg.partition(":")
        choices = resolve(cluster, pool or "brokers", rng, subject)
        if int(count) > len(choices):
            raise TargetError(f"{expr!r}: only {len(choices)} nodes to draw from")
        return rng.sample(sorted(choices), int(count))
    if role == "others":
        excluded = set(resolve(cluster, arg, rng, subject))
        return _some(expr, [n for n in cluster.brokers() if n not in excluded])
    raise TargetError(f"unknown target role {role!r} in {expr!r} (roles: {', '.join(cluster.roles)})")


def _some(expr: str, found: Iterable[str | None]) -> list[str]:
    out = [n for n in found if n]
    if not out:
        raise NoNodeNow(f"{expr!r} names no node right now")
    return out


def resolve(cluster: Cluster, targets: Any, rng: random.Random | None = None,
            subject: str | None = None) -> list[str]:
    """Node names for a target expression or a list of them (duplicates dropped)."""
    rng = rng or random.Random(0)
    if targets is None:
        return cluster.brokers()
    items = [targets] if isinstance(targets, str) else list(targets)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise TargetError(f"a target is a string, not {item!r}")
        out += [n for n in resolve_one(cluster, item, rng, subject) if n not in out]
    return out


def _one(cluster: Cluster, expr: Any, rng: random.Random, subject: str | None) -> str:
    found = resolve(cluster, expr, rng, subject)
    if len(found) != 1:
        raise TargetError(f"{expr!r} must name exactly one node, names {found}")
    return found[0]


def grudge_for(cluster: Cluster, spec: Any, rng: random.Random, subject: str | None = None) -> g.Grudge:
    """A grudge from a partition spec:

    ``"halves"`` / ``"random_halves"`` / ``"bridge"`` / ``"majorities_ring"`` (over the brokers,
    or ``{halves: EXPR}`` over EXPR); ``{isolate: EXPR}`` (EXPR's nodes together, cut from every
    other node, ZooKeeper included); ``{partial: [X, Y]}``; ``{isolate_from: [EXPR_A, EXPR_B]}``;
    ``{one_way: [EXPR_A, EXPR_B]}`` (every packet from EXPR_A's nodes to EXPR_B's dropped, the
    other direction kept: seed 003's "rabbit1 -> rabbit3" is ``{one_way: [rabbit1, rabbit3]}``);
    ``{clients: EXPR}`` (EXPR cut from the host's client path); ``{components: [EXPR, ...]}``;
    ``{grudge: {node: [nodes]}}`` (each pair's link cut both ways, as this spec always did:
    made symmetric; one direction alone is ``one_way``).
    """
    if isinstance(spec, str):
        spec = {spec: None}
    if not isinstance(spec, dict) or len(spec) != 1:
        raise TargetError(f"a partition spec is a name or a one-key mapping, not {spec!r}")
    (kind, arg), = spec.items()
    if kind in ("halves", "bridge", "majorities_ring"):
        return g.BUILDERS[kind](resolve(cluster, arg or "brokers", rng, subject))
    if kind == "random_halves":
        return g.random_halves(cluster.brokers(), rng.randrange(2**31) if arg is None else int(arg))
    if kind == "isolate":
        group = resolve(cluster, arg, rng, subject)
        return g.complete([group, [n for n in cluster.nodes() if n not in group]])
    if kind == "partial":
        a, b = _pair(arg, kind)
        return g.partial(_one(cluster, a, rng, subject), _one(cluster, b, rng, subject))
    if kind in ("isolate_from", "one_way"):
        a, b = _pair(arg, kind)
        return g.BUILDERS[kind](resolve(cluster, a, rng, subject), resolve(cluster, b, rng, subject))
    if kind == "clients":
        return g.isolate_from(resolve(cluster, arg, rng, subject), [g.CLIENTS])
    if kind == "components":
        return g.complete([resolve(cluster, c, rng, subject) for c in arg])
    if kind == "grudge":
        return g.symmetric(g.from_json(arg))
    raise TargetError(f"unknown partition spec {kind!r}")


def _pair(arg: Any, kind: str) -> tuple[Any, Any]:
    if not isinstance(arg, (list, tuple)) or len(arg) != 2:
        raise TargetError(f"{kind} takes a list of two targets, not {arg!r}")
    return arg[0], arg[1]


# ---- checking targets before a run (no cluster needed) -------------------------------------
KEYWORDS = ("all", "brokers", g.CLIENTS)
SPEC_NAMES = ("halves", "random_halves", "bridge", "majorities_ring")
SPEC_KINDS = {"halves": "expr", "bridge": "expr", "majorities_ring": "expr", "random_halves": "seed",
              "isolate": "expr", "clients": "expr", "partial": "pair", "isolate_from": "pair", "one_way": "pair",
              "components": "list", "grudge": "grudge"}


def _near(word: str, names) -> str:
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def expr_problems(expr: Any, nodes: list[str], roles: dict, absent: dict[str, str] | None = None) -> list[str]:
    """What is wrong with a target expression, judged from the broker's node names and
    roles alone (what a role names is only known when the fault runs); ``absent``: names
    this topology lacks, with why (``Cluster.absent_targets``)."""
    absent = absent or {}
    if isinstance(expr, list):  # a union of expressions, as resolve() takes it
        return [p for item in expr for p in expr_problems(item, nodes, roles, absent)]
    if not isinstance(expr, str):
        return [f"a target is a string or a list of them, not {expr!r}"]
    expr = expr.strip()
    if " except " in expr and not expr.startswith(("random:", "others:")):
        keep, _, drop = expr.partition(" except ")
        return expr_problems(keep, nodes, roles, absent) + expr_problems(drop, nodes, roles, absent)
    if expr in nodes or expr in KEYWORDS:
        return []
    role, _, arg = expr.partition(":")
    if role in roles:
        return [f"{expr!r}: role {role} takes no argument"] if arg and not roles[role].arg else []
    if role in absent:
        return [f"{expr!r}: {absent[role]}"]
    if role == "random":
        count, _, pool = arg.partition(":")
        problems = [] if count.isdigit() and int(count) > 0 else [f"{expr!r}: random:N needs a count N > 0"]
        return problems + (expr_problems(pool, nodes, roles, absent) if pool else [])
    if role == "others" and arg:
        return expr_problems(arg, nodes, roles, absent)
    return [f"unknown target {expr!r}{_near(role, [*nodes, *KEYWORDS, *roles, 'random', 'others'])}"]


def nodes_problems(targets: Any, nodes: list[str], roles: dict,
                   absent: dict[str, str] | None = None) -> list[str]:
    """What is wrong with a node fault's ``targets``: a target expression or a list of them.
    (Which faults take nodes and which a partition spec is the fault registry's:
    ``nemesis.faults.targets_problems``.)"""
    items = [targets] if isinstance(targets, str) else targets
    if not isinstance(items, list):
        return [f"targets must be a target or a list of them, not {targets!r}"]
    return [p for item in items for p in expr_problems(item, nodes, roles, absent)]


def spec_problems(targets: Any, nodes: list[str], roles: dict,
                  absent: dict[str, str] | None = None) -> list[str]:
    """What is wrong with a cut's ``targets``: a partition spec (``grudge_for``)."""
    if isinstance(targets, str):
        return [] if targets in SPEC_NAMES else [f"unknown partition {targets!r}{_near(targets, SPEC_NAMES)}"]
    if not isinstance(targets, dict) or len(targets) != 1:
        return [f"a partition spec is a name or a one-key mapping, not {targets!r}"]
    (kind, arg), = targets.items()
    shape = SPEC_KINDS.get(kind)
    if shape is None:
        return [f"unknown partition spec {kind!r}{_near(kind, SPEC_KINDS)}"]
    if shape == "expr":
        return [] if arg is None else expr_problems(arg, nodes, roles, absent)
    if shape == "seed":
        return [] if arg is None or isinstance(arg, int) else [f"random_halves takes a seed, not {arg!r}"]
    if shape == "pair":
        if not isinstance(arg, list) or len(arg) != 2:
            return [f"{kind} takes a list of two targets, not {arg!r}"]
        if arg[0] == arg[1]:  # nothing between a node and itself to cut
            return [f"{kind} names {arg[0]!r} on both ends: it would cut nothing"]
        return [p for a in arg for p in expr_problems(a, nodes, roles, absent)]
    if shape == "list":
        if not isinstance(arg, list) or not arg:
            return [f"{kind} takes a list of targets, not {arg!r}"]
        return [p for a in arg for p in expr_problems(a, nodes, roles, absent)]
    if not isinstance(arg, dict):
        return [f"grudge takes a mapping node -> [nodes], not {arg!r}"]
    names = [*nodes, g.CLIENTS]
    return [f"grudge names {n!r}, " + ((absent or {}).get(str(n)) or f"not a node{_near(str(n), names)}")
            for k, v in arg.items() for n in [k, *(v if isinstance(v, list) else [v])] if n not in names]
