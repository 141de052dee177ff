"""Real RabbitMQ cluster: bring-up, kill -9 + restart, graceful stop, pause, wipe, lookup, teardown.

The docker-marked tests share one cluster (module fixture) and run in file order; the last
one tears it down and checks nothing is left behind.
"""
from __future__ import annotations

import ipaddress
import time

import pika
import pytest

from harness.brokers.rabbitmq.cluster import NODES, RabbitCluster, RabbitConfig
from harness.util import wait_until


# ---- no Docker needed -----------------------------------------------------------------
def test_config_renders_per_run_settings():
    cfg = RabbitConfig.from_settings({"partition_handling": "pause_minority", "net_ticktime": 7,
                                      "collect_statistics_interval": "1000"})
    text = cfg.render()
    assert "cluster_partition_handling = pause_minority" in text
    assert "net_ticktime = 7" in text
    assert "loopback_users.guest = false" in text
    assert "vm_memory_high_watermark.absolute = 2GB" in text
    assert "collect_statistics_interval = 1000" in text
    for i, n in enumerate(NODES, 1):
        assert f"cluster_formation.classic_config.nodes.{i} = rabbit@{n}" in text


def test_config_rejects_bad_partition_handling():
    with pytest.raises(ValueError, match="partition_handling"):
        RabbitConfig(partition_handling="pause_majority")
    with pytest.raises(ValueError, match="pause_if_all_down_nodes"):
        RabbitConfig(partition_handling="pause_if_all_down")
    text = RabbitConfig(partition_handling="pause_if_all_down", pause_if_all_down_nodes=["rabbit1"]).render()
    assert "cluster_partition_handling.pause_if_all_down.nodes.1 = rabbit@rabbit1" in text


# ---- real cluster -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    c = RabbitCluster()
    t0 = time.monotonic()
    c.up(RabbitConfig(partition_handling="pause_minority"))
    print(f"rabbitmq healthy in {time.monotonic() - t0:.1f}s")
    yield c
    c.down()


def connect(c: RabbitCluster, node: str) -> pika.BlockingConnection:
    host, port = c.client_endpoints()[node].split(":")
    assert host == "127.0.0.1"
    return pika.BlockingConnection(pika.ConnectionParameters(
        host=host, port=int(port), credentials=pika.PlainCredentials("guest", "guest"),
        connection_attempts=1, socket_timeout=5, blocked_connection_timeout=10))


def declare_and_publish(c: RabbitCluster, node: str, queue: str, n: int, args: dict | None = None) -> None:
    conn = connect(c, node)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(queue, durable=True, arguments=args or {})
        for i in range(n):
            ch.basic_publish("", queue, f"m{i}".encode(),
                             pika.BasicProperties(delivery_mode=2), mandatory=True)
    finally:
        conn.close()


def queue_messages(c: RabbitCluster, queue: str, node: str | None = None) -> int | None:
    return c.queue_length(queue, node=node)


@pytest.mark.docker
def test_up_healthy(cluster):
    assert cluster.healthy()
    assert all(cluster.running(n) for n in NODES)
    addrs = cluster.addresses()
    subnet = ipaddress.ip_network(cluster.subnet())
    assert len(set(addrs.values())) == 3
    assert all(ipaddress.ip_address(a) in subnet for a in addrs.values())
    assert ipaddress.ip_address(cluster.gateway()) in subnet
    # each node sees the other two
    for n in NODES:
        assert cluster.running_nodes_seen_by(n) == NODES
    assert cluster.partitions() == {n: [] for n in NODES}
    assert cluster.paused_nodes() == []
    # per-run settings took effect
    _, tick = cluster.exec("rabbit1", ["rabbitmqctl", "-q", "eval", "net_kernel:get_net_ticktime()."])
    assert tick.strip().endswith("10")
    _, ph = cluster.exec("rabbit2", ["rabbitmqctl", "-q", "eval",
                                     "application:get_env(rabbit, cluster_partition_handling)."])
    assert "pause_minority" in ph
    # the cookie is written explicitly: owner rabbitmq, mode 400
    _, st = cluster.exec("rabbit3", ["stat", "-c", "%U %a", "/var/lib/rabbitmq/.erlang.cookie"])
    assert st.strip() == "rabbitmq 400"
    # AMQP through every 127.0.0.1 port
    for n in NODES:
        conn = connect(cluster, n)
        assert conn.is_open
        conn.close()


@pytest.mark.docker
def test_mirrored_master_lookup_and_kill_restart(cluster):
    cluster.set_policy("ha-all", r"^ha\.", {"ha-mode": "all", "ha-sync-mode": "automatic"})
    declare_and_publish(cluster, "rabbit2", "ha.kill", 50)
    wait_until(lambda: cluster.queue_mirrors("ha.kill")["synchronised"] == ["rabbit1", "rabbit3"], 30,
               "ha.kill mirrors synchronised")
    info = cluster.queue_mirrors("ha.kill")
    assert info["master"] == "rabbit2"           # declared through rabbit2
    assert info["mirrors"] == ["rabbit1", "rabbit3"]
    assert cluster.queue_master("ha.kill") == "rabbit2"

    cluster.kill("rabbit2")
    assert not cluster.running("rabbit2")
    assert cluster.exit_code("rabbit2") == 137
    new_master = wait_until(lambda: (m := cluster.queue_master("ha.kill", node="rabbit1")) != "rabbit2" and m,
                            60, "a mirror to be promoted")
    assert new_master in ("rabbit1", "rabbit3")
    wait_until(lambda: queue_messages(cluster, "ha.kill", node="rabbit1") == 50, 30,
               "the promoted master to hold all 50 messages")
    wait_until(lambda: "rabbit2" not in cluster.running_nodes_seen_by("rabbit1"), 30, "rabbit2 seen down")

    cluster.start("rabbit2")
    cluster.wait_node_rejoined("rabbit2", timeout=120)
    cluster.wait_healthy(60)
    assert cluster.queue_master("ha.kill") == new_master   # the master does not move back
    wait_until(lambda: "rabbit2" in cluster.queue_mirrors("ha.kill")["synchronised"], 60,
               "rabbit2 mirror synchronised again")


@pytest.mark.docker
def test_quorum_leader_lookup_and_kill(cluster):
    declare_and_publish(cluster, "rabbit1", "qq.kill", 20, {"x-queue-type": "quorum"})
    members = wait_until(lambda: (m := cluster.quorum_members("qq.kill"))["leader"] and m, 30, "qq leader")
    assert members["members"] == NODES
    leader = members["leader"]
    cluster.kill(leader)
    survivor = next(n for n in NODES if n != leader)
    new_leader = wait_until(lambda: (m := cluster.queue_master("qq.kill", node=survivor)) not in (None, leader)
                            and m, 60, "a new quorum leader")
    assert new_leader != leader
    # the new leader reports its message count once its metrics tick (a few seconds)
    wait_until(lambda: queue_messages(cluster, "qq.kill", node=survivor) == 20, 30,
               "the new leader to hold all 20 messages")
    cluster.start(leader)
    cluster.wait_node_rejoined(leader)
    wait_until(lambda: cluster.quorum_members("qq.kill")["online"] == NODES, 60, "all members online")


@pytest.mark.docker
def test_graceful_stop_is_graceful(cluster):
    t0 = time.monotonic()
    cluster.stop("rabbit3", timeout=60)
    took = time.monotonic() - t0
    assert not cluster.running("rabbit3")
    assert cluster.exit_code("rabbit3") == 0, cluster.logs("rabbit3", tail=30)
    assert took < 55        # not the SIGKILL after the grace period
    logs = cluster.logs("rabbit3", tail=400)
    assert "SIGTERM received - shutting down" in logs
    assert "Successfully stopped RabbitMQ" in logs or "Stopped RabbitMQ application" in logs \
        or "stopped TCP listener" in logs
    wait_until(lambda: "rabbit3" not in cluster.running_nodes_seen_by("rabbit1"), 30, "rabbit3 seen stopped")
    cluster.start("rabbit3")
    cluster.wait_node_rejoined("rabbit3")
    cluster.wait_healthy(60)


@pytest.mark.docker
def test_pause_unpause(cluster):
    cluster.pause("rabbit1")
    try:
        assert cluster.paused("rabbit1")
        assert not cluster.running("rabbit1")
        # a frozen node answers nothing on its published management port
        with pytest.raises(Exception):
            cluster.http("rabbit1", "GET", "overview", timeout=2)
        # the others still take AMQP connections (their management API may hang meanwhile:
        # it gathers from every node, the frozen one included)
        conn = connect(cluster, "rabbit2")
        assert conn.is_open
        conn.close()
    finally:
        cluster.unpause("rabbit1")
    assert not cluster.paused("rabbit1")
    assert cluster.running("rabbit1")
    cluster.wait_healthy(90)


@pytest.mark.docker
def test_wipe_and_rejoin(cluster):
    cluster.exec("rabbit3", ["touch", "/var/lib/rabbitmq/mqchaos-marker"])
    declare_and_publish(cluster, "rabbit3", "classic.on3", 5, {"x-queue-type": "classic"})
    wait_until(lambda: cluster.queue_master("classic.on3") == "rabbit3", 20, "classic.on3 on rabbit3")
    cluster.wipe("rabbit3")                       # kill, erase, forget_cluster_node, start
    cluster.wait_node_rejoined("rabbit3", timeout=120)
    cluster.wait_healthy(60)
    rc, _ = cluster.exec("rabbit3", ["test", "-e", "/var/lib/rabbitmq/mqchaos-marker"], check=False)
    assert rc != 0                                # the data really went
    # the queue whose only copy was on rabbit3 is gone with it
    assert cluster.queue("classic.on3") is None
    assert cluster.running_nodes_seen_by("rabbit1") == NODES


@pytest.mark.docker
def test_a_late_confirm_is_written_and_the_message_then_lost_counts_as_lost(cluster, tmp_path):
    """Confirms held back past confirm_timeout (rabbit1 frozen for a moment) are written as
    later completions; the queue then purged, every confirmed message is lost, the late
    ones included (the reference checker reads the history)."""
    import json
    import threading

    import reference
    from harness.brokers.rabbitmq.clients import RabbitPublisher
    from harness.brokers.rabbitmq.workload import endpoints
    from harness.history import JsonlWriter, RunClock

    queue = "late.confirms"
    declare_and_publish(cluster, "rabbit1", queue, 0, {"x-queue-type": "classic"})
    wait_until(lambda: cluster.queue_master(queue) == "rabbit1", 20, f"{queue} on rabbit1")
    stop = threading.Event()
    pub = RabbitPublisher("p0", [e for e in endpoints(cluster) if e.node == "rabbit1"], queue,
                          JsonlWriter(tmp_path / "history" / "produce-p0.jsonl"), RunClock(), stop,
                          rate=100, max_messages=600, window=100, confirm_timeout=1.0)
    pub.start()
    try:
        wait_until(lambda: pub.stats.ok >= 50, 30, "first confirms")
        cluster.pause("rabbit1")
        try:
            wait_until(lambda: pub.stats.info >= 1, 15, "a confirm to time out")
        finally:
            cluster.unpause("rabbit1")
        pub.join(60)
    finally:
        stop.set()
        pub.join(30)
    assert not pub.is_alive() and pub.error is None
    cluster.rabbitmqctl("rabbit1", "purge_queue", queue)
    (tmp_path / "run.json").write_text("{}")
    records = [json.loads(x) for x in (tmp_path / "history" / "produce-p0.jsonl").read_text().splitlines()]
    late = {r["msg_id"] for r in records if r.get("late") and r["outcome"] == "ok"}
    invoked = {r["msg_id"] for r in records if r["outcome"] == "invoke"}
    assert late, "no confirm came after the timeout"
    assert len(invoked) == 600  # every message was written ahead of its send
    ref = reference.check(tmp_path)
    confirmed = {r["msg_id"] for r in records if r["outcome"] == "ok"}
    assert late <= confirmed and ref["lost"] == len(confirmed) == ref["ok"]
    assert ref["unexpected"] == 0


@pytest.mark.docker
def test_collect_logs(cluster, tmp_path):
    cluster.collect_logs(tmp_path)
    for n in NODES:
        text = (tmp_path / "logs" / f"{n}.log").read_text()
        assert f"rabbit@{n}" in text


@pytest.mark.docker
def test_teardown_leaves_nothing(cluster):
    cluster.down()
    left = cluster.leftovers()
    assert left == {"containers": [], "volumes": [], "networks": []}, left
    for n in NODES:
        assert not cluster.exists(n)
