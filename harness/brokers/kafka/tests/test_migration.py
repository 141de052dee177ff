"""Issue 39's ZooKeeper-to-KRaft migration (KIP-866): each phase's configuration against the
documentation's, what shows that a phase took effect, the operation step's evidence, and the
ZooKeeper cluster's readers moving with the phase reached."""
import json
from pathlib import Path

import pytest
import yaml

from fakes import FakeRabbit
from harness import brokers
from harness.brokers.capabilities import CapabilityError, Features, Migration, QuorumMembership, Versions, ability
from harness.brokers.kafka import kraft, migration
from harness.brokers.kafka.cluster import KafkaConfig, ZooKeeperCluster
from harness.brokers.kafka.migration import MIGRATION_FILE
from harness.brokers.kafka.nodes import broker_node
from harness.brokers.kafka.operations import ZooKeeperMigration
from harness.history import RunClock
from harness.scenario import ScenarioError, load, parse
from nemesis.core import Nemesis

ROOT = Path(__file__).resolve().parents[4]  # the repository (this file: harness/brokers/<broker>/tests/)
ZK_KEYS = ("zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms")


def _zk_props(node="kafka2"):
    return KafkaConfig().property_map(node)


def test_the_brokers_configuration_follows_the_documented_phases():
    zk = _zk_props()
    assert migration.broker_properties(zk, None) == zk == migration.broker_properties(zk, "controllers")
    mig = migration.broker_properties(zk, "brokers")
    # the docs' "Enabling the migration on the brokers": ZooKeeper kept, the flag, the
    # controllers' quorum, its listener's protocol, the inter-broker protocol pinned
    assert mig["zookeeper.metadata.migration.enable"] == "true" and mig["zookeeper.connect"] == zk["zookeeper.connect"]
    assert mig["broker.id"] == 2 and mig["inter.broker.protocol.version"] == "3.9"
    assert mig["controller.quorum.voters"] == "3001@ctrl1:19093,3002@ctrl2:19093,3003@ctrl3:19093"
    assert mig["controller.listener.names"] == "CONTROLLER"
    assert mig["listener.security.protocol.map"].split(",").count("CONTROLLER:PLAINTEXT") == 1
    assert "CONTROLLER" not in mig["listeners"]  # a broker does not serve the controller listener
    for phase in ("kraft", "finalize"):  # "Migrating brokers to KRaft"
        kr = migration.broker_properties(zk, phase)
        assert kr["process.roles"] == "broker" and kr["node.id"] == 2
        assert not set(kr) & {"broker.id", "zookeeper.metadata.migration.enable", "inter.broker.protocol.version",
                              *ZK_KEYS}
        assert kr["controller.quorum.voters"] == mig["controller.quorum.voters"]
        assert {k: v for k, v in kr.items() if k in zk and k not in ("listener.security.protocol.map",)} == \
            {k: v for k, v in zk.items() if k not in ("broker.id", "listener.security.protocol.map", *ZK_KEYS)}


def test_the_controllers_run_in_migration_mode_until_finalize():
    zk = _zk_props("kafka1")
    for phase in ("controllers", "brokers", "kraft"):
        c = migration.controller_properties("ctrl3", zk, phase)
        assert c["process.roles"] == "controller" and c["node.id"] == 3003
        assert c["zookeeper.metadata.migration.enable"] == "true" and c["zookeeper.connect"] == zk["zookeeper.connect"]
        # the controller sends its RPCs to ZooKeeper-mode brokers on their inter-broker listener
        assert c["inter.broker.listener.name"] == "INTERNAL" and "INTERNAL:PLAINTEXT" in c["listener.security.protocol.map"]
        assert c["listeners"] == "CONTROLLER://0.0.0.0:19093" and c["advertised.listeners"] == "CONTROLLER://ctrl3:19093"
    done = migration.controller_properties("ctrl3", zk, "finalize")
    assert "zookeeper.metadata.migration.enable" not in done and "zookeeper.connect" not in done


def test_a_phase_out_of_order_or_unknown_is_refused_before_anything_acts(tmp_path, monkeypatch):
    c = ZooKeeperCluster()
    monkeypatch.setattr(c, "state_dir", tmp_path)
    monkeypatch.setattr(c, "stop", lambda *a, **k: pytest.fail("nothing may be stopped"))
    mig = ability(c, Migration)
    with pytest.raises(Exception, match="cannot follow none"):
        mig.migrate("brokers", {}, lambda: 0.0, [])
    (tmp_path / MIGRATION_FILE).write_text(json.dumps({"phase": "brokers"}))
    with pytest.raises(Exception, match="'finalize' cannot follow brokers"):
        mig.migrate("finalize", {}, lambda: 0.0, [])
    with pytest.raises(ValueError, match="params.phase must be one of controllers, brokers, kraft, finalize"):
        mig.migrate("zk", {}, lambda: 0.0, [])


def test_the_migration_is_the_zookeeper_topologys_ability_and_not_kraft_s():
    """The ZooKeeper cluster's Migration component (issue 53); a KRaft cluster has none, and
    no quorum membership is the ZooKeeper cluster's."""
    kafka = brokers.get("kafka")
    zk = kafka.cluster(version="3.9")
    assert isinstance(ability(zk, Migration), ZooKeeperMigration) and ability(zk, Migration) is ability(zk, Migration)
    assert zk.ability(QuorumMembership) is None
    for version in ("3.9-kraft", "4.1"):
        with pytest.raises(CapabilityError, match="no 'migration' ability"):
            ability(kafka.cluster(version=version), Migration)


KRAFT_START = "[2026-11-26 19:00:01,000] INFO [BrokerServer id=2] Transition from STARTING to STARTED (kafka.server.BrokerServer)"
ZK_START = "[2026-11-26 18:58:01,000] INFO [KafkaServer id=2] started (kafka.server.KafkaServer)"


def test_a_brokers_mode_is_read_from_its_own_start():
    assert migration.broker_mode(ZK_START) == "zookeeper"
    assert migration.broker_mode(KRAFT_START) == "kraft"
    assert migration.broker_mode(ZK_START + "\n" + KRAFT_START) == "kraft"  # the later start counts
    assert migration.broker_mode("[...] INFO starting (kafka.server.KafkaServer)") is None


def test_each_phase_is_reached_only_when_the_nodes_show_it():
    kraft_modes = {n: "kraft" for n in ("kafka1", "kafka2", "kafka3")}
    state = {"controller_leader": "ctrl2", "migrated": False, "controllers_migrating": ["ctrl1", "ctrl2", "ctrl3"],
             "broker_modes": {n: "zookeeper" for n in kraft_modes}, "registered": sorted(kraft_modes)}
    assert migration.reached("controllers", state) and not migration.reached("brokers", state)
    assert migration.reached("brokers", {**state, "migrated": True})
    assert not migration.reached("brokers", {**state, "migrated": True, "controller_leader": None})
    half = {**state, "broker_modes": {**kraft_modes, "kafka3": "zookeeper"}}
    assert not migration.reached("kraft", half) and migration.reached("kraft", {**state, "broker_modes": kraft_modes})
    done = {**state, "broker_modes": kraft_modes, "controllers_migrating": []}
    assert migration.reached("finalize", done)
    assert not migration.reached("finalize", {**done, "controllers_migrating": ["ctrl1"]})
    assert not migration.reached("finalize", {**done, "registered": ["kafka1", "kafka2"]})


def test_the_controllers_ids_name_them_wherever_kafka_writes_an_id():
    assert broker_node(3001) == "ctrl1" and broker_node(3) == "kafka3" and broker_node(-1) is None
    view = kraft.quorum_state(json.dumps({"leaderId": 3002, "leaderEpoch": 4, "votedId": -1, "data_version": 0,
                                          "currentVoters": [{"voterId": i} for i in (3001, 3002, 3003)]}))
    assert view == {"leader": "ctrl2", "epoch": 4, "voted": None, "voters": ["ctrl1", "ctrl2", "ctrl3"]}


def _zk_cluster(tmp_path, monkeypatch, phase):
    c = ZooKeeperCluster()
    tmp_path.mkdir()
    monkeypatch.setattr(c, "state_dir", tmp_path)
    if phase:
        (tmp_path / MIGRATION_FILE).write_text(json.dumps({"phase": phase}))
    monkeypatch.setattr(c.ensemble, "children", lambda path: ["1", "2"])
    monkeypatch.setattr(c, "metadata_brokers", lambda timeout=10: ["kafka1", "kafka2", "kafka3"])
    monkeypatch.setattr(c.ensemble, "get_json", lambda path: {"/controller": {"brokerid": 3003, "kraftControllerEpoch": 7},
                                                              "/controller_epoch": 2}.get(path))
    # each of the migration's controllers (none before its first phase) names ctrl1 at epoch 9
    monkeypatch.setattr(c.controller_quorum, "views", lambda: {n: {"leader": "ctrl1", "epoch": 9}
                                                              for n in c.controllers()})
    return c


def test_the_readers_follow_the_metadata_where_the_phase_reached_keeps_it(tmp_path, monkeypatch):
    before = _zk_cluster(tmp_path / "a", monkeypatch, None)
    assert before.nodes() == ["zk1", "zk2", "zk3", "kafka1", "kafka2", "kafka3"] and before.controllers() == []
    assert before.registered_brokers() == ["kafka1", "kafka2"]  # ZooKeeper's /brokers/ids
    dual = _zk_cluster(tmp_path / "b", monkeypatch, "brokers")
    assert dual.nodes()[-3:] == ["ctrl1", "ctrl2", "ctrl3"]
    # the migration's controller claims ZooKeeper's /controller with its own id
    assert dual.controller_and_epoch() == ("ctrl3", 2) and dual.registered_brokers() == ["kafka1", "kafka2"]
    kraft_brokers = _zk_cluster(tmp_path / "c", monkeypatch, "kraft")
    assert kraft_brokers.registered_brokers() == ["kafka1", "kafka2", "kafka3"]  # the metadata's list
    assert kraft_brokers.controller_and_epoch() == ("ctrl3", 2)  # ZooKeeper still written (dual writes)
    done = _zk_cluster(tmp_path / "d", monkeypatch, "finalize")
    assert done.controller_and_epoch() == ("ctrl1", 9)  # the controllers' raft leader


class MigratingFake(FakeRabbit):
    """A cluster whose migration reaches a phase unless ``stuck``; ``fail_after``: the phase
    fails after that many node steps."""

    def __init__(self, tmp_path, stuck=False, fail_after=None):
        super().__init__(tmp_path)
        self.phase, self.stuck, self.fail_after = None, stuck, fail_after

    def migrate(self, phase, params, now, steps):
        for i, node in enumerate(("kafka1", "kafka2", "kafka3")):
            if self.fail_after is not None and i == self.fail_after:
                raise RuntimeError(f"{node} did not come back")
            steps.append({"node": node, "stop": now(), "rejoined": now()})
        if not self.stuck:
            self.phase = phase

    def migration_state(self):
        return {"phase": self.phase}

    def migration_reached(self, phase, state):
        return state["phase"] == phase


def test_the_operation_is_proved_by_the_state_the_nodes_show(tmp_path):
    c = MigratingFake(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("migrate_to_kraft", phase="brokers")
    assert f.targets == [] and f.details["before"] == {"phase": None}
    assert f.details["effective"] is True and f.details["evidence"]["after"] == {"phase": "brokers"}
    assert [s["node"] for s in f.details["sequence"]] == ["kafka1", "kafka2", "kafka3"]
    stuck = MigratingFake(tmp_path, stuck=True)
    with Nemesis(stuck, tmp_path / "s", clock=RunClock(), settle=0, handle_signals=False) as nem:
        f = nem.apply("migrate_to_kraft", phase="brokers", timeout=0.2)
    assert f.details["effective"] is False  # the nodes never showed it


def test_a_phase_that_fails_midway_keeps_the_steps_it_took(tmp_path):
    c = MigratingFake(tmp_path, fail_after=2)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        with pytest.raises(Exception, match="kafka3 did not come back") as info:
            nem.apply("migrate_to_kraft", phase="kraft")
    f = info.value.nemesis_fault
    assert [s["node"] for s in f.details["sequence"]] == ["kafka1", "kafka2"]


def test_the_migration_row_loads_on_zookeeper_only(tmp_path):
    path = ROOT / "scenarios" / "U4-kafka-zookeeper-to-kraft-migration.yaml"
    sc = load(path)
    assert [st["params"]["phase"] for st in sc.nemesis] == list(migration.PHASES)
    data = yaml.safe_load(path.read_text())
    for version in ("3.9-kraft", "4.1"):
        with pytest.raises(ScenarioError, match="migrate_to_kraft at 5s needs migration"):
            parse({**data, "version": version})


def test_a_migrated_cluster_moves_to_kraft_versions_and_raises_its_metadata_version(tmp_path, monkeypatch):
    zk = _zk_cluster(tmp_path / "zk", monkeypatch, "kraft")
    versions, features = ability(zk, Versions), ability(zk, Features)
    assert "is not a KRaft version" not in (versions.upgrade_reason("4.1") or "")
    assert "not a ZooKeeper version" in versions.upgrade_reason("4.1") and versions.upgrade_reason("3.9") is None
    assert features.features() == {} and "once migrate_to_kraft has finalized" in features.features_reason()
    with pytest.raises(Exception, match="once migrate_to_kraft has finalized"):
        features.finalize_features({"release": "4.1"})
    done = _zk_cluster(tmp_path / "done", monkeypatch, "finalize")
    versions = ability(done, Versions)
    assert versions.upgrade_reason("4.1") is None and "not a KRaft version" in versions.upgrade_reason("3.9")
    assert ability(done, Features).features_reason() is None


def test_the_migrations_controllers_are_roles_a_fault_can_target(tmp_path, monkeypatch):
    before = _zk_cluster(tmp_path / "a", monkeypatch, None)
    assert before.role("controllers", None) == [] and before.role("kraft_controller", None) == []
    during = _zk_cluster(tmp_path / "b", monkeypatch, "brokers")
    assert during.role("controllers", None) == ["ctrl1", "ctrl2", "ctrl3"]
    assert during.role("kraft_controller", None) == ["ctrl1"]  # the raft leader the majority's views name
    assert during.role("controller", None) == ["ctrl3"]  # ZooKeeper's /controller, which it claimed


def test_an_upgraded_controller_keeps_its_new_image_in_every_compose_call(tmp_path, monkeypatch):
    c = _zk_cluster(tmp_path / "c", monkeypatch, "finalize")
    files = [p.name for p in c.overrides()]
    # compose applies the files in order: the image override must come after the controllers'
    assert files.index("controllers.override.yml") < files.index("image.override.yml")
    assert files.index("controllers.override.yml") < files.index("cpu.override.yml")


def test_a_controller_is_back_once_started_and_told_the_leader(tmp_path, monkeypatch):
    c = _zk_cluster(tmp_path / "c", monkeypatch, "finalize")
    monkeypatch.setattr(c, "running", lambda n: True)
    monkeypatch.setattr(c, "paused", lambda n: False)
    told = "[QuorumController id=3002] In the new epoch 6, the leader is 3001. (org.apache.kafka.controller.QuorumController)"
    started = "[KafkaRaftServer nodeId=3002] Kafka Server started (kafka.server.KafkaRaftServer)"
    for log, back in ((told, False), (started, False), (told + "\n" + started, True),
                      ("[QuorumController id=3002] In the new epoch 7, the leader is (none).\n" + started, False)):
        monkeypatch.setattr(c, "since_start", lambda n, log=log: log)
        assert c.controller_quorum.back("ctrl2") is back, log  # 4.1 logs its version after it is told
        assert ability(c, Migration)._rolled("ctrl2") is back, log  # what a phase that rolls it waits for
