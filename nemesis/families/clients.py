"""Movable clients (issue 39): the producers redeployed against other nodes, a blue-green
switch (the workers' ``harness.clients.base.Movable``, not the cluster's)."""
from __future__ import annotations

from typing import Any

from harness.clients.base import Movable
from nemesis.kinds import Ctx, Fault, FaultType, prove, shown
from nemesis.targets import TargetError, resolve


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
    after, moved = shown(lambda: {w.name: w.serving_on() for w in workers},
                          lambda on: all(n in f.targets for n in on.values()),
                          float(params.get("timeout", 60)), f"the producers to publish through {f.targets}", 0.2)
    prove(f, {"after": after, "moves": {w.name: w.moves[-1] for w in workers}}, bool(workers) and moved)


TYPES = (
    FaultType("move_producers", plan_move, _move_producers, operation=True,
              does="redeploys the producers against the nodes (an operator's change to the clients: a blue-green switch)"),
)
