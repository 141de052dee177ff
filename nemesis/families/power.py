"""Power loss: the nodes forget what they never fsynced and die at once (capability
``power_loss``: the lazy file system)."""
from __future__ import annotations

from harness.brokers.capabilities import POWER_LOSS, START, PowerLoss, ability
from nemesis.kinds import Ctx, Fault, FaultType, plan_nodes, prove


def _power_loss(ctx: Ctx, f: Fault, params: dict) -> None:
    # every target at the same instant (all replicas of a partition losing power together is
    # the point), so not node by node
    f.details["dropped"] = ability(ctx.cluster, PowerLoss).power_off(f.targets)
    c = ctx.cluster
    down = {n: not c.running(n) and not c.paused(n) for n in f.targets}
    dropped = f.details.get("dropped") or {}
    prove(f, {"down": down, "unsynced_bytes_dropped": {n: (dropped.get(n) or {}).get("unsynced_bytes")
                                                       for n in f.targets},
              "writes_seen": {n: (dropped.get(n) or {}).get("writes_seen") for n in f.targets}},
          all(down.values()) and set(dropped) == set(f.targets))


TYPES = (
    FaultType("power_loss", plan_nodes, _power_loss, "start", needs=frozenset({POWER_LOSS, START}), fs="lazy",
              crashes=True, downs=True, drawn={"targets": "random:1"}, does="cuts the power"),
)
