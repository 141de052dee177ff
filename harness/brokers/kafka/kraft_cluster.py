"""Kafka in KRaft mode (3.9-kraft, 4.1): kafka1..3, each a broker and a controller voter
(compose/kafka-kraft.yml), no ZooKeeper; or, with ``cluster.kraft_controllers: dedicated``,
brokers only, beside three controllers of their own, ctrl1..3 (``controllers``).
docs/generations-research.md, part A, has the sources.

Where the metadata is read from, since there is no ZooKeeper:

- the active controller (the raft leader) and its epoch: each node's own ``quorum-state``
  file (``docker exec``; ``describe_cluster().controller`` names a random broker in KRaft),
  the highest-epoch view that names a leader (``kraft.active_controller``);
- partition leader and ISR: the metadata of the active controller's own broker, asked through
  a client pinned to its port, the answer proven to be that broker's (``node_metadata``). In
  combined mode that broker replays the metadata log its controller leads, so its image holds
  every committed change first; another broker's, cut from the controllers, is frozen. The
  active controller is the raft leader a majority of the voters' quorum-state files name at its
  epoch (``kraft.quorum_leader``); without one the cluster's view is unknown (None, no guess).
  Every broker's own view is read beside it (``node_views``); no leader epoch there (None);
- registered brokers: the metadata's broker list (unfenced brokers);
- with dedicated controllers, the voters are ctrl1..3 and no broker replays the controller's
  log as its leader: the cluster's view is the one the brokers agree on
  (``controllers.agreed_view``, ``view_from: brokers``). The quorum is a value of the cluster
  (``quorum.ControllerQuorum``), its voters the brokers or ctrl1..3;
- a partition's ELR (4.1): kafka-topics, a JVM start, so read rarely and in the background
  (``ElrReader``).
"""
from __future__ import annotations

import threading
import time
from typing import Any

from harness.brokers.protocol import ClusterError, Role
from harness.brokers.kafka import adminclient
from harness.brokers.kafka.adminclient import partitions_of
from harness.brokers.kafka.cluster import INTERNAL_PORT, ZK_NODES, KafkaCluster, KafkaConfig
from harness.brokers.kafka.controllers import agreed_view
from harness.brokers.kafka.nodes import CONTROLLERS, broker_node
from harness.brokers.kafka.generations import ELR, has
from harness.brokers.kafka.kraft import CONTROLLER_PORT, active_controller, parse_elr, quorum_leader, topic_describe_command
from harness.brokers.kafka.operations import KRaftVoters
from harness.brokers.kafka.quorum import ControllerQuorum
from harness.util import wait_until

NO_ZOOKEEPER = ("Kafka in KRaft mode (3.9-kraft, 4.1) has no ZooKeeper: cut a node from the controllers with "
                "params: {ports: controller}")


# view_source's answer with dedicated controllers: the view the brokers agree on
BROKERS_VIEW = "brokers"


class KRaftCluster(KafkaCluster):
    """Kafka in KRaft mode: the brokers and a controller quorum (``controller_quorum``), combined
    with them or apart (``controllers``: ctrl1..3, with ``kraft_controllers: dedicated``)."""
    compose_file = "kafka-kraft.yml"
    zookeeper = False
    quorum_what = "a controller quorum leader"
    components = KafkaCluster.components + (KRaftVoters,)
    roles = {**KafkaCluster.roles,
             "controller": Role("controller", "the active controller (the KRaft quorum's leader)"),
             "voters": Role("voters", "the controller quorum's voters (every node in combined mode; ctrl1..3 "
                                      "with kraft_controllers: dedicated)")}
    absent_targets = {name: NO_ZOOKEEPER for name in ("zk", *ZK_NODES)}
    # the CONTROLLER listener carries the raft quorum and the brokers' heartbeats and
    # metadata fetches; cutting it alone leaves replication (internal) up
    ports = {**KafkaCluster.ports, "controller": (CONTROLLER_PORT,)}

    def __init__(self, project: str | None = None, version: str | None = None) -> None:
        super().__init__(project, version)
        # a static quorum (controller.quorum.voters), whatever each voter's state: every node
        # in combined mode, else the dedicated controllers (their override is the record a
        # dead run's heal reads)
        self.controller_quorum = ControllerQuorum(self, lambda: self.controllers() or self.brokers())
        self._elr = ElrReader(self)
        self._alive: dict[str, list[str]] = {}  # node -> the brokers its last answer listed as alive

    def nodes(self) -> list[str]:
        return self.controllers() + self.brokers()  # the controllers first: the brokers register with them

    def write_config(self, config: KafkaConfig) -> None:
        """The brokers' files, and with ``kraft_controllers: dedicated`` the controllers' and
        their compose override (else none: a combined cluster)."""
        super().write_config(config)
        if config.kraft_controllers != "dedicated":
            self.controller_nodes.remove()
            return
        self.controller_nodes.write("a KRaft cluster's dedicated controllers")
        for node in CONTROLLERS:
            (self.conf_dir() / f"{node}.properties").write_text(config.properties(node))

    def role_nodes(self, name: str) -> list[str]:
        return self.controller_quorum.voters() if name == "voters" else super().role_nodes(name)

    # ---- the quorum, from each node's own view -----------------------------------------
    def quorum(self) -> bool:
        return self.controller_quorum.serves()

    def controller_and_epoch(self) -> tuple[str | None, int | None]:
        return self.controller_quorum.active()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "quorum_views": self.controller_quorum.views()}

    def view_source(self) -> tuple[str | None, str | None, int | None]:
        """The node whose broker's view is the cluster's: the raft leader a majority of the
        voters' own views name at its epoch (None when none does: mid-election, or most nodes
        unreadable); and the active controller with its epoch, from the same reading."""
        views = self.controller_quorum.views()
        if self.controllers():  # no broker is the controller: the brokers' agreed view
            return (BROKERS_VIEW, *active_controller(views))
        return (quorum_leader(views, self.controller_quorum.voters()), *active_controller(views))

    def view_partitions(self, source: str | None, topic: str, views: dict[str, list[dict]]) -> list[dict] | None:
        if source != BROKERS_VIEW:
            return super().view_partitions(source, topic, views)
        agreed = agreed_view(views, {n: self._alive.get(n) for n in views})
        return agreed[1] if agreed else None

    def node_metadata(self, node: str, topic: str, timeout: float = 10) -> list[dict[str, Any]]:
        """``node``'s own view, and the brokers its image lists as alive (``agreed_view``)."""
        md = adminclient.node_answer(self, node, topic, timeout)
        self._alive[node] = sorted(n for b in md.brokers if (n := broker_node(b)))
        return partitions_of(md, topic)

    # ---- the brokers' metadata ---------------------------------------------------------
    def registered_brokers(self) -> list[str]:
        """Brokers with an unfenced registration, as the metadata lists them."""
        return self.metadata_brokers()

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        """The active controller's broker's view (no leader epoch in the metadata: None).
        Raises ClusterError when no controller is known or its broker gave no proven answer:
        callers that wait (wait_until) retry, a role resolved at fault time fails."""
        node = self.view_source()[0]
        if node == BROKERS_VIEW:
            views, errors = self.node_views(topic, 10)
            parts = self.view_partitions(node, topic, views)
            if parts is None:
                raise ClusterError(f"no view of {topic} the brokers agree on (unanswered: {errors or 'none'})")
            return [{**p, "leader_epoch": None} for p in parts]
        if node is None:
            raise ClusterError(f"no active controller a majority of the voters agree on: {topic}'s "
                               "leader and ISR are unknown")
        return [{**p, "leader_epoch": None} for p in self.node_metadata(node, topic)]

    def registered_since_start(self, node: str) -> bool:
        """Unfenced, and by its current run: the metadata may still list a killed broker's
        previous registration until its session times out (broker.session.timeout.ms, 9 s),
        so the broker's own log since its start must say it was unfenced. A registration
        refused as a duplicate meanwhile is retried by the broker itself."""
        return self.unfenced_since_start(node)

    def wait_rejoined(self, node: str, timeout: float) -> None:
        """A dedicated controller: started, told who leads (or leading), and a quorum serves."""
        if node not in self.controllers():
            return super().wait_rejoined(node, timeout)
        wait_until(lambda: self.controller_quorum.back(node), timeout, f"{node} back in the controllers' quorum", 1.0)

    def elr(self, topic: str, partition: int, below_min_isr: bool) -> tuple[list[str] | None, float | None]:
        """Read again (in the background, when the last read is old enough) while the ELR can
        be non-empty, ``below_min_isr``, or was non-empty when last read."""
        if not has(self.config.version, ELR):
            return None, None
        last, _ = self._elr.latest(partition)
        if below_min_isr or last:
            self._elr.request(topic)
        return self._elr.latest(partition)


class ElrReader:
    """A partition's ELR through kafka-topics (a JVM start, 1-2 s of CPU on this 2-core
    machine): never in the caller's thread, at most every ``every`` seconds."""

    def __init__(self, cluster: KRaftCluster, every: float = 10.0) -> None:
        self.cluster, self.every = cluster, every
        self._lock = threading.Lock()
        self._busy = False
        self._started = float("-inf")
        self._read: dict[int, list[str] | None] = {}
        self._read_at: float | None = None

    def request(self, topic: str) -> None:
        with self._lock:
            if self._busy or time.monotonic() - self._started < self.every:
                return
            self._busy, self._started = True, time.monotonic()
        threading.Thread(target=self._run, args=(topic,), name="elr", daemon=True).start()

    def _run(self, topic: str) -> None:
        try:
            for node in self.cluster.brokers():  # the first broker that answers
                code, out = self.cluster.exec(node, topic_describe_command(f"{node}:{INTERNAL_PORT}", topic),
                                              check=False, timeout=30)
                found = parse_elr(out, topic) if code == 0 else {}
                if found:
                    with self._lock:
                        self._read, self._read_at = found, time.monotonic()
                    return
        except RuntimeError:  # docker exec timed out: the next request tries again
            pass
        finally:
            with self._lock:
                self._busy = False

    def latest(self, partition: int) -> tuple[list[str] | None, float | None]:
        with self._lock:
            if self._read_at is None:
                return None, None
            return self._read.get(partition), round(time.monotonic() - self._read_at, 1)


__all__ = ["ElrReader", "KRaftCluster", "NO_ZOOKEEPER"]
