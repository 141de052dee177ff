"""Synchronisation (issue 37, seed 001): the operator's sync_queue and cancel_sync on the
run's queue (capability ``sync``)."""
from __future__ import annotations

from typing import Any

from harness.brokers.capabilities import SYNC, Sync, ability
from nemesis.kinds import Ctx, Fault, FaultType, prove, shown
from nemesis.targets import TargetError


def plan_sync(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """An operator's synchronisation command on the run's queue (seed 001: ``sync_queue``,
    which blocks the queue until its mirrors have every message, and ``cancel_sync_queue``):
    no node targets, instant (the synchronisation goes on after the step), where the replicas
    stood before and after as evidence."""
    if not ctx.subject:
        raise TargetError(f"{f.fault} needs the run's queue")
    f.targets = []
    f.details["before"] = ability(ctx.cluster, Sync).sync_state(ctx.subject)
    f.instant = True


def _sync(ctx: Ctx, f: Fault, params: dict) -> None:
    """Started: the queue reports a synchronisation under way, or none left to do."""
    cancel = f.fault == "cancel_sync"
    ability(ctx.cluster, Sync).sync_subject("cancel" if cancel else "sync", ctx.subject)
    # a cancel leaves a mirror unsynchronised and nothing syncing; a sync is under way or done
    after, took = shown(lambda: ability(ctx.cluster, Sync).sync_state(ctx.subject),
                         lambda st: (not st["syncing"] and bool(st["unsynchronised"])) if cancel else
                         (st["syncing"] or not st["unsynchronised"]),
                         float(params.get("timeout", 10)), f"{f.fault} on {ctx.subject} to show", 0.2)
    before = f.details["before"]
    # nothing to synchronise (or nothing under way to cancel) before the step: no effect to test
    prove(f, {"after": after}, took and (bool(before["unsynchronised"]) if not cancel else True))


TYPES = (
    FaultType("sync_queue", plan_sync, _sync, default_targets="all", needs=frozenset({SYNC}), operation=True,
              does="starts synchronising the run's queue's mirrors (the operator's sync command)"),
    FaultType("cancel_sync", plan_sync, _sync, default_targets="all", needs=frozenset({SYNC}), operation=True,
              does="cancels a synchronisation under way (the operator's cancel command)"),
)
