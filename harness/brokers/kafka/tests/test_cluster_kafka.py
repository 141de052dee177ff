"""Real Kafka + ZooKeeper cluster: bring-up, leader lookup before/after kill -9, controller
failover, graceful stop, pause (ZooKeeper session expiry), wipe + rejoin, teardown.

The docker-marked tests share one cluster (module fixture) and run in file order; the last
one tears it down and checks nothing is left behind.
"""
from __future__ import annotations

import ipaddress
import time

import pytest

from harness.brokers.kafka.cluster import (BROKERS, ZK_NODES, KafkaCluster, KafkaConfig, ZooKeeperCluster, broker_id,
                                           broker_node)
from harness.util import wait_until


# ---- no Docker needed -----------------------------------------------------------------
def test_config_from_settings_and_render():
    cfg = KafkaConfig.from_settings({"min.insync.replicas": "2", "unclean.leader.election.enable": "true",
                                     "auto_leader_rebalance": "false", "log.flush.interval.messages": "1"})
    assert cfg.min_insync_replicas == 2 and cfg.unclean_leader_election is True
    assert cfg.auto_leader_rebalance is False
    props = cfg.properties("kafka2")
    assert "broker.id=2\n" in props
    assert "advertised.listeners=INTERNAL://kafka2:19092,EXTERNAL://127.0.0.1:9093\n" in props
    assert "min.insync.replicas=2\n" in props
    assert "unclean.leader.election.enable=true\n" in props
    assert "auto.leader.rebalance.enable=false\n" in props
    assert "zookeeper.session.timeout.ms=6000\n" in props
    assert "default.replication.factor=3\n" in props
    assert "log.flush.interval.messages=1\n" in props


def test_broker_id_mapping():
    assert [broker_id(n) for n in BROKERS] == [1, 2, 3]
    assert [broker_node(i) for i in (1, 2, 3)] == BROKERS
    assert broker_node(-1) is None
    with pytest.raises(ValueError):
        broker_id("zk1")
    assert broker_id("kafka5") == 5
    with pytest.raises(ValueError, match="kafka1..kafka5"):
        broker_id("kafka6")


def test_a_five_broker_cluster_adds_kafka4_and_kafka5_as_copies_of_kafka3(tmp_path, monkeypatch):
    """Seed 002's RF 5 (claim 60): the brokers beyond three come from a compose override
    rendered from the file's own kafka3; another process (a dead run's heal) finds them."""
    import yaml

    from harness.brokers import compose
    from harness.brokers.kafka.kraft_cluster import KRaftCluster

    monkeypatch.setattr(compose, "STATE_DIR", tmp_path)
    c = ZooKeeperCluster()
    assert c.brokers() == BROKERS and not c.size_override().exists()
    c.broker_nodes.resize(KafkaConfig(brokers=5).brokers)
    data = yaml.safe_load(c.size_override().read_text())
    base = yaml.safe_load((compose.COMPOSE_DIR / "kafka.yml").read_text())["services"]["kafka3"]
    k5 = data["services"]["kafka5"]
    assert sorted(data["services"]) == ["kafka4", "kafka5"] and sorted(data["volumes"]) == ["kafka4-data", "kafka5-data"]
    assert (k5["container_name"], k5["hostname"], k5["environment"]["KAFKA_NODE"]) == ("kafka5",) * 3
    assert k5["ports"] == ["127.0.0.1:9096:9096"] and k5["networks"]["kafkanet"]["ipv4_address"] == "172.28.20.25"
    assert "kafka5-data:/var/lib/kafka" in k5["volumes"] and k5["image"] == base["image"]
    again = ZooKeeperCluster()
    assert again.brokers() == ["kafka1", "kafka2", "kafka3", "kafka4", "kafka5"]
    assert again.nodes() == ZK_NODES + again.brokers()
    assert again.client_endpoints()["kafka4"] == "127.0.0.1:9095"
    c.broker_nodes.resize(3)
    assert not c.size_override().exists() and ZooKeeperCluster().brokers() == BROKERS
    # KRaft: five voters, each node's own
    props = KafkaConfig(brokers=5, version="4.1").properties("kafka5")
    assert "controller.quorum.voters=" in props and props.count("@kafka") == 5 and "node.id=5\n" in props
    assert KRaftCluster.compose_file == "kafka-kraft.yml"
    with pytest.raises(ValueError, match="brokers"):
        KafkaConfig(brokers=6)


# ---- real cluster -----------------------------------------------------------------------
TOPIC = "t-kill"


@pytest.fixture(scope="module")
def cluster():
    c = ZooKeeperCluster()
    t0 = time.monotonic()
    c.up(KafkaConfig(min_insync_replicas=2, replica_lag_time_max_ms=10000))
    print(f"kafka healthy in {time.monotonic() - t0:.1f}s")
    yield c
    c.down()


def produce(c: KafkaCluster, topic: str, n: int, prefix: str) -> int:
    from confluent_kafka import Producer
    acked = []
    p = Producer({"bootstrap.servers": c.bootstrap_servers(), "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(topic, f"{prefix}-{i}".encode(),
                  on_delivery=lambda err, msg: acked.append(msg) if err is None else None)
    p.flush(60)
    return len(acked)


def consume_all(c: KafkaCluster, topic: str) -> list[str]:
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": c.bootstrap_servers(), "group.id": f"check-{time.time()}",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    parts = c.partitions(topic)
    tps = [TopicPartition(topic, p["partition"], 0) for p in parts]
    highs = {tp.partition: cons.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    cons.assign(tps)
    seen: list[str] = []
    pos = {tp.partition: 0 for tp in tps}
    deadline = time.monotonic() + 60
    while any(pos[p] < highs[p] for p in pos) and time.monotonic() < deadline:
        msg = cons.poll(1.0)
        if msg is None or msg.error():
            continue
        seen.append(msg.value().decode())
        pos[msg.partition()] = msg.offset() + 1
    cons.close()
    return seen


@pytest.mark.docker
def test_up_healthy(cluster):
    assert cluster.ensemble.serves()
    assert sorted(cluster.ensemble.mode(z) for z in ZK_NODES) == ["follower", "follower", "leader"]
    assert cluster.registered_brokers() == BROKERS
    assert cluster.metadata_brokers() == BROKERS
    assert cluster.controller() in BROKERS
    assert cluster.describe_controller_via_admin() == cluster.controller()
    addrs = cluster.addresses()
    subnet = ipaddress.ip_network(cluster.subnet())
    assert len(set(addrs.values())) == 6 and all(ipaddress.ip_address(a) in subnet for a in addrs.values())
    assert ipaddress.ip_address(cluster.gateway()) in subnet
    assert all(ep.startswith("127.0.0.1:") for ep in cluster.client_endpoints().values())
    # per-run settings took effect
    _, props = cluster.exec("kafka1", ["cat", "/mqchaos/conf/kafka1.properties"])
    assert "min.insync.replicas=2" in props
    # the health topic is RF 3 and in sync, ZooKeeper and the brokers' metadata agree
    zk_view = cluster.partitions("mqchaos-health")
    md_view = cluster.metadata("mqchaos-health")
    assert len(zk_view) == 3
    for z, m in zip(zk_view, md_view):
        assert len(z["replicas"]) == 3 and sorted(z["isr"]) == BROKERS
        assert z["leader"] == m["leader"] and z["replicas"] == m["replicas"]
        assert z["preferred"] == z["replicas"][0]


@pytest.mark.docker
def test_leader_lookup_and_kill_restart(cluster):
    cluster.create_topic(TOPIC, replicas=[["kafka1", "kafka2", "kafka3"]])
    assert cluster.leader(TOPIC) == "kafka1"          # the preferred replica leads
    assert cluster.followers(TOPIC) == ["kafka2", "kafka3"]
    assert produce(cluster, TOPIC, 200, "before") == 200

    cluster.kill("kafka1")
    assert cluster.exit_code("kafka1") == 137
    new_leader = wait_until(lambda: (ld := cluster.leader(TOPIC)) not in (None, "kafka1") and ld,
                            60, "a new leader for t-kill")
    assert new_leader in ("kafka2", "kafka3")
    wait_until(lambda: "kafka1" not in cluster.isr(TOPIC), 30, "kafka1 out of the ISR")
    wait_until(lambda: "kafka1" not in cluster.registered_brokers(), 30, "kafka1 unregistered")
    wait_until(lambda: cluster.metadata(TOPIC)[0]["leader"] == new_leader, 30, "metadata to follow")
    assert produce(cluster, TOPIC, 100, "during") == 100   # ISR {2,3} satisfies min.insync 2

    cluster.start("kafka1")
    cluster.wait_broker_rejoined("kafka1", topic=TOPIC, timeout=120)
    assert cluster.registered_brokers() == BROKERS
    values = consume_all(cluster, TOPIC)
    assert len(values) == 300 and len(set(values)) == 300


@pytest.mark.docker
def test_controller_kill_elects_another(cluster):
    old = cluster.controller()
    old_epoch = cluster.controller_epoch()
    cluster.kill(old)
    new = wait_until(lambda: (c := cluster.controller()) not in (None, old) and c, 60, "a new controller")
    assert new in BROKERS and new != old
    assert cluster.controller_epoch() > old_epoch
    cluster.start(old)
    cluster.wait_broker_rejoined(old, topic=TOPIC, timeout=120)


@pytest.mark.docker
def test_graceful_stop_moves_leadership(cluster):
    leader = cluster.leader(TOPIC)
    t0 = time.monotonic()
    cluster.stop(leader, timeout=60)
    took = time.monotonic() - t0
    assert took < 55
    # a JVM ended by SIGTERM exits 143 after its shutdown hooks; never 137 (SIGKILL)
    assert cluster.exit_code(leader) in (0, 143), cluster.logs(leader, tail=30)
    logs = cluster.logs(leader, tail=300)
    assert "shut down completed" in logs
    assert "controlled shutdown" in logs.lower()
    assert cluster.leader(TOPIC) not in (None, leader)
    cluster.start(leader)
    cluster.wait_broker_rejoined(leader, topic=TOPIC, timeout=120)


@pytest.mark.docker
def test_pause_expires_zookeeper_session(cluster):
    cluster.pause("kafka3")
    try:
        assert cluster.paused("kafka3") and not cluster.running("kafka3")
        # frozen longer than zookeeper.session.timeout.ms (6 s): its registration goes away
        wait_until(lambda: "kafka3" not in cluster.registered_brokers(), 40, "kafka3's session to expire")
    finally:
        cluster.unpause("kafka3")
    assert cluster.running("kafka3")
    cluster.wait_broker_rejoined("kafka3", topic=TOPIC, timeout=120)


@pytest.mark.docker
def test_wipe_and_rejoin(cluster):
    rc, _ = cluster.exec("kafka3", ["test", "-d", f"/var/lib/kafka/data/{TOPIC}-0"], check=False)
    assert rc == 0
    cluster.exec("kafka3", ["touch", "/var/lib/kafka/mqchaos-marker"])
    cluster.wipe("kafka3")
    rc, _ = cluster.exec("kafka3", ["test", "-e", "/var/lib/kafka/mqchaos-marker"], check=False)
    assert rc != 0                                        # the data really went
    cluster.wait_broker_rejoined("kafka3", topic=TOPIC, timeout=120)
    # it re-replicated the partition from the leader
    wait_until(lambda: cluster.exec("kafka3", ["test", "-d", f"/var/lib/kafka/data/{TOPIC}-0"],
                                    check=False)[0] == 0, 30, "kafka3 to hold t-kill-0 again")
    # a ZooKeeper node loses its data and rejoins the ensemble
    cluster.wipe("zk3")
    wait_until(cluster.ensemble.serves, 60, "ZooKeeper quorum with zk3 back")
    assert cluster.ensemble.mode("zk3") in ("follower", "leader")
    cluster.wait_healthy(60)


@pytest.mark.docker
def test_collect_logs(cluster, tmp_path):
    cluster.collect_logs(tmp_path)
    assert "started (kafka.server.KafkaServer)" in (tmp_path / "logs" / "kafka1.log").read_text()
    assert "QuorumPeer" in (tmp_path / "logs" / "zk1.log").read_text()


@pytest.mark.docker
def test_teardown_leaves_nothing(cluster):
    cluster.down()
    left = cluster.leftovers()
    assert left == {"containers": [], "volumes": [], "networks": []}, left
    for n in cluster.nodes():
        assert not cluster.exists(n)
