"""Restart-app: the broker application restarted inside its running node (capability
``restart_app``: rabbitmqctl stop_app / start_app)."""
from __future__ import annotations

from harness.brokers.capabilities import RESTART_APP, RestartApp, ability
from nemesis.kinds import Ctx, Fault, FaultType, done, each, plan_nodes


def _restart_app(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    ability(ctx.cluster, RestartApp).restart_app(node)


TYPES = (
    FaultType("restart_app", plan_nodes, each(_restart_app, done),
              needs=frozenset({RESTART_APP}), does="restarts the broker application"),
)
