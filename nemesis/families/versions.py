"""Versions (issue 39): a rolling upgrade, each node moved to another version's image with
its data kept (capability ``upgrade``), and the feature level raised after it (``features``)."""
from __future__ import annotations

from typing import Any

from harness.brokers.capabilities import FEATURES, START, STOP, UPGRADE, Features, Versions, ability
from harness.util import same_release
from nemesis.kinds import Ctx, Fault, FaultType, asked_again, each, prove, real, shown
from nemesis.targets import TargetError, resolve


def plan_upgrade(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """A rolling upgrade (issue 39), an operator's change: each target in turn stopped
    gracefully, started on ``params.version``'s image with its data kept, and waited for
    until it has rejoined; the version each node reports before and after is the evidence."""
    version = params.get("version")
    reason = ability(ctx.cluster, Versions).upgrade_reason(str(version)) if version else "upgrade needs params.version"
    if reason:
        raise TargetError(reason)
    f.targets = real(ctx, resolve(ctx.cluster, spec, ctx.rng, ctx.subject), f.fault)
    f.details.update({"version": str(version), "reported_before": {n: _reported(ctx, n) for n in f.targets}})
    f.instant = True


def _reported(ctx: Ctx, node: str) -> str | None:
    try:
        return ability(ctx.cluster, Versions).node_version(node)
    except Exception as e:  # noqa: BLE001 - a node that does not answer has no version to show
        return f"no answer: {type(e).__name__}: {e}"[:200]


def _upgrade(ctx: Ctx, node: str, params: dict, f: Fault) -> None:
    step = {"node": node, "stop": ctx.now()}
    ctx.cluster.stop(node, timeout=float(params.get("timeout", 60)))
    step["swap"] = ctx.now()
    f.details.setdefault("sequence", []).append(step)
    ability(ctx.cluster, Versions).upgrade_node(node, f.details["version"])
    ctx.cluster.wait_rejoined(node, float(params.get("rejoin_timeout", 180)))
    step["rejoined"] = ctx.now()
    step["reports"] = _reported(ctx, node)


def _upgraded(ctx: Ctx, f: Fault) -> None:
    reports = {s["node"]: s.get("reports") for s in f.details.get("sequence") or []}
    prove(f, {"reported_after": reports},
          set(reports) == set(f.targets) and all(same_release(v, f.details["version"]) for v in reports.values()))


def plan_features(ctx: Ctx, f: Fault, spec: Any, params: dict) -> None:
    """The cluster's feature level raised (Kafka: metadata.version; RabbitMQ: every feature
    flag enabled), as the broker's own tool does it: an operator's change of the whole
    cluster (no targets), the features before and after as evidence."""
    f.targets = []
    f.details["features_before"] = ability(ctx.cluster, Features).features()
    f.instant = True


def _finalize(ctx: Ctx, f: Fault, params: dict) -> None:
    want = asked_again(ctx, f, lambda: ability(ctx.cluster, Features).finalize_features(params), float(params.get("retry_s", 0)))
    after, reached = shown(ability(ctx.cluster, Features).features,
                            lambda seen: all(str(seen.get(k, "")).startswith(v) for k, v in want.items()),
                            float(params.get("timeout", 60)), "the feature level to be raised", 1.0)
    after = dict(after or {})
    changed = {k: [f.details["features_before"].get(k), v] for k, v in after.items()
               if f.details["features_before"].get(k) != v}
    # a level already there changes nothing: the run would not test the change it names
    prove(f, {"wanted": want, "features_after": after, "changed": changed}, reached and bool(changed))


TYPES = (
    FaultType("upgrade", plan_upgrade, each(_upgrade, _upgraded), default_targets="brokers",
              needs=frozenset({STOP, START, UPGRADE}), operation=True,
              does="moves the nodes, one by one, to another version's image, their data kept (an operator's change)"),
    FaultType("finalize", plan_features, _finalize, default_targets="all", needs=frozenset({FEATURES}), operation=True,
              does="raises the cluster's feature level: metadata.version, feature flags (an operator's change)"),
)
