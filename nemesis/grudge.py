"""Grudges: partitions as data.

A grudge maps a node to the set of nodes it cuts itself off from. Applying it (nemesis/net.py)
drops, on the grudging node, inbound traffic from and outbound traffic to each grudged node, so
``{a: {b}}`` alone already cuts the a<->b link in both directions. The builders below return
symmetric grudges anyway, so the cut holds even if one side's rules are lost (a node restarted
mid-partition comes back with a fresh network namespace and no rules).

All functions are pure; node names are plain strings. ``CLIENTS`` is the pseudo-node standing
for the host's client path (the Docker bridge gateway); it never carries rules of its own.
"""
from __future__ import annotations

import random
from typing import Iterable, Mapping

Grudge = dict[str, frozenset[str]]

CLIENTS = "clients"


def _nodes(nodes: Iterable[str]) -> list[str]:
    out = list(dict.fromkeys(nodes))  # keep order, drop repeats
    if not out:
        raise ValueError("no nodes")
    return out


def majority(n: int) -> int:
    return n // 2 + 1


def complete(components: Iterable[Iterable[str]]) -> Grudge:
    """Every node grudges every node outside its own component (a clean split)."""
    comps = [frozenset(c) for c in components]
    seen: set[str] = set()
    for c in comps:
        if seen & c:
            raise ValueError(f"components overlap: {sorted(seen & c)}")
        seen |= c
    universe = frozenset(seen)
    return {n: universe - c for c in comps for n in c}


def isolate(node: str, nodes: Iterable[str]) -> Grudge:
    """``node`` alone on one side, everyone else on the other."""
    ns = _nodes(nodes)
    if node not in ns:
        raise ValueError(f"{node} is not one of {ns}")
    return complete([[node], [n for n in ns if n != node]])


def halves(nodes: Iterable[str]) -> Grudge:
    """Split in two: the first ``n // 2`` nodes (a minority) against the rest."""
    ns = _nodes(nodes)
    if len(ns) < 2:
        raise ValueError("halves needs at least two nodes")
    k = len(ns) // 2
    return complete([ns[:k], ns[k:]])


def random_halves(nodes: Iterable[str], seed: int) -> Grudge:
    """``halves`` of a seeded shuffle: the same seed always gives the same split."""
    ns = sorted(_nodes(nodes))
    random.Random(seed).shuffle(ns)
    return halves(ns)


def bridge(nodes: Iterable[str]) -> Grudge:
    """Two halves that cannot see each other, and one node in the middle that sees both."""
    ns = _nodes(nodes)
    if len(ns) < 3:
        raise ValueError("bridge needs at least three nodes")
    mid = len(ns) // 2
    left, right = ns[:mid], ns[mid + 1:]
    return isolate_from(left, right) | {ns[mid]: frozenset()}


def majorities_ring(nodes: Iterable[str]) -> Grudge:
    """Every node sees a majority (itself included), and no two nodes see the same set.

    Nodes sit on a ring in the given order and see their neighbours up to distance ``d`` on each
    side, ``d`` the least that makes ``2d + 1`` a majority. With three nodes that ring is the
    whole cluster, so the only topology with the property is a path: ``bridge``.
    """
    ns = _nodes(nodes)
    n = len(ns)
    if n < 3:
        raise ValueError("majorities_ring needs at least three nodes")
    if n == 3:
        return bridge(ns)
    d = majority(n) // 2  # = ceil((m - 1) / 2)
    grudge: Grudge = {}
    for i, node in enumerate(ns):
        seen = {ns[(i + k) % n] for k in range(-d, d + 1)}
        grudge[node] = frozenset(ns) - seen
    return grudge


def partial(a: str, b: str) -> Grudge:
    """Only the a<->b link is cut; every other link stays up (SCENARIOS R10)."""
    if a == b:
        raise ValueError("partial needs two different nodes")
    return {a: frozenset([b]), b: frozenset([a])}


def isolate_from(group_a: Iterable[str], group_b: Iterable[str]) -> Grudge:
    """Cut every link between the two groups and nothing else, e.g. a broker from all
    ZooKeeper nodes (SCENARIOS K7) or a node from the clients (``[node], [CLIENTS]``)."""
    a, b = frozenset(group_a), frozenset(group_b)
    if not a or not b:
        raise ValueError("isolate_from needs two non-empty groups")
    if a & b:
        raise ValueError(f"groups overlap: {sorted(a & b)}")
    return {**{n: b for n in a}, **{n: a for n in b}}


def union(*grudges: Mapping[str, Iterable[str]]) -> Grudge:
    """All the cuts of several grudges at once."""
    out: dict[str, set[str]] = {}
    for g in grudges:
        for node, peers in g.items():
            out.setdefault(node, set()).update(peers)
    return {n: frozenset(p) for n, p in out.items()}


def links(grudge: Mapping[str, Iterable[str]]) -> set[frozenset[str]]:
    """The undirected links a grudge cuts (what a reader of the record wants to know)."""
    return {frozenset((a, b)) for a, peers in grudge.items() for b in peers}


def sides(grudge: Mapping[str, Iterable[str]], nodes: Iterable[str]) -> list[list[str]]:
    """The sides of a cut: each node with the nodes it still reaches, both ways (a partial
    cut's bridge node sees both halves: a side of its own). Sorted, each once."""
    nodes = _nodes(nodes)
    reach = {n: {m for m in nodes if m not in grudge.get(n, ()) and n not in grudge.get(m, ())} for n in nodes}
    return [list(s) for s in sorted({tuple(sorted(r)) for r in reach.values()}, key=lambda s: (len(s), s))]


def is_symmetric(grudge: Mapping[str, Iterable[str]]) -> bool:
    return all(a in grudge.get(b, ()) for a, peers in grudge.items() for b in peers)


def to_json(grudge: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    return {n: sorted(p) for n, p in sorted(grudge.items())}


def from_json(data: Mapping[str, Iterable[str]]) -> Grudge:
    return {n: frozenset(p) for n, p in data.items()}


BUILDERS = {
    "isolate": isolate,
    "halves": halves,
    "random_halves": random_halves,
    "bridge": bridge,
    "majorities_ring": majorities_ring,
    "partial": partial,
    "isolate_from": isolate_from,
}
