"""A scenario is data: YAML validated into typed objects at load time.

Unknown or mistyped fields are errors that name the field
(`workload.rate: Input should be greater than 0`), raised before anything runs.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from nemesis.schedule import parse as parse_schedule
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ScenarioError(ValueError):
    pass


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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


class TopicSpec(Strict):
    name: str = "mqchaos"
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(3, ge=1, le=3)
    config: dict[str, Any] = Field(default_factory=dict)


class Crash(Strict):
    at: float = Field(ge=0, description="seconds after the load starts")
    consumer: str = Field(pattern=r"^c[0-9]+$")


class Workload(Strict):
    producers: int = Field(2, ge=1, le=64)
    consumers: int = Field(2, ge=0, le=64)
    rate: float = Field(200, gt=0, description="messages per second per producer")
    max_messages: int = Field(1_000_000, ge=1, description="per producer: every load is bounded")
    message_size: int = Field(0, ge=0)
    # RabbitMQ
    window: int = Field(100, ge=1)
    confirm_timeout: float = Field(10, gt=0)
    prefetch: int = Field(50, ge=0)
    auto_ack: bool = False
    single_active_consumer: bool = False
    cancel_on_failover: bool = True
    consumer_delay: float = Field(0, ge=0, le=1, description="seconds of work per delivery")
    crashes: list[Crash] = Field(default_factory=list, description="consumer crashes mid-delivery")
    # Where consumers connect first: a node name, or "followers" / "leader" of the quorum queue
    # (resolved when the run starts; Q5 attaches the consumer to a follower's node).
    consumer_nodes: str | None = None
    # Messages published (with confirms, as fast as the window allows) before the load starts,
    # so the queue is large when the faults come (R6). They are in the history like any other.
    prefill: int = Field(0, ge=0, le=2_000_000)
    # Kafka
    acks: Literal["0", "1", "all", "-1"] = "all"
    idempotence: bool = False
    retries: int = Field(2147483647, ge=0)
    max_in_flight: int = Field(5, ge=1)
    delivery_timeout_ms: int = Field(10_000, ge=1)
    request_timeout_ms: int = Field(3_000, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _acks_as_text(cls, v):
        if isinstance(v, dict) and isinstance(v.get("acks"), int):
            v = dict(v, acks=str(v["acks"]))
        return v


class Probes(Strict):
    """Measurements beyond the checker's, each made by harness/probes.py."""
    # R12: N extra mirrored queues; where their masters sit before, after the faults, and
    # after `rabbitmq-queues rebalance` if asked.
    masters: "MastersProbe | None" = None
    # K11: partition leaders per broker before, after the faults, and after a
    # preferred-replica election (AdminClient elect_leaders) if asked.
    leaders: "LeadersProbe | None" = None
    # R13: confirm-publish throughput into queues with different mirror policies, one after
    # the other, in this run.
    throughput: "ThroughputProbe | None" = None


class MastersProbe(Strict):
    queues: int = Field(9, ge=1, le=100)
    policy: dict[str, Any] = Field(default_factory=lambda: {"ha-mode": "all", "ha-sync-mode": "automatic"})
    locator: Literal["min-masters", "client-local", "random"] = "min-masters"
    rebalance: bool = True


class LeadersProbe(Strict):
    elect_preferred: bool = True
    settle: float = Field(0, ge=0, le=600, description="seconds to let the controller rebalance by itself")


class ThroughputProbe(Strict):
    policies: dict[str, dict[str, Any]] = Field(min_length=1)
    seconds: float = Field(10, gt=0, le=120)
    publishers: int = Field(1, ge=1, le=8)
    window: int = Field(200, ge=1)
    message_size: int = Field(0, ge=0)
    baseline: str | None = None  # the policy the ratios are taken against (default: the first)


Probes.model_rebuild()


class Timing(Strict):
    warmup: float = Field(3, ge=0, description="seconds of load before the first fault")
    duration: float = Field(30, gt=0, le=3600, description="seconds of load while faults run")
    recovery: float = Field(10, ge=0, description="seconds of load after the heal")
    drain_timeout: float = Field(120, gt=0)
    drain_idle: float = Field(3, gt=0)
    heal_timeout: float = Field(180, gt=0)


class Scenario(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    id: str | None = None
    description: str = ""
    broker: Literal["rabbitmq", "kafka"]
    cluster: dict[str, Any] = Field(default_factory=dict)
    queue: QueueSpec | None = None
    topic: TopicSpec | None = None
    workload: Workload = Field(default_factory=Workload)
    timing: Timing = Field(default_factory=Timing)
    nemesis: list[dict[str, Any]] | dict[str, Any] = Field(default_factory=list)  # nemesis/schedule.py
    ordering: Literal["none", "fifo", "monotonic", "strict"] = "none"
    probes: Probes = Field(default_factory=Probes)
    expect: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0

    @model_validator(mode="after")
    def _target_fits_broker(self):
        if self.broker == "rabbitmq":
            if self.topic is not None:
                raise ValueError("topic: is for kafka scenarios; rabbitmq uses queue:")
            self.queue = self.queue or QueueSpec()
        else:
            if self.queue is not None:
                raise ValueError("queue: is for rabbitmq scenarios; kafka uses topic:")
            self.topic = self.topic or TopicSpec()
            if self.workload.crashes:
                raise ValueError("workload.crashes: Kafka is read after the heal; crashes are for rabbitmq")
        if self.broker == "kafka" and (self.probes.masters or self.probes.throughput):
            raise ValueError("probes.masters / probes.throughput are RabbitMQ probes")
        if self.broker == "rabbitmq" and self.probes.leaders:
            raise ValueError("probes.leaders is a Kafka probe")
        names = {f"c{i}" for i in range(self.workload.consumers)}
        for i, c in enumerate(self.workload.crashes):
            if c.consumer not in names:
                raise ValueError(f"workload.crashes.{i}.consumer: no consumer {c.consumer} (have {sorted(names)})")
        return self


def _where(loc: tuple) -> str:
    return ".".join(str(x) for x in loc) or "(top level)"


def parse(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a mapping of fields, not {type(data).__name__}")
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        lines = [f"  {_where(err['loc'])}: {err['msg']}" for err in e.errors()]
        raise ScenarioError(f"{source}: invalid scenario\n" + "\n".join(lines)) from None
    try:  # the nemesis validates its own schedule, naming the step and field
        parse_schedule(sc.nemesis)
    except ValueError as e:
        raise ScenarioError(f"{source}: invalid scenario\n  {e}") from None
    from harness.report import decidable, expectations
    keys = decidable(sc)
    bad = [k for k in expectations(sc) if k not in keys]
    if bad:
        raise ScenarioError(f"{source}: invalid scenario\n" + "\n".join(
            f"  expect.{k}: no {sc.broker} run measures this (measured: {', '.join(sorted(keys))})"
            for k in bad))
    return sc


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. YAML 1.1 reads `on:`/`off:` (the
    nemesis cycle's fields) and `yes`/`no` as booleans."""


_Loader.yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
                                   for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def load(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a safe loader
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not valid YAML: {e}") from None
    return parse(data, str(path))
