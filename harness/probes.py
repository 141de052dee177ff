"""What the probes of several brokers share: how leadership is spread over nodes.

A probe is a measurement some catalogue rows need beyond the checker's (a scenario's
``probes:``); each broker plug-in has its own (RabbitMQ: queue masters, throughput by
mirror policy; Kafka: partition leaders). Each has three hooks the run loop calls
(setup, before_faults, after_heal) and leaves its figures in ``measurements``, which the
prediction may name.
"""
from __future__ import annotations

from typing import Any, Iterable


def spread(counts: dict[str, int], nodes: list[str]) -> dict[str, int]:
    return {n: int(counts.get(n, 0)) for n in nodes}


def balanced(counts: dict[str, int]) -> bool:
    """No node leads more than one more than any other."""
    v = list(counts.values())
    return bool(v) and max(v) - min(v) <= 1


def hosts(counts: dict[str, int]) -> int:
    return sum(1 for c in counts.values() if c)


def spread_measures(prefix: str, stage: str, counts: dict[str, int]) -> dict[str, Any]:
    return {f"{prefix}_{stage}": counts, f"{prefix}_nodes_{stage}": hosts(counts),
            f"{prefix}_balanced_{stage}": balanced(counts),
            f"{prefix}_on_one_node_{stage}": hosts(counts) == 1}


def spread_names(prefix: str, stages: Iterable[str]) -> set[str]:
    return {k for st in stages for k in spread_measures(prefix, st, {})}


class Probes:
    """The hooks, doing nothing; a plug-in's probes override what they need."""

    def __init__(self, ctx: Any):
        """``ctx``: the run's harness.context.RunContext."""
        self.ctx, self.sc, self.cluster = ctx, ctx.sc, ctx.cluster
        self.measurements: dict[str, Any] = {}

    def setup(self) -> None:
        """After the declare, before the load."""

    def before_faults(self) -> None:
        """After the warm-up, just before the first fault."""

    def after_heal(self) -> None:
        """After the heal, before the recovery load."""
