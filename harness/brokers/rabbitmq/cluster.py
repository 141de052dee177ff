"""RabbitMQ cluster (rabbit1..3): lifecycle, node control, roles, recovery, introspection.
What it asks and does is spelled out beside it: ``mgmt`` (the management HTTP API), ``ctl``
(rabbitmqctl), ``queues`` (a queue's record read as master, mirrors, members; the roles),
``recovery`` (stale partitions, forgetting a wiped node, failed boots); ``nodes`` names them;
``operations`` holds the operator's operations, the cluster's optional abilities (its
``components``: membership, versions, feature flags, sync, placement, data files, restart_app)."""
from __future__ import annotations

import logging
import urllib.parse
from pathlib import Path
from typing import Any, Literal

import requests
from pydantic import Field, field_validator, model_validator

from harness.brokers.compose import ComposeCluster
from harness.brokers.containers import docker
from harness.brokers.capabilities import Versions, ability
from harness.brokers.protocol import ClusterError, Recorder, Steady
from harness.brokers.balancer import Balancer
from harness.brokers.settings import Settings
from harness.brokers.rabbitmq import ctl, mgmt, queues, recovery
from harness.brokers.rabbitmq.ctl import parse_recoverable
from harness.brokers.rabbitmq.generations import GENERATIONS, NODE_MONITOR_PARTITIONS, SEED_DISCOVERY, has
from harness.brokers.rabbitmq.generations import PARTITION_HANDLING as HANDLES_PARTITIONS
from harness.brokers.rabbitmq.operations import COMPONENTS
from harness.brokers.rabbitmq.nodes import AMQP_PORTS, MGMT_PORTS, NODES, REPLICATED, erlang_node, short_node
from harness.brokers.rabbitmq.queues import master_of
from harness.brokers.rabbitmq.recovery import boot_failed
from harness.util import same_release

log = logging.getLogger(__name__)

PARTITION_HANDLING = ("ignore", "autoheal", "pause_minority", "pause_if_all_down")


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
    # Nodes that join as RAM nodes (seed 003: metadata in memory only; persistent messages
    # still on disc): cluster_formation.node_type = ram in their own rabbitmq.<node>.conf
    ram_nodes: list[str] = Field(default_factory=list)
    plugins: list[str] = Field(default_factory=list)  # enabled beside rabbitmq_management
    # Nodes started on another version's image than the cluster's (issue 39: a blue-green
    # upgrade's green cluster, LinkSpec.downstream_version): node -> version
    node_versions: dict[str, str] = Field(default_factory=dict)
    # The feature flags a new cluster starts with (RABBITMQ_FEATURE_FLAGS; the required ones
    # always): a cluster as an older version left it, for a row that enables the rest under
    # load (issue 39: ``finalize``). None: every stable flag, RabbitMQ's default.
    feature_flags_on_init: list[str] | None = None
    # HAProxy in front of the nodes, the clients' only address (seed 000, "Обеспечение
    # связности клиентов"): harness.brokers.balancer
    balancer: Balancer | None = None

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
        if set(self.ram_nodes) - set(NODES) or any(set(self.site(n)) <= set(self.ram_nodes) for n in self.ram_nodes):
            raise ValueError(f"ram_nodes: nodes of {', '.join(NODES)}, and each cluster keeps a disc node")
        return self

    def per_node(self) -> bool:
        """Whether each node reads a rabbitmq.conf of its own (rabbitmq.<node>.conf)."""
        return bool(self.sites or self.ram_nodes)

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
            *(["cluster_formation.node_type = ram"] if node in self.ram_nodes else []),
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


class RabbitCluster(ComposeCluster):
    kind = "rabbitmq"
    compose_file = "rabbitmq.yml"
    network_key = "rabbitnet"
    image_repo = "mqchaos/rabbitmq"
    image_vars = ("RABBITMQ_IMAGE",)
    generations = GENERATIONS
    data_mounts = {"rabbit": "/var/lib/rabbitmq"}
    fs_dirs = {"rabbit": "/var/lib/rabbitmq/mnesia"}  # RABBITMQ_MNESIA_BASE: queues, stores, metadata
    roles = queues.ROLES
    balancer_port = 5672
    # the optional abilities (harness.brokers.capabilities): the operator's operations
    components = ComposeCluster.components + COMPONENTS

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
            if config.per_node():
                (conf / f"rabbitmq.{node}.conf").write_text(config.render(node))
        (conf / "enabled_plugins").write_text(f"[{','.join(['rabbitmq_management', *config.plugins])}].\n")
        flags = conf / "feature_flags"  # compose/rabbitmq/entrypoint.sh exports it when present
        flags.unlink(missing_ok=True)
        if config.feature_flags_on_init is not None:
            flags.write_text(",".join(config.feature_flags_on_init) + "\n")

    def versions(self) -> dict[str, Any]:
        return mgmt.versions(self)

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
        if self.config.node_versions:
            self.pin_versions(self.config.node_versions)
        rest = list(NODES)
        if not has(self.config.version, SEED_DISCOVERY):
            self._compose_up(["rabbit1"])
            self._wait_healthy_or_explain(lambda: self.app_serving("rabbit1"),
                                          self.config.healthy_timeout, "rabbit1 running", must_run=["rabbit1"])
            rest.remove("rabbit1")
        self._compose_up(rest)
        self.wait_healthy(self.config.healthy_timeout, must_run=NODES)
        for node, version in self.config.node_versions.items():  # the premise of the run, proven
            reported = ability(self, Versions).node_version(node)
            if not same_release(reported, version):
                raise ClusterError(f"{node} was to run {version}, it reports {reported}")
        if self.config.balancer:
            self.start_balancer(self.config.balancer)

    def balancer_check(self) -> list[str]:
        """A node serving AMQP answers the protocol header with connection.start (a frame
        of class 10, method 10): a node paused by its partition handling has closed its
        listener, a frozen one answers nothing, and either fails."""
        return ["tcp-check connect", "tcp-check send-binary 414d515000000901", "tcp-check expect binary 000a000a"]

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
        return mgmt.healthy(self)

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
            recovery.forget(self, node)
        if start:
            self.start(node)

    def seen_before(self, fault: str, node: str, params: dict) -> dict | None:
        # a master lost and forgotten offline: the mirrors RabbitMQ may promote, as they stood
        if fault == "wipe" and params.get("forget_offline_on"):
            return {"recoverable_mirrors": ctl.recoverable_mirrors(self, node)}
        return None

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
        log.info("%s forgot %s offline", on, node)

    # ---- management HTTP API (through 127.0.0.1 published ports): mgmt.py ------------
    def http(self, node: str, method: str, path: str, timeout: float = 10, **kw) -> requests.Response:
        url = f"http://127.0.0.1:{MGMT_PORTS[node]}/api/{path.lstrip('/')}"
        return requests.request(method, url, auth=self.auth, timeout=timeout, **kw)

    def api(self, path: str, node: str | None = None, timeout: float = 10, among: list[str] | None = None) -> Any:
        """GET a management API path through ``node`` or the first node (of ``among``) that answers."""
        return mgmt.get(self, path, node, timeout, among)

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
        return queues.mirrors_of(self.queue(name, vhost, node) or {})

    def quorum_members(self, name: str, vhost: str = "/", node: str | None = None) -> dict[str, Any]:
        """Quorum queue or stream: {"leader": node, "members": [...], "online": [...]}."""
        return queues.members_of(self.queue(name, vhost, node) or {})

    def set_policy(self, name: str, pattern: str, definition: dict, apply_to: str = "queues",
                   priority: int = 0, vhost: str = "/", node: str | None = None) -> None:
        mgmt.put_policy(self, name, pattern, definition, apply_to, priority, vhost, node)

    # ---- rabbitmqctl (via docker exec; works when the client path is cut): ctl.py ---
    def rabbitmqctl(self, node: str, *args: str, check: bool = True, timeout: float = 60) -> tuple[int, str]:
        return self.exec(node, ["rabbitmqctl", *args], check=check, timeout=timeout)

    def partitions(self) -> dict[str, list[str]]:
        """Each running node's own partition list: {node: [nodes it is partitioned from]}."""
        return ctl.partitions(self)

    def app_running(self, node: str) -> bool:
        """Is the rabbit application running on the node (False when pause_minority paused it)?"""
        return ctl.app_running(self, node)

    def paused_nodes(self) -> list[str]:
        """Nodes whose container runs but whose broker is not running (paused by
        pause_minority / pause_if_all_down, or still booting), plus frozen containers."""
        return [n for n in NODES if self.paused(n) or (self.running(n) and not self.app_running(n))]

    def list_queues(self, node: str, *info: str, timeout: float = 60) -> list[dict]:
        """``rabbitmqctl list_queues`` on ``node`` (the queue processes' own answer)."""
        return ctl.list_queues(self, node, *info, timeout=timeout)

    def queue_length(self, name: str, node: str | None = None) -> int | None:
        return ctl.queue_length(self, name, node)

    def synchronised_now(self, name: str, node: str = "rabbit1") -> list[str]:
        """The nodes of ``name``'s synchronised mirrors as the broker holds them now."""
        return ctl.synchronised_now(self, name, node)

    def running_nodes_seen_by(self, node: str) -> list[str]:
        return sorted(short_node(n) for n in ctl.cluster_status(self, node).get("running_nodes", []))

    def wait_node_rejoined(self, node: str, timeout: float = 120) -> None:
        """Wait until ``node`` runs and all running nodes see it in the cluster."""
        self._wait_healthy_or_explain(lambda: mgmt.rejoined(self, node), timeout, f"{node} rejoined")

    # ---- roles -------------------------------------------------------------------------
    def role(self, name: str, arg: str | None) -> list[str]:
        return queues.resolve_role(self, name, arg)

    # ---- recovery ----------------------------------------------------------------------
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
        recovery.wait_whole(self, timeout, steady, record, stale_after)

    def stuck_nodes(self) -> list[str]:
        return [n for n in NODES if not self.running(n) or not self.app_serving(n)]

    def exited(self) -> dict[str, str]:
        """Exited containers, and running nodes whose broker failed to boot: a node resuming
        from a pause_minority pause can hit BOOT FAILED and then waits forever with its
        broker stopped (3.10.8, Q1), which no amount of waiting ends."""
        out = super().exited()
        out.update(recovery.boot_failures(self, [n for n in NODES if n not in out]))
        return out

    def wait_rejoined(self, node: str, timeout: float) -> None:
        self.wait_node_rejoined(node, timeout=timeout)


__all__ = ["NODES", "REPLICATED", "RabbitCluster", "RabbitConfig", "boot_failed", "erlang_node", "master_of",
           "parse_recoverable", "short_node"]
