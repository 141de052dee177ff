"""The ZooKeeper ensemble of a Kafka cluster in ZooKeeper mode (3.9): zk1..3, a service of its
own beside the brokers (kafkatest's ``ZookeeperService``), reached through 127.0.0.1:2181..2183
(kazoo; the four-letter ``srvr`` for each server's mode), and what Kafka keeps in it: the
brokers' live registrations (/brokers/ids), the controller's record (/controller,
/controller_epoch), each partition's assignment and state (/brokers/topics). The record the
controller writes there is the cluster's view (``ZooKeeperCluster.view_source``)."""
from __future__ import annotations

import json
import logging
import socket
import threading
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.retry import KazooRetry

from harness.brokers.protocol import ClusterError
from harness.brokers.kafka.nodes import ZK_NODES, ZK_PORTS, broker_id, broker_node


class ZooKeeperEnsemble:
    """zk1..3 and Kafka's records in them, through one kazoo client kept until ``close``."""

    def __init__(self) -> None:
        self.nodes = list(ZK_NODES)
        self._client: KazooClient | None = None
        self._lock = threading.Lock()

    def endpoints(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{ZK_PORTS[n]}" for n in self.nodes}

    # ---- the client (kazoo through 127.0.0.1) --------------------------------------------
    def client(self) -> KazooClient:
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        with self._lock:
            if self._client is None or not self._client.connected:
                self._discard()
                client = KazooClient(hosts=",".join(self.endpoints().values()), timeout=6.0,
                                     connection_retry=KazooRetry(max_tries=3, delay=0.2, max_delay=1),
                                     command_retry=KazooRetry(max_tries=3, delay=0.2, max_delay=1))
                client.start(timeout=10)
                self._client = client
            return self._client

    def close(self) -> None:
        with self._lock:
            self._discard()

    def _discard(self) -> None:
        """Stop and forget the client (the caller holds ``_lock``)."""
        if self._client is not None:
            try:
                self._client.stop()
                self._client.close()
            except Exception:  # noqa: BLE001 - a dead session is what we are discarding
                pass
            self._client = None

    def get_json(self, path: str) -> Any:
        try:
            data, _ = self.client().get(path)
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def children(self, path: str) -> list[str]:
        try:
            return self.client().get_children(path)
        except NoNodeError:
            return []

    # ---- the servers ---------------------------------------------------------------------
    def mode(self, node: str, timeout: float = 3) -> str | None:
        """'leader' / 'follower' / 'standalone', or None if the server does not serve (4lw srvr)."""
        try:
            with socket.create_connection(("127.0.0.1", ZK_PORTS[node]), timeout=timeout) as s:
                s.sendall(b"srvr")
                s.settimeout(timeout)
                data = b""
                while chunk := s.recv(4096):
                    data += chunk
        except OSError:
            return None
        for line in data.decode(errors="replace").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def serves(self) -> bool:
        """A leader and two followers."""
        modes = [self.mode(n) for n in self.nodes]
        return modes.count("leader") == 1 and modes.count("follower") == 2

    # ---- Kafka's records -----------------------------------------------------------------
    def registered(self) -> list[str]:
        """The brokers with a live registration (/brokers/ids)."""
        return sorted(broker_node(i) for i in self.children("/brokers/ids"))  # type: ignore[misc]

    def registration_time(self, node: str) -> float | None:
        """When the broker's live registration was created (epoch seconds)."""
        try:
            _, stat = self.client().get(f"/brokers/ids/{broker_id(node)}")
        except NoNodeError:
            return None
        return stat.ctime / 1000.0

    def controller_and_epoch(self) -> tuple[str | None, int | None]:
        """/controller (a broker, or during a migration the active KRaft controller, which
        claims it) and /controller_epoch."""
        data, epoch = self.get_json("/controller"), self.get_json("/controller_epoch")
        return (broker_node(data["brokerid"]) if data else None), (int(epoch) if epoch is not None else None)

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        """Per partition, as the controller recorded it: leader, ISR, replicas, preferred
        replica, leader epoch (node names)."""
        assign = self.get_json(f"/brokers/topics/{topic}")
        if not assign:
            raise ClusterError(f"topic {topic} does not exist")
        res = []
        for p, replicas in sorted(assign["partitions"].items(), key=lambda kv: int(kv[0])):
            st = self.get_json(f"/brokers/topics/{topic}/partitions/{p}/state") or {}
            reps = [broker_node(r) for r in replicas]
            res.append({
                "partition": int(p),
                "leader": broker_node(st.get("leader")),
                "isr": [broker_node(r) for r in st.get("isr", [])],
                "replicas": reps,
                "preferred": reps[0] if reps else None,
                "leader_epoch": st.get("leader_epoch"),
            })
        return res


__all__ = ["ZooKeeperEnsemble"]
