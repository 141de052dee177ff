"""Grudges: partitions as data.

A grudge maps a node to the set of nodes whose packets it drops (Jepsen's convention):
``{b: {a}}`` means every packet a sends to b is dropped, and nothing b sends to a is. A
*symmetric* grudge (``b in grudge[a]`` whenever ``a in grudge[b]``) cuts each of its links both
ways; every builder returns one except ``one_way``, which drops one direction only (seed 003
cuts "rabbit1 -> rabbit3" alone: R11/R11b, ``{one_way: [A, B]}``; a partition's record says
which way in ``details.one_way`` and the sides of the cut in ``details.sides``).

Applying a grudge (nemesis/net.py) drops each dropped direction a -> b at both ends: on b's
INPUT from a and on a's OUTPUT to b. So a cut holds even if one end's rules are lost (a node
restarted mid-partition comes back with a fresh network namespace and no rules), and for a
symmetric grudge that is, on each node, an INPUT drop from and an OUTPUT drop to each peer.

All functions are pure; node names are plain strings. ``CLIENTS`` is the pseudo-node standing
for the host's client path (the Docker bridge gateway); it never carries rules of its own, so
both directions of a link to it are dropped on the node's end.
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


def one_way(senders: Iterable[str] | str, receivers: Iterable[str] | str) -> Grudge:
    """Drop every packet a sender sends to a receiver, and nothing a receiver sends to a sender:
    ``one_way("rabbit1", "rabbit3")`` is ``{"rabbit3": {"rabbit1"}}``, seed 003's "rabbit1 ->
    rabbit3" cut. TCP needs both directions, so every connection between the two stalls either
    way; what differs is who stops hearing the other first (rabbit3 receives nothing from
    rabbit1 at once, while rabbit1 still receives what rabbit3 sends). A name alone is one node."""
    a = frozenset([senders] if isinstance(senders, str) else senders)
    b = frozenset([receivers] if isinstance(receivers, str) else receivers)
    if not a or not b:
        raise ValueError("one_way needs a sender and a receiver")
    if a & b:
        raise ValueError(f"one_way's senders and receivers overlap: {sorted(a & b)}")
    return {n: a for n in b}


def symmetric(grudge: Mapping[str, Iterable[str]]) -> Grudge:
    """The grudge with each dropped direction's reverse dropped too (every link both ways)."""
    return union(grudge, *({p: [n]} for n, peers in grudge.items() for p in peers))


def union(*grudges: Mapping[str, Iterable[str]]) -> Grudge:
    """All the cuts of several grudges at once."""
    out: dict[str, set[str]] = {}
    for g in grudges:
        for node, peers in g.items():
            out.setdefault(node, set()).update(peers)
    return {n: frozenset(p) for n, p in out.items()}


def links(grudge: Mapping[str, Iterable[str]]) -> set[frozenset[str]]:
    """The undirected links a grudge cuts, in one direction or both (what a reader of the record
    wants to know; ``one_way_links`` says which are cut one way only)."""
    return {frozenset((a, b)) for a, peers in grudge.items() for b in peers}


def directions(grudge: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every direction a grudge drops, as ``[sender, receiver]``, sorted."""
    return sorted([sender, receiver] for receiver, senders in grudge.items() for sender in senders)


def one_way_links(grudge: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The directions dropped whose reverse is kept, ``[sender, receiver]``: [] when symmetric."""
    return [[a, b] for a, b in directions(grudge) if b not in grudge.get(a, ())]


def sides(grudge: Mapping[str, Iterable[str]], nodes: Iterable[str]) -> list[list[str]]:
    """The sides of a cut: each node with the nodes it still reaches, both ways (a partial
    cut's bridge node sees both halves: a side of its own). A link dropped one way only parts
    its ends as a two-way cut does (TCP, and so every broker's link, needs both directions):
    ``one_way(a, b)`` has the sides of ``partial(a, b)``. Sorted, each once."""
    nodes = _nodes(nodes)
    reach = {n: {m for m in nodes if m not in grudge.get(n, ()) and n not in grudge.get(m, ())} for n in nodes}
    return [list(s) for s in sorted({tuple(sorted(r)) for r in reach.values()}, key=lambda s: (len(s), s))]


def is_symmetric(grudge: Mapping[str, Iterable[str]]) -> bool:
    """Whether every dropped direction's reverse is dropped too (False for ``one_way``)."""
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
    "one_way": one_way,
}
