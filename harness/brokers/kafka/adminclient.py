"""What Kafka's AdminClient says: topics created, and each broker's own view of a topic.

Whose view: each broker answers a Metadata request from its own metadata image, stale on a
broker cut from the controllers. ``node_metadata`` asks one broker through a client pinned to
its published port and proves from the answer which broker sent it (``answered_by``): librdkafka
sends a Metadata request to any broker it has a connection to, and connects to a random known
one (learned from the pinned broker's own answer) when it has none, so an answer from another
broker is discarded, never taken for the pinned one's, and the request asked again of a fresh
client.

The functions that ask take the ``KafkaCluster``, which keeps the clients (``admin``,
``node_admin``).
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from harness.brokers.protocol import ClusterError
from harness.brokers.kafka.nodes import broker_id, broker_node
from harness.util import wait_until

log = logging.getLogger(__name__)


class ForeignAnswer(ClusterError):
    """A metadata request meant for one broker was answered by another (discarded)."""


def pinned_config(endpoint: str) -> dict[str, Any]:
    """An AdminClient meant to ask one broker only. librdkafka has no setting that forbids the
    others (it learns them from the first answer), so these only make another broker rare;
    ``answered_by`` is what proves whose answer it is."""
    return {"bootstrap.servers": endpoint,            # that node's published 127.0.0.1 port, alone
            "enable.sparse.connections": True,        # connect only where a request must go (default)
            "topic.metadata.refresh.interval.ms": -1,  # no background refresh to a random broker
            "socket.timeout.ms": 10000, "log_level": 0,
            "logger": logging.getLogger("mqchaos.kafka.pinned")}


def answered_by(md: Any, endpoints: dict[str, str]) -> str | None:
    """The node whose broker answered a metadata request (``ClusterMetadata.orig_broker_id`` /
    ``orig_broker_name``: librdkafka's broker handle that got the response), or None when the
    answer does not prove one. A learned broker is named ``127.0.0.1:9093/2`` (id 2); the
    bootstrap connection ``127.0.0.1:9092/bootstrap`` with id -1, known by the address dialled.
    The id and the address must name the same node."""
    name = getattr(md, "orig_broker_name", None) or ""
    address, _, tail = name.split("://")[-1].rpartition("/")
    by_address = next((n for n, ep in endpoints.items() if ep == address), None)
    bid = getattr(md, "orig_broker_id", -1)
    if bid is not None and bid >= 0:
        return by_address if by_address == broker_node(bid) else None
    return by_address if tail == "bootstrap" else None


def partitions_of(md: Any, topic: str) -> list[dict[str, Any]]:
    """Per partition of ``topic`` in one metadata answer: leader, ISR, replicas (node names)."""
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise ClusterError(f"metadata for {topic}: {t.error if t else 'absent'}")
    return [{"partition": p.id, "leader": broker_node(p.leader),
             "isr": [broker_node(r) for r in p.isrs], "replicas": [broker_node(r) for r in p.replicas],
             "preferred": broker_node(p.replicas[0]) if p.replicas else None}
            for p in sorted(t.partitions.values(), key=lambda p: p.id)]


FOREIGN_RETRIES = 2  # fresh clients tried after a foreign answer, before the read fails


def node_metadata(cluster, node: str, topic: str, timeout: float = 10) -> list[dict[str, Any]]:
    """``topic``'s partitions as ``node``'s broker sees them, proven to be its answer."""
    return partitions_of(node_answer(cluster, node, topic, timeout), topic)


def node_answer(cluster, node: str, topic: str, timeout: float = 10) -> Any:
    """``node``'s broker's whole metadata answer about ``topic`` (its partitions, the brokers
    its image lists as alive), proven to be its answer. Raises ClusterError when it did not
    answer in time, ForeignAnswer when another broker answered each of 1 + FOREIGN_RETRIES
    clients. A client that strayed is dropped and the
    read asked again of a fresh one, which knows only ``node``'s address (the stray one would
    keep asking the broker it last used): the stray is librdkafka's, not the broker's, and a
    role resolved at fault time must not fail on it (CI, 2026-11-26: a leader kill skipped)."""
    for attempt in range(1 + FOREIGN_RETRIES):
        client = cluster.node_admin(node)
        try:
            md = client.list_topics(topic=topic, timeout=timeout)
        except KafkaException as exc:
            raise ClusterError(f"{node} gave no metadata for {topic}: {exc}") from exc
        who = answered_by(md, cluster.client_endpoints())
        if who == node:
            return md
        cluster.forget_node_admin(node, client)
        log.debug("metadata asked of %s answered by %s (attempt %d): discarded", node, who, attempt + 1)
    raise ForeignAnswer(f"metadata asked of {node} answered by {who or '?'} "
                        f"({getattr(md, 'orig_broker_name', None)}), {1 + FOREIGN_RETRIES} clients "
                        "in turn: discarded")


def node_views(cluster, topic: str, timeout: float) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Every broker's own view of ``topic`` at once (a paused broker costs ``timeout``
    once, not once per node), and why a broker gave none."""
    def read(node: str) -> list[dict] | str:
        try:
            return cluster.node_metadata(node, topic, timeout)
        except ClusterError as exc:
            return str(exc)[:200]
    nodes = cluster.brokers()
    with ThreadPoolExecutor(len(nodes)) as pool:
        got = dict(zip(nodes, pool.map(read, nodes)))
    return ({n: v for n, v in got.items() if not isinstance(v, str)},
            {n: v for n, v in got.items() if isinstance(v, str)})


def create_topic(cluster, name: str, partitions: int = 1, replication_factor: int = 3,
                 config: dict[str, str] | None = None, replicas: list[list[str]] | None = None,
                 wait: bool = True, timeout: float = 60) -> None:
    """Create a topic (RF 3 by default), optionally with an explicit assignment
    (``replicas``: per partition, node names, preferred first); wait until in sync."""
    if replicas:
        nt = NewTopic(name, num_partitions=len(replicas), replication_factor=-1,
                      replica_assignment=[[broker_id(n) for n in r] for r in replicas],
                      config=config or {})
    else:
        nt = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                      config=config or {})
    fut = cluster.admin().create_topics([nt], operation_timeout=30, request_timeout=30)[name]
    try:
        fut.result(timeout=timeout)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise ClusterError(f"create_topic {name}: {exc}") from exc
    if wait:
        wait_until(lambda: cluster.fully_replicated(name), timeout, f"topic {name} fully in sync", 0.5)
