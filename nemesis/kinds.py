"""What a fault kind is, and what planning and executing one may use: the ``Fault`` record
(its plan, saved before it acts, and its evidence), the ``Ctx`` a plan and an action get, a
``FaultType`` (a fault, what lifts it and what it needs, as one value: Jepsen's
nemesis/combined.clj packages), a ``Choreography`` (one step standing for several), the
evidence helpers every family uses, and the one registry (``REGISTRY``) that
``nemesis.faults`` assembles from the families under ``nemesis/families/``.
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from harness.brokers.protocol import Cluster
from harness.util import wait_until
from nemesis import grudge as g
from nemesis.targets import TargetError, resolve

# undo keys, in the order a heal runs them: thaw first (a frozen container runs no iptables),
# then lift network faults, then start what was stopped
UNDO_ORDER = ("unpause", "rules", "tbf", "start")
ALL = "all"  # what a heal step closes: every fault, whatever lifts it


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
    cluster: Cluster
    rng: random.Random
    now: Callable[[], float]
    subject: str | None = None  # the run's queue / topic, for bare role targets
    # the run's producers (harness.clients.base.Movable), for a step that moves them; None: none
    producers: Callable[[], list] | None = None


def addr_of(ctx: Ctx) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def addr(node: str) -> str:
        if node not in cache:
            cache[node] = ctx.cluster.gateway() if node == g.CLIENTS else ctx.cluster.address(node)
        return cache[node]
    return addr


def real(ctx: Ctx, nodes: list[str], what: str) -> list[str]:
    if g.CLIENTS in nodes:
        raise TargetError(f"{what} needs nodes; 'clients' is only a network target")
    return nodes


@dataclass(frozen=True)
class FaultType:
    """Everything the harness knows of one kind of fault, in one place."""
    name: str
    # resolve the targets and write down what will be done and undone (None: a closing step)
    plan: Callable[[Ctx, Fault, Any, dict], None] | None = None
    # act on the planned fault, then record the evidence that it took effect
    execute: Callable[[Ctx, Fault, dict], None] | None = None
    undo_key: str | None = None  # the part of Fault.undo (UNDO_ORDER) that lifts it; None: instant
    closes: str | None = None  # a step that ends earlier faults: the undo key it lifts, ALL: a heal
    default_targets: str = "random:1"  # a step naming none: one seeded broker, never all by accident
    needs: frozenset[str] = frozenset()  # node-control capabilities (harness.brokers.protocol)
    cut: bool = False  # its targets are a partition spec (nemesis.targets.grudge_for), not nodes
    by_port: bool = False  # params.ports may narrow the cut to the broker's named traffic
    fs: str | None = None  # the file system its nodes' data directories must be served by
    crashes: bool = False  # the node dies at once (what a choreography's crash may be)
    downs: bool = False  # its nodes stay down (not running, or frozen) until a later step lifts it
    # how ``mqchaos explore`` draws it (harness/explore.py): its targets and params; None: never
    drawn: Mapping[str, Any] | None = None
    operation: bool = False  # an operator's change (issue 39), not a fault: its evidence is published
    does: str = ""  # what it does, in a few words (errors)
    # a step that may take minutes (an operation, a restart waited for): run on the schedule's
    # operations lane, so the faults and lifts due meanwhile keep their times
    slow: bool = False

    def __post_init__(self) -> None:
        if self.operation:
            object.__setattr__(self, "slow", True)
        if self.slow and self.undo_key is not None:
            raise ValueError(f"{self.name}: a slow step must be instant (the lane lifts nothing)")


@dataclass(frozen=True)
class Choreography:
    """One schedule step standing for several (Jepsen's NATS 2.12 analysis: pause-kill,
    part-kill): expanded when the schedule is parsed into the steps it stands for
    (``expand(data, where, label)``), so the nemesis never sees it."""
    name: str
    expand: Callable[[dict, str, str], list]
    drawn: Mapping[str, Any] | None = None  # how ``mqchaos explore`` draws it
    does: str = ""


# name -> FaultType: the one registry, filled by nemesis.faults from the families in its order
REGISTRY: dict[str, FaultType] = {}
# name -> Choreography: the schedule's packages, filled the same way
CHOREOGRAPHIES: dict[str, Choreography] = {}


def register(types: tuple[FaultType, ...], choreographies: tuple[Choreography, ...] = ()) -> None:
    """Add the families' kinds to the registry: one definition per name."""
    names = [t.name for t in types] + [c.name for c in choreographies]
    twice = sorted({n for n in names if names.count(n) > 1 or n in REGISTRY or n in CHOREOGRAPHIES})
    if twice:
        raise ValueError(f"fault types defined twice: {twice}")
    REGISTRY.update({t.name: t for t in types})
    CHOREOGRAPHIES.update({c.name: c for c in choreographies})


# ---- planning on nodes -----------------------------------------------------------------------
def plan_on_nodes(ctx: Ctx, f: Fault, spec: Any, params: dict, undo_key: str | None) -> None:
    f.targets = real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    if undo_key:
        f.undo[undo_key] = list(f.targets)
    f.instant = undo_key is None
    # read before t_start is stamped, so the fault's start stays the moment it acts
    seen = {n: s for n in f.targets if (s := ctx.cluster.seen_before(f.fault, n, params))}
    if seen:
        f.details["seen"] = seen


def plan_nodes(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A fault on nodes: lifted by its type's ``undo_key``, or over once done (instant)."""
    plan_on_nodes(ctx, f, spec, params, REGISTRY[f.fault].undo_key)


# ---- evidence: what shows that a fault took effect -----------------------------------------
def shown(look: Callable[[], Any], holds: Callable[[Any], bool], timeout: float, what: str,
           interval: float) -> tuple[Any, bool]:
    """An operator's change as the broker shows it, which follows the tool's answer, not
    always at once: ``look`` until what it shows ``holds``, at most ``timeout`` s. Returns
    the last look that answered (None: none did) and whether it held: the evidence is that
    look, not another one taken after the wait."""
    last: list[Any] = [None]

    def held() -> bool:
        last[0] = look()
        return holds(last[0])
    try:
        wait_until(held, timeout, what, interval)
    except TimeoutError:
        return last[0], False
    return last[0], True


def prove(f: Fault, evidence: dict, effective: bool) -> None:
    """Record what the fault did; a fault with no effect makes the run undecided
    (harness.verdicts.undecided)."""
    f.details.setdefault("evidence", {}).update(evidence)
    f.details["effective"] = bool(effective) and f.details.get("effective", True)


def asked_again(ctx: Ctx, f: Fault, ask: Callable[[], Any], retry_s: float, pause_s: float = 5.0) -> Any:
    """An operator's command refused by the broker, asked again every ``pause_s`` until
    ``retry_s`` have passed (0: asked once), as an operator would once the cluster looks
    healthier; each refusal is kept as evidence (``refused``)."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            return ask()
        except Exception as exc:  # noqa: BLE001 - the broker's refusal, kept; the last one raised
            f.details.setdefault("refused", []).append({"t": ctx.now(), "error": f"{type(exc).__name__}: {exc}"[:500]})
            if time.monotonic() + pause_s > deadline:
                raise
            time.sleep(pause_s)


NodeAction = Callable[[Ctx, str, dict, Fault], None]
Evidence = Callable[[Ctx, Fault], None]


def each(action: NodeAction, evidence: Evidence) -> Callable[[Ctx, Fault, dict], None]:
    """A fault that acts on its targets one after the other, in order, then shows its effect."""
    def run(ctx: Ctx, f: Fault, params: dict) -> None:
        for node in f.targets:
            action(ctx, node, params, f)
        evidence(ctx, f)
    return run


def down(ctx: Ctx, f: Fault) -> None:
    """The containers' state right after the action: not running (and not frozen)."""
    down = {n: not ctx.cluster.running(n) and not ctx.cluster.paused(n) for n in f.targets}
    prove(f, {"down": down}, all(down.values()))


def frozen(ctx: Ctx, f: Fault) -> None:
    frozen = {n: ctx.cluster.paused(n) for n in f.targets}
    prove(f, {"frozen": frozen}, all(frozen.values()))


def restarted(ctx: Ctx, f: Fault) -> None:
    seq = f.details.get("sequence") or []
    prove(f, {"restarted": [s["node"] for s in seq if "start" in s]}, len(seq) == len(f.targets))


def done(ctx: Ctx, f: Fault) -> None:
    prove(f, {"done": list(f.targets)}, True)  # the action raised otherwise
