"""What a Kafka scenario may say: its topic, its producers' options, its probes."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from harness.brokers.settings import closest, config_keys, raw_text
from harness.brokers.kafka import values
from harness.brokers.kafka.config import KafkaConfig
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
                "ack_latency_after_isr_shrink_max_s", "isr_shrink_lag_s", "isr_rejoined",
                "first_controller_at_end", "first_controller_ordinary_at_end", "new_leaders_on_controller", "first_leader_isr_min",
                "split_brain_s", "split_brain_brokers", "catch_up_s", "leader_reaches_controller"}


def metadata_reason(mode: str, why: str | None) -> str:
    """The not-applicable reason of a claim about one metadata mode on a version of the other:
    the scenario's own (``metadata_why``) where it gives one, else the mode's general one."""
    return f"{why.strip()} (metadata: {mode})" if why and why.strip() else METADATA_MODES[mode]


def _int_or_none(value: Any) -> int | None:
    """A config's integer value (text as YAML or --set gives it); None when it is not one
    (the value check names that)."""
    try:
        return None if isinstance(value, bool) else int(str(value))
    except ValueError:
        return None


class TopicSpec(Strict):
    name: str = "mqchaos"
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(3, ge=1)  # at most the brokers: KafkaScenario.version_problems
    config: dict[str, Any] = Field(default_factory=dict)  # topic configs, by Kafka's own names
    # Where the partitions' leader starts, relative to the controller found at creation
    # (the preferred replica is placed there); a scenario that depends on it says so in
    # require: {leader_is_controller: ...}, since the controller can move before the fault.
    # not_controller_last: the controller the last replica, so a broker that is not the
    # controller is next in line after the leader (K18: which replica the controller elects)
    leader: Literal["any", "controller", "not_controller", "not_controller_last"] = "any"

    @field_validator("config")
    @classmethod
    def _kafka_topic_configs(cls, config: dict[str, Any]) -> dict[str, Any]:
        path = str(KafkaConfig.keys_file)
        names = config_keys(path, "topic")
        bad = [f"{k!r} is not a Kafka topic config{closest(k, names)}" for k in config if k not in names]
        if bad:
            raise ValueError("; ".join(bad))
        return config


class Transactions(Strict):
    """KIP-98 transactions: each producer sends ``size`` messages per transaction
    (transactional.id per producer, idempotent, acks=all) and aborts every ``abort_every``-th
    on purpose (0: none); a read_committed reader follows the topic during the load and
    reads it to its end in the drain (harness/brokers/kafka/txn.py, checkers/txn.py)."""
    size: int = Field(5, ge=1, le=1000)
    abort_every: int = Field(4, ge=0)
    transaction_timeout_ms: int = Field(10_000, ge=1000)
    # consume-transform-produce (KIP-98/447): processors in one consumer group read the topic
    # read_committed and write each producer's message back, transformed, in a transaction
    # that also commits their read offsets (send_offsets_to_transaction)
    processors: int = Field(0, ge=0, le=8)
    # a transaction's messages keyed one by one (over the partitions), not all by their
    # producer: transactions then overlap on several partitions (checkers.cycles)
    spread: bool = False


class KafkaWorkload(BaseWorkload):
    acks: Literal["0", "1", "all", "-1"] = "all"
    transactions: Transactions | None = None
    idempotence: bool = False
    retries: int = Field(2147483647, ge=0)
    max_in_flight: int = Field(5, ge=1)
    delivery_timeout_ms: int = Field(10_000, ge=1)
    request_timeout_ms: int = Field(3_000, ge=1)
    prefill: int = Field(0, ge=0, le=0, description="not supported: the topic is read in the drain")
    # a reader that follows the topic during the load too (seed 002: what consumers see while
    # a partition has no leader), then reads on to the end in the drain; its gaps are the
    # checker's read_gaps
    live_reader: bool = False

    @model_validator(mode="after")
    def _one_reader(self) -> "KafkaWorkload":
        if self.live_reader and self.transactions:
            raise ValueError("live_reader: a transactional workload has its own (read_committed) live reader")
        return self

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


class FetchesProbe(Strict):
    """Where a consumer fetches from (seed 002: "消费者并不会从追随者分区中获取消息", consumers
    do not fetch from followers): before the faults, a consumer of its own reads the topic
    from the beginning for ``seconds`` while the load goes on; its client's own count of
    Fetch requests per broker (librdkafka statistics), against the partitions' leaders."""
    seconds: float = Field(10, gt=0, le=120)

    NAMES: ClassVar[set[str]] = {"fetch_requests_by_node", "fetch_requests_to_leaders",
                                 "fetch_requests_to_non_leaders", "fetch_leaders", "fetch_messages_read"}


class KafkaProbes(Strict):
    leaders: LeadersProbe | None = None
    fetches: FetchesProbe | None = None


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
    # Why the claim needs that mode, where METADATA_MODES's general reason is not it (K5a, K8:
    # in KRaft's combined mode a leader cut from both followers is cut from the controller
    # majority too, so the claim's premise cannot happen): the not-applicable reason shown.
    metadata_why: str | None = None

    def subject(self) -> str:
        return f"{self.topic.name}/0"

    @model_validator(mode="after")
    def _metadata_why_needs_a_mode(self):
        if self.metadata_why is not None and self.metadata is None:
            raise ValueError("metadata_why: says why the claim needs a metadata mode; name it in metadata:")
        return self

    def not_applicable(self) -> str | None:
        mode = "zookeeper" if has(self.version, ZOOKEEPER) else "kraft"
        if self.metadata and self.metadata != mode:
            return metadata_reason(self.metadata, self.metadata_why)
        return None

    def version_problems(self) -> list[str]:
        """What this version refuses or the set-up makes meaningless: values outside Kafka's
        ConfigDefs, replication settings no write could meet, ZooKeeper's settings on KRaft."""
        return self._value_problems() + self._combination_problems() + self._zookeeper_problems()

    def _value_problems(self) -> list[str]:
        """Each config as ConfigDef would parse and validate it: the broker refuses to start
        with a bad server.properties value; a bad topic config fails the topic's creation."""
        # the committed file has 3.9's ConfigDefs (4.1's: regenerate from its image); a version
        # without its own entry is judged by the default's, as its names are (config-keys.json)
        broker = values.configs(str(self.version), "broker") or values.configs("3.9", "broker") or {}
        topic = values.configs(str(self.version), "topic") or values.configs("3.9", "topic") or {}
        out = [f"topic.config.{k}: {why}" for k, v in self.topic.config.items()
               if k in topic and (why := values.value_problem(topic[k], raw_text(v)))]
        fields = {name: raw_text(getattr(self.cluster, field)) for name, field in KafkaConfig.aliases.items()}
        for k, v in {**fields, **self.cluster.extra}.items():
            if k in broker and (why := values.value_problem(broker[k], v)):
                out.append(f"cluster.{k}: {why}")
        return out

    def _combination_problems(self) -> list[str]:
        """Settings each valid alone that together leave nothing to test."""
        t, c, w, out = self.topic, self.cluster, self.workload, []
        brokers = c.brokers
        if t.replication_factor > brokers:
            out.append(f"topic.replication_factor: {t.replication_factor} is above the {brokers} brokers "
                       "(Kafka refuses to create the topic: INVALID_REPLICATION_FACTOR)")
        if c.default_replication_factor > brokers:
            out.append(f"cluster.default.replication.factor: {c.default_replication_factor} is above the "
                       f"{brokers} brokers (no automatically created topic could be made)")
        if c.min_insync_replicas > brokers:
            out.append(f"cluster.min.insync.replicas: {c.min_insync_replicas} is above the {brokers} brokers: "
                       "no acks=all write to any topic could ever succeed")
        where = "topic.config.min.insync.replicas" if "min.insync.replicas" in t.config else "cluster.min.insync.replicas"
        min_isr = _int_or_none(t.config.get("min.insync.replicas", c.min_insync_replicas))
        if min_isr is not None and min_isr > t.replication_factor and not (where.startswith("cluster") and
                                                                          min_isr > brokers):
            out.append(f"{where}: {min_isr} is above the topic's replication factor {t.replication_factor}: "
                       "every acks=all write would fail (NOT_ENOUGH_REPLICAS), testing another set-up")
        if w.transactions and w.acks not in ("all", "-1"):
            out.append(f"workload.transactions: a transactional producer is idempotent and needs acks all, "
                       f"not {w.acks} (the producer refuses to start)")
        if w.idempotence and w.acks not in ("all", "-1"):
            out.append(f"workload.idempotence: needs acks all, not {w.acks} (the producer refuses to start)")
        if w.idempotence and w.max_in_flight > 5:
            out.append(f"workload.max_in_flight: {w.max_in_flight} with idempotence; at most 5 "
                       "(the producer refuses to start)")
        return out

    def _zookeeper_problems(self) -> list[str]:
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
        if self.probes.fetches is not None:
            names |= FetchesProbe.NAMES
        if self.workload.live_reader:  # the drain's second read (harness.brokers.kafka.final_read)
            names |= {"read_then_gone", "final_read"}
        return names
