"""RabbitMQ cluster (rabbit1..3) lifecycle and introspection."""
from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field, fields
from typing import Any

import requests

from harness.db.base import ClusterError, ComposeCluster, docker, log
from harness.util import wait_until

NODES = ["rabbit1", "rabbit2", "rabbit3"]
AMQP_PORTS = {"rabbit1": 5672, "rabbit2": 5673, "rabbit3": 5674}
MGMT_PORTS = {"rabbit1": 15672, "rabbit2": 15673, "rabbit3": 15674}
PARTITION_HANDLING = ("ignore", "autoheal", "pause_minority", "pause_if_all_down")


@dataclass
class RabbitConfig:
    """Per-run broker settings. ``extra`` holds raw rabbitmq.conf ``key = value`` lines."""
    partition_handling: str = "ignore"
    net_ticktime: int = 10
    memory_high_watermark: str = "2GB"          # vm_memory_high_watermark.absolute
    disk_free_limit: str = "50MB"               # disk_free_limit.absolute
    pause_if_all_down_nodes: list[str] = field(default_factory=list)  # node names, e.g. ["rabbit1"]
    pause_if_all_down_recover: str = "ignore"   # ignore | autoheal
    extra: dict[str, str] = field(default_factory=dict)
    healthy_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.partition_handling not in PARTITION_HANDLING:
            raise ValueError(f"partition_handling must be one of {PARTITION_HANDLING}, "
                             f"not {self.partition_handling!r}")
        if self.partition_handling == "pause_if_all_down" and not self.pause_if_all_down_nodes:
            raise ValueError("pause_if_all_down needs pause_if_all_down_nodes")

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> "RabbitConfig":
        """Build from ``{field: value}``; keys that are not fields go to ``extra`` (rabbitmq.conf)."""
        names = {f.name for f in fields(cls)}
        known = {k.replace("-", "_"): v for k, v in settings.items() if k.replace("-", "_") in names}
        extra = {k: str(v) for k, v in settings.items() if k.replace("-", "_") not in names}
        cfg = cls(**known)
        cfg.extra.update(extra)
        return cfg

    def render(self) -> str:
        lines = [
            "# rendered by harness/db/rabbitmq.py for this run",
            "loopback_users.guest = false",
            "listeners.tcp.default = 5672",
            "management.tcp.port = 15672",
            "log.console = true",
            "log.console.level = info",
            "log.console.use_colors = off",
            "log.file = false",
            "cluster_formation.peer_discovery_backend = rabbit_peer_discovery_classic_config",
            *(f"cluster_formation.classic_config.nodes.{i} = rabbit@{n}" for i, n in enumerate(NODES, 1)),
            f"cluster_partition_handling = {self.partition_handling}",
            f"net_ticktime = {int(self.net_ticktime)}",
            f"vm_memory_high_watermark.absolute = {self.memory_high_watermark}",
            f"disk_free_limit.absolute = {self.disk_free_limit}",
        ]
        if self.partition_handling == "pause_if_all_down":
            lines.append(f"cluster_partition_handling.pause_if_all_down.recover = {self.pause_if_all_down_recover}")
            lines += [f"cluster_partition_handling.pause_if_all_down.nodes.{i} = rabbit@{n}"
                      for i, n in enumerate(self.pause_if_all_down_nodes, 1)]
        lines += [f"{k} = {v}" for k, v in self.extra.items()]
        return "\n".join(lines) + "\n"


def erlang_node(node: str) -> str:
    return node if "@" in node else f"rabbit@{node}"


def short_node(erl: str | None) -> str | None:
    return erl.split("@", 1)[1] if erl and "@" in erl else erl


class RabbitCluster(ComposeCluster):
    kind = "rabbitmq"
    compose_file = "rabbitmq.yml"
    network_key = "rabbitnet"
    data_mounts = {"rabbit": "/var/lib/rabbitmq"}

    def __init__(self, project: str | None = None) -> None:
        super().__init__(project)
        self.config = RabbitConfig()
        self.auth = ("guest", "guest")

    # ---- lifecycle ------------------------------------------------------------------
    def nodes(self) -> list[str]:
        return list(NODES)

    def brokers(self) -> list[str]:
        return list(NODES)

    def client_endpoints(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{AMQP_PORTS[n]}" for n in NODES}

    def management_endpoints(self) -> dict[str, str]:
        return {n: f"http://127.0.0.1:{MGMT_PORTS[n]}" for n in NODES}

    def amqp_port(self, node: str) -> int:
        return AMQP_PORTS[node]

    def write_config(self, config: RabbitConfig) -> None:
        conf = self.conf_dir()
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "rabbitmq.conf").write_text(config.render())
        (conf / "enabled_plugins").write_text("[rabbitmq_management].\n")

    def up(self, config: RabbitConfig | None = None, fresh: bool = True) -> None:
        """Start rabbit1..3 with ``config`` and wait until all three run as one cluster.

        ``fresh`` (default) tears down any previous cluster and its volumes first.
        rabbit1 is started first and the others join it through classic-config peer
        discovery: started all at once, RabbitMQ 3.10 nodes can form separate clusters.
        """
        self.config = config or RabbitConfig()
        if fresh:
            self.down()
        self.write_config(self.config)
        self._compose_up(["rabbit1"])
        self._wait_healthy_or_explain(lambda: self._app_running_http("rabbit1"),
                                      self.config.healthy_timeout, "rabbit1 running", must_run=["rabbit1"])
        self._compose_up(["rabbit2", "rabbit3"])
        self.wait_healthy(self.config.healthy_timeout, must_run=NODES)

    def wait_healthy(self, timeout: float = 120, must_run: list[str] | None = None) -> None:
        """All nodes' containers run, every node sees all three running, no partitions."""
        self._wait_healthy_or_explain(self.healthy, timeout, "all nodes running and clustered", must_run)

    def healthy(self) -> bool:
        for node in NODES:
            if not self.running(node):
                return False
            view = self.nodes_view(node)
            if sorted(short_node(n["name"]) for n in view if n.get("running")) != sorted(NODES):
                return False
            if any(n.get("partitions") for n in view):
                return False
        return True

    def wipe(self, node: str, start: bool = True, forget: bool = True) -> None:  # type: ignore[override]
        """Lose the node's data. With ``forget`` (default) a running survivor forgets the node
        (``rabbitmqctl forget_cluster_node``) before it starts again, so it rejoins as new."""
        self.kill(node)
        self.erase_data(node)
        if forget:
            survivors = [n for n in NODES if n != node and self.running(n)]
            if not survivors:
                raise ClusterError(f"no running node to forget {node}")
            # the survivor must have seen the node go down first: retry for a bounded while
            wait_until(lambda: self.rabbitmqctl(survivors[0], "forget_cluster_node", erlang_node(node),
                                                check=False, timeout=60)[0] == 0,
                       60, f"{survivors[0]} to forget {node}", interval=2.0)
            log(f"{survivors[0]} forgot {node}")
        if start:
            self.start(node)

    # ---- management HTTP API (through 127.0.0.1 published ports) --------------------
    def http(self, node: str, method: str, path: str, timeout: float = 10, **kw) -> requests.Response:
        url = f"http://127.0.0.1:{MGMT_PORTS[node]}/api/{path.lstrip('/')}"
        return requests.request(method, url, auth=self.auth, timeout=timeout, **kw)

    def api(self, path: str, node: str | None = None, timeout: float = 10) -> Any:
        """GET a management API path through ``node`` or the first node that answers."""
        errors = []
        for n in ([node] if node else NODES):
            try:
                resp = self.http(n, "GET", path, timeout=timeout)
                if resp.status_code == 404:
                    return None
                resp.raise_for_status()
                return resp.json()
            except requests.RequestException as exc:
                errors.append(f"{n}: {exc}")
        raise ClusterError(f"management API {path} unanswered: {'; '.join(errors)}")

    def _app_running_http(self, node: str) -> bool:
        try:
            return any(short_node(n["name"]) == node and n.get("running") for n in self.nodes_view(node))
        except (ClusterError, requests.RequestException, ValueError):
            return False

    def nodes_view(self, node: str) -> list[dict]:
        """/api/nodes as seen through ``node``'s management listener."""
        return self.api("nodes", node=node, timeout=5) or []

    def queue(self, name: str, vhost: str = "/", node: str | None = None) -> dict | None:
        """Raw /api/queues/<vhost>/<name> (None if the queue does not exist)."""
        return self.api(f"queues/{urllib.parse.quote(vhost, safe='')}/{urllib.parse.quote(name, safe='')}",
                        node=node)

    def queue_master(self, name: str, vhost: str = "/", node: str | None = None) -> str | None:
        """Node hosting the classic queue's master, or the quorum queue's leader."""
        q = self.queue(name, vhost, node)
        if not q:
            return None
        return short_node(q.get("leader") or q.get("node"))

    def queue_mirrors(self, name: str, vhost: str = "/", node: str | None = None) -> dict[str, list[str]]:
        """Classic mirrored queue: {"master": node, "mirrors": [...], "synchronised": [...]}."""
        q = self.queue(name, vhost, node) or {}
        return {
            "master": short_node(q.get("node")),
            "mirrors": sorted(short_node(n) for n in q.get("slave_nodes") or []),
            "synchronised": sorted(short_node(n) for n in q.get("synchronised_slave_nodes") or []),
        }

    def quorum_members(self, name: str, vhost: str = "/", node: str | None = None) -> dict[str, Any]:
        """Quorum queue: {"leader": node, "members": [...], "online": [...]}."""
        q = self.queue(name, vhost, node) or {}
        return {
            "leader": short_node(q.get("leader")),
            "members": sorted(short_node(n) for n in q.get("members") or []),
            "online": sorted(short_node(n) for n in q.get("online") or []),
        }

    def set_policy(self, name: str, pattern: str, definition: dict, apply_to: str = "queues",
                   priority: int = 0, vhost: str = "/", node: str | None = None) -> None:
        body = {"pattern": pattern, "definition": definition, "apply-to": apply_to, "priority": priority}
        path = f"policies/{urllib.parse.quote(vhost, safe='')}/{urllib.parse.quote(name, safe='')}"
        errors = []
        for n in ([node] if node else NODES):
            try:
                resp = self.http(n, "PUT", path, json=body)
                resp.raise_for_status()
                return
            except requests.RequestException as exc:
                errors.append(f"{n}: {exc}")
        raise ClusterError(f"set_policy {name} failed: {'; '.join(errors)}")

    def delete_policy(self, name: str, vhost: str = "/", node: str | None = None) -> None:
        path = f"policies/{urllib.parse.quote(vhost, safe='')}/{urllib.parse.quote(name, safe='')}"
        for n in ([node] if node else NODES):
            try:
                if self.http(n, "DELETE", path).status_code in (204, 404):
                    return
            except requests.RequestException:
                continue
        raise ClusterError(f"delete_policy {name} failed")

    # ---- rabbitmqctl (via docker exec; works when the client path is cut) -----------
    def rabbitmqctl(self, node: str, *args: str, check: bool = True, timeout: float = 60) -> tuple[int, str]:
        return self.exec(node, ["rabbitmqctl", *args], check=check, timeout=timeout)

    def cluster_status(self, node: str, timeout: float = 30) -> dict:
        """``rabbitmqctl cluster_status`` on ``node``, as JSON (its own, local view)."""
        _, out = self.rabbitmqctl(node, "-q", "cluster_status", "--formatter", "json", timeout=timeout)
        start = out.find("{")
        return json.loads(out[start:]) if start >= 0 else {}

    def partitions(self) -> dict[str, list[str]]:
        """Each running node's own partition list: {node: [nodes it is partitioned from]}.

        Asked with rabbitmqctl on each node (its local view, also when the client path is
        cut). A node whose broker is not running (stopped, or paused by pause_minority) is
        left out. Under pause_minority the majority records the partition only once the
        paused node comes back, so an empty list during a cut is RabbitMQ's own view."""
        res: dict[str, list[str]] = {}
        for node in NODES:
            if not self.running(node):
                continue
            rc, out = self.exec(node, ["rabbitmqctl", "-q", "eval", "rabbit_node_monitor:partitions()."],
                                check=False, timeout=30)
            if rc != 0:
                continue
            res[node] = sorted(short_node(p) for p in _erl_atoms(out))
        return res

    def app_running(self, node: str) -> bool:
        """Is the rabbit application running on the node (False when pause_minority paused it)?"""
        if not self.running(node):
            return False
        rc, out = self.exec(node, ["rabbitmqctl", "-q", "eval", "rabbit:is_running()."], check=False, timeout=30)
        return rc == 0 and out.strip().endswith("true")

    def paused_nodes(self) -> list[str]:
        """Nodes whose container runs but whose broker is not running (paused by
        pause_minority / pause_if_all_down, or still booting), plus frozen containers."""
        return [n for n in NODES if self.paused(n) or (self.running(n) and not self.app_running(n))]

    def not_running_nodes(self) -> list[str]:
        return [n for n in NODES if not self.running(n)]

    def forget_cluster_node(self, survivor: str, node: str) -> None:
        self.rabbitmqctl(survivor, "forget_cluster_node", erlang_node(node), timeout=60)
        log(f"{survivor} forgot {node}")

    def stop_app(self, node: str) -> None:
        self.rabbitmqctl(node, "stop_app", timeout=120)

    def start_app(self, node: str) -> None:
        self.rabbitmqctl(node, "start_app", timeout=120)

    def list_queues(self, node: str, *info: str, timeout: float = 60) -> list[dict]:
        """``rabbitmqctl list_queues`` on ``node`` (asks the queue processes: not the stats DB).
        Default columns: name, type, messages, pid (the master's / leader's node)."""
        cols = list(info) or ["name", "type", "messages", "pid"]
        _, out = self.rabbitmqctl(node, "-q", "list_queues", "--formatter", "json", *cols, timeout=timeout)
        start = out.find("[")
        rows = json.loads(out[start:]) if start >= 0 else []
        for row in rows:
            if isinstance(row.get("pid"), str) and "@" in row["pid"]:
                row["node"] = short_node(row["pid"].split("<", 1)[-1].split(".", 1)[0]) \
                    if row["pid"].startswith("<") else short_node(row["pid"])
        return rows

    def queue_length(self, name: str, node: str | None = None) -> int | None:
        """Messages in the queue, asked of the queue itself through ``node`` (a running node)."""
        node = node or next(n for n in NODES if self.running(n))
        for row in self.list_queues(node, "name", "messages"):
            if row.get("name") == name:
                return int(row["messages"])
        return None

    def running_nodes_seen_by(self, node: str) -> list[str]:
        return sorted(short_node(n) for n in self.cluster_status(node).get("running_nodes", []))

    def wait_node_rejoined(self, node: str, timeout: float = 120) -> None:
        """Wait until ``node`` runs and all running nodes see it in the cluster."""
        def ok() -> bool:
            if not self._app_running_http(node):
                return False
            return all(node in [short_node(x["name"]) for x in self.nodes_view(n) if x.get("running")]
                       for n in NODES if self.running(n))
        self._wait_healthy_or_explain(ok, timeout, f"{node} rejoined")


def _erl_atoms(text: str) -> list[str]:
    """Atoms like 'rabbit@rabbit2' out of an Erlang term printed by rabbitmqctl eval."""
    import re
    return re.findall(r"'?(rabbit@[A-Za-z0-9_.-]+)'?", text)


__all__ = ["RabbitCluster", "RabbitConfig", "docker"]
