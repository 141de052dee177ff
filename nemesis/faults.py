"""Faults: each is planned (targets resolved, rules computed: a ``Fault`` record that says
exactly what will be done and how to undo it) and then executed. The plan is saved in the
state file *before* any side effect, so a harness killed mid-fault leaves enough behind for
``mqchaos cluster heal`` to undo it.

``FAULT_TYPES`` is the one registry of fault kinds (Jepsen's nemesis/combined.clj packages:
a fault, what lifts it and what it needs travel as one value), assembled here from the
families under ``nemesis/families/`` (one module per family: network, node control, power,
storage, and each operator's operation, whose kinds need one capability protocol of
``harness.brokers.capabilities``), with the choreographies (``CHOREOGRAPHIES``). Every other
table of fault names derives from it: the names a schedule may use (``FAULTS``), the steps
that end faults rather than start one (``CLOSING``), the faults whose targets are a cut
(``CUTS``), a step's default targets, the capabilities a broker must have, the load-time
target checks.
"""
from __future__ import annotations

from typing import Any

from harness.brokers.protocol import Cluster
from nemesis import net
from nemesis.families import (app, choreography, clients, membership, migration, network, nodes, placement, power,
                              storage, sync, versions)
from nemesis.families.network import LOSS, count_dropped, port_numbers, ports_problems  # noqa: F401 (the API)
from nemesis.kinds import (ALL, CHOREOGRAPHIES, REGISTRY, UNDO_ORDER, Ctx, Fault, FaultType,  # noqa: F401 (the API)
                           plan_nodes, prove, register)
from nemesis.targets import nodes_problems, spec_problems

# The order the schedule's errors list them in, and ``mqchaos explore`` draws from.
ORDER = ("partition", LOSS, "bandwidth", "kill", "stop", "pause", "wipe", "power_loss", "corrupt",
         "remove_member", "add_member", "remove_controller", "add_controller", "upgrade", "sync_queue",
         "cancel_sync", "move_replicas", "restore_replicas", "finalize", "migrate_to_kraft", "move_producers",
         "start", "unpause", "restart", "restart_app", "rolling_restart", "heal")
FAMILIES = (network, nodes, power, storage, membership, versions, sync, placement, migration, clients, app)


def _assemble() -> None:
    kinds = {t.name: t for family in FAMILIES for t in family.TYPES}
    if set(kinds) != set(ORDER) or len(kinds) != sum(len(f.TYPES) for f in FAMILIES):
        raise ValueError(f"the families' fault kinds and ORDER differ: {sorted(set(kinds) ^ set(ORDER))}")
    register(tuple(kinds[n] for n in ORDER), choreography.CHOREOGRAPHIES)


_assemble()
FAULT_TYPES: dict[str, FaultType] = REGISTRY

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


def execute(ctx: Ctx, f: Fault, params: dict) -> None:
    FAULT_TYPES[f.fault].execute(ctx, f, params)


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

def missing_capabilities(fault: str, capabilities: frozenset[str]) -> list[str]:
    """What the fault asks of the broker's nodes that they cannot do (refused at load time)."""
    return sorted((REGISTRY[fault].needs if fault in REGISTRY else frozenset()) - capabilities)

def targets_problems(fault: str, targets: Any, nodes: list[str], roles: dict,
                     absent: dict[str, str] | None = None) -> list[str]:
    """What is wrong with a step's ``targets``: a partition spec for a cut, else nodes."""
    if targets is None:
        return []
    check = spec_problems if fault in CUTS else nodes_problems
    return check(targets, nodes, roles, absent)
