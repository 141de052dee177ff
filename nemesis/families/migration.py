"""A metadata migration (issue 39: Kafka's ZooKeeper to KRaft, KIP-866), phase by phase
(capability ``migration``)."""
from __future__ import annotations

from typing import Any

from harness.brokers.capabilities import MIGRATION, Migration, ability
from nemesis.kinds import Ctx, Fault, FaultType, prove, shown
from nemesis.targets import TargetError


def plan_migrate(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A phase of the cluster's metadata migration (issue 39: Kafka's ZooKeeper to KRaft,
    KIP-866), an operator's change of the whole cluster (no targets): ``params.phase``, where
    the migration stood before as evidence."""
    if not params.get("phase"):
        raise TargetError("migrate_to_kraft needs params.phase")
    f.targets = []
    f.details.update({"phase": str(params["phase"]), "before": ability(ctx.cluster, Migration).migration_state()})
    f.instant = True


def _migrate(ctx: Ctx, f: Fault, params: dict) -> None:
    """Done: the nodes show the phase reached (the cluster judges its own state)."""
    phase, migration = f.details["phase"], ability(ctx.cluster, Migration)
    ability(ctx.cluster, Migration).migrate(phase, params, ctx.now, f.details.setdefault("sequence", []))
    after, reached = shown(migration.migration_state, lambda st: migration.migration_reached(phase, st),
                            float(params.get("timeout", 120)), f"the migration's {phase} phase to show", 2.0)
    prove(f, {"after": after}, reached)


TYPES = (
    FaultType("migrate_to_kraft", plan_migrate, _migrate, default_targets="all", needs=frozenset({MIGRATION}),
              operation=True, does="moves the cluster's metadata to KRaft, one documented phase (an operator's change)"),
)
