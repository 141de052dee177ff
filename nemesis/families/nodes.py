"""Node control: kill, stop, pause, wipe, restarts, and the steps that lift them (start,
unpause, heal): what every cluster can do."""
from __future__ import annotations

from typing import Any

from harness.brokers.capabilities import KILL, PAUSE, START, STOP, WIPE
from nemesis.kinds import (ALL, REGISTRY, Ctx, Fault, FaultType, done, down, each, frozen, plan_nodes, plan_on_nodes,
                           restarted)


def plan_wipe(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A wipe restarts the node by itself (instant), unless ``start: false`` leaves it
    stopped: then, like a kill, a later start lifts it."""
    plan_on_nodes(ctx, f, spec, params, None if params.get("start", True) else REGISTRY[f.fault].undo_key)


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


def _wiped(ctx: Ctx, f: Fault) -> None:
    # a wipe left stopped can show it; one that restarted the node only that it was done
    (down if REGISTRY[f.fault].undo_key in f.undo else done)(ctx, f)


TYPES = (
    FaultType("kill", plan_nodes, each(_kill, down), "start",
              needs=frozenset({KILL, START}), crashes=True, downs=True, drawn={"targets": "random:1"},
              does="kills the nodes"),
    FaultType("stop", plan_nodes, each(_stop, down), "start", needs=frozenset({STOP, START}), downs=True,
              drawn={"targets": "random:1"}, does="stops the nodes"),
    FaultType("pause", plan_nodes, each(_pause, frozen), "unpause",
              needs=frozenset({PAUSE}), downs=True, drawn={"targets": "random:1"}, does="freezes the nodes"),
    FaultType("wipe", plan_wipe, each(_wipe, _wiped), "start", needs=frozenset({WIPE, START}),
              does="wipes the nodes' data"),
    FaultType("start", closes="start", default_targets="all", needs=frozenset({START}), does="starts nodes"),
    FaultType("unpause", closes="unpause", default_targets="all", needs=frozenset({PAUSE}), does="thaws nodes"),
    FaultType("restart", plan_nodes, each(_rolling, restarted), needs=frozenset({STOP, START}),
              slow=True, does="restarts the nodes"),
    FaultType("rolling_restart", plan_nodes, each(_rolling, restarted), default_targets="brokers",
              needs=frozenset({STOP, START}), slow=True, does="restarts the nodes one by one"),
    FaultType("heal", closes=ALL, does="lifts every fault"),
)
