"""KRaft with the controllers apart from the brokers (issue 52: ``cluster.kraft_controllers:
dedicated``), without Docker: the brokers' and ctrl1..3's configuration, the topology a dead
run's heal reads back, roles and whose view over a fake ``docker exec`` and AdminClient, the
grudges that cut a broker from its followers or from the controllers, the leader's placement
and the premise K5a, K8b and K14e require, and those rows applicable on KRaft."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from fakes import FakeAdmin, fake_kraft
from harness import brokers
from harness.brokers import compose
from harness.brokers.kafka import controllers, observe, placement
from harness.scenario import load, parse
from nemesis import grudge as g
from nemesis.targets import grudge_for, resolve

ROOT = Path(__file__).resolve().parents[4]  # the repository (this file: harness/brokers/<broker>/tests/)
KAFKA = brokers.get("kafka")
BROKERS = ["kafka1", "kafka2", "kafka3"]
CTRLS = ["ctrl1", "ctrl2", "ctrl3"]
VOTERS = "3001@ctrl1:19093,3002@ctrl2:19093,3003@ctrl3:19093"


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def settings(version: str = "4.1", **extra):
    cfg = KAFKA.settings({"kraft_controllers": "dedicated", "min.insync.replicas": 2,
                          "unclean.leader.election.enable": True, **extra})
    cfg.version = version
    return cfg


def quorum(leader: int, epoch: int) -> str:
    return json.dumps({"leaderId": leader, "leaderEpoch": epoch, "votedId": -1, "data_version": 1})


# ---- configuration ---------------------------------------------------------------------------

def test_a_broker_beside_dedicated_controllers_is_a_broker_only_with_the_controllers_quorum():
    p = props(settings(**{"log.flush.interval.messages": 1}).properties("kafka2"))
    assert p["process.roles"] == "broker" and p["node.id"] == "2" and "broker.id" not in p
    assert p["controller.quorum.voters"] == VOTERS and p["controller.listener.names"] == "CONTROLLER"
    assert p["listeners"] == "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9093"  # no controller listener
    assert p["listener.security.protocol.map"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert not [k for k in p if k.startswith("zookeeper.")]
    assert p["log.flush.interval.messages"] == "1" and p["min.insync.replicas"] == "2"


def test_a_dedicated_controller_has_its_own_listener_and_the_clusters_topic_settings():
    p = props(settings().properties("ctrl1"))
    assert p["process.roles"] == "controller" and p["node.id"] == "3001" and "broker.id" not in p
    assert p["listeners"] == "CONTROLLER://0.0.0.0:19093" and p["advertised.listeners"] == "CONTROLLER://ctrl1:19093"
    assert p["controller.quorum.voters"] == VOTERS
    # the controller decides what these say of topics (elections, the ELR, defaults)
    assert p["min.insync.replicas"] == "2" and p["unclean.leader.election.enable"] == "true"
    assert p["default.replication.factor"] == "3" and p["auto.leader.rebalance.enable"] == "true"
    assert not [k for k in p if k.startswith("zookeeper.")] and "zookeeper.metadata.migration.enable" not in p


def test_combined_stays_the_default_and_a_zookeeper_version_ignores_the_setting():
    combined = KAFKA.settings({})
    combined.version = "4.1"
    assert combined.kraft_controllers == "combined"
    assert props(combined.properties("kafka1"))["process.roles"] == "broker,controller"
    zk = settings("3.9")
    plain = KAFKA.settings({"min.insync.replicas": 2, "unclean.leader.election.enable": True})
    plain.version = "3.9"
    assert zk.properties("kafka1") == plain.properties("kafka1")
    with pytest.raises(ValueError):
        KAFKA.settings({"kraft_controllers": "apart"})


def test_the_topology_is_written_with_the_config_and_read_back_by_another_process(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    c = KAFKA.cluster(version="4.1")
    c.write_config(settings())
    assert c.nodes() == CTRLS + BROKERS and c.controller_quorum.voters() == CTRLS and c.controllers() == CTRLS
    assert props((c.conf_dir() / "ctrl2.properties").read_text())["node.id"] == "3002"
    override = yaml.safe_load(c.controller_nodes.override().read_text())["services"]
    assert sorted(override) == CTRLS and all("ports" not in svc for svc in override.values())
    assert override["ctrl1"]["environment"]["KAFKA_NODE"] == "ctrl1"
    assert c.controller_nodes.override() in c.overrides()
    assert KAFKA.cluster(version="4.1").nodes() == CTRLS + BROKERS  # a dead run's heal, elsewhere
    combined = KAFKA.settings({})
    combined.version = "4.1"
    c.write_config(combined)
    assert c.nodes() == BROKERS and c.controller_quorum.voters() == BROKERS and not c.controller_nodes.present()


def test_the_entrypoint_formats_a_new_broker_beside_dedicated_controllers_but_not_a_migrated_one():
    entry = (ROOT / "compose/kafka/kafka-entrypoint.sh").read_text()
    assert "grep -q '^process.roles=broker$'" in entry and "[ ! -f /var/lib/kafka/data/meta.properties ]" in entry


# ---- roles and whose view --------------------------------------------------------------------

def dedicated(tmp_path, monkeypatch, admin: FakeAdmin, states: dict | None = None, running=tuple(CTRLS + BROKERS)):
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    states = states or {n: quorum(3002, 4) for n in CTRLS}
    c = fake_kraft(monkeypatch, states, admin, running=running)
    c.write_config(settings())
    return c


def test_roles_name_the_controllers_and_the_brokers_agreed_view(tmp_path, monkeypatch):
    admin = FakeAdmin([1, 2, 3], {"t": [(0, 3, [3, 1, 2], [3, 1])]})
    c = dedicated(tmp_path, monkeypatch, admin)
    rng = random.Random(0)
    assert c.role("controller", None) == ["ctrl2"] and c.controller_epoch() == 4
    assert resolve(c, "voters", rng) == CTRLS and c.quorum()
    assert resolve(c, "leader", rng, "t/0") == ["kafka3"] and resolve(c, "followers:t/0", rng) == ["kafka1", "kafka2"]
    assert c.partitions("t")[0]["isr"] == ["kafka3", "kafka1"]
    assert {n for n, _ in c.calls} <= set(CTRLS)  # the quorum read from the controllers' files only
    sample = observe.sample(c, parse({"name": "s", "broker": "kafka", "topic": {"name": "t"},
                                      "cluster": {"kraft_controllers": "dedicated"}}, version="4.1", env={}))
    assert sample["view_from"] == "brokers" and sample["controller"] == "ctrl2" and sample["leader"] == "kafka3"


def test_a_broker_cut_from_the_controllers_is_passed_over_once_the_others_see_it_fenced():
    stale = [{"partition": 0, "leader": "kafka1", "isr": ["kafka1"], "replicas": BROKERS}]
    fresh = [{"partition": 0, "leader": "kafka2", "isr": ["kafka2", "kafka3"], "replicas": BROKERS}]
    views = {"kafka1": stale, "kafka2": fresh, "kafka3": fresh}
    # kafka1's frozen image lists everyone; kafka2 and kafka3 dropped it (fenced)
    alive = {"kafka1": BROKERS, "kafka2": ["kafka2", "kafka3"], "kafka3": ["kafka2", "kafka3"]}
    assert controllers.agreed_view(views, alive) == (["kafka2", "kafka3"], fresh)
    # two brokers cut off: their two frozen images agree, the one that still reaches the
    # controllers does not list them: its view, not theirs
    views = {"kafka1": stale, "kafka2": stale, "kafka3": fresh}
    alive = {"kafka1": BROKERS, "kafka2": BROKERS, "kafka3": ["kafka3"]}
    assert controllers.agreed_view(views, alive) == (["kafka3"], fresh)
    # before the fencing everyone agrees; two views that split evenly decide nothing
    assert controllers.agreed_view({"kafka1": stale, "kafka2": fresh}, {n: BROKERS for n in BROKERS}) is None
    assert controllers.agreed_view({}, {}) is None


def test_no_agreed_view_is_an_error_for_a_role_not_a_guess(tmp_path, monkeypatch):
    admin = FakeAdmin([1, 2, 3], {"t": [(0, 3, [3, 1, 2], [3, 1])]})
    c = dedicated(tmp_path, monkeypatch, admin)
    monkeypatch.setattr(c, "node_views", lambda topic, timeout: ({}, {n: "paused" for n in BROKERS}))
    with pytest.raises(Exception, match="no view of t the brokers agree on"):
        c.partitions("t")


# ---- grudges ---------------------------------------------------------------------------------

def test_grudges_cut_a_leader_from_its_followers_only_or_from_the_controllers_too(tmp_path, monkeypatch):
    admin = FakeAdmin([1, 2, 3], {"mqchaos": [(0, 1, [1, 2, 3], [1, 2, 3])]})
    c = dedicated(tmp_path, monkeypatch, admin)
    rng = random.Random(0)
    cut = grudge_for(c, {"isolate_from": ["leader", "followers"]}, rng, "mqchaos/0")
    assert g.links(cut) == {frozenset({"kafka1", "kafka2"}), frozenset({"kafka1", "kafka3"})}  # the controllers kept
    alone = grudge_for(c, {"isolate": "leader"}, rng, "mqchaos/0")
    assert g.links(alone) == {frozenset({"kafka1", n}) for n in CTRLS + ["kafka2", "kafka3"]}
    from_ctrl = grudge_for(c, {"isolate_from": ["leader", "voters"]}, rng, "mqchaos/0")
    assert g.links(from_ctrl) == {frozenset({"kafka1", n}) for n in CTRLS}
    assert resolve(c, "all", rng) == CTRLS + BROKERS and resolve(c, "brokers", rng) == BROKERS


# ---- node control and recovery ---------------------------------------------------------------

def test_a_restarted_controller_is_back_once_its_log_says_so_and_a_quorum_serves(tmp_path, monkeypatch):
    admin = FakeAdmin([1, 2, 3], {})
    c = dedicated(tmp_path, monkeypatch, admin)
    monkeypatch.setattr(c, "paused", lambda n: False)
    assert not c.controller_quorum.back("ctrl1")  # its log: nothing since its start
    back = ("[2026-11-26 10:00:01,1] INFO [QuorumController id=3001] In the new epoch 5, the leader is 3002. "
            "(org.apache.kafka.controller.QuorumController)\n[2026-11-26 10:00:02,1] INFO [KafkaRaftServer "
            "nodeId=3001] Kafka Server started (kafka.server.KafkaRaftServer)\n")
    monkeypatch.setattr(c, "logs", lambda n, tail=None, since=None: back)
    c.wait_rejoined("ctrl1", 2)


# ---- placement and the premise K5a, K8b, K14e require ----------------------------------------

def test_no_broker_is_the_controller_so_the_leader_is_placed_by_kafka():
    assert placement(BROKERS, "ctrl2", "controller", 3) is None
    assert placement(BROKERS, "kafka2", "controller", 3) == ["kafka2", "kafka1", "kafka3"]
    with pytest.raises(RuntimeError):
        placement(BROKERS, None, "controller", 3)


def sample(t: float, leader: str, controller: str) -> dict:
    return {"t": t, "leader": leader, "isr": BROKERS, "controller": controller}


def test_a_leader_reaches_the_controller_when_it_is_the_controller_or_the_controller_is_apart():
    apart = observe.partition_measures([sample(0, "kafka1", "ctrl2"), sample(2, "kafka1", "ctrl2")], 1.0)
    assert apart["leader_is_controller"] is False and apart["leader_reaches_controller"] is True
    zk = observe.partition_measures([sample(0, "kafka1", "kafka1")], 1.0)
    assert zk["leader_is_controller"] is True and zk["leader_reaches_controller"] is True
    follower = observe.partition_measures([sample(0, "kafka1", "kafka3")], 1.0)
    assert follower["leader_reaches_controller"] is False


@pytest.mark.parametrize("name", ["K5a-leader-cut-from-followers-leader-is-controller",
                                  "K8b-leader-isolated-minisr2", "K14e-txn-leader-isolated-unclean"])
def test_the_rows_run_with_the_controllers_apart_on_kraft(name):
    for version in ("3.9-kraft", "4.1"):
        sc = load(ROOT / "scenarios" / f"{name}.yaml", version=version)
        assert sc.not_applicable() is None and sc.cluster.kraft_controllers == "dedicated", version
        assert "leader_reaches_controller" in sc.require and "leader_is_controller" not in sc.require
    assert load(ROOT / "scenarios" / f"{name}.yaml", version="3.9").not_applicable() is None
