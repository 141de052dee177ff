"""Faults: each is planned (targets resolved, rules computed: a ``Fault`` record that says
exactly what will be done and how to undo it) and then executed. The plan is saved in the
state file *before* any side effect, so a harness killed mid-fault leaves enough behind for
``mqchaos heal`` to undo it.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from nemesis import grudge as g
from nemesis import net
from nemesis.targets import TargetError, grudge_for, resolve

# Targets of a step that names none: one seeded random broker, never "every broker" by accident
DEFAULT_TARGETS = {"partition": "random_halves", "loss": "random_halves", "rolling_restart": "brokers",
                   "start": "all", "unpause": "all"}

# undo keys, in the order a heal runs them: thaw first (a frozen container runs no iptables),
# then lift network faults, then start what was stopped
UNDO_ORDER = ("unpause", "rules", "tbf", "start")


@dataclass
class Fault:
    id: str
    fault: str
    targets: list[str]
    details: dict = field(default_factory=dict)
    undo: dict = field(default_factory=dict)
    t_start: float | None = None
    t_end: float | None = None
    instant: bool = False  # over as soon as executed (restart, rolling_restart, ...)

    def record(self) -> dict:
        """The nemesis.jsonl line (docs/history.md), plus the fault's id."""
        return {"fault": self.fault, "targets": self.targets, "t_start": self.t_start,
                "t_end": self.t_end, "details": self.details, "id": self.id}

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Fault":
        return cls(**data)

    def describe(self) -> str:
        """A few words: the cut links of a network fault, else the nodes."""
        links = self.details.get("links")
        what = " ".join("/".join(link) for link in links) if links else ",".join(self.targets)
        ports = self.details.get("ports")
        return f"{self.fault} {what}" + (f" port {','.join(map(str, ports))}" if ports else "")

    def pending(self) -> bool:
        return any(self.undo.get(k) for k in UNDO_ORDER)


@dataclass
class Ctx:
    """What planning and executing a fault may use."""
    cluster: Any
    rng: random.Random
    now: Callable[[], float]
    subject: str | None = None  # the run's queue / topic, for bare role targets


def _addr_of(ctx: Ctx) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def addr(node: str) -> str:
        if node not in cache:
            cache[node] = ctx.cluster.gateway() if node == g.CLIENTS else ctx.cluster.address(node)
        return cache[node]
    return addr


def _real(ctx: Ctx, nodes: list[str], what: str) -> list[str]:
    if g.CLIENTS in nodes:
        raise TargetError(f"{what} needs nodes; 'clients' is only a network target")
    return nodes


# ---- planning ------------------------------------------------------------------------------
def ports_problems(fault: str, params: dict, ports: Mapping[str, tuple[int, ...]]) -> list[str]:
    """What is wrong with a step's ``params.ports``: names of the traffic the broker's
    cluster lets a partition cut alone (``Cluster.ports``), one or a list."""
    names = params.get("ports")
    if names is None:
        return []
    if fault != "partition":
        return [f"params.ports: only a partition cuts by port, not {fault}"]
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
    grudge = grudge_for(ctx.cluster, spec, ctx.rng, ctx.subject)
    addr = _addr_of(ctx)
    prob = params.get("probability")
    ports = port_numbers(f.fault, params, ctx.cluster.ports)
    if f.fault == "loss":
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
    nodes = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), "bandwidth")
    tbf = {n: net.tbf_spec(net.default_dev(ctx.cluster, n), str(params["rate"]),
                           str(params.get("burst", "32kbit")), str(params.get("latency", "400ms")))
           for n in nodes}
    f.targets = nodes
    f.details["tc"] = {n: "tc qdisc replace " + " ".join(s) for n, s in tbf.items()}
    f.undo["tbf"] = tbf


def plan_nodes(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    f.targets = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    undo = {"kill": "start", "stop": "start", "pause": "unpause", "power_loss": "start"}.get(f.fault)
    if f.fault == "wipe" and not params.get("start", True):
        undo = "start"
    if undo:
        f.undo[undo] = list(f.targets)
    f.instant = undo is None
    # read before t_start is stamped, so the fault's start stays the moment it acts
    seen = {n: s for n in f.targets if (s := ctx.cluster.seen_before(f.fault, n, params))}
    if seen:
        f.details["seen"] = seen


PLANNERS: dict[str, Callable[[Ctx, Fault, Any, dict], None]] = {
    "partition": plan_partition, "loss": plan_partition, "bandwidth": plan_bandwidth,
    **{k: plan_nodes for k in ("kill", "stop", "pause", "wipe", "power_loss", "restart", "restart_app",
                               "rolling_restart")},
}


# ---- executing -----------------------------------------------------------------------------
def _restart(ctx: Ctx, node: str, params: dict) -> dict:
    step = {"node": node, "stop": ctx.now()}
    ctx.cluster.stop(node, timeout=float(params.get("timeout", 60)))
    step["start"] = ctx.now()
    ctx.cluster.start(node)
    if params.get("wait", True):
        ctx.cluster.wait_rejoined(node, float(params.get("rejoin_timeout", 180)))
        step["rejoined"] = ctx.now()
    return step


def execute(ctx: Ctx, f: Fault, params: dict) -> None:
    c = ctx.cluster
    if f.undo.get("rules"):
        net.apply_rules(c, f.undo["rules"])
    for node, spec in (f.undo.get("tbf") or {}).items():
        c.exec(node, ["tc", "qdisc", "replace", *spec], timeout=30)
    for node in f.targets if f.fault in NODE_ACTIONS else []:
        NODE_ACTIONS[f.fault](ctx, node, params, f)
    if f.fault in GROUP_ACTIONS:
        GROUP_ACTIONS[f.fault](ctx, f.targets, params, f)
    if f.fault in NODE_ACTIONS or f.fault in GROUP_ACTIONS:
        _node_evidence(ctx, f)
    if f.undo.get("tbf"):
        prove(f, {"qdisc": sorted(f.undo["tbf"])}, True)  # tc refused otherwise


def _wipe(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    start = bool(params.get("start", True))
    # what else the params say (RabbitMQ: forget) is the broker's to read
    options = {k: v for k, v in params.items() if k not in ("start", "wait", "rejoin_timeout")}
    ctx.cluster.wipe(node, start=start, **options)
    if start and params.get("wait", False):
        ctx.cluster.wait_rejoined(node, float(params.get("rejoin_timeout", 180)))


def _rolling(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    f.details.setdefault("sequence", []).append(_restart(ctx, node, params))


NODE_ACTIONS: dict[str, Callable[[Ctx, str, dict, Fault], None]] = {
    "kill": lambda ctx, n, p, f: ctx.cluster.kill(n),
    "stop": lambda ctx, n, p, f: ctx.cluster.stop(n, timeout=float(p.get("timeout", 60))),
    "pause": lambda ctx, n, p, f: ctx.cluster.pause(n),
    "wipe": _wipe,
    "restart": _rolling,
    "rolling_restart": _rolling,
    "restart_app": lambda ctx, n, p, f: ctx.cluster.restart_app(n),
}

def _power_loss(ctx: Ctx, nodes: list[str], params: dict, f: Fault) -> None:
    # every target at the same instant (all replicas of a partition losing power together is
    # the point), so not node by node
    f.details["dropped"] = ctx.cluster.power_off(nodes)


# Faults that act on all their targets at once.
GROUP_ACTIONS: dict[str, Callable[[Ctx, list[str], dict, Fault], None]] = {"power_loss": _power_loss}

# What each fault asks of the broker's nodes (harness.brokers.base capabilities): a scenario
# whose broker lacks one is refused at validation, before anything runs.
NEEDS: dict[str, frozenset[str]] = {
    "kill": frozenset({"kill", "start"}), "stop": frozenset({"stop", "start"}),
    "pause": frozenset({"pause"}), "unpause": frozenset({"pause"}),
    "wipe": frozenset({"wipe", "start"}), "start": frozenset({"start"}),
    "restart": frozenset({"stop", "start"}), "rolling_restart": frozenset({"stop", "start"}),
    "restart_app": frozenset({"restart_app"}), "power_loss": frozenset({"power_loss", "start"}),
}


def missing_capabilities(fault: str, capabilities: frozenset[str]) -> list[str]:
    return sorted(NEEDS.get(fault, frozenset()) - capabilities)


# ---- evidence: what shows that a fault took effect -----------------------------------------
def prove(f: Fault, evidence: dict, effective: bool) -> None:
    """Record what the fault did; a fault with no effect makes the run undecided
    (harness.verdicts.undecided)."""
    f.details.setdefault("evidence", {}).update(evidence)
    f.details["effective"] = bool(effective) and f.details.get("effective", True)


def count_dropped(cluster: Any, f: Fault, rules: dict) -> None:
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


def _node_evidence(ctx: Ctx, f: Fault) -> None:
    """A node fault's evidence: the container's state right after the action."""
    c = ctx.cluster
    if f.fault == "power_loss":
        down = {n: not c.running(n) and not c.paused(n) for n in f.targets}
        dropped = f.details.get("dropped") or {}
        prove(f, {"down": down, "unsynced_bytes_dropped": {n: (dropped.get(n) or {}).get("unsynced_bytes")
                                                           for n in f.targets}},
              all(down.values()) and set(dropped) == set(f.targets))
    elif f.fault in ("kill", "stop") or (f.fault == "wipe" and "start" in f.undo):
        down = {n: not c.running(n) and not c.paused(n) for n in f.targets}
        prove(f, {"down": down}, all(down.values()))
    elif f.fault == "pause":
        frozen = {n: c.paused(n) for n in f.targets}
        prove(f, {"frozen": frozen}, all(frozen.values()))
    elif f.fault in ("restart", "rolling_restart"):
        seq = f.details.get("sequence") or []
        prove(f, {"restarted": [s["node"] for s in seq if "start" in s]}, len(seq) == len(f.targets))
    elif f.fault in ("wipe", "restart_app"):
        prove(f, {"done": list(f.targets)}, True)  # the action raised otherwise


def undo(cluster: Any, f: Fault, keys: tuple[str, ...] = UNDO_ORDER) -> None:
    """Undo the fault's ``keys`` parts; what is undone leaves ``f.undo``. Rules on a frozen
    (docker-paused) node cannot be removed yet and stay pending."""
    for key in keys:
        pending = f.undo.get(key)
        if not pending:
            continue
        if key == "rules":
            count_dropped(cluster, f, pending)
            f.undo[key] = {n: pending[n] for n in net.remove_rules(cluster, pending)}
        elif key == "tbf":
            f.undo[key] = {n: pending[n] for n in net.remove_tbf_all(cluster, pending)}
        else:
            todo = [n for n in cluster.nodes() if n in pending]
            for n in todo:
                (cluster.unpause if key == "unpause" else cluster.start)(n)
            f.undo[key] = [n for n in pending if n not in todo]
