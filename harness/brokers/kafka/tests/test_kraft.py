"""Kafka in KRaft mode (issue 16, part 4), without Docker: the topology each version brings up,
the active controller from the nodes' quorum-state views, roles and recovery over a fake
``docker exec`` and a fake AdminClient, the controller-port cut as iptables rules, and what a
scenario may not ask of a KRaft version (refused at load time, or not applicable)."""
from __future__ import annotations

import json
import random
import shlex
from pathlib import Path

import pytest
import yaml

from fakes import FakeAdmin, fake_kraft
from harness import brokers
from harness.brokers import compose
from harness.brokers.protocol import ClusterError, RoleError
from harness.brokers.kafka import kraft
from harness.brokers.kafka.cluster import ZooKeeperCluster
from harness.brokers.kafka.kraft_cluster import KRaftCluster
from harness.scenario import ScenarioError, load, parse
from harness.util import wait_until
from nemesis import faults, net
from nemesis import grudge as g
from nemesis.targets import TargetError, resolve

ROOT = Path(__file__).resolve().parents[4]  # the repository (this file: harness/brokers/<broker>/tests/)
KAFKA = brokers.get("kafka")
NODES = ["kafka1", "kafka2", "kafka3"]


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def state_text(leader: int, epoch: int, voted: int = -1, v0: bool = True) -> str:
    """A quorum-state file as FileQuorumStateStore writes it (data_version 0 or 1)."""
    if v0:
        return json.dumps({"clusterId": "", "leaderId": leader, "leaderEpoch": epoch, "votedId": voted,
                           "appliedOffset": 0, "currentVoters": [{"voterId": i} for i in (1, 2, 3)],
                           "data_version": 0})
    return json.dumps({"leaderId": leader, "leaderEpoch": epoch, "votedId": voted, "data_version": 1})


# ---- configuration ---------------------------------------------------------------------------

def test_a_combined_node_renders_its_quorum_and_listeners_and_no_zookeeper():
    cfg = KAFKA.settings({"min.insync.replicas": 2, "log.flush.interval.messages": 1})
    cfg.version = "4.1"
    p = props(cfg.properties("kafka3"))
    assert p["process.roles"] == "broker,controller" and p["node.id"] == "3" and "broker.id" not in p
    assert p["controller.quorum.voters"] == "1@kafka1:19093,2@kafka2:19093,3@kafka3:19093"
    assert p["listeners"] == "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9094,CONTROLLER://0.0.0.0:19093"
    assert p["advertised.listeners"] == "INTERNAL://kafka3:19092,EXTERNAL://127.0.0.1:9094,CONTROLLER://kafka3:19093"
    assert p["listener.security.protocol.map"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert p["inter.broker.listener.name"] == "INTERNAL" and p["controller.listener.names"] == "CONTROLLER"
    assert not [k for k in p if k.startswith("zookeeper.")]
    assert p["min.insync.replicas"] == "2" and p["log.flush.interval.messages"] == "1"  # extra keys kept
    cfg.version = "3.9"  # the same settings with ZooKeeper: today's file
    zk = props(cfg.properties("kafka3"))
    assert zk["broker.id"] == "3" and zk["zookeeper.connect"] == "zk1:2181,zk2:2181,zk3:2181"
    assert "process.roles" not in zk and "CONTROLLER" not in zk["listeners"]


# ---- topology by version -------------------------------------------------------------------

@pytest.mark.parametrize("version, cls, nodes, compose_file", [
    ("3.9", ZooKeeperCluster, ["zk1", "zk2", "zk3", *NODES], "kafka.yml"),
    ("3.9-kraft", KRaftCluster, NODES, "kafka-kraft.yml"),
    ("4.1", KRaftCluster, NODES, "kafka-kraft.yml"),
])
def test_the_version_picks_the_topology(version, cls, nodes, compose_file, monkeypatch):
    c = KAFKA.cluster(version=version)
    assert type(c) is cls and c.nodes() == nodes and c.compose_file == compose_file
    assert c.version() == version
    # the compose file it runs holds exactly its nodes
    services = yaml.safe_load((ROOT / "compose" / compose_file).read_text())["services"]
    assert sorted(services) == sorted(nodes)
    seen = []
    monkeypatch.setattr(compose, "run", lambda cmd, **kw: seen.append(cmd))
    c.compose("ps")
    files = [seen[0][i + 1] for i, a in enumerate(seen[0]) if a == "-f"]
    assert files[0] == str(ROOT / "compose" / compose_file)
    # ZooKeeper's role and nodes only where there is ZooKeeper
    assert ("zk" in c.roles) is (cls is ZooKeeperCluster) and ("voters" in c.roles) is (cls is KRaftCluster)
    assert ("controller" in c.ports) is (cls is KRaftCluster) and c.ports["internal"] == (19092,)


def test_a_cluster_already_up_is_found_by_its_recorded_version(tmp_path, monkeypatch):
    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    assert type(brokers.get_cluster("kafka")) is ZooKeeperCluster  # nothing recorded: the default
    c = KAFKA.cluster(version="4.1")
    monkeypatch.setattr(c, "compose", lambda *a, **k: None)
    c._compose_up(c.nodes())
    assert (tmp_path / "kafka" / "version").read_text() == "4.1\n"
    found = brokers.get_cluster("kafka")  # what mqchaos heal / status / down / nemesis act on
    assert type(found) is KRaftCluster and found.version() == "4.1"
    assert type(KAFKA.cluster()) is ZooKeeperCluster  # one to bring up: the version given, else the default
    (tmp_path / "kafka" / "version").write_text("2.8\n")  # a version the harness no longer runs
    assert type(brokers.get_cluster("kafka")) is ZooKeeperCluster


def test_a_cluster_refuses_to_bring_up_the_other_mode():
    c = KAFKA.cluster(version="4.1")
    cfg = KAFKA.settings({})
    cfg.version = "3.9"
    with pytest.raises(ClusterError, match="Kafka 3.9 is not what a KRaftCluster brings up"):
        c.up(cfg)


# ---- the active controller from the nodes' own views ---------------------------------------

def test_the_highest_epoch_view_that_names_a_leader_wins():
    views = {n: kraft.quorum_state(t) for n, t in (
        ("kafka1", state_text(1, 4)),                 # isolated old leader: its stale view
        ("kafka2", state_text(3, 5)),                 # the majority's new leader
        ("kafka3", state_text(3, 5, v0=False)))}
    assert kraft.active_controller(views) == ("kafka3", 5)
    assert kraft.quorum_leader(views, NODES) == "kafka3"
    # a cut-off candidate (3.9: no pre-vote) raises its epoch but names no leader: passed over
    views["kafka1"] = kraft.quorum_state(state_text(-1, 9, voted=1))
    assert kraft.active_controller(views) == ("kafka3", 5) and kraft.quorum_leader(views, NODES) == "kafka3"


def test_a_quorum_needs_a_majority_of_views_on_the_leader():
    one = {"kafka1": kraft.quorum_state(state_text(2, 7)), "kafka2": None, "kafka3": None}
    assert kraft.active_controller(one) == ("kafka2", 7)  # what is known: kafka1's view
    assert kraft.quorum_leader(one, NODES) is None        # but no majority agrees
    mid_election = {"kafka1": kraft.quorum_state(state_text(2, 7)),
                    "kafka2": kraft.quorum_state(state_text(-1, 8, voted=2)),
                    "kafka3": kraft.quorum_state(state_text(-1, 8, voted=2))}
    assert kraft.active_controller(mid_election) == ("kafka2", 7) and kraft.quorum_leader(mid_election, NODES) is None
    assert kraft.active_controller({n: None for n in NODES}) == (None, None)


# ---- a KRaft cluster over a fake docker exec and a fake AdminClient (tests/fakes.py) --------

def three_up() -> dict[str, str]:
    return {"kafka1": state_text(2, 3), "kafka2": state_text(2, 3), "kafka3": state_text(2, 3, v0=False)}


def test_roles_resolve_from_the_quorum_state_and_the_metadata(monkeypatch):
    admin = FakeAdmin([1, 2, 3], {"t": [(0, 3, [3, 1, 2], [3, 1]), (1, 1, [1, 2, 3], [1, 2, 3])]})
    c = fake_kraft(monkeypatch, three_up(), admin)
    rng = random.Random(0)
    assert c.role("controller", None) == ["kafka2"] and c.controller_epoch() == 3
    assert resolve(c, "leader", rng, "t/0") == ["kafka3"]
    assert resolve(c, "followers:t/0", rng) == ["kafka1", "kafka2"]
    assert resolve(c, "isr:t", rng) == ["kafka3", "kafka1"]
    assert resolve(c, "leader:t/1", rng) == ["kafka1"]
    assert resolve(c, "voters", rng) == NODES
    assert resolve(c, "followers:t/0 except controller", rng) == ["kafka1"]
    assert c.partitions("t")[0] == {"partition": 0, "leader": "kafka3", "isr": ["kafka3", "kafka1"],
                                    "replicas": ["kafka3", "kafka1", "kafka2"], "preferred": "kafka3",
                                    "leader_epoch": None}
    with pytest.raises(TargetError, match="'zk': Kafka in KRaft mode .* has no ZooKeeper"):
        resolve(c, "zk", rng)
    with pytest.raises(RoleError, match="no role 'zk'"):
        c.role("zk", None)
    # nine readings of the quorum: the controller, its epoch, the except, and whose view each
    # of the six partition reads takes; each of every node's view and nothing else; a KRaft
    # cluster has no ZooKeeper client to call
    assert sorted(n for n, _ in c.calls) == sorted(NODES * 9)
    assert all(cmd == ["cat", kraft.QUORUM_STATE] for _, cmd in c.calls)
    assert not hasattr(c, "ensemble") and not hasattr(c, "zk") and not hasattr(c, "registration_time")


def test_health_and_recovery_read_the_quorum_and_the_metadata(monkeypatch):
    admin = FakeAdmin([1, 2, 3], {"mqchaos-health": [(p, 1, [1, 2, 3], [1, 2, 3]) for p in range(3)]})
    c = fake_kraft(monkeypatch, three_up(), admin)
    assert c.quorum() and c.healthy() and c.stuck_nodes() == []
    c.wait_whole(5, lambda cond: cond, lambda finding, action: action())
    # kafka3 fenced (gone from the metadata's brokers), kafka1 and kafka3 frozen: no quorum
    admin.brokers = [1, 2]
    assert c.stuck_nodes() == ["kafka3"] and not c.healthy()
    c2 = fake_kraft(monkeypatch, {"kafka2": state_text(2, 3)}, admin)
    assert not c2.quorum() and c2.controller() == "kafka2"


def test_a_restarted_broker_counts_as_registered_once_its_own_log_says_unfenced(monkeypatch):
    admin = FakeAdmin([1, 2, 3], {})
    unfenced = ("[2026-11-24 10:00:03,1] INFO [BrokerLifecycleManager id=3] The broker has been unfenced. "
                "Transitioning from RECOVERY to RUNNING. (kafka.server.BrokerLifecycleManager)\n")
    # listed, but by the killed run's registration (still within its session): not yet
    assert not fake_kraft(monkeypatch, three_up(), admin, logs="registering...\n").registered_since_start("kafka3")
    assert fake_kraft(monkeypatch, three_up(), admin, logs=unfenced).registered_since_start("kafka3")
    admin.brokers = [1, 2]  # unfenced once, fenced since
    assert not fake_kraft(monkeypatch, three_up(), admin, logs=unfenced).registered_since_start("kafka3")
    down = fake_kraft(monkeypatch, three_up(), FakeAdmin([1, 2, 3], {}), logs=unfenced, running=("kafka1",))
    assert not down.registered_since_start("kafka3")


def test_a_sample_carries_the_controller_epoch_and_no_leader_epoch(monkeypatch):
    from harness.brokers.kafka import observe
    admin = FakeAdmin([1, 2, 3], {"mqchaos": [(0, 3, [3, 1, 2], [3, 1, 2])]})
    c = fake_kraft(monkeypatch, three_up(), admin, version="3.9-kraft")
    sc = parse({"name": "s", "broker": "kafka"}, version="3.9-kraft", env={})
    assert observe.sample(c, sc) == {"leader": "kafka3", "isr": ["kafka3", "kafka1", "kafka2"], "epoch": None,
                                     "controller": "kafka2", "controller_epoch": 3,  # 3.9: no ELR read
                                     "view_from": "kafka2",  # the active controller's broker
                                     "views": {n: {"leader": "kafka3", "isr": ["kafka3", "kafka1", "kafka2"]}
                                               for n in NODES}}


# ---- ELR (4.1): kafka-topics, rarely, in the background ------------------------------------

def test_kafka_topics_elr_lines_are_read_per_partition():
    out = ("[main] WARN some log line\n"
           "Topic: mqchaos\tTopicId: abc\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2\n"
           "\tTopic: mqchaos\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1\tElr: 3,2\tLastKnownElr: \n"
           "\tTopic: mqchaos\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1\tElr: \tLastKnownElr: \n"
           "\tTopic: mqchaos\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3\tElr: N/A\tLastKnownElr: N/A\n")
    assert kraft.parse_elr(out, "mqchaos") == {0: ["kafka3", "kafka2"], 1: [], 2: None}
    assert kraft.parse_elr(out, "other") == {}
    cmd = kraft.topic_describe_command("kafka2:19092", "mqchaos")
    assert cmd[cmd.index("--bootstrap-server") + 1] == "kafka2:19092" and cmd[-3:] == ["--describe", "--topic", "mqchaos"]
    assert "org.apache.kafka.tools.TopicCommand" in cmd


def test_elr_is_read_only_when_it_can_be_non_empty_and_at_most_every_so_often(monkeypatch):
    c = KAFKA.cluster(version="4.1")
    ran = []

    def exec_(node, cmd, check=True, timeout=60, user=None):
        ran.append((node, cmd[cmd.index("--bootstrap-server") + 1]))
        if node == "kafka1":
            return 1, "Error response from daemon: container kafka1 is not running"
        return 0, "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 1,2,3\tIsr: 2\tElr: 3\tLastKnownElr: \n"
    monkeypatch.setattr(c, "exec", exec_)
    assert c.elr("t", 0, below_min_isr=False) == (None, None) and not ran  # the ISR is whole: no JVM
    c.elr("t", 0, below_min_isr=True)  # asked for: read in the background
    elr, age = wait_until(lambda: (got := c.elr("t", 0, below_min_isr=True))[1] is not None and got, 5,
                          "the background read", 0.02)
    assert elr == ["kafka3"] and 0 <= age < 5
    # the first broker that answers, once: asked again and again within 10 s, not read again
    assert ran == [("kafka1", "kafka1:19092"), ("kafka2", "kafka2:19092")]
    z = KAFKA.cluster(version="3.9-kraft")
    monkeypatch.setattr(z, "exec", lambda *a, **k: pytest.fail("3.9 has no ELR to read"))
    assert z.elr("t", 0, below_min_isr=True) == (None, None)


# ---- the controller-port cut as iptables rules ------------------------------------------------

def test_a_port_cut_drops_that_ports_tcp_both_ways_and_nothing_else():
    grudge = g.isolate("kafka2", NODES)
    addr = {"kafka1": "10.0.0.1", "kafka2": "10.0.0.2", "kafka3": "10.0.0.3"}.__getitem__
    rules = net.partition_rules(grudge, addr, "f1", ports=[19093])
    tag = "-m comment --comment mqchaos:f1 -j DROP"

    def expected(peer: str) -> list[str]:
        a = addr(peer)
        return [f"{chain} {d} {a}/32 -p tcp {flag} 19093 {tag}" for flag in ("--dport", "--sport")
                for chain, d in (("MQCHAOS-IN", "-s"), ("MQCHAOS-OUT", "-d"))]
    assert rules == {"kafka1": expected("kafka2"), "kafka2": expected("kafka1") + expected("kafka3"),
                     "kafka3": expected("kafka2")}
    for specs in rules.values():  # each is one iptables rule as the shell gets it
        assert all(shlex.split(s)[0] in ("MQCHAOS-IN", "MQCHAOS-OUT") for s in specs)
    whole = net.partition_rules(grudge, addr, "f1")  # no ports: the whole link, as before
    assert whole["kafka1"] == [f"MQCHAOS-IN -s 10.0.0.2/32 {tag}", f"MQCHAOS-OUT -d 10.0.0.2/32 {tag}"]


def test_a_partition_step_with_ports_plans_the_controller_cut():
    from nemesis.families.network import plan_partition

    c = KAFKA.cluster(version="4.1")
    c.address = {"kafka1": "10.0.0.1", "kafka2": "10.0.0.2", "kafka3": "10.0.0.3"}.__getitem__
    c.controller_and_epoch = lambda: ("kafka1", 4)
    ctx = faults.Ctx(c, random.Random(0), lambda: 0.0, subject="t/0")
    f = faults.Fault("f1", "partition", [])
    plan_partition(ctx, f, {"isolate": "controller"}, {"ports": "controller"})
    assert f.details["ports"] == [19093] and f.details["grudge"]["kafka1"] == ["kafka2", "kafka3"]
    assert f.undo["rules"] == net.partition_rules(g.isolate("kafka1", NODES), c.address, "f1", [19093])
    assert f.describe() == "partition kafka1/kafka2 kafka1/kafka3 port 19093"
    with pytest.raises(TargetError, match="no traffic 'zookeeper' to cut"):
        plan_partition(ctx, faults.Fault("f2", "partition", []), "halves", {"ports": ["zookeeper"]})
    with pytest.raises(TargetError, match="only a partition cuts by port"):
        plan_partition(ctx, faults.Fault("f3", "loss", []), "halves", {"ports": "controller", "probability": 1})


# ---- what a scenario may not ask of a KRaft version ----------------------------------------

def scenario(nemesis: list, **kw) -> dict:
    return {"name": "s", "broker": "kafka", "nemesis": nemesis, **kw}


@pytest.mark.parametrize("step, field", [
    ({"at": 0, "fault": "partition", "targets": {"isolate_from": ["leader", "zk"]}}, "targets: 'zk'"),
    ({"at": 0, "fault": "kill", "targets": "zk2"}, "targets: 'zk2'"),
    ({"at": 0, "fault": "partition", "targets": {"grudge": {"zk1": ["kafka1"]}}}, "targets: grudge names 'zk1'"),
    ({"at": 0, "fault": "partition", "targets": {"isolate": "leader"}, "when": {"same": ["zk", "leader"], "within": 5}},
     "when.same: 'zk'"),
])
def test_zookeeper_targets_are_refused_on_kraft_naming_the_field(step, field):
    for version in ("3.9-kraft", "4.1"):
        with pytest.raises(ScenarioError, match=rf"nemesis: \w+ at 0s: {field}.*no ZooKeeper"):
            parse(scenario([step]), version=version, env={})
    assert parse(scenario([step]), version="3.9", env={}).version == "3.9"  # ZooKeeper's own


def test_zookeeper_settings_and_foreign_ports_are_refused_naming_the_field():
    with pytest.raises(ScenarioError, match="cluster.zookeeper_session_timeout_ms: Kafka 4.1 runs in KRaft mode"):
        parse(scenario([], cluster={"zookeeper.session.timeout.ms": 9000}), version="4.1", env={})
    with pytest.raises(ScenarioError, match="cluster.zookeeper.connection.timeout.ms: Kafka 3.9-kraft runs in KRaft"):
        parse(scenario([], cluster={"zookeeper.connection.timeout.ms": 9000}), version="3.9-kraft", env={})
    assert parse(scenario([], cluster={"zookeeper.session.timeout.ms": 9000}), version="3.9", env={})
    # the default, as run.json's copy of every scenario carries it, is no claim: it loads
    assert parse(scenario([], cluster={"zookeeper_session_timeout_ms": 6000}), version="4.1", env={})
    cut = {"at": 0, "fault": "partition", "targets": {"isolate": "leader"}, "params": {"ports": "controller"}}
    assert parse(scenario([cut]), version="4.1", env={}).nemesis == [cut]
    with pytest.raises(ScenarioError, match=r"partition at 0s: params.ports: no traffic 'controller' to cut"):
        parse(scenario([cut]), version="3.9", env={})
    with pytest.raises(ScenarioError, match=r"kill at 0s: params.ports: only a partition cuts by port"):
        parse(scenario([{"at": 0, "fault": "kill", "targets": "leader", "params": {"ports": "internal"}}]),
              version="4.1", env={})


def test_the_zookeeper_rows_are_not_applicable_on_kraft_and_their_counterparts_run_there():
    files = sorted((ROOT / "scenarios").glob("K*.yaml"))
    zk_rows = [p for p in files if "-zk" in p.name or p.name.startswith("K9-controller")]
    kraft_rows = [p for p in files if "-kraft-" in p.name]
    assert [p.name.split("-")[0] for p in zk_rows] == ["K6", "K7", "K7b", "K9"]
    # K6k is K6's KRaft counterpart with a claim of its own (KRaft fences the cut follower:
    # the opposite of seed 002's K6 claim); every file has an id of its own (issue 52), a
    # KRaft counterpart its ZooKeeper row's with a k
    assert [p.name.split("-")[0] for p in kraft_rows] == ["K6k", "K7", "K7b", "K9"]
    for zk, kr in zip(zk_rows, kraft_rows):
        assert load(kr).id == load(zk).id + "k"
        for version in ("3.9-kraft", "4.1"):
            assert "about ZooKeeper" in load(zk, version).not_applicable()
            sc = load(kr, version)
            assert sc.not_applicable() is None and sc.version == version
            steps = sc.nemesis if isinstance(sc.nemesis, list) else []
            assert any(st.get("params", {}).get("ports") == "controller" for st in steps)
        assert load(zk).not_applicable() is None and "KRaft controller quorum" in load(kr).not_applicable()
    # the rows whose premise KRaft's combined mode cannot meet (a leader cut from both
    # followers is cut from the controller majority too) say so; every other loads as it is
    combined = {p.name.split("-")[0] for p in files if load(p).metadata_why}
    # K1u: a follower killed and the other cut from the leader leave no two voters together
    assert combined == {"K1u", "K5b", "K5i", "K8a", "K8c"}
    # K5a, K8b and K14e (K8c's set-up, transactional) run on KRaft with the controllers apart
    # (issue 52): there a leader cut from both followers still reaches the controllers
    apart = {p.name.split("-")[0] for p in files if load(p).cluster.kraft_controllers == "dedicated"}
    assert apart == {"K5a", "K8b", "K14e"} and not apart & combined
    # a ZooKeeper claim with no KRaft counterpart (K7r: seed 002's old leader cut from ZooKeeper;
    # K16: ZooKeeper's own majority lost; K18: the ZooKeeper controller electing a broker it
    # cannot reach, which KRaft fences once its heartbeats stop; K19: the ZooKeeper controller
    # unable to push a leadership change to the old leader, where a KRaft broker pulls it)
    zk_only = {p.name.split("-")[0] for p in files if p not in zk_rows and load(p).metadata == "zookeeper"
               and not load(p).metadata_why}
    assert zk_only == {"K7r", "K16", "K18", "K19"}
    for p in files:
        if p not in zk_rows + kraft_rows:
            why = load(p, "4.1").not_applicable()
            if p.name.split("-")[0] in combined:
                assert "controller majority" in why and load(p).not_applicable() is None, p.name
            elif p.name.split("-")[0] in zk_only:
                assert "about ZooKeeper" in why and load(p).not_applicable() is None, p.name
            else:
                assert why is None, p.name


def test_a_metadata_reason_needs_its_mode_and_is_the_reason_given():
    """``metadata_why`` is the not-applicable reason of a claim about one metadata mode (K5a,
    K8: KRaft's combined mode cannot give its premise); without ``metadata:`` it says nothing."""
    base = {"name": "k", "broker": "kafka"}
    with pytest.raises(ScenarioError, match="metadata_why"):
        parse(dict(base, metadata_why="because"), version="3.9", env={})
    sc = parse(dict(base, metadata="zookeeper", metadata_why="the premise needs it\n"), version="4.1", env={})
    assert sc.not_applicable() == "the premise needs it (metadata: zookeeper)"
    assert parse(dict(base, metadata="zookeeper"), version="4.1", env={}).not_applicable().startswith(
        "the claim is about ZooKeeper")
    assert parse(dict(base, metadata="zookeeper", metadata_why="x"), version="3.9", env={}).not_applicable() is None


def test_the_transaction_coordinator_is_found_as_kafka_finds_it():
    """txn_coordinator: the leader of __transaction_state's partition Utils.abs(hashCode) % 50
    (Kafka's TransactionStateManager.partitionFor), Java's String.hashCode reproduced."""
    from harness.brokers.kafka import roles

    assert roles.java_hash("hello") == 99162322 and roles.java_hash("") == 0
    assert roles.java_hash("polygenelubricants") == -2 ** 31  # Integer.MIN_VALUE: abs is 0
    assert roles.coordinator_partition("polygenelubricants") == 0
    assert roles.coordinator_partition("hello") == 99162322 % 50
    assert roles.transactional_id("p0") == "mqchaos-p0"

    class Cluster:
        def partitions(self, topic):
            assert topic == "__transaction_state"
            return [{"leader": f"kafka{i % 3 + 1}"} for i in range(50)]
    Cluster.roles = roles.ROLES
    expected = f"kafka{roles.coordinator_partition('mqchaos-p0') % 3 + 1}"
    assert roles.resolve_role(Cluster(), "txn_coordinator", None) == [expected]


def test_a_leader_is_resolved_from_the_brokers_metadata_when_zookeeper_does_not_answer():
    """K16: with ZooKeeper's majority gone the leader (and ISR, followers) come from the
    brokers' metadata; with ZooKeeper answering, from ZooKeeper's record alone."""
    from kazoo.handlers.threading import KazooTimeoutError

    from harness.brokers.kafka.cluster import ZooKeeperCluster

    zk_view = [{"partition": 0, "leader": "kafka2", "isr": ["kafka2", "kafka3"], "replicas": ["kafka2", "kafka3", "kafka1"]}]
    brokers_view = [{"partition": 0, "leader": "kafka1", "isr": ["kafka1", "kafka2", "kafka3"],
                     "replicas": ["kafka1", "kafka2", "kafka3"]}]

    class Fake(ZooKeeperCluster):
        zk_up = True

        def __init__(self):
            pass

        def partitions(self, topic):
            if not self.zk_up:
                raise KazooTimeoutError("Connection time-out")
            return zk_view

        def metadata(self, topic, timeout=10):
            return brokers_view

    c = Fake()
    assert c.role("leader", "mqchaos") == ["kafka2"] and c.role("followers", "mqchaos") == ["kafka3", "kafka1"]
    c.zk_up = False
    assert c.role("leader", "mqchaos") == ["kafka1"]
    assert c.role("isr", "mqchaos") == ["kafka1", "kafka2", "kafka3"]


def test_fetch_requests_are_counted_per_broker_against_the_leaders():
    """K17 (seed 002, 43): a consumer's Fetch requests per broker, from librdkafka's
    statistics (brokers.<name>.nodeid / req.Fetch; bootstrap entries have node id -1)."""
    import json

    from harness.brokers.kafka.probes import fetch_measures

    stats = json.dumps({"brokers": {
        "127.0.0.1:9092/bootstrap": {"nodeid": -1, "req": {"Fetch": 0, "Metadata": 2}},
        "127.0.0.1:9092/1": {"nodeid": 1, "req": {"Fetch": 0, "Metadata": 1}},
        "127.0.0.1:9093/2": {"nodeid": 2, "req": {"Fetch": 41, "ListOffsets": 1}},
        "127.0.0.1:9094/3": {"nodeid": 3, "req": {"Fetch": 3}}}})
    m = fetch_measures(stats, ["kafka2"], 900)
    assert m["fetch_requests_by_node"] == {"kafka1": 0, "kafka2": 41, "kafka3": 3}
    assert m["fetch_requests_to_leaders"] == 41 and m["fetch_requests_to_non_leaders"] == 3
    assert m["fetch_leaders"] == ["kafka2"] and m["fetch_messages_read"] == 900
    assert fetch_measures(None, ["kafka2"], 0) == {"fetch_messages_read": 0}  # no statistics: nothing judged


def test_a_live_reader_follows_the_topic_during_the_load(tmp_path):
    """workload.live_reader (K1u, seed 002 claim 44): one reader following the topic during
    the load, which the drain then reads on to the end; not beside a transactional workload."""
    import threading
    from types import SimpleNamespace

    from harness.brokers.kafka import PLUGIN
    from harness.history import JsonlWriter, RunClock
    from harness.scenario import parse

    base = {"name": "k", "broker": "kafka", "nemesis": [], "workload": {"live_reader": True}}
    sc = parse(base)
    ctx = SimpleNamespace(sc=sc, cluster=SimpleNamespace(bootstrap_servers=lambda: "127.0.0.1:1"),
                          writer=lambda kind, name: JsonlWriter(tmp_path / f"{kind}-{name}.jsonl"),
                          clock=RunClock(), stop=threading.Event())
    [reader] = PLUGIN.consumers(ctx)
    assert reader.name == "c0" and reader.following.is_set()
    assert PLUGIN.consumers(SimpleNamespace(**{**vars(ctx), "sc": parse({**base, "workload": {}})})) == []
    with pytest.raises(Exception, match="live_reader"):
        parse({**base, "workload": {"live_reader": True, "transactions": {"size": 5}}})


def test_the_drain_reads_the_final_log_again_to_find_what_the_live_reader_saw_vanish(tmp_path, monkeypatch):
    """K1h (seed 002, 48): a message the live reader read and the final log lacks was read
    above the high watermark; the final read goes to probes/, not the history; unknown when
    either read was incomplete. expect.measured takes the drain's figures."""
    import threading
    from types import SimpleNamespace

    import harness.brokers.kafka as K
    from harness import expect
    from harness.history import RunClock

    class Final:
        def __init__(self, name, bootstrap, topic, writer, clock, stop, **kw):
            self.ids, self.complete, self.writer = {"a", "b", "d"}, True, writer

        def start(self):
            pass

        def join(self, timeout=None):
            pass
    monkeypatch.setattr(K, "KafkaReader", Final)
    ctx = SimpleNamespace(sc=K.KafkaScenario.model_validate({"name": "k", "broker": "kafka", "nemesis": [],
                                                             "workload": {"live_reader": True}}),
                          cluster=SimpleNamespace(bootstrap_servers=lambda: "127.0.0.1:1"), dir=tmp_path,
                          clock=RunClock(), stop=threading.Event())
    live = SimpleNamespace(ids={"a", "b", "c"}, complete=True)
    assert K.final_read(ctx, live) == {"read_then_gone": 1, "final_read": 3}
    assert (tmp_path / "probes").is_dir()
    assert K.final_read(ctx, SimpleNamespace(ids={"a"}, complete=False))["read_then_gone"] is None
    assert {"read_then_gone", "final_read"} <= ctx.sc.measurement_names()
    m = expect.measured({}, {"drain": {"complete": True, "figures": {"read_then_gone": 0, "final_read": 9}}})
    assert m["read_then_gone"] == 0 and m["final_read"] == 9
