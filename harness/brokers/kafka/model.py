"""What a Kafka scenario may say: its topic, its producers' options, its probes."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.brokers.base import closest, config_keys
from harness.brokers.kafka.cluster import KafkaConfig
from harness.brokers.kafka.generations import ZOOKEEPER, has
from harness.probes import spread_names
from harness.spec import BaseScenario, BaseWorkload, Strict

METADATA_MODES = {
    "zookeeper": "the claim is about ZooKeeper, which a Kafka cluster in KRaft mode does not have "
                 "(its KRaft counterpart is the scenario's -kraft file)",
    "kraft": "the claim is about the KRaft controller quorum; this version keeps its metadata in ZooKeeper",
}
MEASUREMENTS = {"isr_min", "isr_below_2_s", "isr_shrink_s", "leaders_seen", "leader_changes",
                "new_leader_elected", "controller_changes", "new_controller_elected", "leaderless_s",
                "log_truncations", "isr_below_min_s", "leader_is_controller", "ack_latency_max_s",
                "ack_latency_after_isr_shrink_max_s"}


class TopicSpec(Strict):
    name: str = "mqchaos"
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(3, ge=1, le=3)
    config: dict[str, Any] = Field(default_factory=dict)  # topic configs, by Kafka's own names
    # Where the partitions' leader starts, relative to the controller found at creation
    # (the preferred replica is placed there); a scenario that depends on it says so in
    # require: {leader_is_controller: ...}, since the controller can move before the fault.
    leader: Literal["any", "controller", "not_controller"] = "any"

    @field_validator("config")
    @classmethod
    def _kafka_topic_configs(cls, config: dict[str, Any]) -> dict[str, Any]:
        path = str(KafkaConfig.keys_file)
        names = config_keys(path, "topic")
        bad = [f"{k!r} is not a Kafka topic config{closest(k, names)}" for k in config if k not in names]
        if bad:
            raise ValueError("; ".join(bad))
        return config


class KafkaWorkload(BaseWorkload):
    acks: Literal["0", "1", "all", "-1"] = "all"
    idempotence: bool = False
    retries: int = Field(2147483647, ge=0)
    max_in_flight: int = Field(5, ge=1)
    delivery_timeout_ms: int = Field(10_000, ge=1)
    request_timeout_ms: int = Field(3_000, ge=1)
    prefill: int = Field(0, ge=0, le=0, description="not supported: the topic is read in the drain")

    @model_validator(mode="before")
    @classmethod
    def _acks_as_text(cls, v):
        if isinstance(v, dict) and isinstance(v.get("acks"), int):
            v = dict(v, acks=str(v["acks"]))
        return v

    def outcome_timeout(self) -> float:
        return self.delivery_timeout_ms / 1000

    def timeouts(self) -> dict[str, float]:
        return {"delivery_timeout_s": self.delivery_timeout_ms / 1000,
                "request_timeout_s": self.request_timeout_ms / 1000}


class LeadersProbe(Strict):
    """K11: partition leaders per broker before, after the faults, and after a
    preferred-replica election (AdminClient elect_leaders) if asked."""
    elect_preferred: bool = True
    settle: float = Field(0, ge=0, le=600, description="seconds to let the controller rebalance by itself")


class KafkaProbes(Strict):
    leaders: LeadersProbe | None = None


class KafkaScenario(BaseScenario):
    target_key = "topic"
    live_consumers = False  # read after the heal, in the drain

    broker: Literal["kafka"]
    cluster: KafkaConfig = Field(default_factory=KafkaConfig)
    topic: TopicSpec = Field(default_factory=TopicSpec)
    workload: KafkaWorkload = Field(default_factory=KafkaWorkload)
    probes: KafkaProbes = Field(default_factory=KafkaProbes)
    # Where the claim has the cluster keep its metadata (K6/K7/K9 are about ZooKeeper; their
    # -kraft files about the KRaft quorum): on a version of the other mode the run is not
    # applicable. None: either.
    metadata: Literal["zookeeper", "kraft"] | None = None

    def subject(self) -> str:
        return f"{self.topic.name}/0"

    def not_applicable(self) -> str | None:
        mode = "zookeeper" if has(self.version, ZOOKEEPER) else "kraft"
        if self.metadata and self.metadata != mode:
            return METADATA_MODES[self.metadata]
        return None

    def version_problems(self) -> list[str]:
        """ZooKeeper's settings on a KRaft version (4.x has no such names; 3.9 would ignore
        them, and a claim resting on them would not be tested)."""
        if has(self.version, ZOOKEEPER):
            return []
        # a value other than the default: run.json's copy of a scenario carries every default
        field = type(self.cluster).model_fields["zookeeper_session_timeout_ms"]
        named = (["zookeeper_session_timeout_ms"]
                 if self.cluster.zookeeper_session_timeout_ms != field.default else [])
        named += [k for k in self.cluster.extra if k.startswith("zookeeper.")]
        return [f"cluster.{k}: Kafka {self.version} runs in KRaft mode, without ZooKeeper" for k in named]

    def measurement_names(self) -> set[str]:
        names = set(MEASUREMENTS)
        if self.probes.leaders is not None:
            names |= spread_names("leaders", ("before", "after", "after_election"))
        return names
