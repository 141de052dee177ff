"""Faults: each is planned (targets resolved, rules computed: a ``Fault`` record that says
exactly what will be done and how to undo it) and then executed. The plan is saved in the
state file *before* any side effect, so a harness killed mid-fault leaves enough behind for
``mqchaos heal`` to undo it.

``FAULT_TYPES`` is the one registry of fault kinds (Jepsen's nemesis/combined.clj packages:
a fault, what lifts it and what it needs travel as one value). Every other table of fault
names derives from it: the names a schedule may use (``FAULTS``), the steps that end faults
rather than start one (``CLOSING``), the faults whose targets are a cut (``CUTS``), a step's
default targets, the capabilities a broker must have, the load-time target checks.
"""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from harness.brokers.protocol import (CORRUPT, FEATURES, KILL, MEMBERSHIP, MIGRATION, PAUSE, PLACEMENT, POWER_LOSS, QUORUM,
                                      QUORUM_MEMBERSHIP, RESTART_APP, START, STOP, SYNC, UPGRADE, WIPE, Cluster)
from harness.clients.base import Movable
from harness.util import same_release, wait_until
from nemesis import grudge as g
from nemesis import net
from nemesis.targets import TargetError, grudge_for, nodes_problems, resolve, spec_problems

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
    if not (fault in FAULT_TYPES and FAULT_TYPES[fault].by_port):
        return [f"params.ports: only a {'/'.join(BY_PORT)} cuts by port, not {fault}"]
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
    addr = _addr_of(ctx)
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
    nodes = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    tbf = {n: net.tbf_spec(net.default_dev(ctx.cluster, n), str(params["rate"]),
                           str(params.get("burst", "32kbit")), str(params.get("latency", "400ms")))
           for n in nodes}
    f.targets = nodes
    f.details["tc"] = {n: "tc qdisc replace " + " ".join(s) for n, s in tbf.items()}
    f.undo["tbf"] = tbf


def _plan_on_nodes(ctx: Ctx, f: Fault, spec: Any, params: dict, undo_key: str | None) -> None:
    f.targets = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    if undo_key:
        f.undo[undo_key] = list(f.targets)
    f.instant = undo_key is None
    # read before t_start is stamped, so the fault's start stays the moment it acts
    seen = {n: s for n in f.targets if (s := ctx.cluster.seen_before(f.fault, n, params))}
    if seen:
        f.details["seen"] = seen


def plan_nodes(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A fault on nodes: lifted by its type's ``undo_key``, or over once done (instant)."""
    _plan_on_nodes(ctx, f, spec, params, FAULT_TYPES[f.fault].undo_key)


def plan_wipe(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A wipe restarts the node by itself (instant), unless ``start: false`` leaves it
    stopped: then, like a kill, a later start lifts it."""
    _plan_on_nodes(ctx, f, spec, params, None if params.get("start", True) else FAULT_TYPES[f.fault].undo_key)


def plan_corrupt(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """Storage corruption (Jepsen's NATS 2.12 analysis: bit-flips and truncations of a
    minority's files): on each target, the newest files of ``params.files`` (one of the
    broker's ``data_file_kinds``), listed while the node runs. ``mode: bitflip`` flips one
    seeded bit in each of ``bytes`` (default 1) seeded bytes within the file's last ``tail``
    bytes (default: anywhere); ``mode: truncate`` cuts ``bytes`` (default half the file)
    from its end. ``crash: true`` kills the node first and corrupts it while down
    (crash-then-corrupt; a later ``start`` lifts it), else the running node's files change
    in place (corrupt-then-restart: a later kill / restart step)."""
    kinds = getattr(ctx.cluster, "data_file_kinds", {})
    kind, mode = params.get("files"), params.get("mode", "bitflip")
    if kind not in kinds:
        raise TargetError(f"corrupt needs params.files, one of {sorted(kinds)}, not {kind!r}")
    if mode not in ("bitflip", "truncate"):
        raise TargetError(f"corrupt: params.mode must be bitflip or truncate, not {mode!r}")
    f.targets = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    plan: dict[str, list[dict]] = {}
    for node in f.targets:
        files = ctx.cluster.data_files(node, kind, ctx.subject)
        if not files:
            raise TargetError(f"corrupt: {node} has no {kind} files yet")
        plan[node] = [_file_plan(ctx, path, size, mode, params) for path, size in files if size > 0]
    f.details.update({"files": plan, "mode": mode, "kind": kind, "crash": bool(params.get("crash", False))})
    if params.get("crash"):
        f.undo["start"] = list(f.targets)
    f.instant = not params.get("crash")


def _file_plan(ctx: Ctx, path: str, size: int, mode: str, params: dict) -> dict:
    if mode == "truncate":
        cut = int(params.get("bytes", size // 2))
        return {"path": path, "size": size, "truncate_to": max(0, size - cut)}
    lo = max(0, size - int(params.get("tail", size)))
    positions = sorted(ctx.rng.sample(range(lo, size), min(int(params.get("bytes", 1)), size - lo)))
    return {"path": path, "size": size, "positions": positions, "bits": [ctx.rng.randrange(8) for _ in positions]}


def _corrupt(ctx: Ctx, f: Fault, params: dict) -> None:
    """Each planned file changed, then read back: the evidence is the bytes before and after
    (or the size cut to); a change that did not read back makes the fault ineffective."""
    c, done = ctx.cluster, []
    for node, entries in f.details["files"].items():
        if f.details.get("crash"):
            c.kill(node)
        for e in entries:
            if "truncate_to" in e:
                c.patch_file(node, e["path"], size=e["truncate_to"])
                end = c.file_bytes(node, e["path"], [e["truncate_to"]] + ([e["truncate_to"] - 1] if e["truncate_to"] else []))
                done.append(e["truncate_to"] not in end and (e["truncate_to"] == 0 or e["truncate_to"] - 1 in end))
                continue
            before = c.file_bytes(node, e["path"], e["positions"])
            changes = {p: before[p] ^ (1 << b) for p, b in zip(e["positions"], e["bits"]) if p in before}
            c.patch_file(node, e["path"], changes)
            after = c.file_bytes(node, e["path"], list(changes))
            e["bytes"] = {str(p): [f"{before[p]:02x}", f"{after.get(p, -1) & 0xff:02x}"] for p in changes}
            done.append(bool(changes) and all(after.get(p) == v for p, v in changes.items()))
    down = {n: not c.running(n) for n in f.targets} if f.details.get("crash") else {}
    prove(f, {"files_changed": sum(done), "files": len(done), **({"down": down} if down else {})},
          bool(done) and all(done) and all(down.values()))


def _members_of(ctx: Ctx, f: Fault) -> str | None:
    """What a membership step changes: the metadata quorum's voters (``*_controller``,
    KIP-853), else the run's queue / topic."""
    return QUORUM if f.fault.endswith("_controller") else ctx.subject


def plan_member(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """An operator's membership change (issue 39), not a fault: the run's queue / topic
    (``subject``), or the controllers, lose (``remove_*``) or gain (``add_*``) the targets'
    members, as the broker's own tool does it; instant, the members before and after as
    evidence."""
    if not _members_of(ctx, f):
        raise TargetError(f"{f.fault} needs the run's queue or topic")
    f.targets = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    f.details["members_before"] = ctx.cluster.members(_members_of(ctx, f))
    f.instant = True


def _change_members(ctx: Ctx, f: Fault, params: dict) -> None:
    add, subject = f.fault.startswith("add_"), _members_of(ctx, f)
    def ask(node: str) -> None:
        if f.details.get("refused"):  # asked before: a timed-out request may have gone through
            now = _members_now(ctx, subject)
            if isinstance(now, list) and (node in now) == add:
                return
        ctx.cluster.change_member("add" if add else "remove", node, subject)

    for node in f.targets:
        try:
            _asked_again(ctx, f, lambda n=node: ask(n), float(params.get("retry_s", 0)))
        except Exception:
            # whether the broker made the change anyway (a timed-out request may have): evidence
            f.details["members_after_refusal"] = _members_now(ctx, subject)
            raise
    after, changed = _shown(lambda: ctx.cluster.members(subject),
                            lambda members: all((n in members) == add for n in f.targets),
                            float(params.get("timeout", 30)), f"the members of {subject} to change", 0.5)
    prove(f, {"members_after": list(after or [])}, changed)


def _members_now(ctx: Ctx, subject: str) -> list[str] | str:
    try:
        return list(ctx.cluster.members(subject))
    except Exception as e:  # noqa: BLE001 - no answer is itself what the record shows
        return f"no answer: {type(e).__name__}: {e}"[:200]


def plan_upgrade(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A rolling upgrade (issue 39), an operator's change: each target in turn stopped
    gracefully, started on ``params.version``'s image with its data kept, and waited for
    until it has rejoined; the version each node reports before and after is the evidence."""
    version = params.get("version")
    reason = ctx.cluster.upgrade_reason(str(version)) if version else "upgrade needs params.version"
    if reason:
        raise TargetError(reason)
    f.targets = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    f.details.update({"version": str(version), "reported_before": {n: _reported(ctx, n) for n in f.targets}})
    f.instant = True


def _reported(ctx: Ctx, node: str) -> str | None:
    try:
        return ctx.cluster.node_version(node)
    except Exception as e:  # noqa: BLE001 - a node that does not answer has no version to show
        return f"no answer: {type(e).__name__}: {e}"[:200]


def _upgrade(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    step = {"node": node, "stop": ctx.now()}
    ctx.cluster.stop(node, timeout=float(params.get("timeout", 60)))
    step["swap"] = ctx.now()
    f.details.setdefault("sequence", []).append(step)
    ctx.cluster.upgrade_node(node, f.details["version"])
    ctx.cluster.wait_rejoined(node, float(params.get("rejoin_timeout", 180)))
    step["rejoined"] = ctx.now()
    step["reports"] = _reported(ctx, node)


def _upgraded(ctx: Ctx, f: Fault) -> None:
    reports = {s["node"]: s.get("reports") for s in f.details.get("sequence") or []}
    prove(f, {"reported_after": reports},
          set(reports) == set(f.targets) and all(same_release(v, f.details["version"]) for v in reports.values()))


def plan_sync(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """An operator's synchronisation command on the run's queue (seed 001: ``sync_queue``,
    which blocks the queue until its mirrors have every message, and ``cancel_sync_queue``):
    no node targets, instant (the synchronisation goes on after the step), where the replicas
    stood before and after as evidence."""
    if not ctx.subject:
        raise TargetError(f"{f.fault} needs the run's queue")
    f.targets = []
    f.details["before"] = ctx.cluster.sync_state(ctx.subject)
    f.instant = True


def _sync(ctx: Ctx, f: Fault, params: dict) -> None:
    """Started: the queue reports a synchronisation under way, or none left to do."""
    cancel = f.fault == "cancel_sync"
    ctx.cluster.sync_subject("cancel" if cancel else "sync", ctx.subject)
    # a cancel leaves a mirror unsynchronised and nothing syncing; a sync is under way or done
    after, took = _shown(lambda: ctx.cluster.sync_state(ctx.subject),
                         lambda st: (not st["syncing"] and bool(st["unsynchronised"])) if cancel else
                         (st["syncing"] or not st["unsynchronised"]),
                         float(params.get("timeout", 10)), f"{f.fault} on {ctx.subject} to show", 0.2)
    before = f.details["before"]
    # nothing to synchronise (or nothing under way to cancel) before the step: no effect to test
    prove(f, {"after": after}, took and (bool(before["unsynchronised"]) if not cancel else True))


def plan_place(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """An operator's move of the run's queue's replicas (seed 000's policy "trick", seed
    001's "nodes" policy): ``move_replicas`` onto the targets, ``restore_replicas`` lifting
    it (no targets); instant (the broker moves the master in its own time: what the row
    measures), where the replicas stood before as evidence."""
    if not ctx.subject:
        raise TargetError(f"{f.fault} needs the run's queue")
    f.targets = _real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault) \
        if f.fault == "move_replicas" else []
    f.details["before"] = ctx.cluster.placement(ctx.subject)
    f.instant = True


def _place(ctx: Ctx, f: Fault, params: dict) -> None:
    """Taken: the broker reports the move in force on the queue (or lifted)."""
    move = f.fault == "move_replicas"
    ctx.cluster.place_subject(ctx.subject, list(f.targets) if move else None)
    after, took = _shown(lambda: ctx.cluster.placement(ctx.subject), lambda st: st["placed"] == move,
                         float(params.get("timeout", 15)), f"{f.fault} on {ctx.subject} to show", 0.5)
    # lifting a move that was never in force changes nothing
    prove(f, {"after": after}, took and (move or f.details["before"]["placed"]))


def plan_features(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """The cluster's feature level raised (Kafka: metadata.version; RabbitMQ: every feature
    flag enabled), as the broker's own tool does it: an operator's change of the whole
    cluster (no targets), the features before and after as evidence."""
    f.targets = []
    f.details["features_before"] = ctx.cluster.features()
    f.instant = True


def _finalize(ctx: Ctx, f: Fault, params: dict) -> None:
    want = _asked_again(ctx, f, lambda: ctx.cluster.finalize_features(params), float(params.get("retry_s", 0)))
    after, reached = _shown(ctx.cluster.features,
                            lambda seen: all(str(seen.get(k, "")).startswith(v) for k, v in want.items()),
                            float(params.get("timeout", 60)), "the feature level to be raised", 1.0)
    after = dict(after or {})
    changed = {k: [f.details["features_before"].get(k), v] for k, v in after.items()
               if f.details["features_before"].get(k) != v}
    # a level already there changes nothing: the run would not test the change it names
    prove(f, {"wanted": want, "features_after": after, "changed": changed}, reached and bool(changed))


def plan_migrate(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A phase of the cluster's metadata migration (issue 39: Kafka's ZooKeeper to KRaft,
    KIP-866), an operator's change of the whole cluster (no targets): ``params.phase``, where
    the migration stood before as evidence."""
    if not params.get("phase"):
        raise TargetError("migrate_to_kraft needs params.phase")
    f.targets = []
    f.details.update({"phase": str(params["phase"]), "before": ctx.cluster.migration_state()})
    f.instant = True


def _migrate(ctx: Ctx, f: Fault, params: dict) -> None:
    """Done: the nodes show the phase reached (the cluster judges its own state)."""
    phase = f.details["phase"]
    ctx.cluster.migrate(phase, params, ctx.now, f.details.setdefault("sequence", []))
    after, reached = _shown(ctx.cluster.migration_state, lambda st: ctx.cluster.migration_reached(phase, st),
                            float(params.get("timeout", 120)), f"the migration's {phase} phase to show", 2.0)
    prove(f, {"after": after}, reached)


def plan_move(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """The producers redeployed against the target nodes (issue 39: a blue-green switch, the
    documented path from mirrored to quorum queues): an operator's change to the clients,
    not the cluster; instant, where each producer published before as evidence."""
    if ctx.producers is None:
        raise TargetError(f"{f.fault}: the run has no producers to move")
    fixed = [w.name for w in ctx.producers() if not isinstance(w, Movable)]
    if fixed:
        raise TargetError(f"{f.fault}: this broker's producers cannot be moved ({', '.join(fixed)})")
    f.targets = resolve(ctx.cluster, spec, ctx.rng, ctx.subject)
    f.details["before"] = {w.name: w.serving_on() for w in ctx.producers()}
    f.instant = True


def _move_producers(ctx: Ctx, f: Fault, params: dict) -> None:
    """Done: every producer publishes through a target node (each first lets its window's
    confirms come, up to its confirm timeout)."""
    workers = ctx.producers() if ctx.producers else []
    for w in workers:
        w.move_to(list(f.targets))
    after, moved = _shown(lambda: {w.name: w.serving_on() for w in workers},
                          lambda on: all(n in f.targets for n in on.values()),
                          float(params.get("timeout", 60)), f"the producers to publish through {f.targets}", 0.2)
    prove(f, {"after": after, "moves": {w.name: w.moves[-1] for w in workers}}, bool(workers) and moved)


def _asked_again(ctx: Ctx, f: Fault, ask: Callable[[], Any], retry_s: float, pause_s: float = 5.0) -> Any:
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


# ---- executing: each acts, then records the evidence that it took effect ---------------------
def execute(ctx: Ctx, f: Fault, params: dict) -> None:
    FAULT_TYPES[f.fault].execute(ctx, f, params)


def _cut(ctx: Ctx, f: Fault, params: dict) -> None:
    # its evidence (packets dropped) is read when the rules are lifted: count_dropped
    if f.undo.get("rules"):
        net.apply_rules(ctx.cluster, f.undo["rules"])


def _limit(ctx: Ctx, f: Fault, params: dict) -> None:
    for node, spec in (f.undo.get("tbf") or {}).items():
        ctx.cluster.exec(node, ["tc", "qdisc", "replace", *spec], timeout=30)
    if f.undo.get("tbf"):
        prove(f, {"qdisc": sorted(f.undo["tbf"])}, True)  # tc refused otherwise


NodeAction = Callable[[Ctx, str, dict, Fault], None]
Evidence = Callable[[Ctx, Fault], None]


def _each(action: NodeAction, evidence: Evidence) -> Callable[[Ctx, Fault, dict], None]:
    """A fault that acts on its targets one after the other, in order, then shows its effect."""
    def run(ctx: Ctx, f: Fault, params: dict) -> None:
        for node in f.targets:
            action(ctx, node, params, f)
        evidence(ctx, f)
    return run


def _restart(ctx: Ctx, node: str, params: dict) -> dict:
    step = {"node": node, "stop": ctx.now()}
    ctx.cluster.stop(node, timeout=float(params.get("timeout", 60)))
    step["start"] = ctx.now()
    ctx.cluster.start(node)
    if params.get("wait", True):
        ctx.cluster.wait_rejoined(node, float(params.get("rejoin_timeout", 180)))
        step["rejoined"] = ctx.now()
    return step


def _wipe(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    start = bool(params.get("start", True))
    # what else the params say (RabbitMQ: forget) is the broker's to read
    options = {k: v for k, v in params.items() if k not in ("start", "wait", "rejoin_timeout")}
    ctx.cluster.wipe(node, start=start, **options)
    if start and params.get("wait", False):
        ctx.cluster.wait_rejoined(node, float(params.get("rejoin_timeout", 180)))


def _rolling(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    f.details.setdefault("sequence", []).append(_restart(ctx, node, params))


def _kill(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    ctx.cluster.kill(node)


def _stop(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    ctx.cluster.stop(node, timeout=float(params.get("timeout", 60)))


def _pause(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    ctx.cluster.pause(node)


def _restart_app(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    ctx.cluster.restart_app(node)


def _power_loss(ctx: Ctx, f: Fault, params: dict) -> None:
    # every target at the same instant (all replicas of a partition losing power together is
    # the point), so not node by node
    f.details["dropped"] = ctx.cluster.power_off(f.targets)
    c = ctx.cluster
    down = {n: not c.running(n) and not c.paused(n) for n in f.targets}
    dropped = f.details.get("dropped") or {}
    prove(f, {"down": down, "unsynced_bytes_dropped": {n: (dropped.get(n) or {}).get("unsynced_bytes")
                                                       for n in f.targets},
              "writes_seen": {n: (dropped.get(n) or {}).get("writes_seen") for n in f.targets}},
          all(down.values()) and set(dropped) == set(f.targets))


# ---- evidence: what shows that a fault took effect -----------------------------------------
def _shown(look: Callable[[], Any], holds: Callable[[Any], bool], timeout: float, what: str,
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


def _down(ctx: Ctx, f: Fault) -> None:
    """The containers' state right after the action: not running (and not frozen)."""
    down = {n: not ctx.cluster.running(n) and not ctx.cluster.paused(n) for n in f.targets}
    prove(f, {"down": down}, all(down.values()))


def _frozen(ctx: Ctx, f: Fault) -> None:
    frozen = {n: ctx.cluster.paused(n) for n in f.targets}
    prove(f, {"frozen": frozen}, all(frozen.values()))


def _restarted(ctx: Ctx, f: Fault) -> None:
    seq = f.details.get("sequence") or []
    prove(f, {"restarted": [s["node"] for s in seq if "start" in s]}, len(seq) == len(f.targets))


def _done(ctx: Ctx, f: Fault) -> None:
    prove(f, {"done": list(f.targets)}, True)  # the action raised otherwise


def _wiped(ctx: Ctx, f: Fault) -> None:
    # a wipe left stopped can show it; one that restarted the node only that it was done
    (_down if FAULT_TYPES[f.fault].undo_key in f.undo else _done)(ctx, f)


def undo(cluster: Cluster, f: Fault, keys: tuple[str, ...] = UNDO_ORDER) -> None:
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
                # a container removed since (a later run's cluster replaced it) has nothing to lift
                if cluster.exists(n):
                    (cluster.unpause if key == "unpause" else cluster.start)(n)
            f.undo[key] = [n for n in pending if n not in todo]


# ---- the registry ----------------------------------------------------------------------------
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


def _registry(*types: FaultType) -> dict[str, FaultType]:
    names = [t.name for t in types]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # one definition per fault name
        raise ValueError(f"fault types defined twice: {twice}")
    return {t.name: t for t in types}


LOSS = "loss"
# In the order the schedule's errors list them.
FAULT_TYPES: dict[str, FaultType] = _registry(
    FaultType("partition", plan_partition, _cut, "rules", default_targets="random_halves", cut=True,
              by_port=True, drawn={"targets": "random_halves"}, does="cuts links"),
    FaultType(LOSS, plan_partition, _cut, "rules", default_targets="random_halves", cut=True,
              does="drops a share of the packets on links"),
    FaultType("bandwidth", plan_bandwidth, _limit, "tbf", does="limits the nodes' egress"),
    FaultType("kill", plan_nodes, _each(_kill, _down), "start",
              needs=frozenset({KILL, START}), crashes=True, downs=True, drawn={"targets": "random:1"},
              does="kills the nodes"),
    FaultType("stop", plan_nodes, _each(_stop, _down), "start", needs=frozenset({STOP, START}), downs=True,
              drawn={"targets": "random:1"}, does="stops the nodes"),
    FaultType("pause", plan_nodes, _each(_pause, _frozen), "unpause",
              needs=frozenset({PAUSE}), downs=True, drawn={"targets": "random:1"}, does="freezes the nodes"),
    FaultType("wipe", plan_wipe, _each(_wipe, _wiped), "start", needs=frozenset({WIPE, START}),
              does="wipes the nodes' data"),
    FaultType("power_loss", plan_nodes, _power_loss, "start", needs=frozenset({POWER_LOSS, START}), fs="lazy",
              crashes=True, downs=True, drawn={"targets": "random:1"}, does="cuts the power"),
    FaultType("corrupt", plan_corrupt, _corrupt, "start", needs=frozenset({CORRUPT}),
              drawn={"targets": "random:1", "params": {"mode": "bitflip", "bytes": 16, "tail": 65536, "crash": True}},
              does="bit-flips or truncates the nodes' newest data files"),
    FaultType("remove_member", plan_member, _change_members, needs=frozenset({MEMBERSHIP}),
              operation=True,
              does="removes the nodes' members of the run's queue (an operator's change)"),
    FaultType("add_member", plan_member, _change_members, needs=frozenset({MEMBERSHIP}),
              operation=True,
              does="adds members of the run's queue on the nodes (an operator's change)"),
    FaultType("remove_controller", plan_member, _change_members, needs=frozenset({QUORUM_MEMBERSHIP}),
              operation=True, does="removes the nodes from the metadata quorum's voters (KIP-853, an operator's change)"),
    FaultType("add_controller", plan_member, _change_members, needs=frozenset({QUORUM_MEMBERSHIP}),
              operation=True, does="adds the nodes to the metadata quorum's voters (KIP-853, an operator's change)"),
    FaultType("upgrade", plan_upgrade, _each(_upgrade, _upgraded), default_targets="brokers",
              needs=frozenset({STOP, START, UPGRADE}), operation=True,
              does="moves the nodes, one by one, to another version's image, their data kept (an operator's change)"),
    FaultType("sync_queue", plan_sync, _sync, default_targets="all", needs=frozenset({SYNC}), operation=True,
              does="starts synchronising the run's queue's mirrors (the operator's sync command)"),
    FaultType("cancel_sync", plan_sync, _sync, default_targets="all", needs=frozenset({SYNC}), operation=True,
              does="cancels a synchronisation under way (the operator's cancel command)"),
    FaultType("move_replicas", plan_place, _place, default_targets="random:1", needs=frozenset({PLACEMENT}),
              operation=True, does="moves the run's queue's replicas onto the nodes (an operator's change)"),
    FaultType("restore_replicas", plan_place, _place, default_targets="all", needs=frozenset({PLACEMENT}),
              operation=True, does="lifts a move of the run's queue's replicas (an operator's change)"),
    FaultType("finalize", plan_features, _finalize, default_targets="all", needs=frozenset({FEATURES}), operation=True,
              does="raises the cluster's feature level: metadata.version, feature flags (an operator's change)"),
    FaultType("migrate_to_kraft", plan_migrate, _migrate, default_targets="all", needs=frozenset({MIGRATION}),
              operation=True, does="moves the cluster's metadata to KRaft, one documented phase (an operator's change)"),
    FaultType("move_producers", plan_move, _move_producers, operation=True,
              does="redeploys the producers against the nodes (an operator's change to the clients: a blue-green switch)"),
    FaultType("start", closes="start", default_targets="all", needs=frozenset({START}), does="starts nodes"),
    FaultType("unpause", closes="unpause", default_targets="all", needs=frozenset({PAUSE}), does="thaws nodes"),
    FaultType("restart", plan_nodes, _each(_rolling, _restarted), needs=frozenset({STOP, START}),
              slow=True, does="restarts the nodes"),
    FaultType("restart_app", plan_nodes, _each(_restart_app, _done),
              needs=frozenset({RESTART_APP}), does="restarts the broker application"),
    FaultType("rolling_restart", plan_nodes, _each(_rolling, _restarted), default_targets="brokers",
              needs=frozenset({STOP, START}), slow=True, does="restarts the nodes one by one"),
    FaultType("heal", closes=ALL, does="lifts every fault"),
)

# ---- the tables derived from it --------------------------------------------------------------
FAULTS = tuple(FAULT_TYPES)  # every name a schedule step may use
# steps that end earlier faults rather than start one (faults are numbered f1, f2, ... without them)
CLOSING = tuple(n for n, t in FAULT_TYPES.items() if t.closes)
CUTS = tuple(n for n, t in FAULT_TYPES.items() if t.cut)
BY_PORT = tuple(n for n, t in FAULT_TYPES.items() if t.by_port)
CRASHES = tuple(n for n, t in FAULT_TYPES.items() if t.crashes)
DOWNS = tuple(n for n, t in FAULT_TYPES.items() if t.downs)
DRAWN = {n: t.drawn for n, t in FAULT_TYPES.items() if t.drawn}
OPERATIONS = tuple(n for n, t in FAULT_TYPES.items() if t.operation)
# the step that lifts a fault by its undo key (kill -> start, pause -> unpause)
LIFTED_BY = {t.closes: n for n, t in FAULT_TYPES.items() if t.closes and t.closes != ALL}


def missing_capabilities(fault: str, capabilities: frozenset[str]) -> list[str]:
    """What the fault asks of the broker's nodes that they cannot do (refused at load time)."""
    return sorted((FAULT_TYPES[fault].needs if fault in FAULT_TYPES else frozenset()) - capabilities)


def targets_problems(fault: str, targets: Any, nodes: list[str], roles: dict,
                     absent: dict[str, str] | None = None) -> list[str]:
    """What is wrong with a step's ``targets``: a partition spec for a cut, else nodes."""
    if targets is None:
        return []
    check = spec_problems if fault in CUTS else nodes_problems
    return check(targets, nodes, roles, absent)
