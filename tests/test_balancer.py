"""The load balancer in front of a cluster (harness/brokers/balancer.py): its configuration,
what its log says it removed, who may ask for one, and where the clients then go. The
docker-marked tests run HAProxy itself, from the image ``mqchaos images`` builds: the
rendered configuration is one it accepts, and its own log lines are the ones parsed."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness import scenario
from harness.brokers import balancer
from harness.brokers.containers import docker
from harness.brokers.rabbitmq import workload
from harness.brokers.rabbitmq.cluster import RabbitCluster
from harness.util import wait_until

ROOT = Path(__file__).resolve().parent.parent
R48 = ROOT / "scenarios" / "R48-balancer-drops-down-and-paused-nodes.yaml"
AMQP_CHECK = RabbitCluster().balancer_check()


def test_config_lists_every_server_with_the_check_and_its_timing():
    text = balancer.config({"rabbit1": "172.28.10.11", "rabbit2": "172.28.10.12"}, 5672, AMQP_CHECK,
                           balancer.Balancer(interval_ms=250, fall=3, rise=1, connect_timeout_ms=700))
    lines = [line.strip() for line in text.splitlines()]
    assert "server rabbit1 172.28.10.11:5672 check" in lines
    assert "server rabbit2 172.28.10.12:5672 check" in lines
    assert "default-server inter 250ms fall 3 rise 1" in lines
    assert "timeout connect 700ms" in lines and "option redispatch" in lines
    assert f"bind :{balancer.PORT}" in lines
    # the check's lines come in the plug-in's order, after option tcp-check
    at = lines.index("option tcp-check")
    assert lines[at + 1:at + 1 + len(AMQP_CHECK)] == AMQP_CHECK


def test_amqp_check_sends_the_protocol_header_and_expects_connection_start():
    header = bytes.fromhex(AMQP_CHECK[1].split()[-1])
    assert header == b"AMQP\x00\x00\x09\x01"  # AMQP 0-9-1's protocol header
    # connection.start: class 10, method 10, as two big-endian shorts
    assert bytes.fromhex(AMQP_CHECK[2].split()[-1]) == (10).to_bytes(2, "big") * 2


LOG = """\
2026-11-26T15:19:20.873062094Z [WARNING]  (1) : Server balanced/rabbit3 is DOWN, reason: Layer4 connection problem, info: "Connection refused at step 1 of tcp-check (connect)", check duration: 0ms. 2 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.
2026-11-26T15:19:31.001000000Z [WARNING]  (1) : Server balanced/rabbit3 is UP, reason: Layer7 check passed, code: 0, check duration: 2ms. 3 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.
2026-11-26T15:19:40.500000000Z [WARNING]  (1) : Server balanced/rabbit2 is DOWN, reason: Layer7 timeout, check duration: 501ms. 2 active and 0 backup servers left.
2026-11-26T15:19:41.000000000Z [NOTICE]   (1) : haproxy version is 2.6.12
2026-11-26T15:19:20.873000000Z Server balanced/rabbit3 is DOWN, reason: Layer4 connection problem (the log's copy)
2026-11-26T15:19:21.000000000Z 172.28.10.1:43028 [26/Nov/2026:15:18:00.675] balanced balanced/rabbit3 1/0/80325 51234 SD 7/7/6/2/0 0/0
2026-11-26T15:19:21.100000000Z 172.28.10.1:43030 [26/Nov/2026:15:18:00.701] balanced balanced/rabbit3 1/0/80401 50022 SD 6/6/5/1/0 0/0
2026-11-26T15:19:22.000000000Z 172.28.10.1:43090 [26/Nov/2026:15:19:21.500] balanced balanced/<NOSRV> -1/-1/0 0 SC 1/1/0/0/0 0/0
2026-11-26T15:19:45.000000000Z 172.28.10.1:43044 [26/Nov/2026:15:18:00.720] balanced balanced/rabbit2 1/0/104280 61234 SD 5/5/4/1/0 0/0
"""


def test_removals_counts_each_server_taken_out_and_put_back():
    got = balancer.removals(LOG)
    # each state change once (the stderr copy), the sessions by the node they ended on
    assert got == {"balancer_removed": ["rabbit2", "rabbit3"], "balancer_removed_count": 2,
                   "balancer_restored_count": 1, "balancer_sessions_ended": {"rabbit2": 1, "rabbit3": 2}}
    assert balancer.removals(None)["balancer_removed_count"] == 0
    assert set(got) == balancer.MEASUREMENTS


def test_only_a_broker_whose_clients_can_go_through_one_takes_a_balancer(tmp_path):
    sc = scenario.load(R48)
    assert sc.cluster.balancer == balancer.Balancer()
    assert balancer.MEASUREMENTS <= sc.measurement_names()
    assert {"balancer_sessions_ended.rabbit1", "balancer_sessions_ended.rabbit3"} <= sc.measurement_names()
    kafka = tmp_path / "k.yaml"
    kafka.write_text("name: k\nbroker: kafka\ncluster: {balancer: {}}\ntopic: {name: t}\nnemesis: []\n"
                     "expect: {lost: 0}\n")
    with pytest.raises(scenario.ScenarioError, match="'balancer' is neither a setting"):
        scenario.load(kafka)
    bad = tmp_path / "r.yaml"
    bad.write_text(R48.read_text().replace("fall: 2", "fall: 0"))
    with pytest.raises(scenario.ScenarioError, match="fall"):
        scenario.load(bad)


def test_without_a_balancer_no_scenario_names_its_figures():
    plain = scenario.load(ROOT / "scenarios" / "Q1-quorum-leader-faults.yaml")
    assert plain.cluster.balancer is None
    assert not balancer.MEASUREMENTS & plain.measurement_names()


class _Cluster:
    def __init__(self, endpoint):
        self.endpoint = endpoint

    def balancer_endpoint(self):
        return self.endpoint

    def client_endpoints(self):
        return {"rabbit1": "127.0.0.1:5672", "rabbit2": "127.0.0.1:5673", "rabbit3": "127.0.0.1:5674"}


def test_with_a_balancer_the_producers_know_its_address_only():
    sc = scenario.load(R48)
    assert workload.producer_endpoints(_Cluster(f"127.0.0.1:{balancer.PORT}"), sc) == [
        workload.Endpoint("lb", "127.0.0.1", balancer.PORT)]
    assert [e.node for e in workload.producer_endpoints(_Cluster(None), sc)] == ["rabbit1", "rabbit2", "rabbit3"]


def _haproxy(tmp_path, servers: dict[str, str], name: str):
    conf = tmp_path / "haproxy.cfg"
    # no network: the servers are the container's own loopback, where nothing listens
    conf.write_text(balancer.config(servers, 5999, AMQP_CHECK, balancer.Balancer(interval_ms=200)))
    docker("rm", "-f", name, check=False)
    docker("run", "-d", "--name", name, "--network", "none", "-v", f"{conf}:{balancer.CONF_IN_CONTAINER}:ro",
           f"{balancer.IMAGE.repo}:latest", "haproxy", "-db", "-f", balancer.CONF_IN_CONTAINER, timeout=60)


@pytest.mark.docker
def test_haproxy_accepts_the_config_and_its_log_says_what_it_removed(tmp_path):
    name = f"mqchaos-test-lb-{int(time.time())}"
    try:
        _haproxy(tmp_path, {"rabbit1": "127.0.0.1", "rabbit2": "127.0.0.2"}, name)
        got = wait_until(lambda: (r := balancer.removals(docker("logs", "--timestamps", name).stderr))
                         ["balancer_removed_count"] >= 2 and r, 30, "HAProxy took both servers out")
        assert got["balancer_removed"] == ["rabbit1", "rabbit2"]
        # a client turned away with no server left: HAProxy's own session line, at no node
        docker("exec", name, "bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{balancer.PORT}; exec 3>&-", check=False)
        logs = wait_until(lambda: (p := docker("logs", "--timestamps", name)) and "<NOSRV>" in p.stdout and p, 30,
                          "HAProxy logged the session")
        assert balancer.removals(logs.stdout + logs.stderr)["balancer_sessions_ended"] == {}
        assert balancer.removals(logs.stdout + logs.stderr)["balancer_removed_count"] == 2
    finally:
        docker("rm", "-f", name, check=False)
