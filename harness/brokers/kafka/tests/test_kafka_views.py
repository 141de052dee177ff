"""Whose view (issue 34, item 6) for Kafka, without Docker: the cluster's leader and ISR are the
active controller's broker's view in KRaft mode (ZooKeeper's record in ZooKeeper mode), asked
through a client pinned to that broker's published port and proven by the answer's
``orig_broker_id`` / ``orig_broker_name``; every broker's own view is kept beside it; an answer
from another broker is discarded and asked again of a fresh client; no controller a majority
agrees on means no view, not a guess."""
from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from harness import brokers
from harness.brokers.protocol import ClusterError
from harness.brokers.kafka import cluster as kcluster
from harness.brokers.kafka import adminclient, kraft, observe
from harness.brokers.kafka.cluster import ForeignAnswer, answered_by, pinned_config
from harness.brokers.kafka.roles import resolve_role
from harness.scenario import parse

KAFKA = brokers.get("kafka")
NODES = ["kafka1", "kafka2", "kafka3"]
ENDPOINTS = {"kafka1": "127.0.0.1:9092", "kafka2": "127.0.0.1:9093", "kafka3": "127.0.0.1:9094"}
TOPIC = "mqchaos"


def quorum_file(leader: int, epoch: int, voted: int = -1) -> str:
    return json.dumps({"leaderId": leader, "leaderEpoch": epoch, "votedId": voted, "data_version": 1})


def md(leader: int, isr: list[int], orig_id: int, orig_name: str) -> SimpleNamespace:
    """A ClusterMetadata as confluent-kafka returns it: the partition, and who sent it."""
    part = SimpleNamespace(id=0, leader=leader, replicas=[1, 2, 3], isrs=isr)
    return SimpleNamespace(brokers={}, topics={TOPIC: SimpleNamespace(error=None, partitions={0: part})},
                           orig_broker_id=orig_id, orig_broker_name=orig_name)


class PinnedClient:
    """The client pinned to one node: answers with ``view`` as ``answers_as`` (its own node by
    default; another to play librdkafka's fallback to a broker it learned), or raises."""

    def __init__(self, node: str, view: tuple[int, list[int]] | None, answers_as: str | None = None,
                 delay: float = 0.0) -> None:
        self.node, self.view, self.answers_as, self.delay, self.asked = node, view, answers_as or node, delay, 0

    def list_topics(self, topic=None, timeout=None):
        self.asked += 1
        time.sleep(self.delay)
        if self.view is None:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        bid = int(self.answers_as.removeprefix("kafka"))
        return md(*self.view, bid, f"{ENDPOINTS[self.answers_as]}/{bid}")


def kraft_cluster(monkeypatch, quorum: dict[str, str | None], clients: dict[str, PinnedClient],
                  fresh=lambda node: PinnedClient(node, (2, [2, 3]))):
    c = KAFKA.cluster(version="4.1")

    def exec_(node, cmd, check=True, timeout=60, user=None):
        assert cmd == ["cat", kraft.QUORUM_STATE], cmd
        text = quorum.get(node)
        return (0, text) if text is not None else (1, f"Error response from daemon: {node} is paused")
    monkeypatch.setattr(c, "exec", exec_)
    # a fresh client per node once one is forgotten (after a foreign answer): ``fresh``'s (by
    # default its own broker answers)
    made: dict[str, list[PinnedClient]] = {n: [] for n in NODES}

    def node_admin(node):
        if c._pinned.get(node) is None:
            c._pinned[node] = fresh(node) if made[node] else clients[node]
            made[node].append(c._pinned[node])
        return c._pinned[node]
    monkeypatch.setattr(c, "node_admin", node_admin)
    monkeypatch.setattr(c, "admin", lambda: pytest.fail("the cluster's view asked of whichever broker answers"))
    c.made = made
    return c


def scenario():
    return parse({"name": "s", "broker": "kafka"}, version="4.1", env={})


# kafka1 cut from the controllers: its quorum-state file still names itself at epoch 4, and its
# broker still lists itself as the leader with the full ISR (its frozen image); kafka2 and kafka3
# elected kafka3 at epoch 5, and kafka2 now leads the partition with ISR {2, 3}
CUT_QUORUM = {"kafka1": quorum_file(1, 4), "kafka2": quorum_file(3, 5), "kafka3": quorum_file(3, 5)}


def cut_clients() -> dict[str, PinnedClient]:
    return {"kafka1": PinnedClient("kafka1", (1, [1, 2, 3])), "kafka2": PinnedClient("kafka2", (2, [2, 3])),
            "kafka3": PinnedClient("kafka3", (2, [2, 3]))}


# ---- who answered ------------------------------------------------------------------------------

def test_the_answering_broker_is_proven_by_its_id_and_address_or_by_the_bootstrap_address():
    assert answered_by(md(1, [1], 2, "127.0.0.1:9093/2"), ENDPOINTS) == "kafka2"       # a learned broker
    assert answered_by(md(1, [1], -1, "127.0.0.1:9094/bootstrap"), ENDPOINTS) == "kafka3"  # the address dialled
    assert answered_by(md(1, [1], 2, "127.0.0.1:9092/2"), ENDPOINTS) is None       # id and address disagree
    assert answered_by(md(1, [1], 2, "10.0.0.5:9093/2"), ENDPOINTS) is None        # not a published port
    assert answered_by(md(1, [1], -1, "127.0.0.1:9092/internal"), ENDPOINTS) is None
    assert answered_by(SimpleNamespace(), ENDPOINTS) is None                        # nothing said: no proof


# ---- the cluster's view: the active controller's broker ---------------------------------------

def test_the_cluster_view_is_the_active_controllers_broker_and_a_stale_nodes_view_is_kept_not_used(monkeypatch):
    c = kraft_cluster(monkeypatch, CUT_QUORUM, cut_clients())
    s = observe.sample(c, scenario())
    assert s["view_from"] == "kafka3" and s["controller"] == "kafka3" and s["controller_epoch"] == 5
    assert s["leader"] == "kafka2" and s["isr"] == ["kafka2", "kafka3"]
    assert s["views"] == {"kafka1": {"leader": "kafka1", "isr": ["kafka1", "kafka2", "kafka3"]},  # stale, kept
                          "kafka2": {"leader": "kafka2", "isr": ["kafka2", "kafka3"]},
                          "kafka3": {"leader": "kafka2", "isr": ["kafka2", "kafka3"]}}
    assert "view_errors" not in s
    # roles and partition reads outside the sample take the same view, from kafka3 alone
    asked = {n: cl.asked for n, cl in c._pinned.items()}
    assert c.leader(TOPIC) == "kafka2" and c.isr(TOPIC) == ["kafka2", "kafka3"]
    assert c._pinned["kafka3"].asked == asked["kafka3"] + 2
    assert c._pinned["kafka1"].asked == asked["kafka1"] and c._pinned["kafka2"].asked == asked["kafka2"]


def test_an_answer_from_another_broker_is_discarded_and_asked_again_of_a_fresh_client(monkeypatch):
    clients = cut_clients()
    # kafka3's client lost its connection and librdkafka sent the request to kafka1, which it
    # learned from kafka3's own earlier answer: kafka1's stale view, under kafka3's name if taken
    clients["kafka3"] = PinnedClient("kafka3", (1, [1, 2, 3]), answers_as="kafka1")
    c = kraft_cluster(monkeypatch, CUT_QUORUM, clients)
    s = observe.sample(c, scenario())
    # the stray client was dropped, and the fresh one (knowing kafka3's address only) believed
    assert clients["kafka3"].asked == 1 and len(c.made["kafka3"]) == 2
    assert s["view_from"] == "kafka3" and s["leader"] == "kafka2" and s["isr"] == ["kafka2", "kafka3"]
    assert s["views"]["kafka3"] == {"leader": "kafka2", "isr": ["kafka2", "kafka3"]}  # not kafka1's
    assert s["views"]["kafka1"]["leader"] == "kafka1"  # kafka1's own client: its own (stale) view
    assert "view_errors" not in s


def test_a_partition_read_fails_only_when_every_fresh_client_strays(monkeypatch):
    clients = cut_clients()
    clients["kafka3"] = PinnedClient("kafka3", (1, [1, 2, 3]), answers_as="kafka2")
    c = kraft_cluster(monkeypatch, CUT_QUORUM, clients,
                      fresh=lambda node: PinnedClient(node, (1, [1, 2, 3]), answers_as="kafka2"))
    with pytest.raises(ForeignAnswer, match="asked of kafka3 answered by kafka2"):
        c.partitions(TOPIC)
    assert len(c.made["kafka3"]) == 1 + adminclient.FOREIGN_RETRIES  # each one asked once, each dropped
    assert all(cl.asked == 1 for cl in c.made["kafka3"]) and "kafka3" not in c._pinned
    # the leader role, resolved at fault time: one stray, then the fresh client's own answer
    clients = cut_clients()
    clients["kafka3"] = PinnedClient("kafka3", (1, [1, 2, 3]), answers_as="kafka2")
    c = kraft_cluster(monkeypatch, CUT_QUORUM, clients)
    assert resolve_role(c, "leader", TOPIC) == ["kafka2"]


@pytest.mark.parametrize("quorum", [
    # mid-election: kafka2 and kafka3 candidates at epoch 6, only the deposed kafka1 names a leader
    {"kafka1": quorum_file(1, 5), "kafka2": quorum_file(-1, 6, voted=2), "kafka3": quorum_file(-1, 6, voted=3)},
    # two nodes frozen (their files unreadable): one view is no majority
    {"kafka1": quorum_file(1, 5), "kafka2": None, "kafka3": None},
], ids=["mid-election", "two-unreadable"])
def test_no_controller_a_majority_agrees_on_means_no_view(monkeypatch, quorum):
    c = kraft_cluster(monkeypatch, quorum, cut_clients())
    s = observe.sample(c, scenario())
    assert s["view_from"] is None and s["leader"] is None and "isr" not in s
    assert s["controller"] == "kafka1"  # the highest-epoch view's leader, recorded as read
    assert set(s["views"]) == set(NODES)  # every broker's own view still kept
    with pytest.raises(ClusterError, match="no active controller a majority"):
        c.partitions(TOPIC)


def test_a_paused_broker_costs_one_timeout_per_sample(monkeypatch):
    clients = cut_clients()
    for n in NODES:  # each answers in 0.3 s; asked one after another they would take 0.9 s
        clients[n].delay = 0.3
    clients["kafka1"].view = None  # paused: no answer within the timeout
    c = kraft_cluster(monkeypatch, CUT_QUORUM, clients)
    t0 = time.monotonic()
    s = observe.sample(c, scenario())
    assert time.monotonic() - t0 < 0.75
    assert set(s["views"]) == {"kafka2", "kafka3"} and "kafka1" in s["view_errors"]
    assert s["leader"] == "kafka2" and s["view_from"] == "kafka3"


def test_zookeeper_mode_keeps_zookeepers_record_and_the_brokers_views_beside_it(monkeypatch):
    c = KAFKA.cluster(version="3.9")
    clients = cut_clients()
    monkeypatch.setattr(c, "node_admin", lambda n: clients[n])
    monkeypatch.setattr(c, "controller_and_epoch", lambda: ("kafka2", 7))
    monkeypatch.setattr(c, "partitions", lambda t: [{"partition": 0, "leader": "kafka2", "isr": ["kafka2", "kafka3"],
                                                     "replicas": NODES, "preferred": "kafka1", "leader_epoch": 9}])
    s = observe.sample(c, parse({"name": "s", "broker": "kafka"}, version="3.9", env={}))
    assert s["view_from"] == "zookeeper" and s["leader"] == "kafka2" and s["epoch"] == 9
    assert s["views"]["kafka1"] == {"leader": "kafka1", "isr": ["kafka1", "kafka2", "kafka3"]}


# ---- the pinned clients ------------------------------------------------------------------------

def test_pinned_clients_reach_one_published_port_each_are_kept_and_dropped_on_close(monkeypatch):
    made = []
    monkeypatch.setattr(kcluster, "AdminClient", lambda conf: made.append(conf) or SimpleNamespace(conf=conf))
    c = KAFKA.cluster(version="4.1")
    a = c.node_admin("kafka2")
    assert c.node_admin("kafka2") is a and len(made) == 1  # kept: not a client per sample
    assert made[0]["bootstrap.servers"] == "127.0.0.1:9093"  # kafka2's published port, alone
    assert made[0]["enable.sparse.connections"] is True and made[0]["topic.metadata.refresh.interval.ms"] == -1
    assert [cfg["bootstrap.servers"] for cfg in (pinned_config(ep) for ep in c.client_endpoints().values())] == [
        "127.0.0.1:9092", "127.0.0.1:9093", "127.0.0.1:9094"]
    c.close()
    assert c.node_admin("kafka2") is not a and len(made) == 2


def test_librdkafka_accepts_the_pinned_clients_settings():
    conf = {k: v for k, v in pinned_config("127.0.0.1:9092").items() if k != "bootstrap.servers"}
    AdminClient(conf)  # no bootstrap servers: it connects nowhere, only the settings are checked
