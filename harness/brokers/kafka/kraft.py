"""Kafka in KRaft mode (3.9-kraft, 4.1): three combined broker+controller nodes and no
ZooKeeper; the pure parts (configuration, the cluster id, reading the quorum's state).
docs/generations-research.md, part A, has the sources.

- A static quorum (``controller.quorum.voters``): it formats with no quorum flag on 3.9 and
  4.1 alike, and a wiped disk rejoins as the same voter with an empty log, which Kafka's
  docs call unsafe: the harness's wipe fault is then exactly that case.
- The CONTROLLER listener is advertised as ``kafkaN:19093``: 3.9+ falls back to ``listeners``
  otherwise, where 0.0.0.0 fails validation; 9093/9094 are kafka2/3's EXTERNAL ports.
- The active controller is the raft leader. Clients cannot see it (describe_cluster gives a
  random broker in KRaft); each node's ``quorum-state`` file or MetadataQuorumCommand's
  ``describe --status`` (a JVM start, 1-2 s of CPU) can.
"""
from __future__ import annotations

import base64
import json
import re
import uuid
from typing import Any, Mapping

from harness.brokers.kafka.nodes import broker_node

CONTROLLER_PORT = 19093
METADATA_DIR = "/var/lib/kafka/data"  # __cluster_metadata goes in the first log.dirs entry
QUORUM_STATE = f"{METADATA_DIR}/__cluster_metadata-0/quorum-state"
STORAGE_TOOL = "kafka.tools.StorageTool"  # not under org.apache.kafka.tools, in 3.9 and 4.1
QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
# BrokerLifecycleManager's line once the controller has unfenced this broker's registration
UNFENCED = "The broker has been unfenced"
# ZooKeeper's settings, which KRaft-mode server.properties must not carry (4.x has no such names)
ZOOKEEPER_KEYS = ("zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms")

# log4j 2 (4.x brings no log4j 1 binding), the same loggers and levels as LOG4J
LOG4J2 = """\
# rendered by harness/brokers/kafka/kraft.py
appender.console.type=Console
appender.console.name=STDOUT
appender.console.layout.type=PatternLayout
appender.console.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=info
rootLogger.appenderRef.stdout.ref=STDOUT
""" + "".join(f"logger.l{i}.name={name}\nlogger.l{i}.level={level}\n" for i, (name, level) in enumerate((
    ("kafka.request.logger", "warn"), ("kafka.network.RequestChannel$", "warn"),
    ("kafka.authorizer.logger", "warn"), ("kafka.log.LogCleaner", "warn"), ("state.change.logger", "info"),
    ("kafka.controller", "info"), ("org.apache.kafka.controller", "info"), ("org.apache.kafka.raft", "info"))))


def node_id(node: str) -> int:
    return int(node.removeprefix("kafka"))


def voters(brokers: list[str]) -> str:
    """``controller.quorum.voters``: every node a voter, at its advertised CONTROLLER listener."""
    return ",".join(f"{node_id(n)}@{n}:{CONTROLLER_PORT}" for n in brokers)


def kraft_properties(props: dict[str, Any], node: str, brokers: list[str]) -> dict[str, Any]:
    """A ZooKeeper-mode server.properties mapping turned into a combined node's: its roles,
    node id, the static quorum and the CONTROLLER listener; no ZooKeeper settings."""
    out = {k: v for k, v in props.items() if k not in ZOOKEEPER_KEYS and k != "broker.id"}
    out = {"process.roles": "broker,controller", "node.id": node_id(node),
           "controller.quorum.voters": voters(brokers), "controller.listener.names": "CONTROLLER", **out}
    out["listeners"] = f"{props['listeners']},CONTROLLER://0.0.0.0:{CONTROLLER_PORT}"
    out["advertised.listeners"] = f"{props['advertised.listeners']},CONTROLLER://{node}:{CONTROLLER_PORT}"
    out["listener.security.protocol.map"] = f"{props['listener.security.protocol.map']},CONTROLLER:PLAINTEXT"
    return out


def render_properties(props: Mapping[str, Any], who: str) -> str:
    """server.properties text: ``key=value`` lines under a line naming who rendered them."""
    return f"# rendered by {who} for this run\n" + "".join(f"{k}={v}\n" for k, v in props.items())


def cluster_id() -> str:
    """A cluster id as Kafka makes them (16 random bytes, base64url, no padding: 22 chars),
    never starting with '-' (the storage tool's argument parser would read an option)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def quorum_state(text: str) -> dict[str, Any]:
    """A node's own persisted view of the quorum (its ``quorum-state`` file, data_version 0
    or 1): {"leader": node or None, "epoch": int, "voted": node or None, "voters": [...] or
    None (v1 does not keep them)}. Stale on an isolated node: it is that node's view."""
    data = json.loads(text)

    def name(i: Any) -> str | None:
        return broker_node(i) if isinstance(i, int) and i >= 0 else None
    voters_ = data.get("currentVoters")
    return {"leader": name(data.get("leaderId")), "epoch": data.get("leaderEpoch"), "voted": name(data.get("votedId")),
            "voters": sorted(n for n in (name(v.get("voterId")) for v in voters_) if n) if voters_ else None}


def quorum_status(text: str) -> dict[str, Any]:
    """MetadataQuorumCommand ``describe --status`` output: {"leader": node (the active
    controller), "epoch", "high_watermark", "voters": [...], "observers": [...]}."""
    fields = dict(m.groups() for m in re.finditer(r"^(\w+):\s*(.*?)\s*$", text, re.M))
    if "LeaderId" not in fields:
        raise ValueError(f"not a quorum status: {text[:200]!r}")

    def ids(key: str) -> list[str]:
        try:
            return sorted(broker_node(int(v["id"])) for v in json.loads(fields.get(key) or "[]"))
        except (ValueError, TypeError, KeyError):
            return sorted(broker_node(int(i)) for i in re.findall(r"\bid\b\D*(\d+)", fields.get(key) or ""))
    leader = int(fields["LeaderId"])
    return {"leader": broker_node(leader), "epoch": int(fields.get("LeaderEpoch", -1)),
            "high_watermark": int(fields.get("HighWatermark", -1)), "voters": ids("CurrentVoters"),
            "observers": ids("CurrentObservers")}


def voter_directories(text: str) -> dict[str, str]:
    """``describe --status``'s CurrentVoters: each voter's metadata directory id (KIP-853)."""
    m = re.search(r"^CurrentVoters:\s*(\[.*\])\s*$", text, re.M)
    try:
        return {broker_node(int(v["id"])): v["directoryId"] for v in json.loads(m.group(1))
                if isinstance(v, dict) and v.get("directoryId")} if m else {}
    except (ValueError, TypeError, KeyError):
        return {}


def controller_command(node: str, *args: str) -> list[str]:
    """kafka-metadata-quorum through ``node``'s controller listener: ``remove-controller
    --controller-id N --controller-directory-id D``, or (run on the node being added, with its
    own configuration) ``--command-config FILE ... add-controller``."""
    return ["java", "-cp", "/opt/kafka/libs/*", QUORUM_COMMAND, "--bootstrap-controller", f"{node}:{CONTROLLER_PORT}",
            *args]


def quorum_status_command(node: str) -> list[str]:
    """The status of the quorum asked of ``node``'s controller listener (KIP-919, 3.7+): not
    through a broker, which forwards the request and fails when it cannot reach the leader."""
    return ["java", "-cp", "/opt/kafka/libs/*", QUORUM_COMMAND, "--bootstrap-controller",
            f"{node}:{CONTROLLER_PORT}", "describe", "--status"]


def active_controller(views: Mapping[str, dict | None]) -> tuple[str | None, int | None]:
    """The active controller and its epoch from the nodes' own ``quorum_state`` views (None:
    unread): the leader named at the highest epoch any view names one. An isolated node's
    view is stale (a lower epoch, or a candidate's higher epoch that names no leader: 3.9
    has no pre-vote, so a cut-off voter keeps raising it); (None, None) when none names one."""
    named = [(v["epoch"], v["leader"]) for v in views.values()
             if v and v.get("leader") and isinstance(v.get("epoch"), int)]
    if not named:
        return None, None
    epoch, leader = max(named)
    return leader, epoch


def quorum_leader(views: Mapping[str, dict | None], voters: list[str]) -> str | None:
    """The active controller if a majority of the voters' own views name it at its epoch
    (a quorum that serves: health), else None."""
    leader, epoch = active_controller(views)
    agree = sum(1 for n in voters if (v := views.get(n)) and v.get("leader") == leader and v.get("epoch") == epoch)
    return leader if leader and agree >= len(voters) // 2 + 1 else None


def topic_describe_command(bootstrap: str, topic: str) -> list[str]:
    """kafka-topics --describe (a JVM start, 1-2 s of CPU): the only reader of a partition's
    ELR here, since confluent-kafka's describe_topics has none."""
    return ["java", "-cp", "/opt/kafka/libs/*", TOPIC_COMMAND, "--bootstrap-server", bootstrap,
            "--describe", "--topic", topic]


def parse_elr(text: str, topic: str) -> dict[int, list[str] | None]:
    """Per partition of ``topic``, its eligible leader replicas (node names) as kafka-topics
    prints them (``Elr: 3,1``; ``Elr: N/A``: the broker did not answer
    DescribeTopicPartitions, None). Other lines (logging) are passed over."""
    out: dict[int, list[str] | None] = {}
    for m in re.finditer(rf"Topic:\s*{re.escape(topic)}\s+Partition:\s*(\d+)\b.*?\bElr:[ \t]*([^\t\n]*)", text):
        value = m.group(2).strip()
        out[int(m.group(1))] = (None if value == "N/A" else
                                [f"kafka{int(i)}" for i in value.split(",") if i.strip().isdigit()])
    return out


__all__ = ["CONTROLLER_PORT", "LOG4J2", "QUORUM_STATE", "STORAGE_TOOL", "active_controller", "cluster_id",
           "kraft_properties", "parse_elr", "render_properties", "quorum_leader", "quorum_state", "quorum_status", "quorum_status_command",
           "topic_describe_command", "voters"]


FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh


def feature_command(bootstrap: str, *args: str) -> list[str]:
    """kafka-features (a JVM start): ``describe``, or ``upgrade --release-version R``, the
    documented way to finalize metadata.version after a rolling upgrade (KIP-778, KIP-1022)."""
    return ["java", "-cp", "/opt/kafka/libs/*", FEATURE_COMMAND, "--bootstrap-server", bootstrap, *args]


def parse_features(text: str) -> dict[str, str]:
    """``describe``'s lines (``Feature: metadata.version ... FinalizedVersionLevel: 3.9-IV0``):
    each feature's finalized level; other lines (logging) passed over."""
    return {m.group(1): m.group(2) for m in re.finditer(
        r"Feature:\s*(\S+)\b.*?\bFinalizedVersionLevel:\s*(\S+)", text)}


def reported_version(log: str) -> str | None:
    """The version a broker's last start logged of itself (AppInfoParser: ``Kafka version: 4.1.1``)."""
    found = re.findall(r"Kafka version: ([0-9][0-9A-Za-z.\-]*)", log)
    return found[-1] if found else None


REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh


def reassign_command(bootstrap: str, plan_file: str, *args: str) -> list[str]:
    """kafka-reassign-partitions with a plan file: ``--execute`` or ``--verify``."""
    return ["java", "-cp", "/opt/kafka/libs/*", REASSIGN_COMMAND, "--bootstrap-server", bootstrap,
            "--reassignment-json-file", plan_file, *args]


def reassignment(topic: str, partition: int, replicas: list[int]) -> str:
    """The tool's plan: one partition moved to ``replicas`` (broker ids, preferred leader first)."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": replicas}]})
