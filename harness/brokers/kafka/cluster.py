"""Kafka clusters: three brokers (kafka1..3) and where they keep the cluster's metadata,
by version (``generations.ZOOKEEPER``): a ZooKeeper ensemble (zk1..3: ``ZooKeeperCluster``,
3.9) or a KRaft controller quorum on the brokers themselves (``kraft_cluster.KRaftCluster``,
3.9-kraft and 4.1). ``KafkaCluster`` holds what both share: configuration, the AdminClient,
topics, roles and recovery over the metadata each one reads its own way.

Clients reach the brokers through 127.0.0.1:9092..9094 (external listeners advertised as
such) and ZooKeeper through 127.0.0.1:2181..2183; the brokers talk to each other on the
internal listener. Broker ids: kafka<N> has broker.id (node.id) N (``nodes``).

Whose view: each broker answers a Metadata request from its own metadata image; ``adminclient``
asks each one through a client pinned to it and proves whose answer it is. The roles a fault
targets are resolved in ``roles``.
"""
from __future__ import annotations

import copy
import json
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, ClassVar

import yaml
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry
from pydantic import Field

from harness.brokers.compose import COMPOSE_DIR, ComposeCluster
from harness.brokers.protocol import (CONTAINER_CAPABILITIES, CORRUPT, FEATURES, MEMBERSHIP, MIGRATION,
                                     QUORUM_MEMBERSHIP, UPGRADE, ClusterError,
                                     Recorder, Role, RoleError, Steady)
from harness.brokers.settings import Settings
from harness.brokers.kafka import adminclient
from harness.brokers.kafka.adminclient import ForeignAnswer, answered_by, partitions_of, pinned_config
from harness.brokers.kafka.generations import GENERATIONS, ZOOKEEPER, has
from harness.brokers.kafka.kraft import (LOG4J2, QUORUM_STATE, UNFENCED, active_controller, cluster_id,
                                         feature_command, kraft_properties, parse_features, quorum_leader, quorum_state,
                                         reassign_command,
                                         reassignment, render_properties, reported_version)
from harness.brokers.kafka import migration, whole
from harness.brokers.kafka.controllers import ControllerNodes, Topology, controller_properties
from harness.brokers.kafka.controllers import broker_properties as kraft_broker_properties
from harness.brokers.kafka.nodes import (BROKERS, CONTROLLERS, INTERNAL_PORT, KAFKA_PORTS, MAX_BROKERS, ZK_NODES,
                                         ZK_PORTS, broker_id, broker_names, broker_node)
from harness.brokers.kafka.roles import ROLES, resolve_role
from harness.util import wait_until

log = logging.getLogger(__name__)

HEALTH_TOPIC = "mqchaos-health"

LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.authorizer.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.state.change.logger=INFO
log4j.logger.kafka.controller=INFO
log4j.logger.org.apache.zookeeper=INFO
log4j.logger.org.apache.zookeeper.server.NIOServerCnxn=WARN
log4j.logger.org.apache.zookeeper.server.NIOServerCnxnFactory=WARN
"""


# Kafka's property names for the settings' fields (a scenario may use either).
ALIASES = {
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election",
    "auto.leader.rebalance.enable": "auto_leader_rebalance",
    "replica.lag.time.max.ms": "replica_lag_time_max_ms",
    "zookeeper.session.timeout.ms": "zookeeper_session_timeout_ms",
    "default.replication.factor": "default_replication_factor",
    "leader.imbalance.check.interval.seconds": "leader_imbalance_check_interval_seconds",
    "offsets.topic.num.partitions": "offsets_topic_partitions",
}


class KafkaConfig(Settings):
    """The ``cluster:`` block: fields, or Kafka property names (``min.insync.replicas``).
    Other keys must be Kafka's own names (its ConfigDef: config-keys.json) and are rendered
    as server.properties ``key=value`` lines."""
    aliases = ALIASES
    keys_file = Path(__file__).with_name("config-keys.json")
    broker = "kafka"

    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    auto_leader_rebalance: bool = True
    replica_lag_time_max_ms: int = 30000
    zookeeper_session_timeout_ms: int = 6000      # lowered from 18000: failover in seconds
    default_replication_factor: int = 3
    leader_imbalance_check_interval_seconds: int = 300
    offsets_topic_partitions: int = 6             # lowered from 50: 2 cores
    healthy_timeout: float = 180.0
    # seed 002's "replication factor 5, min.insync.replicas 3": kafka4, kafka5 added to the
    # compose file's three (ZooKeeper stays three)
    brokers: int = Field(3, ge=3, le=MAX_BROKERS)
    # KRaft versions: the controller quorum on the brokers themselves (combined) or on three
    # nodes of its own, ctrl1..3 (dedicated: harness/brokers/kafka/controllers.py); a
    # ZooKeeper version keeps its metadata apart anyway (zk1..3) and ignores it
    kraft_controllers: Topology = "combined"

    def properties(self, node: str) -> str:
        return render_properties(self.property_map(node), "harness/brokers/kafka/cluster.py")

    def property_map(self, node: str) -> dict[str, Any]:
        """``node``'s server.properties: a broker's, or a dedicated controller's (ctrl1..3)."""
        if node in CONTROLLERS:
            return controller_properties(node, {**self.zookeeper_map(BROKERS[0]), **self.extra})
        props = self.zookeeper_map(node)
        if not has(self.version, ZOOKEEPER):  # KRaft: a combined broker+controller node, or a broker
            props = (kraft_properties(props, node, broker_names(self.brokers))
                     if self.kraft_controllers == "combined" else kraft_broker_properties(props))
        props.update(self.extra)
        return props

    def zookeeper_map(self, node: str) -> dict[str, Any]:
        """The broker's settings as a ZooKeeper-mode server.properties mapping (no extra keys)."""
        bid = broker_id(node)
        port = KAFKA_PORTS[node]
        props = {
            "broker.id": bid,
            "listeners": f"INTERNAL://0.0.0.0:{INTERNAL_PORT},EXTERNAL://0.0.0.0:{port}",
            "advertised.listeners": f"INTERNAL://{node}:{INTERNAL_PORT},EXTERNAL://127.0.0.1:{port}",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "zookeeper.connect": ",".join(f"{z}:2181" for z in ZK_NODES),
            "zookeeper.session.timeout.ms": self.zookeeper_session_timeout_ms,
            "zookeeper.connection.timeout.ms": 30000,
            "log.dirs": "/var/lib/kafka/data",
            "num.partitions": 1,
            "default.replication.factor": self.default_replication_factor,
            "min.insync.replicas": self.min_insync_replicas,
            "unclean.leader.election.enable": str(self.unclean_leader_election).lower(),
            "auto.leader.rebalance.enable": str(self.auto_leader_rebalance).lower(),
            "leader.imbalance.check.interval.seconds": self.leader_imbalance_check_interval_seconds,
            "replica.lag.time.max.ms": self.replica_lag_time_max_ms,
            "offsets.topic.replication.factor": 3,
            "offsets.topic.num.partitions": self.offsets_topic_partitions,
            "transaction.state.log.replication.factor": 3,
            "transaction.state.log.min.isr": 2,
            "group.initial.rebalance.delay.ms": 0,
            "controlled.shutdown.enable": "true",
            "num.network.threads": 2,
            "num.io.threads": 4,
        }
        return props


ZOO_CFG = """\
# rendered by harness/brokers/kafka/cluster.py
tickTime=2000
initLimit=10
syncLimit=5
dataDir=/var/lib/zookeeper
clientPort=2181
maxClientCnxns=0
quorumListenOnAllIPs=true
4lw.commands.whitelist=*
admin.enableServer=false
autopurge.purgeInterval=1
""" + "".join(f"server.{i}={z}:2888:3888\n" for i, z in enumerate(ZK_NODES, 1))


class KafkaCluster(ComposeCluster):
    """What both metadata modes share; each says how it reads the metadata: ``quorum``,
    ``registered_brokers``, ``controller_and_epoch``, ``partitions``, ``registered_since_start``."""
    kind = "kafka"
    network_key = "kafkanet"
    image_repo = "mqchaos/kafka"
    image_vars = ("KAFKA_IMAGE", "ZOOKEEPER_IMAGE")
    generations = GENERATIONS
    data_mounts = {"zk": "/var/lib/zookeeper", "kafka": "/var/lib/kafka"}
    fs_dirs = {"kafka": "/var/lib/kafka/data"}  # log.dirs; ZooKeeper's disks keep power
    # FEATURES: metadata.version, KRaft's (a ZooKeeper cluster's once migrated; its
    # inter.broker.protocol.version is not done)
    # QUORUM_MEMBERSHIP: KIP-853 controllers, 4.1's (3.9 cannot make its static quorum dynamic)
    # MIGRATION: ZooKeeper's metadata to KRaft (KIP-866), 3.9 on ZooKeeper's only
    capabilities = CONTAINER_CAPABILITIES | {CORRUPT, UPGRADE, FEATURES, MEMBERSHIP, QUORUM_MEMBERSHIP, MIGRATION}
    data_file_kinds = {"segment": "the newest log segment (.log) of each of the topic's partitions on the node"}
    roles = ROLES
    ports = {"internal": (INTERNAL_PORT,)}  # the brokers' own listener: replication
    zookeeper: ClassVar[bool]       # the mode (generations.ZOOKEEPER) the class brings up
    quorum_what: ClassVar[str]      # what ``quorum`` waits for, in words

    def __init__(self, project: str | None = None, version: str | None = None) -> None:
        super().__init__(project)
        self.config = KafkaConfig()
        self.config.version = version
        self._admin = None
        self._pinned: dict[str, Any] = {}  # node -> an AdminClient asking that broker only
        self._pinned_lock = threading.Lock()
        # the brokers: as many as the last up here brought up (a dead run's heal, in another
        # process, finds its kafka4 and kafka5 in the size override)
        self._size = self._recorded_size()

    def _recorded_size(self) -> int:
        try:
            services = (yaml.safe_load(self.size_override().read_text()) or {}).get("services") or {}
        except (OSError, yaml.YAMLError):
            return len(BROKERS)
        return len(BROKERS) + sum(1 for name in services if name.startswith("kafka"))

    def _write_size_override(self) -> None:
        """kafka4.. as copies of the compose file's kafka3 (its own name, port, address and
        volume), or no override for three."""
        path = self.size_override()
        if self._size <= len(BROKERS):
            path.unlink(missing_ok=True)
            return
        self._write_copies(path, "the brokers beyond three", {
            node: (20 + broker_id(node), [f"127.0.0.1:{KAFKA_PORTS[node]}:{KAFKA_PORTS[node]}"])
            for node in broker_names(self._size)[len(BROKERS):]})

    def _write_copies(self, path: Path, what: str, nodes: dict[str, tuple[int, list[str] | None]]) -> None:
        """A compose override of services copied from the compose file's kafka3, each with its
        own name, data volume, address (node -> (last octet, published ports or None))."""
        base = yaml.safe_load((COMPOSE_DIR / self.compose_file).read_text())
        last = base["services"][BROKERS[-1]]
        services, volumes = {}, {}
        for node, (octet, ports) in nodes.items():
            svc = copy.deepcopy(last)
            svc["hostname"] = svc["container_name"] = node
            svc["environment"]["KAFKA_NODE"] = node
            svc["volumes"] = [v.replace(f"{BROKERS[-1]}-data:", f"{node}-data:") for v in svc["volumes"]]
            if ports is None:
                svc.pop("ports", None)
            else:
                svc["ports"] = ports
            net = svc["networks"][self.network_key]
            net["ipv4_address"] = net["ipv4_address"].rsplit(".", 1)[0] + f".{octet}"
            services[node], volumes[f"{node}-data"] = svc, {}
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# rendered by harness/brokers/kafka/cluster.py: {what}\n"
                        + yaml.safe_dump({"version": base.get("version", "2.4"), "services": services,
                                          "volumes": volumes}, sort_keys=False))

    def data_files(self, node: str, kind: str, subject: str | None) -> list[tuple[str, int]]:
        """``subject`` ``TOPIC`` (every partition's) or ``TOPIC/P`` (the nemesis's: partition P's)."""
        if kind not in self.data_file_kinds or not subject:
            raise ClusterError(f"no {kind!r} data files (kinds: {', '.join(self.data_file_kinds)}; a topic is needed)")
        topic, _, part = subject.partition("/")
        return self.newest_files(node, "/var/lib/kafka/data", f"*/{topic}-{part or '[0-9]*'}/*", "*.log")

    # ---- versions (issue 39) ------------------------------------------------------------
    def upgrade_reason(self, version: str) -> str | None:
        """A node moves only within its metadata mode: from ZooKeeper to KRaft is a migration
        of the metadata (KIP-866), not an image swap."""
        reason = super().upgrade_reason(version)
        on_zookeeper = self.metadata_on_zookeeper()
        if reason is None and has(version, ZOOKEEPER) != on_zookeeper:
            mode = "ZooKeeper" if on_zookeeper else "KRaft"
            return f"kafka {version} is not a {mode} version: a node of this cluster cannot run it on its data"
        return reason

    def controllers(self) -> list[str]:
        """Dedicated controller nodes (a migration's; a KRaft cluster's voters are its brokers)."""
        return []

    def metadata_on_zookeeper(self) -> bool:
        """Do the nodes keep the metadata in ZooKeeper (a version without ZooKeeper cannot run
        them)? The mode brought up, until a migration has finished."""
        return self.zookeeper

    def node_version(self, node: str) -> str | None:
        """What the broker (or a migration's controller) logged of itself at its last start
        (AppInfoParser)."""
        kafka_nodes = [*self.brokers(), *self.controllers()]
        return reported_version(self.logs(node)) if node in kafka_nodes and self.running(node) else None

    # ---- the feature level (issue 39): metadata.version ---------------------------------
    def _features_tool(self, *args: str) -> str:
        """kafka-features through each running broker in turn until one answers, as an operator
        would (a broker cut from the controllers cannot: U3b ran it on the isolated one)."""
        error: ClusterError | None = None
        for node in (n for n in self.brokers() if self.running(n)):
            try:
                return self.exec(node, feature_command(f"{node}:{INTERNAL_PORT}", *args), timeout=120)[1]
            except ClusterError as e:
                error = e
        raise error or ClusterError("no broker runs to ask kafka-features")

    def features(self) -> dict[str, str]:
        return parse_features(self._features_tool("describe"))

    def features_reason(self) -> str | None:
        """Why the cluster has no metadata.version to raise (None: it has: KRaft's metadata)."""
        return None

    def finalize_features(self, params: dict) -> dict[str, str]:
        """``params.release`` (4.1): ``kafka-features upgrade --release-version``; then
        metadata.version must be at that release's level (4.1-IVn)."""
        reason = self.features_reason()
        if reason:
            raise ClusterError(reason)
        release = str(params.get("release") or "")
        if not release:
            raise ClusterError("finalize on kafka needs params.release (e.g. 4.1)")
        self._features_tool("upgrade", "--release-version", release)
        return {"metadata.version": f"{release}-"}

    # ---- membership (issue 39): a partition's replicas, moved by reassignment -------------
    @staticmethod
    def _subject(subject: str) -> tuple[str, int]:
        topic, _, part = subject.partition("/")
        return topic, int(part or 0)

    def members(self, subject: str) -> list[str]:
        """The replicas of the subject's partition (``TOPIC`` is its partition 0)."""
        topic, part = self._subject(subject)
        return list(self.partitions(topic)[part]["replicas"])

    def change_member(self, op: str, node: str, subject: str) -> None:
        """A partition reassignment (kafka-reassign-partitions --execute) to the replicas
        without ``node`` (remove) or with it appended (add), run on a running broker other
        than ``node``; the new replica set is what ``members`` then shows."""
        topic, part = self._subject(subject)
        now = self.members(subject)
        want = [r for r in now if r != node] if op == "remove" else [*now, *([node] if node not in now else [])]
        at = next((n for n in self.brokers() if n != node and self.running(n)), node)
        plan = "/tmp/mqchaos-reassign.json"
        text = reassignment(topic, part, [broker_id(n) for n in want])  # JSON: no single quote in it
        self.exec(at, ["sh", "-c", f"printf '%s' '{text}' > {plan}"], timeout=30)
        self.exec(at, reassign_command(f"{at}:{INTERNAL_PORT}", plan, "--execute"), timeout=120)

    # ---- topology -------------------------------------------------------------------
    def brokers(self) -> list[str]:
        return broker_names(self._size)

    def client_endpoints(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{KAFKA_PORTS[n]}" for n in self.brokers()}

    def bootstrap_servers(self) -> str:
        return ",".join(self.client_endpoints().values())

    broker_id = staticmethod(broker_id)
    broker_node = staticmethod(broker_node)

    # ---- what each mode reads its own way --------------------------------------------
    def quorum(self) -> bool:
        """The metadata quorum serves (a ZooKeeper leader and followers / a raft leader)."""
        raise NotImplementedError

    def registered_brokers(self) -> list[str]:
        raise NotImplementedError

    def controller_and_epoch(self) -> tuple[str | None, int | None]:
        raise NotImplementedError

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        """Per partition: leader, ISR, replicas, preferred replica (first replica), leader
        epoch (None where the mode cannot read it). Node names, not broker ids."""
        raise NotImplementedError

    def registered_since_start(self, node: str) -> bool:
        """The broker's registration belongs to its current run (not its previous one's)."""
        raise NotImplementedError

    def role_partitions(self, topic: str) -> list[dict[str, Any]]:
        """The partitions a role (``leader``, ``isr``, ``followers``) is resolved from when a
        fault is applied: the mode's own record."""
        return self.partitions(topic)

    def elr(self, topic: str, partition: int, below_min_isr: bool) -> tuple[list[str] | None, float | None]:
        """The partition's eligible leader replicas (KIP-966) as last read, and how many
        seconds ago; (None, None): not read (a version without ELR)."""
        return None, None

    def role_nodes(self, name: str) -> list[str]:
        """The nodes of a mode's own role that takes no argument (``zk``, ``voters``)."""
        raise RoleError(f"a kafka cluster has no role {name!r}")

    def controller(self) -> str | None:
        return self.controller_and_epoch()[0]

    def controller_epoch(self) -> int | None:
        return self.controller_and_epoch()[1]

    # ---- lifecycle ------------------------------------------------------------------
    def write_config(self, config: KafkaConfig) -> None:
        conf = self.conf_dir()
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "zoo.cfg").write_text(ZOO_CFG)
        (conf / "log4j.properties").write_text(LOG4J)
        # compose/kafka/kafka-entrypoint.sh: log4j 2's file read by an image that has log4j 2
        # (4.x: an upgraded node reads the same conf as its 3.9 peers); the storage of a KRaft
        # node formatted with the cluster id when that file is there
        (conf / "log4j2.properties").write_text(LOG4J2)
        for name, text, wanted in (("cluster-id", cluster_id() + "\n", not has(config.version, ZOOKEEPER)),):
            (conf / name).unlink(missing_ok=True)
            if wanted:
                (conf / name).write_text(text)
        for node in broker_names(config.brokers):
            (conf / f"{node}.properties").write_text(config.properties(node))

    def up(self, config: KafkaConfig | None = None, fresh: bool = True) -> None:
        """Every node at once (a ZooKeeper-mode broker waits for ZooKeeper up to
        zookeeper.connection.timeout.ms, 30 s; the quorum forms in about 3, so its JVM starts
        meanwhile). Healthy = the metadata quorum, every broker registered, a RF-3 topic with
        a full ISR."""
        self.config = config or KafkaConfig(version=self.config.version)
        if has(self.config.version, ZOOKEEPER) != self.zookeeper:
            raise ClusterError(f"Kafka {self.generation().name} is not what a {type(self).__name__} "
                               "brings up: make the cluster with the plug-in's cluster(version=...)")
        self.close()
        if fresh:
            self.down()
        self._size = self.config.brokers
        self._write_size_override()
        self.write_config(self.config)
        self._compose_up(self.nodes())
        self._wait_healthy_or_explain(self.quorum, self.config.healthy_timeout, self.quorum_what,
                                      must_run=self.nodes())
        self.wait_healthy(self.config.healthy_timeout, must_run=self.nodes())

    def down(self) -> None:
        self.close()
        super().down()

    def versions(self) -> dict[str, Any]:
        _, out = self.exec("kafka1", ["sh", "-c", "ls /opt/kafka/libs | grep -m1 '^kafka_'"], check=False)
        return {"kafka": out.strip() or None}

    def describe(self) -> dict[str, Any]:
        try:
            controller, epoch = self.controller_and_epoch()
            return {"version": self.generation().name, "registered_brokers": self.registered_brokers(),
                    "controller": controller, "controller_epoch": epoch, "healthy": self.healthy()}
        finally:
            self.close()

    def wait_healthy(self, timeout: float = 180, must_run: list[str] | None = None) -> None:
        self._wait_healthy_or_explain(self._all_registered, timeout, f"{len(self.brokers())} brokers registered",
                                      must_run)
        deadline = time.monotonic() + timeout

        def topic_ready() -> bool:
            if HEALTH_TOPIC not in self.topics():
                self.create_topic(HEALTH_TOPIC, partitions=3, wait=False)
            return self.fully_replicated(HEALTH_TOPIC) and self.every_broker_names_leaders(HEALTH_TOPIC)
        self._wait_healthy_or_explain(topic_ready, max(10.0, deadline - time.monotonic()),
                                      f"topic {HEALTH_TOPIC} fully in sync")

    def every_broker_names_leaders(self, topic: str) -> bool:
        """Each broker's own metadata names a leader for every partition of ``topic``. The
        controller's record (ZooKeeper's, in that mode) is written before the brokers learn it:
        a client asking a broker in between gets LEADER_NOT_AVAILABLE (CI, 2026-11-27)."""
        views, errors = self.node_views(topic, 10)  # every broker is in one or the other
        return not errors and all(ps and all(p["leader"] for p in ps) for ps in views.values())

    def _all_registered(self) -> bool:
        return all(self.running(n) for n in self.nodes()) and self.registered_brokers() == self.brokers()

    def healthy(self) -> bool:
        try:
            return (self.quorum() and self._all_registered()
                    and (HEALTH_TOPIC not in self.topics() or self.fully_replicated(HEALTH_TOPIC)))
        except Exception:  # noqa: BLE001
            return False

    def started_at(self, node: str) -> float | None:
        raw = self.state(node).get("StartedAt")
        if not raw or raw.startswith("0001"):
            return None
        raw = raw.rstrip("Z")
        main, _, frac = raw.partition(".")
        ts = datetime.fromisoformat(main + "+00:00").timestamp()
        return ts + (float("0." + frac[:6]) if frac else 0.0)

    def close(self) -> None:
        """Forget the clients (confluent-kafka's AdminClient has no close: dropping the last
        reference destroys its handle)."""
        self._admin = None
        with self._pinned_lock:
            self._pinned.clear()

    # ---- partitions ------------------------------------------------------------------
    def leader(self, topic: str, partition: int = 0) -> str | None:
        return self.partitions(topic)[partition]["leader"]

    def isr(self, topic: str, partition: int = 0) -> list[str]:
        return self.partitions(topic)[partition]["isr"]

    def followers(self, topic: str, partition: int = 0) -> list[str]:
        p = self.partitions(topic)[partition]
        return [r for r in p["replicas"] if r != p["leader"]]

    def fully_replicated(self, topic: str) -> bool:
        parts = self.partitions(topic)
        return bool(parts) and all(p["leader"] and sorted(p["isr"]) == sorted(p["replicas"]) for p in parts)

    # ---- AdminClient (through 127.0.0.1) --------------------------------------------
    def admin(self):
        """One AdminClient per cluster object (kept: futures die with their client)."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers(),
                                       "socket.timeout.ms": 10000, "log_level": 0,
                                       "logger": logging.getLogger("mqchaos.kafka.admin")})
        return self._admin

    def topics(self, timeout: float = 10) -> list[str]:
        md = self.admin().list_topics(timeout=timeout)
        return sorted(md.topics)

    def metadata(self, topic: str, timeout: float = 10) -> list[dict[str, Any]]:
        """Per partition as the brokers' metadata says: leader, ISR, replicas (node names).
        Whichever broker the client asks answers from its own metadata image: not a view to
        take for the cluster's (``node_metadata`` says whose it is)."""
        return partitions_of(self.admin().list_topics(topic=topic, timeout=timeout), topic)

    # ---- each broker's own view (a client pinned to it) --------------------------------
    def node_admin(self, node: str):
        """The AdminClient that asks only ``node``'s broker, kept per node so that a sample
        each second does not start a client (and its threads) per node."""
        with self._pinned_lock:
            client = self._pinned.get(node)
            if client is None:
                client = self._pinned[node] = AdminClient(pinned_config(self.client_endpoints()[node]))
            return client

    def forget_node_admin(self, node: str, client: Any) -> None:
        """Drop ``node``'s pinned client, unless another has replaced it meanwhile."""
        with self._pinned_lock:
            if self._pinned.get(node) is client:
                del self._pinned[node]

    def node_metadata(self, node: str, topic: str, timeout: float = 10) -> list[dict[str, Any]]:
        """``topic``'s partitions as ``node``'s broker sees them, proven to be its answer."""
        return adminclient.node_metadata(self, node, topic, timeout)

    def node_views(self, topic: str, timeout: float) -> tuple[dict[str, list[dict]], dict[str, str]]:
        """Every broker's own view of ``topic``, and why a broker gave none."""
        return adminclient.node_views(self, topic, timeout)

    def view_source(self) -> tuple[str | None, str | None, int | None]:
        """Whose view is the cluster's (a node, ``zookeeper``, or None: unknown, no guess),
        the controller and its epoch, from one reading of the metadata quorum."""
        raise NotImplementedError

    def view_partitions(self, source: str | None, topic: str, views: dict[str, list[dict]]) -> list[dict] | None:
        """The cluster's view of ``topic`` given ``view_source``'s answer and the brokers'
        own views: by default the source node's own (None when unknown or unanswered)."""
        return views.get(source) if source else None

    def metadata_brokers(self, timeout: float = 10) -> list[str]:
        md = self.admin().list_topics(timeout=timeout)
        return sorted(broker_node(b) for b in md.brokers)  # type: ignore[misc]

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: dict[str, str] | None = None, replicas: list[list[str]] | None = None,
                     wait: bool = True, timeout: float = 60) -> None:
        """Create a topic (RF 3 by default, or ``replicas`` per partition); wait until in sync."""
        adminclient.create_topic(self, name, partitions, replication_factor, config, replicas, wait, timeout)

    def wait_broker_rejoined(self, node: str, topic: str = HEALTH_TOPIC, timeout: float = 120) -> None:
        """Wait until ``node`` is registered and back in the ISR of every partition of ``topic``."""
        def ok() -> bool:
            return self.registered_since_start(node) and all(node in p["isr"] for p in self.partitions(topic))
        self._wait_healthy_or_explain(ok, timeout, f"{node} rejoined the ISR of {topic}")

    # ---- a KRaft quorum, from each voter's own view -------------------------------------
    def quorum_views_of(self, nodes: list[str]) -> dict[str, dict | None]:
        """Each node's persisted quorum state (None: not readable: down, frozen, not yet
        formatted), read from all of them at once."""
        def read(node: str) -> dict | None:
            try:
                code, out = self.exec(node, ["cat", QUORUM_STATE], check=False, timeout=5)
                return quorum_state(out) if code == 0 else None
            except (ValueError, RuntimeError):  # half-written, or docker exec timed out
                return None
        if not nodes:
            return {}
        with ThreadPoolExecutor(len(nodes)) as pool:
            return dict(zip(nodes, pool.map(read, nodes)))

    def since_start(self, node: str) -> str:
        """The node's log since its container last started."""
        return self.logs(node, since=self.state(node).get("StartedAt"))

    def unfenced_since_start(self, node: str, log: str | None = None) -> bool:
        """A KRaft broker's registration is its current run's: it runs, the metadata lists it,
        and its own log since its start (``log``, if already read) says it was unfenced."""
        if not self.running(node) or node not in self.registered_brokers():
            return False
        return UNFENCED in (self.since_start(node) if log is None else log)

    # ---- roles -------------------------------------------------------------------------
    def role(self, name: str, arg: str | None) -> list[str]:
        return resolve_role(self, name, arg)

    # ---- recovery ----------------------------------------------------------------------
    def wait_whole(self, timeout: float, steady: Steady, record: Recorder, stale_after: float | None = None) -> None:
        """Replication restored, not only every broker registered (``whole``)."""
        whole.wait(self, timeout, steady)

    def whole_condition(self) -> str:
        return whole.waited_for(self.quorum_what)

    def stuck_nodes(self) -> list[str]:
        return whole.stuck(self)

    def wait_rejoined(self, node: str, timeout: float) -> None:
        if node in self.brokers():
            wait_until(lambda: self.registered_since_start(node), timeout, f"{node} registered again", 0.5)


MIGRATION_FILE = "migration.json"  # the migration's phase begun last (a dead run's heal reads it)


class ZooKeeperCluster(ControllerNodes, KafkaCluster):
    """Kafka 3.9 with a ZooKeeper ensemble (zk1..3): the metadata read from ZooKeeper, until a
    migration to KRaft (``migrate``, KIP-866) moves it to dedicated controllers (ctrl1..3):
    from then on each reader takes it where the phase reached keeps it (``migration``)."""
    compose_file = "kafka.yml"
    zookeeper = True
    quorum_what = "ZooKeeper quorum"
    roles = {**KafkaCluster.roles, "zk": Role("zk", "the ZooKeeper nodes"),
             "controllers": Role("controllers", "the dedicated KRaft controllers a migration added"),
             "kraft_controller": Role("kraft_controller", "a migration's active KRaft controller (the raft leader "
                                                          "of ctrl1..3; none before the controllers phase)")}

    def __init__(self, project: str | None = None, version: str | None = None) -> None:
        super().__init__(project, version)
        self._zk = None
        self._zk_lock = threading.Lock()

    def nodes(self) -> list[str]:
        return ZK_NODES + self.brokers() + self.controllers()

    # ---- the migration to KRaft (issue 39, KIP-866: harness/brokers/kafka/migration.py) ----
    def migration_phase(self) -> str | None:
        """The migration's phase begun last; None: none begun (the cluster is ZooKeeper's)."""
        try:
            return json.loads((self.state_dir / MIGRATION_FILE).read_text()).get("phase")
        except (OSError, ValueError, AttributeError):
            return None

    def _past(self, phase: str) -> bool:
        return migration.phase_index(self.migration_phase()) >= migration.PHASES.index(phase)

    def controllers(self) -> list[str]:
        """The dedicated controllers, once a migration has added them."""
        return list(CONTROLLERS) if self._past("controllers") else []

    def controller_leader(self) -> str | None:
        """A migration's active controller, if a majority of ctrl1..3's own views name it
        (None: no controllers yet, or no leader they agree on)."""
        ctrls = self.controllers()
        return quorum_leader(self.quorum_views_of(ctrls), ctrls) if ctrls else None

    def _node_properties(self, node: str, phase: str | None) -> str:
        who = "harness/brokers/kafka/migration.py"
        if node in CONTROLLERS:
            props = migration.controller_properties(node, self.config.property_map(BROKERS[0]), phase)
        else:
            props = migration.broker_properties(self.config.property_map(node), phase)
        return render_properties(props, who)

    def migrate(self, phase: str, params: dict, now: Callable[[], float], steps: list[dict[str, Any]]) -> None:
        """The phase (migration.PHASES, in order): the controllers started, or each broker /
        controller in turn stopped gracefully, given the phase's configuration, started and
        waited for (``params.rejoin_timeout``). The phase is recorded before anything acts, so
        a dead run's heal finds the controllers."""
        phase = migration.check_phase(phase)
        last = migration.phase_index(self.migration_phase())
        if migration.PHASES.index(phase) != last + 1:
            raise ClusterError(f"migration phase {phase!r} cannot follow {migration.PHASES[last] if last >= 0 else 'none'}"
                               f": the phases run in order ({', '.join(migration.PHASES)})")
        timeout = float(params.get("rejoin_timeout", 180))
        if phase == "controllers":
            cid = migration.zk_cluster_id(self.zk_get_json("/cluster/id"))
            self.write_controllers_override("a migration's KRaft controllers")
            (self.state_dir / MIGRATION_FILE).write_text(json.dumps({"phase": phase}))
            (self.conf_dir() / "cluster-id").write_text(cid + "\n")
            for node in CONTROLLERS:
                (self.conf_dir() / f"{node}.properties").write_text(self._node_properties(node, phase))
            step = {"nodes": list(CONTROLLERS), "start": now()}
            steps.append(step)
            self.compose("up", "-d", "--no-build", "--no-deps", *CONTROLLERS, timeout=600)
            wait_until(self.controller_leader, timeout, "the controllers' quorum to elect a leader", 1.0)
            step["ready"] = now()
            return
        (self.state_dir / MIGRATION_FILE).write_text(json.dumps({"phase": phase}))
        for node in (CONTROLLERS if phase == "finalize" else self.brokers()):
            step = {"node": node, "stop": now()}
            steps.append(step)
            self.stop(node, timeout=float(params.get("timeout", 60)))
            (self.conf_dir() / f"{node}.properties").write_text(self._node_properties(node, phase))
            step["start"] = now()
            self.start(node)
            wait_until(lambda n=node: self._rolled(n, phase), timeout, f"{node} back after the {phase} phase", 1.0)
            step["rejoined"] = now()

    def _rolled(self, node: str, phase: str) -> bool:
        if not (self.running(node) and not self.paused(node)):
            return False
        if node in CONTROLLERS:  # started, in its quorum again (told the leader since its start), one serves
            log = self.since_start(node)
            return (migration.CONTROLLER_STARTED in log and bool(migration.CONTROLLER_JOINED.search(log))
                    and self.controller_leader() is not None)
        return self.registered_since_start(node)

    def migration_state(self) -> dict[str, Any]:
        """What the nodes show: the controllers' raft leader, whether a controller logged the
        metadata's copy from ZooKeeper, which controllers run in migration mode (their
        configuration as logged at their start), each broker's mode (its log since its start),
        the brokers the metadata lists."""
        ctrls = self.controllers()
        running = [n for n in ctrls if self.running(n)]
        state: dict[str, Any] = {
            "phase": self.migration_phase(),
            "controller_leader": self.controller_leader(),
            "migrated": any(migration.MIGRATED in self.logs(n) for n in running),
            "controllers_migrating": [n for n in running
                                      if f"{migration.MIGRATION_FLAG} = true" in self.since_start(n)],
            "broker_modes": {n: migration.broker_mode(self.since_start(n)) if self.running(n) else None
                             for n in self.brokers()},
        }
        try:
            state["registered"] = self.registered_brokers()
        except Exception as e:  # noqa: BLE001 - no answer is itself evidence
            state["registered"] = f"no answer: {type(e).__name__}: {e}"[:200]
        return state

    def migration_reached(self, phase: str, state: dict[str, Any]) -> bool:
        return migration.reached(phase, state)

    def metadata_on_zookeeper(self) -> bool:
        return not self._past("finalize")

    def features_reason(self) -> str | None:
        return None if self._past("finalize") else (
            "metadata.version is KRaft's: a ZooKeeper cluster has one once migrate_to_kraft has finalized")

    def features(self) -> dict[str, str]:
        return {} if self.features_reason() else super().features()

    def down(self) -> None:
        super().down()  # the controllers' override too (ControllerNodes)
        (self.state_dir / MIGRATION_FILE).unlink(missing_ok=True)

    def zk_nodes(self) -> list[str]:
        return list(ZK_NODES)

    def zk_endpoints(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{ZK_PORTS[n]}" for n in ZK_NODES}

    def role_nodes(self, name: str) -> list[str]:
        if name == "zk":
            return list(ZK_NODES)
        if name == "controllers":
            return self.controllers()
        if name == "kraft_controller":
            leader = self.controller_leader()
            return [leader] if leader else []
        return super().role_nodes(name)

    def start(self, node: str) -> None:
        """Start (or unpause) a node. A broker started again while its previous ZooKeeper
        registration lives on (within zookeeper.session.timeout.ms of a kill -9) exits at once
        with NodeExistsException, so wait for the old session to expire first."""
        st = self.state(node)
        if node in self.brokers() and st and not st.get("Running") and not self._kraft_configured(node):
            limit = self.config.zookeeper_session_timeout_ms / 1000 + 20
            try:
                wait_until(lambda: node not in self.zk_registered(), limit,
                           f"{node}'s previous ZooKeeper session to expire", 0.25)
            except TimeoutError as exc:
                log.warning("%s; starting %s anyway", exc, node)
        super().start(node)

    def registration_time(self, node: str) -> float | None:
        """When the broker's live ZooKeeper registration was created (epoch seconds)."""
        try:
            _, stat = self.zk().get(f"/brokers/ids/{broker_id(node)}")
        except NoNodeError:
            return None
        return stat.ctime / 1000.0

    def registered_since_start(self, node: str) -> bool:
        if self._past("kraft"):  # a KRaft broker now (its own start says so): unfenced since its start
            log = self.since_start(node)
            if migration.broker_mode(log) == "kraft":
                return self.unfenced_since_start(node, log)
        reg, started = self.registration_time(node), self.started_at(node)
        return reg is not None and started is not None and self.running(node) and reg >= started - 2

    def wait_rejoined(self, node: str, timeout: float) -> None:
        if node in self.controllers():
            wait_until(lambda: self._rolled(node, "controllers"), timeout, f"{node} back in the controllers' quorum", 1)
        elif node in self.brokers() and self._past("kraft"):
            wait_until(lambda: self.registered_since_start(node), timeout, f"{node} registered", 0.5)
        elif node in self.brokers():
            # start() waited for the old session to expire: any registration is the new one
            wait_until(lambda: node in self.registered_brokers(), timeout, f"{node} registered", 0.5)

    def close(self) -> None:
        super().close()
        with self._zk_lock:
            self._discard_zk()

    def _discard_zk(self) -> None:
        """Stop and forget the ZooKeeper client (the caller holds ``_zk_lock``)."""
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # noqa: BLE001 - a dead session is what we are discarding
                pass
            self._zk = None

    # ---- ZooKeeper (kazoo through 127.0.0.1) ----------------------------------------
    def zk(self):
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        with self._zk_lock:
            if self._zk is None or not self._zk.connected:
                self._discard_zk()
                client = KazooClient(hosts=",".join(self.zk_endpoints().values()), timeout=6.0,
                                     connection_retry=KazooRetry(max_tries=3, delay=0.2, max_delay=1),
                                     command_retry=KazooRetry(max_tries=3, delay=0.2, max_delay=1))
                client.start(timeout=10)
                self._zk = client
            return self._zk

    def zk_get_json(self, path: str) -> Any:
        try:
            data, _ = self.zk().get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def zk_children(self, path: str) -> list[str]:
        try:
            return self.zk().get_children(path)
        except NoNodeError:
            return []

    def zk_mode(self, node: str, timeout: float = 3) -> str | None:
        """'leader' / 'follower' / 'standalone', or None if the server does not serve (4lw srvr)."""
        try:
            with socket.create_connection(("127.0.0.1", ZK_PORTS[node]), timeout=timeout) as s:
                s.sendall(b"srvr")
                s.settimeout(timeout)
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
        except OSError:
            return None
        for line in data.decode(errors="replace").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def zk_quorum(self) -> bool:
        modes = [self.zk_mode(n) for n in ZK_NODES]
        return modes.count("leader") == 1 and modes.count("follower") == 2

    def quorum(self) -> bool:
        """ZooKeeper's, and a migration's controllers' once they are up; after ``finalize``
        the controllers' alone (ZooKeeper is no longer written)."""
        controllers_serve = not self.controllers() or self.controller_leader() is not None
        return controllers_serve and (self._past("finalize") or self.zk_quorum())

    def registered_brokers(self) -> list[str]:
        """Brokers with a live registration in ZooKeeper (/brokers/ids); from a migration's
        ``kraft`` phase on (a KRaft broker registers with the controllers only), the brokers
        the metadata lists."""
        return self.metadata_brokers() if self._past("kraft") else self.zk_registered()

    def zk_registered(self) -> list[str]:
        return sorted(broker_node(i) for i in self.zk_children("/brokers/ids"))  # type: ignore[misc]

    def _kraft_configured(self, node: str) -> bool:
        """Will ``node`` start as a KRaft broker (its rendered configuration has a role)?"""
        try:
            return "\nprocess.roles=" in (self.conf_dir() / f"{node}.properties").read_text()
        except OSError:
            return False

    def controller_and_epoch(self) -> tuple[str | None, int | None]:
        """The controller (ZooKeeper's /controller: a broker, or during a migration the
        active KRaft controller, which claims it) and /controller_epoch; after ``finalize``
        the controllers' raft leader and epoch."""
        if self._past("finalize"):
            return active_controller(self.quorum_views_of(self.controllers()))
        data, epoch = self.zk_get_json("/controller"), self.zk_get_json("/controller_epoch")
        return (broker_node(data["brokerid"]) if data else None), (int(epoch) if epoch is not None else None)

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        """From ZooKeeper (the controller's record; a migration's controller writes it there
        too until ``finalize``), then from the brokers' metadata (no leader epoch)."""
        if self._past("finalize"):
            return [{**p, "leader_epoch": None} for p in self.metadata(topic)]
        assign = self.zk_get_json(f"/brokers/topics/{topic}")
        if not assign:
            raise ClusterError(f"topic {topic} does not exist")
        res = []
        for p, replicas in sorted(assign["partitions"].items(), key=lambda kv: int(kv[0])):
            st = self.zk_get_json(f"/brokers/topics/{topic}/partitions/{p}/state") or {}
            reps = [broker_node(r) for r in replicas]
            res.append({
                "partition": int(p),
                "leader": broker_node(st.get("leader")),
                "isr": [broker_node(r) for r in st.get("isr", [])],
                "replicas": reps,
                "preferred": reps[0] if reps else None,
                "leader_epoch": st.get("leader_epoch"),
            })
        return res

    def role_partitions(self, topic: str) -> list[dict[str, Any]]:
        """ZooKeeper's record; when ZooKeeper does not answer (its majority lost: K16), the
        brokers' metadata, which then cannot have moved on: without ZooKeeper the controller
        can change no leader or ISR, so every broker still holds its last update."""
        try:
            return self.partitions(topic)
        except (KazooException, KazooTimeoutError) as e:
            log.info("ZooKeeper does not answer (%s: %s): %s's roles from the brokers' metadata",
                     type(e).__name__, e, topic)
            return self.metadata(topic)

    def view_source(self) -> tuple[str | None, str | None, int | None]:
        """ZooKeeper holds the controller's record: the cluster's view, whatever a broker caches."""
        return ("zookeeper", *self.controller_and_epoch())

    def view_partitions(self, source: str | None, topic: str, views: dict[str, list[dict]]) -> list[dict] | None:
        return self.partitions(topic)

    def describe_controller_via_admin(self, timeout: float = 10) -> str | None:
        """The controller as clients see it (in KRaft mode a random broker: not offered there)."""
        res = self.admin().describe_cluster(request_timeout=timeout).result(timeout=timeout)
        return broker_node(res.controller.id) if res.controller else None


__all__ = ["BROKERS", "HEALTH_TOPIC", "INTERNAL_PORT", "ForeignAnswer", "KafkaCluster", "KafkaConfig", "ZK_NODES",
           "ZooKeeperCluster", "answered_by", "broker_id", "broker_node", "partitions_of", "pinned_config"]
