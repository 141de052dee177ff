"""Network faults: cuts (partitions, one-way and by port), packet loss, a bandwidth limit."""
from __future__ import annotations

from typing import Any, Mapping

from harness.brokers.protocol import Cluster
from nemesis import grudge as g
from nemesis import net
from nemesis.kinds import REGISTRY, Ctx, Fault, FaultType, addr_of, prove, real
from nemesis.targets import TargetError, grudge_for, resolve

LOSS = "loss"


def ports_problems(fault: str, params: dict, ports: Mapping[str, tuple[int, ...]]) -> list[str]:
    """What is wrong with a step's ``params.ports``: names of the traffic the broker's
    cluster lets a partition cut alone (``Cluster.ports``), one or a list."""
    names = params.get("ports")
    if names is None:
        return []
    if not (fault in REGISTRY and REGISTRY[fault].by_port):
        return [f"params.ports: only a {'/'.join(n for n, t in REGISTRY.items() if t.by_port)} cuts by port, not {fault}"]
    items = [names] if isinstance(names, str) else names
    if not isinstance(items, list) or not items or not all(isinstance(n, str) for n in items):
        return [f"params.ports: a traffic name or a list of them, not {names!r}"]
    return [f"params.ports: no traffic {n!r} to cut in this cluster (there is: {', '.join(ports) or 'none'})"
            for n in items if n not in ports]


def port_numbers(fault: str, params: dict, ports: Mapping[str, tuple[int, ...]]) -> list[int]:
    """The TCP ports a step's ``params.ports`` names ([]: the whole link)."""
    problems = ports_problems(fault, params, ports)
    if problems:
        raise TargetError("; ".join(problems))
    names = params.get("ports") or []
    return sorted({port for name in ([names] if isinstance(names, str) else names) for port in ports[name]})


def plan_partition(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A cut (partition, or loss with ``params.probability``): the grudge and its rules."""
    grudge = grudge_for(ctx.cluster, spec, ctx.rng, ctx.subject)
    addr = addr_of(ctx)
    prob = params.get("probability")
    ports = port_numbers(f.fault, params, ctx.cluster.ports)
    if f.fault == LOSS:  # the one cut that drops at random rather than every packet
        if prob is None:
            raise TargetError("loss needs params.probability")
        rules = net.loss_rules(grudge, addr, f.id, float(prob))
    else:
        rules = net.partition_rules(grudge, addr, f.id, ports)
    involved = sorted({n for n, peers in grudge.items() if peers} | {p for ps in grudge.values() for p in ps})
    f.targets = involved
    f.details.update({"grudge": g.to_json(grudge),
                      "links": sorted(sorted(link) for link in g.links(grudge)),
                      "sides": g.sides(grudge, ctx.cluster.nodes()),
                      "addresses": {n: addr(n) for n in involved},
                      "rules": rules})
    one_way = g.one_way_links(grudge)
    if one_way:  # "links" and "sides" read the same for both ways; which way is dropped is here
        f.details["one_way"] = one_way
    if prob is not None:
        f.details["probability"] = float(prob)
    if ports:  # the cut links carry the rest of their traffic
        f.details["ports"] = ports
    f.undo["rules"] = rules


def plan_bandwidth(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    if "rate" not in params:
        raise TargetError("bandwidth needs params.rate (e.g. 1mbit)")
    nodes = real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    tbf = {n: net.tbf_spec(net.default_dev(ctx.cluster, n), str(params["rate"]),
                           str(params.get("burst", "32kbit")), str(params.get("latency", "400ms")))
           for n in nodes}
    f.targets = nodes
    f.details["tc"] = {n: "tc qdisc replace " + " ".join(s) for n, s in tbf.items()}
    f.undo["tbf"] = tbf


def _cut(ctx: Ctx, f: Fault, params: dict) -> None:
    # its evidence (packets dropped) is read when the rules are lifted: count_dropped
    if f.undo.get("rules"):
        net.apply_rules(ctx.cluster, f.undo["rules"])


def _limit(ctx: Ctx, f: Fault, params: dict) -> None:
    for node, spec in (f.undo.get("tbf") or {}).items():
        ctx.cluster.exec(node, ["tc", "qdisc", "replace", *spec], timeout=30)
    if f.undo.get("tbf"):
        prove(f, {"qdisc": sorted(f.undo["tbf"])}, True)  # tc refused otherwise


def count_dropped(cluster: Cluster, f: Fault, rules: dict) -> None:
    """A network fault's evidence: packets its rules dropped, read just before they go
    (summed over the times the fault's rules are lifted). "No effect" is concluded only
    when every node carrying its rules was read: a node down at the lift took its counters
    with it, and then nothing is concluded. Never in the way of a heal."""
    ev = f.details.setdefault("evidence", {})
    try:
        got = net.dropped(cluster, rules, f.id)
    except Exception as e:  # noqa: BLE001 - the heal must go on; the evidence is then missing
        ev["error"] = f"{type(e).__name__}: {e}"[:300]
        f.details["effective"] = None
        return
    seen = ev.setdefault("dropped_packets", {})
    for node, n in got.items():
        seen[node] = seen.get(node, 0) + n
    unread = sorted(set(ev.get("unread", [])) | (set(rules) - set(got)))
    if unread:
        ev["unread"] = unread
    f.details["effective"] = True if sum(seen.values()) > 0 else (None if unread else False)


TYPES = (
    FaultType("partition", plan_partition, _cut, "rules", default_targets="random_halves", cut=True,
              by_port=True, drawn={"targets": "random_halves"}, does="cuts links"),
    FaultType(LOSS, plan_partition, _cut, "rules", default_targets="random_halves", cut=True,
              does="drops a share of the packets on links"),
    FaultType("bandwidth", plan_bandwidth, _limit, "tbf", does="limits the nodes' egress"),
)
