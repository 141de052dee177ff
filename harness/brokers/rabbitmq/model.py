"""What a RabbitMQ scenario may say: its queue, its workload options, its probes."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from harness.brokers.rabbitmq.cluster import RabbitConfig
from harness.probes import spread_names
from harness.spec import BaseScenario, BaseWorkload, Strict

# Measurements this plug-in's observation gives (a scenario's `expect:` may name them).
MEASUREMENTS = {"paused_nodes", "paused_count", "partition_detected", "autoheal_losers", "autoheal_loser_count",
                "masters_seen", "master_changes", "new_master_elected", "unsynchronised_s",
                "deliveries_by_node", "follower_delivery_fraction", "masterless_s"}


class QueueSpec(Strict):
    name: str = "mqchaos"
    type: Literal["classic", "mirrored", "quorum"] = "quorum"
    # Policy definition for mirrored queues: ha-mode, ha-params, ha-sync-mode,
    # ha-promote-on-failure, ha-promote-on-shutdown, ...
    policy: dict[str, Any] = Field(default_factory=dict)
    arguments: dict[str, Any] = Field(default_factory=dict)
    declare_on: str | None = None  # node whose connection declares it (classic master's home)

    @model_validator(mode="after")
    def _policy_fits(self):
        if self.policy and self.type != "mirrored":
            raise ValueError("policy applies to mirrored queues only (type: mirrored)")
        if self.type == "mirrored" and "ha-mode" not in self.policy:
            raise ValueError("a mirrored queue needs policy.ha-mode")
        return self


class RabbitWorkload(BaseWorkload):
    window: int = Field(100, ge=1)
    confirm_timeout: float = Field(10, gt=0)
    prefetch: int = Field(50, ge=0)
    auto_ack: bool = False
    single_active_consumer: bool = False
    cancel_on_failover: bool = True
    persistent: bool = Field(True, description="delivery_mode 2; false: lost on restart (seed 000)")
    consumer_delay: float = Field(0, ge=0, le=1, description="seconds of work per delivery")
    # Where consumers connect first: a node name, or "followers" / "leader" of the quorum queue
    # (resolved when the run starts; Q5 attaches the consumer to a follower's node).
    consumer_nodes: str | None = None

    def outcome_timeout(self) -> float:
        return self.confirm_timeout

    def timeouts(self) -> dict[str, float]:
        return {"confirm_timeout_s": self.confirm_timeout}


class MastersProbe(Strict):
    """R12: N extra mirrored queues; where their masters sit before, after the faults, and
    after `rabbitmq-queues rebalance` if asked."""
    queues: int = Field(9, ge=1, le=100)
    policy: dict[str, Any] = Field(default_factory=lambda: {"ha-mode": "all", "ha-sync-mode": "automatic"})
    locator: Literal["min-masters", "client-local", "random"] = "min-masters"
    rebalance: bool = True


class ThroughputProbe(Strict):
    """R13: confirm-publish throughput into queues with different mirror policies, one after
    the other, in this run."""
    policies: dict[str, dict[str, Any]] = Field(min_length=1)
    seconds: float = Field(10, gt=0, le=120)
    publishers: int = Field(1, ge=1, le=8)
    window: int = Field(200, ge=1)
    message_size: int = Field(0, ge=0)
    baseline: str | None = None  # the policy the ratios are taken against (default: the first)

    def base(self) -> str:
        return self.baseline or next(iter(self.policies))


class RabbitProbes(Strict):
    masters: MastersProbe | None = None
    throughput: ThroughputProbe | None = None


class RabbitScenario(BaseScenario):
    target_key = "queue"
    live_consumers = True

    broker: Literal["rabbitmq"]
    cluster: RabbitConfig = Field(default_factory=RabbitConfig)
    queue: QueueSpec = Field(default_factory=QueueSpec)
    workload: RabbitWorkload = Field(default_factory=RabbitWorkload)
    probes: RabbitProbes = Field(default_factory=RabbitProbes)

    def subject(self) -> str:
        return self.queue.name

    def measurement_names(self) -> set[str]:
        names = set(MEASUREMENTS)
        if self.probes.masters is not None:
            names |= spread_names("masters", ("before", "after", "after_rebalance")) | {"masters_on_one_node"}
        if (t := self.probes.throughput) is not None:
            names |= {f"throughput.{k}" for k in t.policies}
            names |= {f"throughput_ratio.{k}_vs_{t.base()}" for k in t.policies if k != t.base()}
        return names
