"""RabbitMQ cluster (rabbit1..3): lifecycle, node control, roles, recovery, introspection."""
from __future__ import annotations

import json
import re
import time
import urllib.parse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import requests
from pydantic import Field, field_validator, model_validator

from harness.brokers.compose import ComposeCluster
from harness.brokers.containers import docker, log
from harness.brokers.protocol import (CONTAINER_CAPABILITIES, RESTART_APP, ClusterError, Recorder, Role, RoleError,
                                      Steady)
from harness.brokers.settings import Settings
from harness.brokers.rabbitmq.generations import GENERATIONS, NODE_MONITOR_PARTITIONS, SEED_DISCOVERY, has
from harness.brokers.rabbitmq.generations import PARTITION_HANDLING as HANDLES_PARTITIONS
from harness.util import wait_until

NODES = ["rabbit1", "rabbit2", "rabbit3"]

AMQP_PORTS = {"rabbit1": 5672, "rabbit2": 5673, "rabbit3": 5674}
MGMT_PORTS = {"rabbit1": 15672, "rabbit2": 15673, "rabbit3": 15674}
PARTITION_HANDLING = ("ignore", "autoheal", "pause_minority", "pause_if_all_down")
# Queue types whose management entry names a `leader`, its `members` and those `online`
# (quorum queues; streams: the stream coordinator's writer and its replicas).
REPLICATED = ("quorum", "stream")


class RabbitConfig(Settings):
    """The ``cluster:`` block. Keys that are not fields must be rabbitmq.conf names (the
    server's own schema: config-keys.json) and are rendered as ``key = value`` lines."""
    keys_file = Path(__file__).with_name("config-keys.json")
    broker = "rabbitmq"
    partition_handling: Literal["ignore", "autoheal", "pause_minority", "pause_if_all_down"] = "ignore"
    net_ticktime: int = 10
    memory_high_watermark: str = "2GB"          # vm_memory_high_watermark.absolute
    disk_free_limit: str = "50MB"               # disk_free_limit.absolute
    pause_if_all_down_nodes: list[str] = Field(default_factory=list)  # node names, e.g. ["rabbit1"]
    pause_if_all_down_recover: Literal["ignore", "autoheal"] = "ignore"
    healthy_timeout: float = 120.0
    # Separate clusters on one network (a link's two sites, R21): each list forms a cluster of
    # its own; empty, one cluster of all three.
    sites: list[list[str]] = Field(default_factory=list)
    plugins: list[str] = Field(default_factory=list)  # enabled beside rabbitmq_management

    @field_validator("pause_if_all_down_nodes", mode="before")
    @classmethod
    def _comma_separated(cls, v: Any) -> Any:
        return [n for n in v.split(",") if n] if isinstance(v, str) else v  # --set a,b

    @model_validator(mode="after")
    def _nodes_named(self):
        if self.partition_handling == "pause_if_all_down" and not self.pause_if_all_down_nodes:
            raise ValueError("pause_if_all_down needs pause_if_all_down_nodes")
        if self.sites and sorted(n for site in self.sites for n in site) != NODES or any(not s for s in self.sites):
            raise ValueError(f"sites must split {', '.join(NODES)} into clusters, each node in one")
        return self

    def site(self, node: str) -> list[str]:
        """The nodes that form ``node``'s cluster."""
        return next((sorted(s) for s in self.sites if node in s), list(NODES))

    def render(self, node: str = NODES[0]) -> str:
        lines = [
            "# rendered by harness/brokers/rabbitmq/cluster.py for this run",
            "loopback_users.guest = false",
            "listeners.tcp.default = 5672",
            "management.tcp.port = 15672",
            "log.console = true",
            "log.console.level = info",
            "log.console.use_colors = off",
            "log.file = false",
            "cluster_formation.peer_discovery_backend = rabbit_peer_discovery_classic_config",
            *(f"cluster_formation.classic_config.nodes.{i} = rabbit@{n}" for i, n in enumerate(self.site(node), 1)),
            # 3.10: a blank node starts here only when a peer already runs (rabbit1 alone
            # first, a wiped node into a running cluster), or never finds one: rabbit1 looking
            # for its not-yet-started peers 10 x 0.5 s (the default) was 5 s of every start.
            # 4.x nodes start together and wait for the seed's database: 3 tries (1.5 s) were
            # too few under load, a node booted standalone; 60 (30 s) are enough.
            f"cluster_formation.discovery_retry_limit = {60 if has(self.version, SEED_DISCOVERY) else 2}",
            "cluster_formation.discovery_retry_interval = 500",
            f"net_ticktime = {int(self.net_ticktime)}",
            f"vm_memory_high_watermark.absolute = {self.memory_high_watermark}",
            f"disk_free_limit.absolute = {self.disk_free_limit}",
        ]
        # 4.3 (Khepri only) has no partition handling: its schema still parses the key and
        # ignores it, so rendering it would only pretend (a scenario asking for a mode there
        # is not applicable: RabbitScenario.not_applicable)
        handles = has(self.version, HANDLES_PARTITIONS)
        if handles:
            lines.insert(-3, f"cluster_partition_handling = {self.partition_handling}")
        if handles and self.partition_handling == "pause_if_all_down":
            lines.append(f"cluster_partition_handling.pause_if_all_down.recover = {self.pause_if_all_down_recover}")
            lines += [f"cluster_partition_handling.pause_if_all_down.nodes.{i} = rabbit@{n}"
                      for i, n in enumerate(self.pause_if_all_down_nodes, 1)]
        lines += [f"{k} = {v}" for k, v in self.extra.items()
                  if handles or not k.startswith("cluster_partition_handling")]
        return "\n".join(lines) + "\n"


def _classic_nodes(conf: str) -> list[str]:
    """The peer discovery's node list of a rendered rabbitmq.conf, short names, sorted."""
    return sorted(short_node(v.strip()) for k, _, v in (line.partition("=") for line in conf.splitlines())
                  if k.strip().startswith("cluster_formation.classic_config.nodes."))


def parse_recoverable(out: str) -> dict[str, list[str]]:
    """``[{{resource,<<"/">>,queue,<<"q">>},[rabbit@rabbit2]}]`` (an eval's printed term) as
    {"q": ["rabbit2"]}; a queue outside the default vhost is named "vhost/q"."""
    found = re.findall(r'<<"([^"]*)">>,\s*queue,\s*<<"([^"]*)">>\},\s*\[([^\]]*)\]', out)
    return {(q if vhost == "/" else f"{vhost}/{q}"): re.findall(r"@([\w.-]+)", nodes) for vhost, q, nodes in found}


def erlang_node(node: str) -> str:
    return node if "@" in node else f"rabbit@{node}"


def short_node(erl: str | None) -> str | None:
    return erl.split("@", 1)[1] if erl and "@" in erl else erl


def master_of(q: dict) -> str | None:
    """A queue's master / leader from a node's management record: a quorum queue's
    ``leader`` (none while it elects one); a stream's ``leader``, or on 3.10, which reports
    none for a stream, its ``node`` (the writer's); a classic queue's ``node``."""
    if q.get("type") == "quorum":
        return short_node(q.get("leader"))
    return short_node(q.get("leader") or q.get("node"))


class RabbitCluster(ComposeCluster):
    kind = "rabbitmq"
    compose_file = "rabbitmq.yml"
    network_key = "rabbitnet"
    image_repo = "mqchaos/rabbitmq"
    image_vars = ("RABBITMQ_IMAGE",)
    generations = GENERATIONS
    data_mounts = {"rabbit": "/var/lib/rabbitmq"}
    fs_dirs = {"rabbit": "/var/lib/rabbitmq/mnesia"}  # RABBITMQ_MNESIA_BASE: queues, stores, metadata
    capabilities = CONTAINER_CAPABILITIES | {RESTART_APP}
    roles = {r.name: r for r in (
        Role("queue_master", "node of classic queue Q's master, or quorum queue / stream Q's leader", "queue"),
        Role("quorum_leader", "the same (reads better for quorum queues and streams)", "queue"),
        Role("queue_mirrors", "nodes of Q's mirrors (classic) / followers (quorum queue, stream)", "queue"),
    )}

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

    def write_config(self, config: RabbitConfig) -> None:
        conf = self.conf_dir()
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "rabbitmq.conf").write_text(config.render())
        for node in NODES:  # a node of a separate site reads its own (compose/rabbitmq/entrypoint.sh)
            (conf / f"rabbitmq.{node}.conf").unlink(missing_ok=True)
            if config.sites:
                (conf / f"rabbitmq.{node}.conf").write_text(config.render(node))
        (conf / "enabled_plugins").write_text(f"[{','.join(['rabbitmq_management', *config.plugins])}].\n")

    def versions(self) -> dict[str, Any]:
        """What the nodes run: the cluster's versions (the first node's overview), and per
        node its image and the versions its own management listener reports."""
        ov = self.api("overview") or {}
        nodes: dict[str, Any] = self.node_images()
        for node, entry in nodes.items():
            try:
                own = self.api("overview", node=node, timeout=5) or {}
            except ClusterError:
                own = {}
            entry.update(rabbitmq=own.get("rabbitmq_version"), erlang=own.get("erlang_version"))
        return {"rabbitmq": ov.get("rabbitmq_version"), "erlang": ov.get("erlang_version"), "nodes": nodes}

    def describe(self) -> dict[str, Any]:
        parts: Any = self.partitions() if self.reports_partitions() else "not reported by this version"
        return {"partitions": parts, "healthy": self.healthy(), "versions": self.versions()}

    def running_version(self) -> str | None:
        """The generation the running nodes' image was built for (its label), else the one
        this object was configured with: a separate process (``mqchaos heal``, ``status``)
        asks the containers."""
        labels = {e.get("version") for e in self.node_images().values()} - {None}
        return labels.pop() if len(labels) == 1 else self.version()

    def reports_partitions(self) -> bool:
        """Can the nodes say whom they are partitioned from? 4.3 removed
        rabbit_node_monitor:partitions() (and its /api/nodes ``partitions`` is always [])."""
        return has(self.running_version() or self.version(), NODE_MONITOR_PARTITIONS)

    def up(self, config: RabbitConfig | None = None, fresh: bool = True) -> None:
        """Start rabbit1..3 with ``config`` and wait until all three run as one cluster.

        ``fresh`` (default) tears down any previous cluster and its volumes first.
        On 3.10 rabbit1 is started first and the others join it through classic-config peer
        discovery: started all at once, 3.10 nodes can form separate clusters. 4.x nodes are
        started together: their discovery picks one seed among the peers it reaches.
        """
        self.config = config or RabbitConfig()
        if fresh:
            self.down()
        self.write_config(self.config)
        rest = list(NODES)
        if not has(self.config.version, SEED_DISCOVERY):
            self._compose_up(["rabbit1"])
            self._wait_healthy_or_explain(lambda: self.app_serving("rabbit1"),
                                          self.config.healthy_timeout, "rabbit1 running", must_run=["rabbit1"])
            rest.remove("rabbit1")
        self._compose_up(rest)
        self.wait_healthy(self.config.healthy_timeout, must_run=NODES)

    def wait_healthy(self, timeout: float = 120, must_run: list[str] | None = None) -> None:
        """All nodes' containers run, every node sees all three running, no partitions."""
        self._wait_healthy_or_explain(self.healthy, timeout, "all nodes running and clustered", must_run)

    def sites(self) -> list[list[str]]:
        """The clusters the nodes form, as this cluster's rendered configuration says (a
        separate process, ``mqchaos heal``, reads the same)."""
        out: list[list[str]] = []
        for node in NODES:
            conf = self.conf_dir() / f"rabbitmq.{node}.conf"
            site = _classic_nodes(conf.read_text()) if conf.exists() else list(NODES)
            if site not in out:
                out.append(site)
        return out

    def healthy(self) -> bool:
        sites = self.sites()
        for node in NODES:
            if not self.running(node):
                return False
            view = self.nodes_view(node)
            if sorted(short_node(n["name"]) for n in view if n.get("running")) != next(s for s in sites if node in s):
                return False
            if any(n.get("partitions") for n in view):
                return False
        return True

    def wipe(self, node: str, start: bool = True, forget: bool = True, forget_offline_on: str | None = None,
             **options: Any) -> None:
        """Lose the node's data. With ``forget`` (default) a running survivor forgets the node
        (``rabbitmqctl forget_cluster_node``) before it starts again, so it rejoins as new.
        With ``forget_offline_on``, that stopped node forgets it instead (``--offline``): seed
        001's way to drop a lost master while every mirror is stopped."""
        self.kill(node)
        self.erase_data(node)
        if forget_offline_on:
            self.forget_offline(forget_offline_on, node)
        elif forget:
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

    def seen_before(self, fault: str, node: str, params: dict) -> dict | None:
        # a master lost and forgotten offline: the mirrors RabbitMQ may promote, as they stood
        if fault == "wipe" and params.get("forget_offline_on"):
            return {"recoverable_mirrors": self.recoverable_mirrors(node)}
        return None

    def recoverable_mirrors(self, node: str) -> dict[str, list[str]] | None:
        """{queue: its recoverable mirrors' nodes} for the classic queues mastered on ``node``:
        the list ``forget_cluster_node --offline`` promotes from (the queue is deleted when it is
        empty). None when the node cannot say."""
        expr = ("[{amqqueue:get_name(Q), amqqueue:get_recoverable_slaves(Q)} || Q <- rabbit_amqqueue:list(), "
                "is_pid(amqqueue:get_pid(Q)), node(amqqueue:get_pid(Q)) =:= node()].")
        code, out = self.rabbitmqctl(node, "eval", expr, check=False, timeout=30)
        return parse_recoverable(out) if code == 0 else None

    def forget_offline(self, on: str, node: str, timeout: float = 180) -> None:
        """``rabbitmqctl forget_cluster_node --offline`` as the stopped node ``on`` (its name,
        its data, its configuration) in a one-off container with no network. Each queue
        mastered on ``node`` goes to the first of its recoverable mirrors (3.10.8: the oldest
        in the list, not the most recently stopped, R4c), or is deleted when there is none."""
        if node == on or on not in NODES:
            raise ClusterError(f"forget_offline_on: {on!r} is not another node of the cluster")
        if self.state(on).get("Running"):
            raise ClusterError(f"{on} must be stopped to forget {node} offline")
        info = self._inspect(on) or {}
        env = [a for e in (info.get("Config") or {}).get("Env") or [] for a in ("-e", e)]
        # the CLI, as root, needs the node's cookie (written into the data volume at its boot)
        script = ("cp /var/lib/rabbitmq/.erlang.cookie /root/.erlang.cookie && chmod 400 /root/.erlang.cookie && "
                  f"rabbitmqctl forget_cluster_node --offline {erlang_node(node)}")
        proc = docker("run", "--rm", "--network", "none", "--hostname", on, "--volumes-from", on, *env,
                      "--entrypoint", "/bin/sh", info["Config"]["Image"], "-c", script,
                      check=False, timeout=timeout)
        if proc.returncode != 0:
            raise ClusterError(f"{on} could not forget {node} offline ({proc.returncode}): "
                               f"{(proc.stdout + proc.stderr)[-1500:]}")
        log(f"{on} forgot {node} offline")

    # ---- management HTTP API (through 127.0.0.1 published ports) --------------------
    def http(self, node: str, method: str, path: str, timeout: float = 10, **kw) -> requests.Response:
        url = f"http://127.0.0.1:{MGMT_PORTS[node]}/api/{path.lstrip('/')}"
        return requests.request(method, url, auth=self.auth, timeout=timeout, **kw)

    def api(self, path: str, node: str | None = None, timeout: float = 10, among: list[str] | None = None) -> Any:
        """GET a management API path through ``node`` or the first node (of ``among``) that answers."""
        errors = []
        for n in ([node] if node else among or NODES):
            try:
                resp = self.http(n, "GET", path, timeout=timeout)
                if resp.status_code == 404:
                    return None
                resp.raise_for_status()
                return resp.json()
            except requests.RequestException as exc:
                errors.append(f"{n}: {exc}")
        raise ClusterError(f"management API {path} unanswered: {'; '.join(errors)}")

    def app_serving(self, node: str) -> bool:
        try:
            return any(short_node(n["name"]) == node and n.get("running") for n in self.nodes_view(node))
        except (ClusterError, requests.RequestException, ValueError):
            return False

    def nodes_view(self, node: str) -> list[dict]:
        """/api/nodes as seen through ``node``'s management listener."""
        return self.api("nodes", node=node, timeout=5) or []

    def queue(self, name: str, vhost: str = "/", node: str | None = None,
              among: list[str] | None = None) -> dict | None:
        """Raw /api/queues/<vhost>/<name> (None if the queue does not exist)."""
        return self.api(f"queues/{urllib.parse.quote(vhost, safe='')}/{urllib.parse.quote(name, safe='')}",
                        node=node, among=among)

    def queue_master(self, name: str, vhost: str = "/", node: str | None = None) -> str | None:
        """Node hosting the classic queue's master, or the quorum queue's / stream's leader."""
        q = self.queue(name, vhost, node)
        if not q:
            return None
        # a quorum queue electing a leader: the node its record names, so a fault still has a target
        return master_of(q) or short_node(q.get("node"))

    def queue_mirrors(self, name: str, vhost: str = "/", node: str | None = None) -> dict[str, list[str]]:
        """Classic mirrored queue: {"master": node, "mirrors": [...], "synchronised": [...]}."""
        q = self.queue(name, vhost, node) or {}
        return {
            "master": short_node(q.get("node")),
            "mirrors": sorted(short_node(n) for n in q.get("slave_nodes") or []),
            "synchronised": sorted(short_node(n) for n in q.get("synchronised_slave_nodes") or []),
        }

    def synchronised_now(self, name: str, node: str = "rabbit1") -> list[str]:
        """The nodes of ``name``'s synchronised mirrors as the broker holds them now
        (rabbitmqctl; the management API's copy can be seconds old, and a mirror restarted
        a moment ago may still be listed there as synchronised)."""
        name_bin = name.replace("\\", "\\\\").replace('"', '\\"')
        expr = (f'case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"{name_bin}">>)) of '
                '{ok, Q} -> [node(P) || P <- amqqueue:get_sync_slave_pids(Q)]; _ -> [] end.')
        _, out = self.rabbitmqctl(node, "eval", expr, timeout=30)
        return sorted(re.findall(r"@([\w.-]+)", out))

    def quorum_members(self, name: str, vhost: str = "/", node: str | None = None) -> dict[str, Any]:
        """Quorum queue or stream: {"leader": node, "members": [...], "online": [...]}."""
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
        paused node comes back, so an empty list during a cut is RabbitMQ's own view.
        A version without the call (4.3) reports nothing: {} (``reports_partitions``)."""
        res: dict[str, list[str]] = {}
        if not self.reports_partitions():
            return res
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
            if not self.app_serving(node):
                return False
            return all(node in [short_node(x["name"]) for x in self.nodes_view(n) if x.get("running")]
                       for n in NODES if self.running(n))
        self._wait_healthy_or_explain(ok, timeout, f"{node} rejoined")

    # ---- roles -------------------------------------------------------------------------
    def role(self, name: str, arg: str | None) -> list[str]:
        if name not in self.roles:
            raise RoleError(f"a rabbitmq cluster has no role {name!r} (roles: {', '.join(self.roles)})")
        if not arg:
            raise RoleError(f"{name} needs a queue ({name}:QUEUE)")
        if name == "queue_mirrors":
            q = self.queue(arg) or {}
            if q.get("type") in REPLICATED:
                leader = short_node(q.get("leader"))
                return [n for n in (short_node(m) for m in q.get("members") or []) if n != leader]
            return self.queue_mirrors(arg)["mirrors"]
        master = self.queue_master(arg)
        return [master] if master else []

    # ---- recovery ----------------------------------------------------------------------
    def restart_app(self, node: str) -> None:
        """``rabbitmqctl stop_app && start_app``: the documented recovery from a partition."""
        self.rabbitmqctl(node, "stop_app", timeout=120)
        self.rabbitmqctl(node, "start_app", timeout=120)

    def partition_handling(self) -> str:
        """The mode the running cluster was started with (its rendered rabbitmq.conf)."""
        conf = self.conf_dir() / "rabbitmq.conf"
        if conf.exists():
            for line in conf.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "cluster_partition_handling":
                    return value.strip()
        return self.config.partition_handling

    def wait_whole(self, timeout: float, steady: Steady, record: Recorder, stale_after: float | None = None) -> None:
        """Wait for "no partitions, every node running". If a partition entry outlives the
        network cut, run the documented recovery (``stop_app``/``start_app`` on the node
        holding it, the most-partitioned first) and record it as a finding."""
        t0 = time.monotonic()
        handling = self.partition_handling()
        # under `ignore` RabbitMQ never heals itself; other modes get time to do their job
        patience = stale_after if stale_after is not None else (20.0 if handling == "ignore" else 90.0)
        whole = "RabbitMQ: no partitions, all nodes running"
        try:
            wait_until(steady(self.healthy), min(patience, timeout), whole, 1.0)
            return
        except TimeoutError:
            pass
        for _ in range(len(NODES)):
            parts = self.partitions()
            holders = sorted((n for n, p in parts.items() if p), key=lambda n: (-len(parts[n]), n))
            if not holders:
                break
            node = holders[0]
            log(f"partition entries {parts} {time.monotonic() - t0:.0f}s after the heal; recovering {node}")
            record({"finding": "stale_partition", "node": node, "partitions": parts,
                    "partition_handling": handling, "waited_s": round(time.monotonic() - t0, 1),
                    "expected": handling == "ignore",
                    "recovery": f"rabbitmqctl stop_app && rabbitmqctl start_app on {node}"},
                   lambda n=node: self.restart_app(n))
            try:
                wait_until(steady(self.healthy), 60, "RabbitMQ whole after stop_app/start_app", 1.0)
                return
            except TimeoutError:
                continue
        left = max(10.0, timeout - (time.monotonic() - t0))
        wait_until(steady(self.healthy), left, whole, 1.0)

    def stuck_nodes(self) -> list[str]:
        return [n for n in NODES if not self.running(n) or not self.app_serving(n)]

    def exited(self) -> dict[str, str]:
        """Exited containers, and running nodes whose broker failed to boot: a node resuming
        from a pause_minority pause can hit BOOT FAILED and then waits forever with its
        broker stopped (3.10.8, Q1), which no amount of waiting ends."""
        out = super().exited()
        for node in NODES:
            if node in out or not self.running(node) or self.app_serving(node):
                continue
            # since the container's last start: a node restarted since has not failed yet
            why = boot_failed(self.logs(node, tail=400, since=self.state(node).get("StartedAt")), time.time())
            if why:
                out[node] = f"still running, its broker not: {why}"
        return out

    def wait_rejoined(self, node: str, timeout: float) -> None:
        self.wait_node_rejoined(node, timeout=timeout)


BOOT_STARTED, BOOT_DONE, BOOT_FAILED = "Starting RabbitMQ", "Server startup complete", "BOOT FAILED"
# A boot that has logged nothing for this long is hung (3.10.8, R9: a node resuming after a
# pause_minority pause started booting, logged Erlang's global "Faking nodedown/nodeup"
# workaround and then nothing for 3 minutes); a boot's steps log every few seconds.
BOOT_SILENCE_S = 60.0


def boot_failed(log: str, now: float | None = None, silence: float = BOOT_SILENCE_S) -> str | None:
    """Why the node's broker will not come up by itself: its last boot ended in BOOT FAILED,
    or (given ``now``, a Unix time) it started and has logged nothing for ``silence``
    seconds; None otherwise. ``log``: its lines, each after docker's timestamp or not."""
    stamps, lines = [], []
    for line in log.splitlines():
        head, _, rest = line.partition(" ")
        dated = head[:4].isdigit() and head.endswith("Z")
        stamps.append(_docker_time(head) if dated else None)
        lines.append(rest if dated else line)
    last = None
    for i, line in enumerate(lines):
        for marker in (BOOT_STARTED, BOOT_DONE, BOOT_FAILED):
            if marker in line:
                last = (marker, i)
    if not last or last[0] == BOOT_DONE:
        return None
    if last[0] == BOOT_FAILED:
        after = [ln.strip() for ln in lines[last[1] + 1:] if ln.strip() and not set(ln.strip()) <= {"="}]
        return (BOOT_FAILED + ": " + " ".join(after[:12]))[:600]
    latest = max((t for t in stamps if t is not None), default=None)
    if now is not None and latest is not None and now - latest >= silence:
        tail = [ln.strip() for ln in lines[last[1]:] if ln.strip()][-3:]
        return (f"boot hung: started, then nothing logged for {now - latest:.0f}s; last: "
                + " | ".join(tail))[:600]
    return None


def _docker_time(stamp: str) -> float | None:
    """A docker log timestamp (RFC 3339, nanoseconds, UTC) as a Unix time."""
    try:
        return datetime.strptime(stamp[:26].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def _erl_atoms(text: str) -> list[str]:
    """Atoms like 'rabbit@rabbit2' out of an Erlang term printed by rabbitmqctl eval."""
    return re.findall(r"'?(rabbit@[A-Za-z0-9_.-]+)'?", text)


__all__ = ["NODES", "REPLICATED", "RabbitCluster", "RabbitConfig", "boot_failed"]
