"""What a RabbitMQ scenario may say: its queue, its workload options, its probes, its sites
and link.

- Streams (``queue.type: stream``, 3.9+: every version here; issue 16: S1): declared durable
  with ``x-queue-type: stream`` (``QueueSpec.declare_arguments``), three replicas (the default
  initial cluster size: every node, so a consumer failing over finds the local replica it
  reads). What AMQP 0.9.1 refuses of a stream (single active consumer, auto-ack, prefetch 0)
  is refused at load, and so are more than one consumer (each would get every message) and
  retention (it moves the first offset). The consumer and the drain: clients.py, workload.py.
- Poison messages (``workload.poison: {every, give_up_after}``, quorum queues; D1, D1b, D2:
  ``Poison``): every Nth message of a producer is marked; the delivery limit in force
  (``delivery_limit``) and the returns it counts (``reject_limit``: 3.x and 4.0 count every
  return, 4.3 only failed deliveries, which a basic.reject is and a basic.nack is not:
  ``poison.method``; generations.py's ``NACK_COUNTS``).
- Dead-lettering (``queue.dead_letter``, ``DeadLetter``): a fanout exchange and a quorum queue,
  at-least-once with ``x-overflow: reject-publish``.
- Sites (``cluster.sites``): separate clusters on one network (each node renders
  ``rabbitmq.<node>.conf``, which compose/rabbitmq/entrypoint.sh picks; health per site);
  without a link the first site is the cluster under test and the clients use only it (R32's
  two-node cluster: ``RabbitScenario.client_nodes`` / ``queue_sites``).
- ``link:`` (``LinkSpec``): a dynamic shovel, a federated queue (optionally one downstream
  cluster per node; ``downstream_type``: blue-green) or a federated exchange from the upstream
  cluster to the downstream one(s), declared by ``workload.link``; producers upstream,
  consumers downstream. A federated exchange's upstream may keep a queue of its own, read by
  no one, whose depth after the heal is ``upstream_queue_messages`` (F3), or the exchanges
  may federate each other (``bidirectional``, ``LinkSpec.sources``: every node's clients, a
  queue in each cluster; ``missing_at_a_site`` counts confirmed messages a cluster never
  delivered: F4).
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from harness.brokers import balancer
from harness.brokers.rabbitmq import values
from harness.brokers.rabbitmq.cluster import NODES, RabbitConfig
from harness.brokers.rabbitmq.generations import (GENERATIONS, DELIVERY_LIMIT_DEFAULT, MIRRORED_QUEUES, MIRRORING_REMOVED,
                                                  PARTITION_HANDLING, PARTITION_HANDLING_GONE, REFUSED_KEYS,
                                                  NACK_COUNTS, NACKS_FREE, RAM_NODES, RAM_NODES_GONE, has)
from harness.expect import judge
from harness.probes import spread_names
from harness.spec import BaseScenario, BaseWorkload, Strict

# Measurements this plug-in's observation gives (a scenario's `expect:` may name them).
MEASUREMENTS = {"paused_nodes", "paused_count", "partition_detected", "autoheal_losers", "autoheal_loser_count",
                "masters_seen", "master_changes", "new_master_elected", "unsynchronised_s", "masters_at_once_max",
                "deliveries_by_node", "follower_delivery_fraction", "masterless_s", "queue_present", "unroutable",
                "mirrors_added", "mirrors_added_count", "ram_nodes", "exchange_present", "forced_close_nodes",
                "confirm_latency_max_s", "sync_duration_s"}
# What partition handling does (a version without it cannot show any of these).
PARTITION_MEASUREMENTS = {"paused_nodes", "paused_count", "partition_detected", "autoheal_losers",
                          "autoheal_loser_count"}
# A quorum queue's delivery limit in force (-1: unlimited): its x-delivery-limit, else the
# version's default (20 from 4.0); and how many requeueing rejects it takes before it drops or
# dead-letters a message (-1: never; 4.3 no longer counts them). Recorded for every quorum run.
QUORUM_MEASUREMENTS = {"delivery_limit", "reject_limit"}
# The version and the declaration alone decide these: a `require:` on one that the version
# cannot meet makes the row not applicable there (no cluster is brought up for nothing).
VERSION_FACTS = ("delivery_limit", "reject_limit")

# The stream arguments the harness lets through (rabbit_stream_queue capabilities also take
# x-max-length-bytes and x-max-age: retention drops messages by design and moves the stream's
# first offset, from which the drain counts what is left).
STREAM_ARGUMENTS = ("x-initial-cluster-size", "x-queue-leader-locator", "x-stream-max-segment-size-bytes")
# Dead-lettering is `dead_letter:`: the drain must know the dead-letter queue to read it.
DEAD_LETTER_ARGUMENTS = ("x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy")


# The typed settings' rabbitmq.conf names (RabbitConfig.render), so their values are judged
# by the same schema as a raw line's.
RENDERED = {"net_ticktime": "net_ticktime", "memory_high_watermark": "vm_memory_high_watermark.absolute",
            "disk_free_limit": "disk_free_limit.absolute"}


class DeadLetter(Strict):
    """A dead-letter exchange (fanout) and queue (quorum) the harness declares; the drain reads
    the queue and records its deliveries as dead-lettered. ``at-least-once`` (quorum queues,
    3.10+) needs x-overflow reject-publish, which the harness sets: with drop-head RabbitMQ falls
    back to at-most-once (rabbit_quorum_queue dlh/5)."""
    exchange: str = "mqchaos.dlx"
    queue: str = "mqchaos.dlq"
    strategy: Literal["at-least-once", "at-most-once"] = "at-least-once"

    def arguments(self) -> dict[str, Any]:
        """The dead-lettering queue's arguments."""
        args = {"x-dead-letter-exchange": self.exchange, "x-dead-letter-strategy": self.strategy}
        if self.strategy == "at-least-once":
            args["x-overflow"] = "reject-publish"
        return args


class QueueSpec(Strict):
    name: str = "mqchaos"
    # stream: an append-only log (3.9+), read by offset (this module's docstring)
    type: Literal["classic", "mirrored", "quorum", "stream"] = "quorum"
    # Policy definition for mirrored queues: ha-mode, ha-params, ha-sync-mode,
    # ha-promote-on-failure, ha-promote-on-shutdown, ...
    policy: dict[str, Any] = Field(default_factory=dict)
    arguments: dict[str, Any] = Field(default_factory=dict)
    declare_on: str | None = None  # node whose connection declares it (classic master's home)
    dead_letter: DeadLetter | None = None
    # false: a transient queue (seeds 000, 001: deleted when its node restarts); classic only
    durable: bool = True
    # the producers publish through this durable direct exchange, bound to the queue (routing
    # key: the queue's name) and declared with it on declare_on's node (seed 001: exchanges and
    # bindings are kept on every node); None: the default exchange
    exchange: str | None = None
    # false: the exchange is transient (seed 000: "Неустойчивые очереди и маршрутизация
    # удаляются при перезапуске узла", non-durable queues and routing go with a node's restart)
    exchange_durable: bool = True

    @model_validator(mode="after")
    def _policy_fits(self):
        if self.policy and self.type != "mirrored":
            raise ValueError("policy applies to mirrored queues only (type: mirrored)")
        if self.type == "mirrored" and "ha-mode" not in self.policy:
            raise ValueError("a mirrored queue needs policy.ha-mode")
        limit = self.arguments.get("x-delivery-limit")
        if limit is not None:
            if self.type != "quorum":
                raise ValueError("arguments.x-delivery-limit: quorum queues only")
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < -1:
                raise ValueError("arguments.x-delivery-limit: an integer, -1 for unlimited")
        if not self.exchange_durable and not self.exchange:
            raise ValueError("exchange_durable: false needs queue.exchange (the default exchange is always there)")
        if not self.durable and self.type not in ("classic", "mirrored"):
            raise ValueError(f"durable: false: classic queues only ({self.type} queues are always durable)")
        if self.type == "stream":
            self._stream_fits()
        self._dead_letter_fits()
        return self

    def _stream_fits(self) -> None:
        for key in self.arguments:
            if key not in STREAM_ARGUMENTS:
                raise ValueError(f"arguments.{key}: not for a stream here (takes {', '.join(STREAM_ARGUMENTS)})")
        size = self.arguments.get("x-initial-cluster-size")
        if size is not None and size != 3:
            # a stream consumer reads the replica of the node it is connected to
            raise ValueError("arguments.x-initial-cluster-size: 3, so that every node a consumer fails over "
                             "to has a replica to read")

    def _dead_letter_fits(self) -> None:
        for key in DEAD_LETTER_ARGUMENTS:
            if key in self.arguments:
                raise ValueError(f"arguments.{key}: use dead_letter: (the drain reads the dead-letter queue it names)")
        dl = self.dead_letter
        if dl is None:
            return
        if self.type != "quorum":
            raise ValueError("dead_letter: quorum queues only here (the delivery limit it serves)")
        if dl.queue == self.name:
            raise ValueError("dead_letter.queue: another queue than the queue's own")
        overflow = self.arguments.get("x-overflow")
        if dl.strategy == "at-least-once" and overflow not in (None, "reject-publish"):
            raise ValueError(f"arguments.x-overflow: at-least-once dead-lettering needs reject-publish, not {overflow!r} "
                             "(RabbitMQ would fall back to at-most-once)")

    def declare_arguments(self) -> dict[str, Any]:
        """What the queue is declared with (beside durable)."""
        args = dict(self.arguments)
        if self.type in ("quorum", "stream"):
            args["x-queue-type"] = self.type
        if self.dead_letter:
            args.update(self.dead_letter.arguments())
        return args

    def mirrored(self) -> bool:
        """Does this queue rely on classic mirroring (its type, or ha-* keys)?"""
        return self.type == "mirrored" or any(k.startswith("ha-") for k in self.policy)


class Poison(Strict):
    """Every ``every``-th message of each producer (seq every-1, 2*every-1, ...) is poison
    (header and produce records say so): the consumers hand it back with requeue each time it
    comes (basic.reject, or basic.nack: ``method``), and take it (acknowledge it, recorded
    ``gave_up``) on its ``give_up_after``-th delivery to one of them, so a version that never
    drops it (no delivery limit counting the returns: 3.10 without x-delivery-limit, a nack on
    4.3) still ends its drain."""
    every: int = Field(ge=2, le=1_000_000)
    give_up_after: int = Field(50, ge=2, le=1000)
    method: Literal["reject", "nack"] = Field("reject", description="how a consumer hands a poison message "
                                              "back: 4.3 counts a basic.reject toward the delivery limit, "
                                              "not a basic.nack")


class RabbitWorkload(BaseWorkload):
    window: int = Field(100, ge=1)
    confirm_timeout: float = Field(10, gt=0)
    prefetch: int = Field(50, ge=0)
    auto_ack: bool = False
    single_active_consumer: bool = False
    cancel_on_failover: bool = True
    persistent: bool = Field(True, description="delivery_mode 2; false: lost on restart (seed 000)")
    confirms: bool = Field(True, description="publisher confirms; false: every publish's outcome unknown "
                                             "(unknown_lost counts those never delivered)")
    transactions: int = Field(0, ge=0, le=1000, description="AMQP transactions: messages per tx.commit, "
                              "its Tx.CommitOk their confirmation (seed 001); 0: none")
    consumer_delay: float = Field(0, ge=0, le=1, description="seconds of work per delivery")
    # Where consumers connect first: a node name, or "followers" / "leader" / "outside" (no
    # replica) of the quorum queue (resolved when the run starts; Q5 attaches the consumer to a
    # follower's node).
    consumer_nodes: str | None = None
    poison: Poison | None = None

    @model_validator(mode="after")
    def _transactions(self):
        if self.transactions and not self.confirms:
            raise ValueError("workload.transactions: a transaction's Tx.CommitOk is its confirmation; "
                             "confirms: false has none")
        if self.transactions > self.window:
            raise ValueError("workload.transactions: more messages per transaction than the window allows")
        return self

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
    """R13: throughput into queues with different mirror policies, one after the other, in
    this run. ``confirms``: our publishers, persistent messages with publisher confirms (what
    SCENARIOS asks); ``perftest``: the source's own tool and flags (RabbitMQ PerfTest ``-a``:
    one publisher without confirms, non-persistent messages, one auto-ack consumer; its
    receiving rate). Each method and policy is measured ``repeat`` times, interleaved."""
    policies: dict[str, dict[str, Any]] = Field(min_length=2)
    methods: list[Literal["confirms", "perftest"]] = Field(default_factory=lambda: ["confirms"], min_length=1)
    repeat: int = Field(1, ge=1, le=10)
    seconds: float = Field(10, gt=0, le=120)
    publishers: int = Field(1, ge=1, le=8)
    window: int = Field(200, ge=1)
    message_size: int = Field(0, ge=0)
    baseline: str | None = None  # the policy the ratios are taken against (default: the first)
    # per policy name, what else differs (the confirms method only): persistent messages or
    # not (seed 000: persistence costs throughput), and the node the publishers connect to
    # (seed 003: a queue lives on one node, a client of another node is routed through it)
    persistent: dict[str, bool] = Field(default_factory=dict)
    via: dict[str, Literal["rabbit1", "rabbit2", "rabbit3"]] = Field(default_factory=dict)
    # seed 004 (quorum queues keep their publish rate under a backlog and consumer pressure,
    # mirrored queues less so): the queue's type, the messages queued in it before the
    # measurement, the consumers draining it meanwhile, and the policy a ratio is taken
    # against when not the baseline (a backlog's cost within one queue type)
    queue_type: dict[str, Literal["classic", "quorum"]] = Field(default_factory=dict)
    backlog: dict[str, Annotated[int, Field(ge=0, le=1_000_000)]] = Field(default_factory=dict)
    consumers: dict[str, Annotated[int, Field(ge=0, le=8)]] = Field(default_factory=dict)
    vs: dict[str, str] = Field(default_factory=dict)
    # seed 000 (messages written to disk every few hundred ms, a confirm sent after the write):
    # a publisher's own rate, msg/s (default: as fast as its window allows); each policy's
    # confirm latency is measured either way
    rate: dict[str, Annotated[float, Field(gt=0, le=10_000)]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _variants(self) -> "ThroughputProbe":
        for field in ("persistent", "via", "queue_type", "backlog", "consumers", "vs", "rate"):
            unknown = set(getattr(self, field)) - set(self.policies)
            if unknown:
                raise ValueError(f"{field}: {', '.join(sorted(unknown))} not among the policies")
            if getattr(self, field) and self.methods != ["confirms"]:
                raise ValueError(f"{field} applies to the confirms method only (perftest sets its own)")
        if self.baseline is not None and self.baseline not in self.policies:
            raise ValueError(f"baseline: {self.baseline} is not among the policies")
        bad = {k: v for k, v in self.vs.items() if v not in self.policies or v == k}
        if bad:
            raise ValueError(f"vs: {bad} must name another of the policies")
        mirrored = [k for k, t in self.queue_type.items() if t == "quorum" and any(
            key.startswith("ha-") for key in self.policies[k])]
        if mirrored:
            raise ValueError(f"queue_type: {', '.join(mirrored)}: a quorum queue takes no ha- (mirroring) policy")
        return self

    def base(self, policy: str | None = None) -> str:
        """The policy ``policy``'s ratio is taken against (``vs``, else the baseline, else the first)."""
        return self.vs.get(policy or "", self.baseline or next(iter(self.policies)))

    def bases(self) -> dict[str, str]:
        """Per policy with a ratio, the policy it is taken against."""
        return {k: self.base(k) for k in self.policies if k != self.base(k)}

    def names(self) -> set[str]:
        """The measurements it gives: the first method's under ``throughput`` /
        ``throughput_ratio``, every method's under its own name."""
        ratios = [f"{k}_vs_{b}" for k, b in self.bases().items()]
        out = {f"throughput.{k}" for k in self.policies} | {f"throughput_ratio.{r}" for r in ratios}
        for m in self.methods:
            out |= {f"throughput_{m}.{k}" for k in self.policies} | {f"throughput_ratio_{m}.{r}" for r in ratios}
            out |= {f"throughput_ratio_range_{m}.{r}" for r in ratios} | {f"throughput_falls.{m}"}
        if "confirms" in self.methods:
            out |= {f"confirm_latency_{q}_ms.{k}" for q in ("p50", "p99") for k in self.policies}
        return out


class LinksProbe(Strict):
    """Q5: the bytes each node receives from each other node (iptables counters) between the
    load's start and the first fault, against the bytes delivered meanwhile: served by its
    local replica, a consumer's follower node receives from the leader what the other
    follower does; served by the leader (proxying), every delivery crosses the network too."""


SYNC_MODES = ("automatic", "manual")


class SyncProbe(Strict):
    """R6: how long a mirrored queue is blocked while a restarted mirror synchronises, by
    queue size and ha-sync-mode. Per size, one queue (ha-mode all) is filled once; then, in
    each repetition, ``node``'s app is restarted under ``automatic`` (the window: from the
    stop until the mirror is synchronised again) and under ``manual`` (a window of the same
    length: the mirror stays unsynchronised), while a publisher with confirms and a slow
    consumer (``rate`` msg/s each) show whether the queue answers. Between repetitions the
    queue is synchronised by hand, outside any window."""
    sizes: list[int] = Field(min_length=2)
    repeat: int = Field(3, ge=2, le=10)
    node: Literal["rabbit2", "rabbit3"] = "rabbit3"  # a mirror's: the master is on rabbit1
    message_size: int = Field(1000, ge=0)
    rate: float = Field(50, gt=0, le=1000)
    sync_timeout: float = Field(600, gt=0)

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if any(n < 1000 or n > 2_000_000 for n in v) or v != sorted(set(v)):
            raise ValueError("sizes must increase, each from 1000 to 2000000 messages")
        return v

    def names(self) -> set[str]:
        out = {"sync_blocking_grows", "sync_runs"}
        for n in self.sizes:
            out |= {f"sync_window_s.{n}", f"sync_blocked_difference.{n}.mean", f"sync_blocked_difference.{n}.ci95"}
            out |= {f"sync_blocked_median.{mode}.{n}" for mode in SYNC_MODES}
        return out


class MetadataProbe(Strict):
    """R7q-R11q: what a partition does to the metadata store. ``at`` seconds after the faults
    begin, a client of each node declares a durable queue of its own (a metadata write: Mnesia
    takes it on either side of a cut, Khepri only with a majority, a paused node refuses the
    client); after the heal, which of the queues whose declare was answered still exist."""
    at: float = Field(10, ge=0, le=600)
    timeout: float = Field(45, gt=0, le=120)  # Khepri gives up after 30 s (khepri_default_timeout)
    # a policy over the probe's queues, set before the faults (seed 001: an ha-mode nodes
    # policy whose nodes are all down when a queue is declared): where each answered
    # declare put its queue is ``metadata_masters``, those put on their client's own node
    # ``metadata_on_own_node``
    policy: dict[str, Any] | None = None
    # seed 001: an exclusive queue is neither mirrored nor kept: declared exclusive (and
    # durable), its connection held ``hold`` seconds, its mirrors read, then closed
    exclusive: bool = False
    hold: float = Field(6, ge=0, le=60)

    NAMES: ClassVar[set[str]] = {"metadata_write_ok", "metadata_write_failed", "metadata_write_s",
                                 "metadata_write_max_s", "metadata_kept", "metadata_lost", "metadata_on_own_node",
                                 "metadata_mirrored"}


class RabbitProbes(Strict):
    masters: MastersProbe | None = None
    metadata: MetadataProbe | None = None
    throughput: ThroughputProbe | None = None
    links: LinksProbe | None = None
    sync: SyncProbe | None = None


LINK_PLUGINS = {"shovel": ("rabbitmq_shovel", "rabbitmq_shovel_management"),
                "federated-queue": ("rabbitmq_federation", "rabbitmq_federation_management"),
                "federated-exchange": ("rabbitmq_federation", "rabbitmq_federation_management")}


class LinkSpec(Strict):
    """A link between clusters on one network (seeds 000, 003: federation and shovels, made
    for WANs): by default rabbit1 and rabbit2 form the upstream cluster, rabbit3 the
    downstream one. Producers publish upstream, consumers read the queue of the same name
    downstream. ``shovel``: a dynamic shovel, declared downstream, moves the upstream queue's
    messages across. ``federated-queue``: the downstream queue federates the upstream queue
    of its name (it pulls messages when its consumers have room). ``federated-exchange``: the
    producers publish to ``queue.exchange`` upstream; the downstream exchange of that name
    federates it, and the downstream queue is bound there (seed 003: what is published
    upstream is published downstream too). ``separate_downstreams``: each downstream node is
    a cluster of its own, each with its link (seed 003: several downstreams of one federated
    queue)."""
    kind: Literal["shovel", "federated-queue", "federated-exchange"] = "shovel"
    # on-confirm: the upstream message is acked once downstream confirms it (at least once);
    # no-ack: acked as it is sent
    ack_mode: Literal["on-confirm", "on-publish", "no-ack"] = "on-confirm"
    reconnect_delay: float = Field(5, gt=0, le=60)
    upstream: list[str] = Field(default_factory=lambda: ["rabbit1", "rabbit2"])
    downstream: list[str] = Field(default_factory=lambda: ["rabbit3"])
    separate_downstreams: bool = False
    # federated-exchange: a queue of the upstream cluster's own (``<queue>.upstream``) bound
    # to the exchange like the downstream one, which no one reads: what it holds after the
    # load is ``upstream_queue_messages`` (seed 003: the upstream knows nothing of what the
    # downstream consumes)
    upstream_queue: bool = False
    # federated-exchange: each cluster's exchange federates the other's (seed 003: upstreams
    # both ways), each cluster has the queue bound, producers and consumers use every node
    bidirectional: bool = False
    # federated exchange or queue: the producers' node list goes on with the downstream
    # cluster, so when the upstream cluster goes (seed 003: replacing a cluster) or a
    # move_producers step moves them (a blue-green switch) they publish there
    replace: bool = False
    # the downstream cluster's queue type, when it is not the queue's (issue 39: RabbitMQ's
    # blue-green path from a mirrored queue to a quorum queue, a federated queue draining blue)
    downstream_type: Literal["classic", "quorum"] | None = None
    # the downstream cluster's version, when it is not the run's (the guide's blue-green
    # upgrade: green on a version blue cannot be upgraded to in place, e.g. 4.0 -> 4.3)
    downstream_version: str | None = None

    @model_validator(mode="after")
    def _exchange_only(self) -> "LinkSpec":
        for field in ("upstream_queue", "bidirectional"):
            if getattr(self, field) and self.kind != "federated-exchange":
                raise ValueError(f"link.{field}: a federated exchange's only")
        if self.replace and self.kind == "shovel":
            raise ValueError("link.replace: a federation's only (a shovel has no downstream producers' side)")
        if self.downstream_version is not None and self.downstream_version not in GENERATIONS:
            raise ValueError(f"link.downstream_version: {self.downstream_version!r} is no version here "
                             f"({', '.join(GENERATIONS)})")
        if self.downstream_type and self.kind != "federated-queue":
            raise ValueError("link.downstream_type: a federated queue's only (blue-green: the green cluster's "
                             "queue federates the blue one's)")
        if self.bidirectional and self.upstream_queue:
            raise ValueError("link.bidirectional: each cluster's queue is read; no upstream_queue")
        return self

    def sources(self) -> list[tuple[str, list[str]]]:
        """Each link: where it is declared (a downstream cluster's first node) and the nodes
        of the cluster it federates from."""
        down = [(home, list(self.upstream)) for home in self.homes()]
        return down + [(sorted(self.upstream)[0], sorted(self.downstream))] if self.bidirectional else down

    def sites(self) -> list[list[str]]:
        """The clusters: the upstream first, then the downstream one(s)."""
        down = [[n] for n in sorted(self.downstream)] if self.separate_downstreams else [sorted(self.downstream)]
        return [sorted(self.upstream), *down]

    def homes(self) -> list[str]:
        """Where each downstream cluster's link is declared: its first node."""
        return [site[0] for site in self.sites()[1:]]


class RabbitScenario(BaseScenario):
    target_key = "queue"
    live_consumers = True

    broker: Literal["rabbitmq"]
    cluster: RabbitConfig = Field(default_factory=RabbitConfig)
    queue: QueueSpec = Field(default_factory=QueueSpec)
    workload: RabbitWorkload = Field(default_factory=RabbitWorkload)
    probes: RabbitProbes = Field(default_factory=RabbitProbes)
    link: LinkSpec | None = None

    @model_validator(mode="after")
    def _link_sites(self):
        """A link's ends are separate clusters: the configuration says so, with the link's
        plugins."""
        ln = self.link
        if ln is None:
            return self
        sites = ln.sites()
        if self.cluster.sites and sorted(map(sorted, self.cluster.sites)) != sorted(sites):
            raise ValueError(f"cluster.sites {self.cluster.sites} differ from the link's ends {sites}")
        if sorted(n for site in sites for n in site) != list(NODES):
            raise ValueError("link: upstream and downstream must split rabbit1..3, each node in one")
        if self.queue.declare_on and self.queue.declare_on not in ln.upstream:
            raise ValueError("queue.declare_on must be an upstream node (the producers' side)")
        if ln.separate_downstreams and ln.kind != "federated-queue":
            raise ValueError("link.separate_downstreams: a federated queue's (seed 003); a shovel or a federated "
                             "exchange here has one downstream cluster")
        if ln.kind == "federated-exchange" and not self.queue.exchange:
            raise ValueError("link.kind federated-exchange: queue.exchange names the exchange federated")
        if ln.kind == "federated-queue" and self.queue.type == "mirrored" and ln.downstream_type is None:
            raise ValueError("link.kind federated-queue: a mirrored queue's ha policy would replace the federation "
                             "policy (one policy applies to a queue); use classic or quorum, or link.downstream_type")
        self.cluster.sites = sites
        self.cluster.plugins = sorted({*self.cluster.plugins, *LINK_PLUGINS[ln.kind]})
        if ln.downstream_version:
            self.cluster.node_versions = {n: ln.downstream_version for n in ln.downstream}
        return self

    @model_validator(mode="after")
    def _one_site_tested(self):
        """Sites without a link: the first site is the cluster under test (seed 000: a two-node
        cluster), the rest stand by; the queue is declared there."""
        if self.link is None and self.cluster.sites and self.queue.declare_on \
                and self.queue.declare_on not in self.cluster.sites[0]:
            raise ValueError("queue.declare_on must be a node of the first of cluster.sites (the cluster "
                             "under test)")
        return self

    def client_nodes(self, side: Literal["produce", "consume"]) -> list[str]:
        """The nodes the producers or the consumers connect to: a link's upstream or downstream
        cluster; with sites alone the first site; else every node."""
        if self.link:
            if self.link.bidirectional:
                return list(NODES)
            if side == "produce" and self.link.replace:  # the old cluster first, then the new
                return [*self.link.upstream, *self.link.downstream]
            return list(self.link.upstream if side == "produce" else self.link.downstream)
        return list(self.cluster.sites[0]) if self.cluster.sites else list(NODES)

    def consumed_type(self) -> str:
        """The type of the queue the consumers read: a federated queue's downstream type when
        the link gives it one (a mirrored queue's consumer argument x-cancel-on-ha-failover is
        refused by a quorum queue), else the queue's."""
        if self.link and self.link.downstream_type:
            return self.link.downstream_type
        return self.queue.type

    def queue_sites(self) -> list[list[str]] | None:
        """The clusters that hold the scenario's queue: with sites alone the first; a federated
        exchange's downstream ones (upstream, the link's own queue holds what is in transit);
        else every one the nodes form (None: ask the cluster)."""
        if self.link:
            if self.link.bidirectional:  # a queue on each side, each fed by the other's exchange
                return self.link.sites()
            return self.link.sites()[1:] if self.link.kind == "federated-exchange" else None
        return [list(self.cluster.sites[0])] if self.cluster.sites else None

    @model_validator(mode="after")
    def _streams_and_poison(self):
        """What a stream's consumer over AMQP 0.9.1 cannot do, and where poison applies."""
        w, q = self.workload, self.queue
        if q.type == "stream":
            if w.single_active_consumer:
                raise ValueError("workload.single_active_consumer: a stream refuses x-single-active-consumer over "
                                 "AMQP 0.9.1 (its single active consumer is the stream protocol's)")
            if w.auto_ack:
                raise ValueError("workload.auto_ack: a stream refuses automatic acknowledgement")
            if w.prefetch < 1:
                raise ValueError("workload.prefetch: a stream consumer needs a prefetch (basic.qos) of at least 1")
            if w.consumers > 1:
                raise ValueError("workload.consumers: at most 1 for a stream: it gives every consumer every "
                                 "message, so a second would count each message as duplicated")
            if w.consumer_nodes == "outside":
                raise ValueError("workload.consumer_nodes: a stream consumer needs a replica on its node")
            if self.link:
                raise ValueError("link: a shovel does not read a stream by offset here")
        if w.poison:
            if q.type != "quorum":
                raise ValueError("workload.poison: quorum queues only (the delivery limit it is about)")
            if w.auto_ack:
                raise ValueError("workload.poison: consumers reject poison messages: needs auto_ack: false")
        if self.link and (w.poison or q.dead_letter):
            raise ValueError("workload.poison / queue.dead_letter: not across a link")
        return self

    def subject(self) -> str:
        return self.queue.name

    # ---- the version's say ------------------------------------------------------------
    def _mirroring(self) -> bool:
        """Does the claim rest on classic mirrored queues (the queue, or a probe's queues)?"""
        p = self.probes
        ha = (lambda policy: any(k.startswith("ha-") for k in policy))
        return (self.queue.mirrored() or p.masters is not None or p.sync is not None
                or (p.throughput is not None and any(ha(pol) for pol in p.throughput.policies.values())))

    def not_applicable(self) -> str | None:
        if not has(self.version, MIRRORED_QUEUES) and self._mirroring():
            return MIRRORING_REMOVED
        if self.cluster.ram_nodes and not has(self.version, RAM_NODES):
            return RAM_NODES_GONE
        facts = self.version_facts()
        for key, wanted in self.require.items():
            if facts.get(key) is not None and judge(wanted, facts[key]) is False:
                why = (NACKS_FREE if key == "reject_limit" and self._returns_free()
                       else "no delivery limit, set or by default" if facts["delivery_limit"] == -1 else "")
                return (f"the claim requires {key} {wanted}, RabbitMQ {self.version} gives {facts[key]}"
                        + (f" ({why})" if why else ""))
        # A claim about what partition handling does (who paused, who lost an autoheal); a
        # scenario that merely sets a mode (Q1's pause_minority) still runs, the mode left out
        named = {k.split(".")[0] for field in ("expect", "require") for k in getattr(self, field)}
        if not has(self.version, PARTITION_HANDLING) and named & PARTITION_MEASUREMENTS:
            return PARTITION_HANDLING_GONE
        return None

    def version_problems(self) -> list[str]:
        """What this version refuses or would silently replace: boot-breaking keys, values
        outside the server's schema (values.py), policies and arguments its validators refuse."""
        refused = REFUSED_KEYS.get(str(self.version), ())
        out = [f"cluster.{k}: RabbitMQ {self.version} refuses to boot with it" for k in self.cluster.extra
               if k.startswith(refused)] if refused else []
        out += self._conf_value_problems(refused)
        out += self._policy_problems()
        limit, poison = self.reject_limit(), self.workload.poison
        # the (limit + 1)-th requeue drops or dead-letters it: one consumer must not give up first
        if poison and limit is not None and limit >= 0 and poison.give_up_after < limit + 2:
            out.append(f"workload.poison.give_up_after: {poison.give_up_after}, but RabbitMQ {self.version} takes "
                       f"{limit + 1} requeues of a message before it drops or dead-letters it: at least "
                       f"{limit + 2}, so that the broker acts first")
        return out

    def _conf_value_problems(self, refused: tuple[str, ...]) -> list[str]:
        """rabbitmq.conf lines judged by the version's schema: the raw keys as written, the
        typed fields by the names they are rendered under (RENDERED)."""
        version, out = str(self.version), []
        lines = {k: v for k, v in self.cluster.extra.items() if not (refused and k.startswith(refused))}
        for key, value in lines.items():
            if values.unknown_key(version, key):
                out.append(f"cluster.{key}: not a configuration name of RabbitMQ {version} (its schema no longer "
                           "has it; the node would not boot)")
            elif why := values.value_problem(version, key, value):
                out.append(f"cluster.{key}: {why}")
        for field, key in RENDERED.items():
            if why := values.value_problem(version, key, str(getattr(self.cluster, field))):
                out.append(f"cluster.{field} ({key}): {why}")
        return out

    def _policy_problems(self) -> list[str]:
        """Policies as rabbitmqctl set_policy's validators judge them, queue arguments as
        queue.declare does: refused at load, not half-way through a run."""
        nodes = [n for site in (self.cluster.sites or [NODES]) for n in site]
        out = [f"queue.policy.{p}" for p in values.policy_problems(self.queue.policy, nodes)] if self.queue.policy else []
        out += [f"queue.arguments.{p}" for p in values.argument_problems(self.queue.arguments, self.queue.type)]
        if self.probes.masters is not None:
            out += [f"probes.masters.policy.{p}" for p in values.policy_problems(self.probes.masters.policy, nodes)]
        for name, policy in (self.probes.throughput.policies.items() if self.probes.throughput else ()):
            out += [f"probes.throughput.policies.{name}.{p}" for p in values.policy_problems(policy, nodes)]
        return out

    def delivery_limit(self) -> int | None:
        """A quorum queue's delivery limit in force: its x-delivery-limit, else the version's
        default; -1 when unlimited; None for other queue types."""
        if self.queue.type != "quorum":
            return None
        limit = self.queue.arguments.get("x-delivery-limit")
        if limit is None:
            limit = DELIVERY_LIMIT_DEFAULT.get(str(self.version))
        return -1 if limit is None else int(limit)

    def reject_limit(self) -> int | None:
        """How many of the consumers' requeueing returns (reject or nack: poison.method) a
        quorum queue counts toward its delivery limit before it drops or dead-letters a message
        (it acts on the one after): the delivery limit where they count, -1 when nothing does
        (no limit, or a nack on 4.3); None for other queue types."""
        if self.queue.type != "quorum":
            return None
        return -1 if self._returns_free() else self.delivery_limit()

    def nacks(self) -> bool:
        """Do the consumers hand poison back with basic.nack (poison.method), not basic.reject?"""
        return self.workload.poison is not None and self.workload.poison.method == "nack"

    def _returns_free(self) -> bool:
        """The consumers' returns do not count toward the delivery limit: a nack on 4.3."""
        return self.nacks() and not has(self.version, NACK_COUNTS)

    def version_facts(self) -> dict[str, int | None]:
        """The measurements the version and the declaration alone decide (VERSION_FACTS)."""
        return {"delivery_limit": self.delivery_limit(), "reject_limit": self.reject_limit()}

    def measurement_names(self) -> set[str]:
        names = set(MEASUREMENTS) | (QUORUM_MEASUREMENTS if self.queue.type == "quorum" else set())
        if self.probes.masters is not None:
            names |= spread_names("masters", ("before", "after", "after_rebalance")) | {"masters_on_one_node"}
        if (t := self.probes.throughput) is not None:
            names |= t.names()
        if self.probes.links is not None:
            names |= {"link_bytes", "link_delivered_bytes", "delivery_network_share"}
        if self.probes.sync is not None:
            names |= self.probes.sync.names()
        if self.probes.metadata is not None:
            names |= MetadataProbe.NAMES
        if self.link is not None and self.link.upstream_queue:
            names.add("upstream_queue_messages")
        if self.link is not None and self.link.bidirectional:
            names.add("missing_at_a_site")
        if self.cluster.balancer is not None:
            names |= balancer.measurement_names(list(NODES))
        return names
