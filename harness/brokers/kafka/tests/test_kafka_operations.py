"""Kafka's operation families as components (issue 53: harness/brokers/kafka/operations.py) and
its topology as values: each version's cluster class offers what each version did before the
families became components (the sets pinned below were read before the change: on 0b1b698 and on 9ef3360),
the quorum membership of a KRaft cluster through kafka-metadata-quorum, the data files, and
the topology's services (the ZooKeeper ensemble, the controller quorum, the brokers)."""
from __future__ import annotations

import inspect
import json

import pytest

from harness import brokers
from harness.brokers import compose
from harness.brokers.capabilities import (FAMILIES, NODE_CONTROL, CapabilityError, DataFiles, Features, Membership,
                                          Migration, PowerLoss, QuorumMembership, Versions, ability, offered)
from harness.brokers.kafka import kraft
from harness.brokers.kafka.cluster import KafkaCluster, ZooKeeperCluster
from harness.brokers.kafka.kraft_cluster import KRaftCluster
from harness.brokers.kafka.operations import KafkaFiles, KRaftVoters, ZooKeeperMigration
from harness.brokers.protocol import ClusterError

KAFKA = brokers.get("kafka")
BROKERS = ["kafka1", "kafka2", "kafka3"]
# Broker.capabilities_of(version) as it was before the families became components
# (KafkaCluster.capabilities less each generation's lacks, read on 9ef3360)
BEFORE = {
    "3.9": {"kill", "stop", "start", "pause", "wipe", "power_loss", "corrupt", "upgrade", "features", "membership",
            "migration"},
    "3.9-kraft": {"kill", "stop", "start", "pause", "wipe", "power_loss", "corrupt", "upgrade", "features",
                  "membership"},
    "4.1": {"kill", "stop", "start", "pause", "wipe", "power_loss", "corrupt", "upgrade", "features", "membership",
            "quorum_membership"},
}


# ---- capabilities, per version ------------------------------------------------------------------

@pytest.mark.parametrize("version", sorted(BEFORE))
def test_each_version_can_do_what_it_could_before(version):
    assert KAFKA.capabilities_of(version) == BEFORE[version]
    assert set(KAFKA.generations) == set(BEFORE)  # a new version needs its row here


def test_the_broker_can_do_what_some_version_can():
    assert KAFKA.capabilities == frozenset().union(*BEFORE.values())


@pytest.mark.parametrize("version, cls", [("3.9", ZooKeeperCluster), ("3.9-kraft", KRaftCluster),
                                          ("4.1", KRaftCluster), (None, ZooKeeperCluster)])
def test_the_version_names_its_topologys_class_and_each_capability_is_a_component(version, cls):
    assert KAFKA.cluster_class(version) is cls and type(KAFKA.cluster(version=version)) is cls
    c = KAFKA.cluster(version=version)
    for name in cls.capabilities - NODE_CONTROL:
        assert isinstance(ability(c, FAMILIES[name]), FAMILIES[name]), name
    # the ZooKeeper topology migrates and has no voters to change; the KRaft one the reverse
    assert ("migration" in cls.capabilities) is (cls is ZooKeeperCluster)
    assert ("quorum_membership" in cls.capabilities) is (cls is KRaftCluster)
    assert cls.capabilities == NODE_CONTROL | offered(cls.components)  # derived from them, never declared


def test_the_shared_base_is_abstract_and_raises_no_not_implemented():
    assert inspect.isabstract(KafkaCluster) and "NotImplementedError" not in inspect.getsource(KafkaCluster)
    assert {"quorum", "registered_brokers", "controller_and_epoch", "partitions", "registered_since_start",
            "view_source"} <= KafkaCluster.__abstractmethods__
    assert not inspect.isabstract(ZooKeeperCluster) and not inspect.isabstract(KRaftCluster)


def test_a_family_the_topology_lacks_is_refused_by_name():
    with pytest.raises(CapabilityError, match="no 'quorum_membership' ability"):
        ability(KAFKA.cluster(version="3.9"), QuorumMembership)
    with pytest.raises(CapabilityError, match="no 'migration' ability"):
        ability(KAFKA.cluster(version="4.1"), Migration)
    zk = KAFKA.cluster(version="3.9")
    assert isinstance(ability(zk, Migration), ZooKeeperMigration) and ability(zk, PowerLoss) is ability(zk, PowerLoss)


# ---- the topology's values ------------------------------------------------------------------------

def test_the_zookeeper_topology_is_its_ensemble_its_brokers_and_a_migrations_controllers(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    zk = KAFKA.cluster(version="3.9")
    assert zk.ensemble.nodes == ["zk1", "zk2", "zk3"] and zk.ensemble.endpoints()["zk2"] == "127.0.0.1:2182"
    assert zk.controller_quorum.voters() == [] and zk.controller_quorum.leader() is None  # no migration yet
    assert zk.nodes() == zk.ensemble.nodes + BROKERS
    zk.state_dir.mkdir(parents=True)
    zk.migration.begin("controllers")
    assert zk.controller_quorum.voters() == ["ctrl1", "ctrl2", "ctrl3"] == zk.controllers()
    assert zk.nodes()[-3:] == zk.controllers() and zk.migration.past("controllers") and not zk.migration.past("brokers")
    zk.migration.clear()  # what down() does, the cluster gone
    assert zk.migration.phase() is None and zk.controllers() == []


def test_a_kraft_clusters_quorum_is_its_brokers_or_the_controllers_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    c = KAFKA.cluster(version="4.1")
    assert c.controller_quorum.voters() == BROKERS and c.nodes() == BROKERS  # combined
    c.controller_nodes.write("test")
    assert c.controller_quorum.voters() == ["ctrl1", "ctrl2", "ctrl3"] and c.nodes() == c.controllers() + BROKERS
    c.controller_nodes.remove()
    assert c.controller_quorum.voters() == BROKERS


# ---- quorum membership (KIP-853) ------------------------------------------------------------------

STATUS = ('ClusterId: x\nLeaderId: 1\nLeaderEpoch: 3\nHighWatermark: 9\nCurrentVoters: [{"id": 1, "directoryId": '
          '"AAA", "endpoints": ["CONTROLLER://kafka1:19093"]}, {"id": 2, "directoryId": "BBB", "endpoints": []}, '
          '{"id": 3, "directoryId": "CCC", "endpoints": []}]\nCurrentObservers: []\n')


def voters_cluster(monkeypatch, running=tuple(BROKERS)):
    c = KAFKA.cluster(version="4.1")
    ran = []

    def exec_(node, cmd, check=True, timeout=60, user=None):
        ran.append((node, cmd))
        return (0, STATUS) if cmd[-2:] == ["describe", "--status"] else (0, "")
    monkeypatch.setattr(c, "exec", exec_)
    monkeypatch.setattr(c, "running", lambda node: node in running)
    return c, ran


def test_the_voters_are_read_from_a_running_controllers_status(monkeypatch):
    c, ran = voters_cluster(monkeypatch, running=("kafka2", "kafka3"))
    voters = ability(c, QuorumMembership)
    assert isinstance(voters, KRaftVoters) and voters.voters() == BROKERS
    assert [n for n, _ in ran] == ["kafka2"]  # kafka1 does not run: not asked
    assert ran[0][1] == kraft.quorum_status_command("kafka2")


def test_a_voter_is_removed_through_another_and_added_on_itself(monkeypatch):
    c, ran = voters_cluster(monkeypatch)
    voters = ability(c, QuorumMembership)
    voters.change_voter("remove", "kafka1")
    (_, status), (at, remove) = ran
    assert at == "kafka2" and status[-2:] == ["describe", "--status"]  # never the voter that goes
    assert remove == kraft.controller_command("kafka2", "remove-controller", "--controller-id", "1",
                                              "--controller-directory-id", "AAA")
    ran.clear()
    voters.change_voter("add", "kafka1")
    [(at, add)] = ran
    assert at == "kafka1" and add[-1] == "add-controller" and "/mqchaos/conf/kafka1.properties" in add
    assert add[add.index("--bootstrap-controller") + 1] == "kafka2:19093"


def test_a_voter_change_with_no_other_running_voter_or_no_directory_is_refused(monkeypatch):
    c, _ = voters_cluster(monkeypatch, running=("kafka1",))
    with pytest.raises(ClusterError, match="no other running node"):
        ability(c, QuorumMembership).change_voter("remove", "kafka1")
    c, _ = voters_cluster(monkeypatch)
    monkeypatch.setattr(c, "exec", lambda node, cmd, check=True, timeout=60, user=None: (0, STATUS.replace(
        '"directoryId": "CCC", ', "")))
    with pytest.raises(ClusterError, match="kafka3 is no voter with a directory id"):
        ability(c, QuorumMembership).change_voter("remove", "kafka3")


# ---- data files, versions, features ---------------------------------------------------------------

def test_the_data_files_are_a_topics_newest_segments(monkeypatch):
    c = KAFKA.cluster(version="4.1")
    asked = []
    monkeypatch.setattr(c, "newest_files", lambda node, d, path_glob, name_glob: asked.append(
        (node, d, path_glob, name_glob)) or [("/var/lib/kafka/data/t-0/0.log", 9)])
    files = ability(c, DataFiles)
    assert isinstance(files, KafkaFiles) and list(files.kinds()) == ["segment"]
    assert files.data_files("kafka2", "segment", "t/1") == [("/var/lib/kafka/data/t-0/0.log", 9)]
    files.data_files("kafka2", "segment", "t")
    assert asked == [("kafka2", "/var/lib/kafka/data", "*/t-1/*", "*.log"),
                     ("kafka2", "/var/lib/kafka/data", "*/t-[0-9]*/*", "*.log")]
    for kind, subject in (("wal", "t"), ("segment", None)):
        with pytest.raises(ClusterError, match="kinds: segment; a topic is needed"):
            files.data_files("kafka2", kind, subject)


def test_a_node_reports_its_version_only_when_it_runs_kafka(monkeypatch):
    c = KAFKA.cluster(version="3.9")
    monkeypatch.setattr(c, "running", lambda node: node != "kafka3")
    monkeypatch.setattr(c, "logs", lambda node, **kw: "[x] INFO Kafka version: 3.9.1 (AppInfoParser)\n")
    versions = ability(c, Versions)
    assert versions.node_version("kafka1") == "3.9.1"
    assert versions.node_version("kafka3") is None and versions.node_version("zk1") is None


def test_finalize_needs_a_release_and_asks_kafka_features_to_upgrade_to_it(monkeypatch):
    c = KAFKA.cluster(version="4.1")
    ran = []
    monkeypatch.setattr(c, "running", lambda node: True)
    monkeypatch.setattr(c, "exec", lambda node, cmd, check=True, timeout=60: ran.append((node, cmd)) or (0, ""))
    features = ability(c, Features)
    assert features.features_reason() is None
    with pytest.raises(ClusterError, match="needs params.release"):
        features.finalize_features({})
    assert features.finalize_features({"release": "4.1"}) == {"metadata.version": "4.1-"}
    [(at, cmd)] = ran
    assert at == "kafka1" and cmd[-3:] == ["upgrade", "--release-version", "4.1"] and kraft.FEATURE_COMMAND in cmd


def test_membership_is_every_topologys(monkeypatch):
    for version in BEFORE:
        c = KAFKA.cluster(version=version)
        monkeypatch.setattr(c, "partitions", lambda topic: [{"replicas": ["kafka1"]}, {"replicas": ["kafka2", "kafka3"]}])
        assert ability(c, Membership).members("t/1") == ["kafka2", "kafka3"] and ability(c, Membership).members("t") == [
            "kafka1"]


def test_the_migration_record_is_json_in_the_state_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    zk = KAFKA.cluster(version="3.9")
    zk.state_dir.mkdir(parents=True)
    zk.migration.begin("kraft")
    assert json.loads((zk.state_dir / "migration.json").read_text()) == {"phase": "kraft"}
    assert zk.migration.past("brokers") and not zk.migration.past("finalize") and zk.metadata_on_zookeeper()


def test_a_node_is_not_moved_to_the_other_metadata_modes_image(tmp_path, monkeypatch):
    """What pin_versions refused before the versions became a component: no compose call, no
    image override, for a version of the other mode."""
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    monkeypatch.setattr(compose, "run", lambda cmd, **kw: pytest.fail(f"no compose call: {cmd}"))
    c = KAFKA.cluster(version="3.9")
    with pytest.raises(ClusterError, match="not a ZooKeeper version"):
        ability(c, Versions).upgrade_node("kafka1", "4.1")
    assert not c.image_override().exists()
    seen = []
    monkeypatch.setattr(compose, "run", lambda cmd, **kw: seen.append(cmd))
    k = KAFKA.cluster(version="3.9-kraft")
    ability(k, Versions).upgrade_node("kafka2", "4.1")
    assert json.loads(k.image_override().read_text())["services"]["kafka2"]["image"].startswith("mqchaos/kafka:4.1")
    assert seen[-1][-1] == "kafka2" and "--no-deps" in seen[-1]
