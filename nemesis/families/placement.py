"""Placement (seeds 000, 001): the operator moves the run's queue's replicas onto chosen
nodes, and lifts the move (capability ``placement``)."""
from __future__ import annotations

from typing import Any

from harness.brokers.capabilities import PLACEMENT, Placement, ability
from nemesis.kinds import Ctx, Fault, FaultType, prove, real, shown
from nemesis.targets import TargetError, resolve


def plan_place(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """An operator's move of the run's queue's replicas (seed 000's policy "trick", seed
    001's "nodes" policy): ``move_replicas`` onto the targets, ``restore_replicas`` lifting
    it (no targets); instant (the broker moves the master in its own time: what the row
    measures), where the replicas stood before as evidence."""
    if not ctx.subject:
        raise TargetError(f"{f.fault} needs the run's queue")
    f.targets = real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault) \
        if f.fault == "move_replicas" else []
    f.details["before"] = ability(ctx.cluster, Placement).placement(ctx.subject)
    f.instant = True


def _place(ctx: Ctx, f: Fault, params: dict) -> None:
    """Taken: the broker reports the move in force on the queue (or lifted)."""
    move = f.fault == "move_replicas"
    ability(ctx.cluster, Placement).place_subject(ctx.subject, list(f.targets) if move else None)
    after, took = shown(lambda: ability(ctx.cluster, Placement).placement(ctx.subject), lambda st: st["placed"] == move,
                         float(params.get("timeout", 15)), f"{f.fault} on {ctx.subject} to show", 0.5)
    # lifting a move that was never in force changes nothing
    prove(f, {"after": after}, took and (move or f.details["before"]["placed"]))


TYPES = (
    FaultType("move_replicas", plan_place, _place, default_targets="random:1", needs=frozenset({PLACEMENT}),
              operation=True, does="moves the run's queue's replicas onto the nodes (an operator's change)"),
    FaultType("restore_replicas", plan_place, _place, default_targets="all", needs=frozenset({PLACEMENT}),
              operation=True, does="lifts a move of the run's queue's replicas (an operator's change)"),
)
