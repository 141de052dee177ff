"""A Kafka cluster's settings (the scenario's ``cluster:`` block, ``KafkaConfig``) and what is
rendered from them for a run: each node's server.properties (a ZooKeeper-mode broker's, a
combined KRaft node's, a broker beside dedicated controllers, a dedicated controller's),
ZooKeeper's zoo.cfg, log4j's configuration."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from harness.brokers.settings import Settings
from harness.brokers.kafka.controllers import Topology, controller_properties
from harness.brokers.kafka.controllers import broker_properties as kraft_broker_properties
from harness.brokers.kafka.generations import ZOOKEEPER, has
from harness.brokers.kafka.kraft import kraft_properties, render_properties
from harness.brokers.kafka.nodes import BROKERS, CONTROLLERS, INTERNAL_PORT, KAFKA_PORTS, MAX_BROKERS, ZK_NODES, broker_id, broker_names

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
        return render_properties(self.property_map(node), "harness/brokers/kafka/config.py")

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
# rendered by harness/brokers/kafka/config.py
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


__all__ = ["ALIASES", "LOG4J", "ZOO_CFG", "KafkaConfig"]
