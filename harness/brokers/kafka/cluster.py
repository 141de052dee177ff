"""Kafka clusters: brokers (kafka1..N) and where they keep the cluster's metadata, by version
(``generations.ZOOKEEPER``). The topology is made of values, each a service of the cluster's
(kafkatest's quorum.py makes the metadata quorum a value, isolated controllers a service of
their own):

- the brokers (``services.BrokerNodes``: three, or up to five copies of kafka3);
- the metadata quorum: a ZooKeeper ensemble (``zookeeper.ZooKeeperEnsemble``, zk1..3:
  ``ZooKeeperCluster``, 3.9), or a KRaft controller quorum (``quorum.ControllerQuorum``:
  ``kraft_cluster.KRaftCluster``, 3.9-kraft and 4.1) whose voters are the brokers themselves
  (combined) or three controllers of their own (dedicated, ``controllers.ControllerNodes``,
  ctrl1..3, which a ZooKeeper cluster's migration to KRaft adds too);
- no load balancer: a Kafka client is sent to each partition's leader by the metadata.

``KafkaCluster`` holds what every topology shares: configuration (``config``), the
AdminClient, topics, roles and recovery over the metadata, which each topology class reads
its own way (``quorum``, ``registered_brokers``, ``controller_and_epoch``, ``partitions``,
``registered_since_start``, ``view_source``). The operation families are components
(``operations``): the class's ``components`` say which it has.

Clients reach the brokers through 127.0.0.1:9092..9094 (external listeners advertised as
such) and ZooKeeper through 127.0.0.1:2181..2183; the brokers talk to each other on the
internal listener. Broker ids: kafka<N> has broker.id (node.id) N (``nodes``).

Whose view: each broker answers a Metadata request from its own metadata image; ``adminclient``
asks each one through a client pinned to it and proves whose answer it is. The roles a fault
targets are resolved in ``roles``.
"""
from __future__ import annotations

import abc
import logging
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from confluent_kafka.admin import AdminClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from harness.brokers.compose import ComposeCluster
from harness.brokers.protocol import ClusterError, Recorder, Role, RoleError, Steady
from harness.brokers.kafka import adminclient, whole
from harness.brokers.kafka.adminclient import ForeignAnswer, answered_by, partitions_of, pinned_config
from harness.brokers.kafka.config import LOG4J, ZOO_CFG, KafkaConfig
from harness.brokers.kafka.controllers import ControllerNodes
from harness.brokers.kafka.generations import GENERATIONS, ZOOKEEPER, has
from harness.brokers.kafka.kraft import LOG4J2, UNFENCED, cluster_id
from harness.brokers.kafka.migration import MigrationRecord, broker_mode
from harness.brokers.kafka.nodes import (BROKERS, CONTROLLERS, INTERNAL_PORT, KAFKA_PORTS, ZK_NODES, broker_id,
                                         broker_names, broker_node)
from harness.brokers.kafka.operations import (KafkaFeatures, KafkaFiles, KafkaMembership, KafkaVersions,
                                              ZooKeeperMigration)
from harness.brokers.kafka.quorum import ControllerQuorum
from harness.brokers.kafka.roles import ROLES, resolve_role
from harness.brokers.kafka.services import BrokerNodes
from harness.brokers.kafka.zookeeper import ZooKeeperEnsemble
from harness.util import wait_until

log = logging.getLogger(__name__)

HEALTH_TOPIC = "mqchaos-health"


class KafkaCluster(ComposeCluster):
    """What every topology shares; each topology class says how it reads the metadata
    (the abstract readers below)."""
    kind = "kafka"
    network_key = "kafkanet"
    image_repo = "mqchaos/kafka"
    image_vars = ("KAFKA_IMAGE", "ZOOKEEPER_IMAGE")
    generations = GENERATIONS
    data_mounts = {"zk": "/var/lib/zookeeper", "kafka": "/var/lib/kafka"}
    fs_dirs = {"kafka": "/var/lib/kafka/data"}  # log.dirs; ZooKeeper's disks keep power
    components = ComposeCluster.components + (KafkaFiles, KafkaVersions, KafkaFeatures, KafkaMembership)
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
        self.broker_nodes = BrokerNodes(self)
        self.controller_nodes = ControllerNodes(self)  # ctrl1..3, where the topology has them

    def overrides(self) -> list[Path]:
        """The dedicated controllers' override right after the size override: the later ones
        (an upgraded node's image, the CPU weight) apply to them too."""
        size, *rest = super().overrides()
        return [size, self.controller_nodes.override(), *rest]

    # ---- topology -------------------------------------------------------------------
    def brokers(self) -> list[str]:
        return self.broker_nodes.names()

    def controllers(self) -> list[str]:
        """The dedicated controller nodes the cluster has now (none in combined mode)."""
        return list(CONTROLLERS) if self.controller_nodes.present() else []

    def metadata_on_zookeeper(self) -> bool:
        """Do the nodes keep the metadata in ZooKeeper (a version without ZooKeeper cannot run
        them)? The mode brought up, until a migration has finished."""
        return self.zookeeper

    def client_endpoints(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{KAFKA_PORTS[n]}" for n in self.brokers()}

    def bootstrap_servers(self) -> str:
        return ",".join(self.client_endpoints().values())

    broker_id = staticmethod(broker_id)
    broker_node = staticmethod(broker_node)

    # ---- what each topology reads its own way ------------------------------------------
    @abc.abstractmethod
    def quorum(self) -> bool:
        """The metadata quorum serves (a ZooKeeper leader and followers / a raft leader)."""

    @abc.abstractmethod
    def registered_brokers(self) -> list[str]: ...

    @abc.abstractmethod
    def controller_and_epoch(self) -> tuple[str | None, int | None]: ...

    @abc.abstractmethod
    def partitions(self, topic: str) -> list[dict[str, Any]]:
        """Per partition: leader, ISR, replicas, preferred replica (first replica), leader
        epoch (None where the mode cannot read it). Node names, not broker ids."""

    @abc.abstractmethod
    def registered_since_start(self, node: str) -> bool:
        """The broker's registration belongs to its current run (not its previous one's)."""

    @abc.abstractmethod
    def view_source(self) -> tuple[str | None, str | None, int | None]:
        """Whose view is the cluster's (a node, ``zookeeper``, or None: unknown, no guess),
        the controller and its epoch, from one reading of the metadata quorum."""

    def view_partitions(self, source: str | None, topic: str, views: dict[str, list[dict]]) -> list[dict] | None:
        """The cluster's view of ``topic`` given ``view_source``'s answer and the brokers'
        own views: by default the source node's own (None when unknown or unanswered)."""
        return views.get(source) if source else None

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
        (conf / "cluster-id").unlink(missing_ok=True)
        if not has(config.version, ZOOKEEPER):
            (conf / "cluster-id").write_text(cluster_id() + "\n")
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
        self.broker_nodes.resize(self.config.brokers)
        self.write_config(self.config)
        self._compose_up(self.nodes())
        self._wait_healthy_or_explain(self.quorum, self.config.healthy_timeout, self.quorum_what,
                                      must_run=self.nodes())
        self.wait_healthy(self.config.healthy_timeout, must_run=self.nodes())

    def down(self) -> None:
        self.close()
        super().down()
        self.controller_nodes.remove()

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


class ZooKeeperCluster(KafkaCluster):
    """Kafka 3.9 with a ZooKeeper ensemble (zk1..3, ``ensemble``): the metadata read from
    ZooKeeper, until a migration to KRaft (its ``Migration`` component,
    ``operations.ZooKeeperMigration``, KIP-866) moves it to dedicated controllers (ctrl1..3,
    ``controller_quorum``): from then on each reader takes it where the phase reached
    (``migration``) keeps it."""
    compose_file = "kafka.yml"
    zookeeper = True
    quorum_what = "ZooKeeper quorum"
    components = KafkaCluster.components + (ZooKeeperMigration,)
    roles = {**KafkaCluster.roles, "zk": Role("zk", "the ZooKeeper nodes"),
             "controllers": Role("controllers", "the dedicated KRaft controllers a migration added"),
             "kraft_controller": Role("kraft_controller", "a migration's active KRaft controller (the raft leader "
                                                          "of ctrl1..3; none before the controllers phase)")}

    def __init__(self, project: str | None = None, version: str | None = None) -> None:
        super().__init__(project, version)
        self.ensemble = ZooKeeperEnsemble()
        self.migration = MigrationRecord(self)  # the phase begun last
        # a migration's controllers (no voters before its first phase adds them)
        self.controller_quorum = ControllerQuorum(self, lambda: self.controllers())

    def nodes(self) -> list[str]:
        return self.ensemble.nodes + self.brokers() + self.controllers()

    def controllers(self) -> list[str]:
        """The dedicated controllers, once a migration has added them."""
        return list(CONTROLLERS) if self.migration.past("controllers") else []

    def metadata_on_zookeeper(self) -> bool:
        return not self.migration.past("finalize")

    def down(self) -> None:
        super().down()
        self.migration.clear()

    def close(self) -> None:
        super().close()
        self.ensemble.close()

    def role_nodes(self, name: str) -> list[str]:
        if name == "zk":
            return list(self.ensemble.nodes)
        if name == "controllers":
            return self.controllers()
        if name == "kraft_controller":
            leader = self.controller_quorum.leader()
            return [leader] if leader else []
        return super().role_nodes(name)

    # ---- node control ------------------------------------------------------------------
    def start(self, node: str) -> None:
        """Start (or unpause) a node. A broker started again while its previous ZooKeeper
        registration lives on (within zookeeper.session.timeout.ms of a kill -9) exits at once
        with NodeExistsException, so wait for the old session to expire first."""
        st = self.state(node)
        if node in self.brokers() and st and not st.get("Running") and not self._kraft_configured(node):
            limit = self.config.zookeeper_session_timeout_ms / 1000 + 20
            try:
                wait_until(lambda: node not in self.ensemble.registered(), limit,
                           f"{node}'s previous ZooKeeper session to expire", 0.25)
            except TimeoutError as exc:
                log.warning("%s; starting %s anyway", exc, node)
        super().start(node)

    def _kraft_configured(self, node: str) -> bool:
        """Will ``node`` start as a KRaft broker (its rendered configuration has a role)?"""
        try:
            return "\nprocess.roles=" in (self.conf_dir() / f"{node}.properties").read_text()
        except OSError:
            return False

    def wait_rejoined(self, node: str, timeout: float) -> None:
        if node in self.controllers():
            wait_until(lambda: self.controller_quorum.back(node), timeout, f"{node} back in the controllers' quorum", 1)
        elif node in self.brokers() and self.migration.past("kraft"):
            wait_until(lambda: self.registered_since_start(node), timeout, f"{node} registered", 0.5)
        elif node in self.brokers():
            # start() waited for the old session to expire: any registration is the new one
            wait_until(lambda: node in self.registered_brokers(), timeout, f"{node} registered", 0.5)

    # ---- the metadata, where the migration's phase keeps it ------------------------------
    def quorum(self) -> bool:
        """ZooKeeper's, and a migration's controllers' once they are up; after ``finalize``
        the controllers' alone (ZooKeeper is no longer written)."""
        controllers_serve = not self.controllers() or self.controller_quorum.serves()
        return controllers_serve and (self.migration.past("finalize") or self.ensemble.serves())

    def registered_brokers(self) -> list[str]:
        """Brokers with a live registration in ZooKeeper (/brokers/ids); from a migration's
        ``kraft`` phase on (a KRaft broker registers with the controllers only), the brokers
        the metadata lists."""
        return self.metadata_brokers() if self.migration.past("kraft") else self.ensemble.registered()

    def started_at(self, node: str) -> float | None:
        """When the node's container last started (epoch seconds; None: never)."""
        raw = self.state(node).get("StartedAt")
        if not raw or raw.startswith("0001"):
            return None
        raw = raw.rstrip("Z")
        main, _, frac = raw.partition(".")
        ts = datetime.fromisoformat(main + "+00:00").timestamp()
        return ts + (float("0." + frac[:6]) if frac else 0.0)

    def registered_since_start(self, node: str) -> bool:
        if self.migration.past("kraft"):  # a KRaft broker now (its own start says so): unfenced since its start
            log = self.since_start(node)
            if broker_mode(log) == "kraft":
                return self.unfenced_since_start(node, log)
        reg, started = self.ensemble.registration_time(node), self.started_at(node)
        return reg is not None and started is not None and self.running(node) and reg >= started - 2

    def controller_and_epoch(self) -> tuple[str | None, int | None]:
        """The controller (ZooKeeper's /controller: a broker, or during a migration the
        active KRaft controller, which claims it) and /controller_epoch; after ``finalize``
        the controllers' raft leader and epoch."""
        if self.migration.past("finalize"):
            return self.controller_quorum.active()
        return self.ensemble.controller_and_epoch()

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        """From ZooKeeper (the controller's record; a migration's controller writes it there
        too until ``finalize``), then from the brokers' metadata (no leader epoch)."""
        if self.migration.past("finalize"):
            return [{**p, "leader_epoch": None} for p in self.metadata(topic)]
        return self.ensemble.partitions(topic)

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
