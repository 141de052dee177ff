"""RabbitMQ's replica roles of a quorum queue or stream, without Docker: the followers are the
members other than the leader, and none are known while no leader is named (a role that names
no node makes the nemesis wait for one, never strike every member)."""
from harness import brokers
from harness.brokers.rabbitmq import queues


def cluster_with(queue: dict):
    c = brokers.get("rabbitmq").cluster(version="4.3")
    c.queue = lambda name: queue
    return c


def test_followers_are_the_members_but_the_leader():
    c = cluster_with({"type": "stream", "leader": "rabbit@rabbit1",
                      "members": ["rabbit@rabbit1", "rabbit@rabbit2", "rabbit@rabbit3"]})
    assert queues.resolve_role(c, "queue_mirrors", "s") == ["rabbit2", "rabbit3"]


def test_no_leader_named_means_no_follower_known():
    for leader in (None, ""):
        c = cluster_with({"type": "quorum", "leader": leader,
                          "members": ["rabbit@rabbit1", "rabbit@rabbit2", "rabbit@rabbit3"]})
        assert queues.resolve_role(c, "queue_mirrors", "q") == []
