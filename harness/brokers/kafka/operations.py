"""The Kafka cluster's optional abilities (``harness.brokers.capabilities``): one component per
operation family, built from the cluster (``Cluster.ability``), each calling the broker's own
tool as an operator would. Which a cluster has is its topology class's ``components``:

- every Kafka cluster: ``KafkaFiles`` (data files: a topic's log segments), ``KafkaVersions``
  (a node's image swapped within its metadata mode), ``KafkaFeatures`` (metadata.version
  raised by kafka-features), ``KafkaMembership`` (a partition's replicas moved by
  kafka-reassign-partitions); the power switch is the compose cluster's;
- a KRaft cluster: ``KRaftVoters`` (the controller quorum's voters changed by
  kafka-metadata-quorum, KIP-853; 3.9's static quorum cannot: its generation lacks it);
- a ZooKeeper cluster: ``ZooKeeperMigration`` (its metadata moved to KRaft, KIP-866, phase by
  phase: ``migration``).
"""
from __future__ import annotations

from typing import Any, Callable

from harness.brokers.compose import ImageVersions
from harness.brokers.containers import NodeFiles
from harness.brokers.protocol import ClusterError
from harness.brokers.kafka import migration
from harness.brokers.kafka.generations import ZOOKEEPER, has
from harness.brokers.kafka.kraft import (controller_command, feature_command, parse_features, quorum_status,
                                         quorum_status_command, reassign_command, reassignment, render_properties,
                                         reported_version, voter_directories)
from harness.brokers.kafka.nodes import BROKERS, CONTROLLERS, INTERNAL_PORT, broker_id, node_id
from harness.util import wait_until

# The clusters these components belong to import them, so they are typed Any here: an import
# back, even under TYPE_CHECKING, would be a cycle (tests/test_architecture.py counts those).
KafkaCluster = ZooKeeperCluster = KRaftCluster = Any


class KafkaFiles(NodeFiles):
    """Data files (``corrupt``): the newest log segment of a topic's partitions on a broker."""
    KINDS = {"segment": "the newest log segment (.log) of each of the topic's partitions on the node"}

    def kinds(self) -> dict[str, str]:
        return dict(self.KINDS)

    def data_files(self, node: str, kind: str, subject: str | None) -> list[tuple[str, int]]:
        """``subject`` ``TOPIC`` (every partition's) or ``TOPIC/P`` (the nemesis's: partition P's)."""
        if kind not in self.KINDS or not subject:
            raise ClusterError(f"no {kind!r} data files (kinds: {', '.join(self.KINDS)}; a topic is needed)")
        topic, _, part = subject.partition("/")
        return self.cluster.newest_files(node, "/var/lib/kafka/data", f"*/{topic}-{part or '[0-9]*'}/*", "*.log")


class KafkaVersions(ImageVersions):
    """Versions (issue 39): a node's image swapped, its data kept, within its metadata mode."""
    cluster: KafkaCluster

    def node_version(self, node: str) -> str | None:
        """What the broker (or a dedicated controller) logged of itself at its last start
        (AppInfoParser)."""
        c = self.cluster
        return reported_version(c.logs(node)) if node in [*c.brokers(), *c.controllers()] and c.running(node) else None

    def upgrade_reason(self, version: str) -> str | None:
        """A node moves only within its metadata mode: from ZooKeeper to KRaft is a migration
        of the metadata (KIP-866), not an image swap."""
        reason = super().upgrade_reason(version)
        on_zookeeper = self.cluster.metadata_on_zookeeper()
        if reason is None and has(version, ZOOKEEPER) != on_zookeeper:
            mode = "ZooKeeper" if on_zookeeper else "KRaft"
            return f"kafka {version} is not a {mode} version: a node of this cluster cannot run it on its data"
        return reason


class KafkaFeatures:
    """Features (issue 39): metadata.version, KRaft's (a ZooKeeper cluster's once its migration
    has finalized; its inter.broker.protocol.version is not done)."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    def _tool(self, *args: str) -> str:
        """kafka-features through each running broker in turn until one answers, as an operator
        would (a broker cut from the controllers cannot: U3b ran it on the isolated one)."""
        error: ClusterError | None = None
        for node in (n for n in self.cluster.brokers() if self.cluster.running(n)):
            try:
                return self.cluster.exec(node, feature_command(f"{node}:{INTERNAL_PORT}", *args), timeout=120)[1]
            except ClusterError as e:
                error = e
        raise error or ClusterError("no broker runs to ask kafka-features")

    def features_reason(self) -> str | None:
        """Why the cluster has no metadata.version to raise (None: it has: KRaft's metadata)."""
        if self.cluster.metadata_on_zookeeper():
            return "metadata.version is KRaft's: a ZooKeeper cluster has one once migrate_to_kraft has finalized"
        return None

    def features(self) -> dict[str, str]:
        return {} if self.features_reason() else parse_features(self._tool("describe"))

    def finalize_features(self, params: dict) -> dict[str, str]:
        """``params.release`` (4.1): ``kafka-features upgrade --release-version``; then
        metadata.version must be at that release's level (4.1-IVn)."""
        reason = self.features_reason()
        if reason:
            raise ClusterError(reason)
        release = str(params.get("release") or "")
        if not release:
            raise ClusterError("finalize on kafka needs params.release (e.g. 4.1)")
        self._tool("upgrade", "--release-version", release)
        return {"metadata.version": f"{release}-"}


class KafkaMembership:
    """Membership (issue 39): a partition's replicas (``TOPIC`` is its partition 0,
    ``TOPIC/P`` partition P), moved by reassignment."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    @staticmethod
    def _subject(subject: str) -> tuple[str, int]:
        topic, _, part = subject.partition("/")
        return topic, int(part or 0)

    def members(self, subject: str) -> list[str]:
        topic, part = self._subject(subject)
        return list(self.cluster.partitions(topic)[part]["replicas"])

    def change_member(self, op: str, node: str, subject: str) -> None:
        """A partition reassignment (kafka-reassign-partitions --execute) to the replicas
        without ``node`` (remove) or with it appended (add), run on a running broker other
        than ``node``; the new replica set is what ``members`` then shows."""
        c = self.cluster
        topic, part = self._subject(subject)
        now = self.members(subject)
        want = [r for r in now if r != node] if op == "remove" else [*now, *([node] if node not in now else [])]
        at = next((n for n in c.brokers() if n != node and c.running(n)), node)
        plan = "/tmp/mqchaos-reassign.json"
        text = reassignment(topic, part, [broker_id(n) for n in want])  # JSON: no single quote in it
        c.exec(at, ["sh", "-c", f"printf '%s' '{text}' > {plan}"], timeout=30)
        c.exec(at, reassign_command(f"{at}:{INTERNAL_PORT}", plan, "--execute"), timeout=120)


class KRaftVoters:
    """Quorum membership (issue 39, KIP-853): the controller quorum's voters, changed through
    kafka-metadata-quorum on the controllers' own listener."""

    def __init__(self, cluster: KRaftCluster) -> None:
        self.cluster = cluster

    def _status(self) -> str:
        """``describe --status`` asked of a running voter's controller listener."""
        for node in (n for n in self.cluster.controller_quorum.voters() if self.cluster.running(n)):
            rc, out = self.cluster.exec(node, quorum_status_command(node), check=False, timeout=120)
            if rc == 0 and "CurrentVoters" in out:
                return out
        raise ClusterError("no controller answered describe --status")

    def voters(self) -> list[str]:
        return quorum_status(self._status())["voters"]

    def change_voter(self, op: str, node: str) -> None:
        """remove-controller (the voter's id and directory id, run through another running
        voter), or add-controller run on the node itself with its own configuration (what the
        tool needs to find its metadata directory)."""
        c = self.cluster
        other = next((n for n in c.controller_quorum.voters() if n != node and c.running(n)), None)
        if other is None:
            raise ClusterError("no other running node to change the controllers through")
        if op == "remove":
            directory = voter_directories(self._status()).get(node)
            if not directory:
                raise ClusterError(f"{node} is no voter with a directory id (a static quorum?)")
            c.exec(other, controller_command(other, "remove-controller", "--controller-id", str(node_id(node)),
                                             "--controller-directory-id", directory), timeout=120)
        else:
            c.exec(node, controller_command(other, "--command-config", f"/mqchaos/conf/{node}.properties",
                                            "add-controller"), timeout=120)


class ZooKeeperMigration:
    """Migration (issue 39, KIP-866: ``migration``): the phases in order, each recorded
    (``ZooKeeperCluster.migration``) before anything acts, so a dead run's heal finds the
    controllers; the cluster's readers follow the phase reached."""

    def __init__(self, cluster: ZooKeeperCluster) -> None:
        self.cluster = cluster

    def migrate(self, phase: str, params: dict, now: Callable[[], float], steps: list[dict[str, Any]]) -> None:
        """The phase (migration.PHASES, in order): the controllers started, or each broker /
        controller in turn stopped gracefully, given the phase's configuration, started and
        waited for (``params.rejoin_timeout``)."""
        c = self.cluster
        phase = migration.check_phase(phase)
        last = migration.phase_index(c.migration.phase())
        if migration.PHASES.index(phase) != last + 1:
            raise ClusterError(f"migration phase {phase!r} cannot follow {migration.PHASES[last] if last >= 0 else 'none'}"
                               f": the phases run in order ({', '.join(migration.PHASES)})")
        timeout = float(params.get("rejoin_timeout", 180))
        if phase == "controllers":
            self._add_controllers(now, steps, timeout)
            return
        c.migration.begin(phase)
        for node in (CONTROLLERS if phase == "finalize" else c.brokers()):
            step = {"node": node, "stop": now()}
            steps.append(step)
            c.stop(node, timeout=float(params.get("timeout", 60)))
            (c.conf_dir() / f"{node}.properties").write_text(self._node_properties(node, phase))
            step["start"] = now()
            c.start(node)
            wait_until(lambda n=node: self._rolled(n), timeout, f"{node} back after the {phase} phase", 1.0)
            step["rejoined"] = now()

    def _add_controllers(self, now: Callable[[], float], steps: list[dict[str, Any]], timeout: float) -> None:
        """ctrl1..3 formatted with ZooKeeper's cluster id, started in migration mode, and
        waited for until their quorum elects a leader."""
        c = self.cluster
        cid = migration.zk_cluster_id(c.ensemble.get_json("/cluster/id"))
        c.controller_nodes.write("a migration's KRaft controllers")
        c.migration.begin("controllers")
        (c.conf_dir() / "cluster-id").write_text(cid + "\n")
        for node in CONTROLLERS:
            (c.conf_dir() / f"{node}.properties").write_text(self._node_properties(node, "controllers"))
        step = {"nodes": list(CONTROLLERS), "start": now()}
        steps.append(step)
        c.compose("up", "-d", "--no-build", "--no-deps", *CONTROLLERS, timeout=600)
        wait_until(c.controller_quorum.leader, timeout, "the controllers' quorum to elect a leader", 1.0)
        step["ready"] = now()

    def _node_properties(self, node: str, phase: str | None) -> str:
        config = self.cluster.config
        if node in CONTROLLERS:
            props = migration.controller_properties(node, config.property_map(BROKERS[0]), phase)
        else:
            props = migration.broker_properties(config.property_map(node), phase)
        return render_properties(props, "harness/brokers/kafka/migration.py")

    def _rolled(self, node: str) -> bool:
        """A node rolled into the phase is back: a controller in its quorum again, a broker
        registered since its start."""
        c = self.cluster
        if node in CONTROLLERS:
            return c.controller_quorum.back(node)
        return c.running(node) and not c.paused(node) and c.registered_since_start(node)

    def migration_state(self) -> dict[str, Any]:
        """What the nodes show: the controllers' raft leader, whether a controller logged the
        metadata's copy from ZooKeeper, which controllers run in migration mode (their
        configuration as logged at their start), each broker's mode (its log since its start),
        the brokers the metadata lists."""
        c = self.cluster
        running = [n for n in c.controllers() if c.running(n)]
        state: dict[str, Any] = {
            "phase": c.migration.phase(),
            "controller_leader": c.controller_quorum.leader(),
            "migrated": any(migration.MIGRATED in c.logs(n) for n in running),
            "controllers_migrating": [n for n in running
                                      if f"{migration.MIGRATION_FLAG} = true" in c.since_start(n)],
            "broker_modes": {n: migration.broker_mode(c.since_start(n)) if c.running(n) else None
                             for n in c.brokers()},
        }
        try:
            state["registered"] = c.registered_brokers()
        except Exception as e:  # noqa: BLE001 - no answer is itself evidence
            state["registered"] = f"no answer: {type(e).__name__}: {e}"[:200]
        return state

    def migration_reached(self, phase: str, state: dict[str, Any]) -> bool:
        return migration.reached(phase, state)


__all__ = ["KRaftVoters", "KafkaFeatures", "KafkaFiles", "KafkaMembership", "KafkaVersions", "ZooKeeperMigration"]
