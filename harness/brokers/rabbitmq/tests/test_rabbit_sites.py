"""Separate RabbitMQ clusters on one network, as scenarios declare them: a link's ends
(shovel, federated queue, federated exchange; several downstreams of one federated queue) and
a cluster under test smaller than three nodes (seed 000's two-node cluster). Pure: the model's
answers about which nodes hold what and whom the clients use."""
import threading
import types

import pytest
from pydantic import ValidationError

from harness.brokers.rabbitmq import workload as W
from harness.brokers.rabbitmq.model import RabbitScenario
from harness.history import RunClock


def scenario(**kw) -> RabbitScenario:
    base = {"name": "x", "broker": "rabbitmq", "queue": {"name": "q", "type": "classic"},
            "timing": {"duration": 10}}
    return RabbitScenario.model_validate({**base, **kw})


def test_a_shovel_keeps_its_two_sites():
    sc = scenario(link={"kind": "shovel"})
    assert sc.cluster.sites == [["rabbit1", "rabbit2"], ["rabbit3"]]
    assert "rabbitmq_shovel" in sc.cluster.plugins and "rabbitmq_federation" not in sc.cluster.plugins
    assert sc.client_nodes("produce") == ["rabbit1", "rabbit2"] and sc.client_nodes("consume") == ["rabbit3"]
    assert sc.link.homes() == ["rabbit3"] and sc.queue_sites() is None


def test_a_federated_queue_with_a_downstream_per_node():
    sc = scenario(link={"kind": "federated-queue", "upstream": ["rabbit1"], "downstream": ["rabbit3", "rabbit2"],
                        "separate_downstreams": True})
    assert sc.cluster.sites == [["rabbit1"], ["rabbit2"], ["rabbit3"]]
    assert sc.link.homes() == ["rabbit2", "rabbit3"]  # each downstream cluster declares its own link
    assert {"rabbitmq_federation", "rabbitmq_federation_management"} <= set(sc.cluster.plugins)
    assert sc.client_nodes("consume") == ["rabbit3", "rabbit2"] and sc.queue_sites() is None


def test_a_federated_exchange_counts_the_queue_downstream_only():
    sc = scenario(queue={"name": "q", "type": "classic", "exchange": "x"}, link={"kind": "federated-exchange"})
    assert sc.queue_sites() == [["rabbit3"]]
    assert "upstream_queue_messages" not in sc.measurement_names()
    # F3 (seed 003): a queue of the upstream's own, bound like the downstream one, read by no one
    sc = scenario(queue={"name": "q", "type": "classic", "exchange": "x"},
                  link={"kind": "federated-exchange", "upstream_queue": True})
    assert W.upstream_queue(sc) == "q.upstream" and "upstream_queue_messages" in sc.measurement_names()
    assert sc.queue_sites() == [["rabbit3"]]  # the drain still reads the downstream queue only


def test_exchanges_federated_both_ways():
    """F4 (seed 003, 68): each cluster's exchange federates the other's; both have the
    queue, clients use every node, the drain reads both queues."""
    from harness.brokers.rabbitmq import observe

    sc = scenario(queue={"name": "q", "type": "classic", "exchange": "x"},
                  link={"kind": "federated-exchange", "bidirectional": True})
    assert sc.link.sources() == [("rabbit3", ["rabbit1", "rabbit2"]), ("rabbit1", ["rabbit3"])]
    assert sc.client_nodes("produce") == sc.client_nodes("consume") == ["rabbit1", "rabbit2", "rabbit3"]
    assert sc.queue_sites() == [["rabbit1", "rabbit2"], ["rabbit3"]] and "missing_at_a_site" in sc.measurement_names()
    one_way = scenario(queue={"name": "q", "type": "classic", "exchange": "x"}, link={"kind": "federated-exchange"})
    assert one_way.link.sources() == [("rabbit3", ["rabbit1", "rabbit2"])]
    produce = [{"msg_id": m, "outcome": "ok"} for m in ("a", "b", "c")] + [{"msg_id": "d", "outcome": "info"}]
    consume = [{"msg_id": "a", "node": "rabbit1"}, {"msg_id": "a", "node": "rabbit3"},
               {"msg_id": "b", "node": "rabbit2"}, {"msg_id": "b", "node": "rabbit2"},  # twice, one cluster
               {"msg_id": "c", "node": "rabbit3"}, {"msg_id": "d", "node": "rabbit1"}]
    assert observe.missing_at_a_site(produce, consume, sc.link.sites()) == 2  # b and c


def test_a_cluster_replaced_through_a_federated_exchange():
    """Seed 003 (F5): the producers' node list goes on with the new cluster; what the old one
    held when it went is read only after the heal brought it back (by message identity)."""
    from harness import windows

    sc = scenario(queue={"name": "q", "type": "classic", "exchange": "x"},
                  link={"kind": "federated-exchange", "replace": True})
    assert sc.client_nodes("produce") == ["rabbit1", "rabbit2", "rabbit3"] and sc.client_nodes("consume") == ["rabbit3"]
    plain = scenario(queue={"name": "q", "type": "classic", "exchange": "x"}, link={"kind": "federated-exchange"})
    assert plain.client_nodes("produce") == ["rabbit1", "rabbit2"]
    produce = [{"msg_id": m, "outcome": o, "t_complete": t} for m, o, t in (
        ("a", "ok", 1.0), ("b", "ok", 2.0), ("c", "ok", 3.0), ("d", "fail", 4.0), ("e", "ok", 5.0), ("f", "ok", 35.0))]
    consume = [{"msg_id": "a", "t": 5.0}, {"msg_id": "b", "t": 31.0}, {"msg_id": "b", "t": 12.0},  # b first at 12
               {"msg_id": "c", "t": 30.5}, {"msg_id": "d", "t": 40.0},                            # d was refused
               {"msg_id": "f", "t": 36.0}]                        # f confirmed after the heal began: not held back
    # by hand, the heal at 30: c alone was confirmed before it and first read after it (e never
    # read: lost, not late; f published after the heal, by the new cluster)
    assert windows.read_after_heal(produce, consume, 30.0) == 1
    assert windows.read_after_heal(produce, consume, None) is None


@pytest.mark.parametrize("kw, field", [
    ({"link": {"kind": "federated-exchange"}}, "queue.exchange"),
    ({"link": {"kind": "shovel", "upstream": ["rabbit1"], "downstream": ["rabbit2", "rabbit3"],
               "separate_downstreams": True}}, "separate_downstreams"),
    ({"link": {"kind": "federated-queue"}, "queue": {"name": "q", "type": "mirrored",
                                                     "policy": {"ha-mode": "all"}}}, "mirrored"),
    ({"link": {"kind": "federated-queue", "upstream": ["rabbit1"], "downstream": ["rabbit2"]}}, "split rabbit1..3"),
    ({"queue": {"name": "q", "type": "classic", "exchange_durable": False}}, "exchange_durable"),
    ({"link": {"kind": "federated-queue", "upstream_queue": True}}, "upstream_queue"),
    ({"link": {"kind": "shovel", "bidirectional": True}}, "bidirectional"),
    ({"link": {"kind": "shovel", "replace": True}}, "replace"),
    ({"link": {"kind": "shovel", "downstream_type": "quorum"}}, "downstream_type"),
    ({"cluster": {"sites": [["rabbit1", "rabbit2"], ["rabbit3"]]},
      "queue": {"name": "q", "type": "classic", "declare_on": "rabbit3"}}, "first of cluster.sites"),
])
def test_what_a_link_or_a_site_cannot_be(kw, field):
    with pytest.raises(ValidationError, match=field):
        scenario(**kw)


def test_a_two_node_cluster_under_test():
    sc = scenario(cluster={"sites": [["rabbit1", "rabbit2"], ["rabbit3"]]},
                  queue={"name": "q", "type": "classic", "declare_on": "rabbit1"})
    assert sc.client_nodes("produce") == sc.client_nodes("consume") == ["rabbit1", "rabbit2"]
    assert sc.queue_sites() == [["rabbit1", "rabbit2"]]  # the standby cluster holds no queue
    assert scenario().client_nodes("produce") == ["rabbit1", "rabbit2", "rabbit3"]


def test_the_mirrors_a_policy_asks_for_in_a_cluster_of_n():
    assert W.mirrors_wanted({"ha-mode": "all"}, 3) == 2 and W.mirrors_wanted({"ha-mode": "all"}, 2) == 1
    assert W.mirrors_wanted({"ha-mode": "exactly", "ha-params": 2}, 3) == 1
    assert W.mirrors_wanted({"ha-mode": "exactly", "ha-params": 3}, 2) == 1
    assert W.mirrors_wanted({"ha-mode": "nodes", "ha-params": ["rabbit1", "rabbit2"]}, 3) == 1


def test_a_ram_node_has_its_own_configuration():
    from harness.brokers.rabbitmq.cluster import RabbitConfig
    c = RabbitConfig(ram_nodes=["rabbit3"])
    assert c.per_node() and not RabbitConfig().per_node()
    assert "cluster_formation.node_type = ram" in c.render("rabbit3")
    assert "node_type" not in c.render("rabbit1")
    with pytest.raises(ValidationError, match="disc node"):
        RabbitConfig(ram_nodes=["rabbit1", "rabbit2", "rabbit3"])
    with pytest.raises(ValidationError, match="disc node"):  # a site of RAM nodes only
        RabbitConfig(sites=[["rabbit1", "rabbit2"], ["rabbit3"]], ram_nodes=["rabbit3"])
    sc = scenario(cluster={"ram_nodes": ["rabbit3"]})
    assert sc.not_applicable() is None
    assert "RAM nodes" in RabbitScenario.model_validate({**sc.model_dump(mode="json"), "version": "4.3"}).not_applicable()


def test_policies_change_through_the_first_node_that_takes_them():
    """mgmt.put_policy / delete_policy: a node that fails is passed over; a policy already
    gone is deleted; every node failing names the change and each node's error."""
    import requests

    from harness.brokers.protocol import ClusterError
    from harness.brokers.rabbitmq import mgmt

    class Resp:
        def __init__(self, code):
            self.status_code = code

        def raise_for_status(self):
            if self.status_code >= 400:
                raise requests.HTTPError(f"HTTP {self.status_code}")

    class Cluster:
        def __init__(self, codes):
            self.codes, self.calls = codes, []

        def http(self, node, method, path, **kw):
            self.calls.append((node, method, path, kw.get("json")))
            return Resp(self.codes[node])

    c = Cluster({"rabbit1": 503, "rabbit2": 204, "rabbit3": 204})
    mgmt.put_policy(c, "p", "^q$", {"ha-mode": "all"}, priority=2)
    assert [n for n, *_ in c.calls] == ["rabbit1", "rabbit2"]
    assert c.calls[-1][1:] == ("PUT", "policies/%2F/p", {"pattern": "^q$", "definition": {"ha-mode": "all"},
                                                        "apply-to": "queues", "priority": 2})
    gone = Cluster({"rabbit1": 404, "rabbit2": 204, "rabbit3": 204})
    mgmt.delete_policy(gone, "p")
    assert gone.calls == [("rabbit1", "DELETE", "policies/%2F/p", None)]
    with pytest.raises(ClusterError, match="set_policy p failed: rabbit2: HTTP 404"):
        mgmt.put_policy(Cluster({"rabbit2": 404}), "p", "^q$", {}, node="rabbit2")  # a 404 on PUT is a failure


# ---- issue 39: a mirrored queue moved to a quorum queue, blue-green -----------------------------

BLUE_GREEN = {"link": {"kind": "federated-queue", "replace": True, "downstream_type": "quorum"},
              "queue": {"name": "q", "type": "mirrored", "policy": {"ha-mode": "all", "ha-sync-mode": "automatic"}}}


class _Declared:
    """pika.BlockingConnection stand-in: which node each queue was declared on, and how."""
    log: list[tuple[str, str, dict]] = []

    def __init__(self, params):
        self.node = {5672: "rabbit1", 5673: "rabbit2", 5674: "rabbit3"}[params.port]

    def channel(self):
        return self

    def queue_declare(self, name, durable=True, arguments=None):
        self.log.append((self.node, name, dict(arguments or {})))

    def close(self):
        pass


class _Sites:
    """The cluster calls declare() makes: policies by node, mirrors, the link's state."""

    def __init__(self):
        self.policies: list[tuple[str, str | None]] = []

    def client_endpoints(self):
        return {"rabbit1": "127.0.0.1:5672", "rabbit2": "127.0.0.1:5673", "rabbit3": "127.0.0.1:5674"}

    def balancer_endpoint(self):
        return None

    def set_policy(self, name, pattern, definition, apply_to="queues", node=None):
        self.policies.append((name, node))

    def queue_mirrors(self, name, node=None):
        return {"synchronised": ["rabbit1", "rabbit2"] if node in ("rabbit1", "rabbit2") else []}

    def http(self, node, method, path, json=None):
        return types.SimpleNamespace(raise_for_status=lambda: None)

    def api(self, path, node=None, timeout=10):
        return [{"upstream": W.LINK, "status": "running"}]


def test_blue_green_declares_a_mirrored_queue_in_blue_and_a_quorum_queue_in_green(monkeypatch):
    sc = scenario(**BLUE_GREEN)
    # producers start in blue and may go on with green; consumers read green
    assert sc.client_nodes("produce") == ["rabbit1", "rabbit2", "rabbit3"] and sc.client_nodes("consume") == ["rabbit3"]
    _Declared.log = []
    monkeypatch.setattr(W.pika, "BlockingConnection", _Declared)
    cluster = _Sites()
    W.declare(cluster, sc)
    assert _Declared.log == [("rabbit1", "q", {}), ("rabbit3", "q", {"x-queue-type": "quorum"})]
    # the ha policy on blue only (green's queue is federated, a policy of its own); blue's two
    # nodes are its mirrors' whole cluster (not three: green is another cluster)
    assert cluster.policies == [("mqchaos-ha", "rabbit1"), ("mqchaos-federation", "rabbit3")]


def test_blue_green_consumers_read_green_as_the_quorum_queue_it_is():
    # x-cancel-on-ha-failover is a mirrored queue's consumer argument: a quorum queue refuses
    # the consume (precondition_failed; G1's first run, 2026-11-26: no delivery at all)
    assert scenario(**BLUE_GREEN).consumed_type() == "quorum"
    assert scenario(link={"kind": "federated-queue"}).consumed_type() == "classic"
    ctx = types.SimpleNamespace(sc=scenario(**BLUE_GREEN), cluster=_Sites(), writer=lambda side, name: None,
                                clock=RunClock(), stop=threading.Event())
    assert [c.cancel_on_failover for c in W.consumers(ctx)] == [False, False]
