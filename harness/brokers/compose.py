"""The Docker Compose cluster most plug-ins build on: a compose project (``mqchaos-<broker>``)
of one file in compose/, the image of the version asked for, the overrides a run adds
(the power-loss file system, a background CPU weight), and its removal.

Every node is a container named after the node (``rabbit1``, ``zk1``, ``kafka1`` ...): node
access and control are ``harness.brokers.containers.ContainerCluster``'s. Addresses are
read from Docker; clients reach brokers only through ports published on 127.0.0.1.
"""
from __future__ import annotations

import abc
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from harness import store
from harness.brokers import balancer, lazyfs
from harness.brokers.containers import ContainerCluster, docker
from harness.brokers.protocol import ClusterError
from harness.brokers.generations import VERSION_LABEL, Generation, image_ref
from harness.engine import compose_cmd
from harness.util import run, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent
COMPOSE_DIR = ROOT / "compose"
STATE_DIR = Path(os.environ.get("MQCHAOS_STATE_DIR", ROOT / "build" / "clusters"))
VERSION_FILE = "version"  # in a kind's state directory: the version its last up brought up

# cgroup CPU shares of a cluster's nodes: normal (docker's default), and the weight of a
# cluster a batch starts while another run's load goes on (harness.batch)
CPU_SHARES_NORMAL = 1024
CPU_SHARES_BACKGROUND = 2


class ImageVersions(abc.ABC):
    """The versions ability (``harness.brokers.capabilities.Versions``) of a compose
    cluster, its generic part: a node's container made again from another version's image,
    its named data volume kept. The plug-in's subclass says what a node reports."""

    def __init__(self, cluster: "ComposeCluster") -> None:
        self.cluster = cluster

    @abc.abstractmethod
    def node_version(self, node: str) -> str | None: ...

    def upgrade_reason(self, version: str) -> str | None:
        return self.cluster.version_reason(version)

    def upgrade_node(self, node: str, version: str) -> None:
        """The node's container made again from ``version``'s image (compose, that node only)
        and started; every later compose call keeps it there (an override file, gone with
        the cluster)."""
        reason = self.upgrade_reason(version)  # a plug-in's narrower reason holds here too
        if reason:
            raise ClusterError(reason)
        c = self.cluster
        c.pin_versions({node: version})
        c.forget_address(node)
        c.compose("up", "-d", "--no-build", "--no-deps", "--force-recreate", node, timeout=600)


class ComposeCluster(ContainerCluster):
    """A cluster brought up and down as a compose project; what both kinds share."""

    compose_file: str          # file name in compose/
    # the image of each version: the compose file's variables (RABBITMQ_IMAGE ...) get
    # ``image_ref(image_repo, generation)`` unless the environment sets them (an official
    # image, say, which then runs whatever the version's rendering asks of it)
    image_repo: ClassVar[str] = ""
    image_vars: ClassVar[tuple[str, ...]] = ()
    generations: ClassVar[dict[str, Generation]] = {}
    # the data directory the power-loss file system serves (settings ``fs: lazy``), by prefix
    fs_dirs: dict[str, str] = {}
    components: ClassVar[tuple[type, ...]] = (lazyfs.PowerSwitch,)

    def __init__(self, project: str | None = None) -> None:
        super().__init__(project or f"mqchaos-{self.kind}")
        self.state_dir = self.kind_dir()
        self.cpu_shares = CPU_SHARES_NORMAL  # the nodes' (docker's cpu_shares), set_background

    @classmethod
    def kind_dir(cls) -> Path:
        """The broker's state here: the configuration rendered for its last ``up`` and more."""
        return STATE_DIR / cls.kind

    @classmethod
    def recorded_version(cls) -> str | None:
        """The version the last ``up`` here brought up (``_compose_up`` records it), None if
        none: what a cluster already up runs (``harness.brokers.get_cluster``)."""
        try:
            return (cls.kind_dir() / VERSION_FILE).read_text().strip() or None
        except OSError:
            return None

    # ---- compose --------------------------------------------------------------------
    def conf_dir(self) -> Path:
        return self.state_dir / "conf"

    def compose_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env[f"MQCHAOS_{self.kind.upper()}_CONF"] = str(self.conf_dir())
        ref = self.image()
        for var in self.image_vars:
            env.setdefault(var, ref)
        return env

    def version(self) -> str | None:
        """The version this cluster object brings up (its settings')."""
        return getattr(getattr(self, "config", None), "version", None)

    def generation(self) -> Generation:
        version = self.version()
        if version is None or version not in self.generations:
            return next((g for g in self.generations.values() if g.default), Generation("default", default=True))
        return self.generations[version]

    def image(self) -> str:
        """The image its nodes run, unless the environment names another (``image_vars``)."""
        return image_ref(self.image_repo, self.generation())

    def node_images(self) -> dict[str, dict[str, str | None]]:
        """What each existing node's container runs: its image and the version the image was
        built for (the ``mqchaos.version`` label ``mqchaos images`` puts on it; None on
        another image)."""
        out: dict[str, dict[str, str | None]] = {}
        for node in self.nodes():
            info = self._inspect(node)
            if info:
                labels = (info.get("Config") or {}).get("Labels") or {}
                out[node] = {"image": (info.get("Config") or {}).get("Image"), "version": labels.get(VERSION_LABEL)}
        return out

    def compose(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        files = [COMPOSE_DIR / self.compose_file] + [p for p in self.overrides() if p.exists()]
        cmd = [*compose_cmd(), "-p", self.project, *(a for f in files for a in ("-f", str(f))), *args]
        return run(cmd, check=check, timeout=timeout, env=self.compose_env())

    def overrides(self) -> list[Path]:
        """The override files every compose call reads, where they exist."""
        return [self.size_override(), self.fs_override(), self.cpu_override(), self.image_override()]

    def size_override(self) -> Path:
        """The nodes a run adds beyond the compose file's (a plug-in's larger cluster), each a
        copy of the file's last node of its kind; gone with the cluster."""
        return self.state_dir / "size.override.yml"

    # ---- the power-loss file system (harness.brokers.lazyfs) -------------------------
    def fs_override(self) -> Path:
        return self.state_dir / "lazyfs.override.yml"

    def fs_dir(self, node: str) -> str | None:
        return next((d for prefix, d in self.fs_dirs.items() if node.startswith(prefix)), None)

    def write_fs_override(self, settings: Any) -> None:
        """``fs: lazy``: the data nodes mount their data directory through nemesis/lazyfs.py;
        otherwise no override (compose reads every override file that exists)."""
        path = self.fs_override()
        if not lazyfs.wanted(settings):
            path.unlink(missing_ok=True)
            return
        dirs = {n: d for n in self.nodes() if (d := self.fs_dir(n))}
        lazyfs.write_override(path, dirs, settings.fs_writeback_s)

    def lazy_fs(self, node: str) -> bool:
        return lazyfs.mounted(self._inspect(node))


    # ---- a load balancer in front of the nodes (harness.brokers.balancer) --------------
    # the port the balancer forwards to on each node; None: the broker's clients cannot go
    # through one (a Kafka client is sent to each partition's leader by the metadata)
    balancer_port: ClassVar[int | None] = None

    def balancer_check(self) -> list[str]:
        """HAProxy tcp-check lines that pass only on a node serving clients."""
        return []

    def balancer_name(self) -> str:
        return f"{self.project}-{balancer.NAME}"

    def balancer_endpoint(self) -> str | None:
        """The one address the clients know when the settings ask for a balancer, else None."""
        return f"127.0.0.1:{balancer.PORT}" if getattr(getattr(self, "config", None), "balancer", None) else None

    def start_balancer(self, settings: balancer.Balancer, timeout: float = 60) -> None:
        """HAProxy in front of the brokers (their addresses read from Docker), serving once
        it takes connections."""
        if self.balancer_port is None:
            raise ClusterError(f"{self.kind}'s clients cannot go through a load balancer")
        conf = self.state_dir / "balancer" / "haproxy.cfg"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(balancer.config({n: self.address(n) for n in self.brokers()}, self.balancer_port,
                                        self.balancer_check(), settings))
        docker("rm", "-f", self.balancer_name(), check=False)
        docker(*balancer.run_args(self.project, self.network_name(), conf, balancer.IMAGE.ref(balancer.GENERATION)),
               timeout=60)

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", balancer.PORT), timeout=1):
                    return True
            except OSError:
                return False
        wait_until(answers, timeout, "the load balancer takes connections", interval=0.5)

    def collect_logs(self, run_dir: str | os.PathLike) -> None:
        super().collect_logs(run_dir)
        if self.balancer_endpoint() and self.exists(self.balancer_name()):
            out = Path(run_dir) / store.LOGS / f"{balancer.NAME}.log"
            out.write_text(self.logs(self.balancer_name()))

    # ---- an upgrade: one node on another version's image, its data volume kept ---------
    def image_override(self) -> Path:
        return self.state_dir / "image.override.yml"

    def version_reason(self, version: str) -> str | None:
        """Why a node of this cluster cannot run ``version``'s image (None: it can): a
        version the plug-in does not build (its ``Versions`` component may narrow it)."""
        if version not in self.generations:
            return f"{self.kind} has no version {version!r} (versions: {', '.join(self.generations)})"
        return None

    def pin_versions(self, versions: dict[str, str]) -> None:
        """Nodes made from another version's image than the cluster's, by every later compose
        call (an override file, gone with the cluster): an upgrade's node, or a node that
        starts on another version (a blue-green upgrade's green cluster)."""
        for version in set(versions.values()):
            reason = self.version_reason(version)
            if reason:
                raise ClusterError(reason)
        path = self.image_override()
        images = _image_overrides(path)
        images.update({n: image_ref(self.image_repo, self.generations[v]) for n, v in versions.items()})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": "2.4", "services": {
            n: {"image": ref} for n, ref in sorted(images.items())}}, indent=1))  # YAML too

    # ---- the CPU weight of a cluster started in the background -----------------------
    def cpu_override(self) -> Path:
        return self.state_dir / "cpu.override.yml"

    def set_background(self, on: bool) -> None:
        """cgroup CPU shares: the background weight gets the CPU only while the other
        containers and the harness leave it idle. Nodes created from now on get it from a
        compose override (a node recreated later, the weight of that moment); existing ones
        by docker update."""
        self.cpu_shares = CPU_SHARES_BACKGROUND if on else CPU_SHARES_NORMAL
        path = self.cpu_override()
        if on:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"version": "2.4", "services": {
                n: {"cpu_shares": self.cpu_shares} for n in self.nodes()}}, indent=1))  # YAML too
        else:
            path.unlink(missing_ok=True)
        names = list(self._inspect_all(""))
        if names:
            docker("update", "--cpu-shares", str(self.cpu_shares), *names, timeout=60)

    def cpu_weights(self) -> dict[str, int]:
        """Each existing node's CPU shares, as docker reports them (0: docker's default, 1024)."""
        return {n: int(f[0]) for n, f in self._inspect_all("{{.HostConfig.CpuShares}}").items()}


    def _compose_up(self, services: list[str] | None = None) -> None:
        self.write_fs_override(getattr(self, "config", None))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / VERSION_FILE).write_text(f"{self.generation().name}\n")
        self.compose("up", "-d", "--no-build", "--force-recreate", *(services or []), timeout=600)

    def down(self) -> None:
        """Every container, volume and the network of the project gone. No graceful shutdown:
        the cluster and its data go anyway (a graceful Kafka stop of all brokers at once takes
        ~30 s of controlled-shutdown retries). Plain docker calls: a docker-compose (v1) call
        costs about a second of start-up alone, and a fresh cluster's `up` calls this first."""
        self._addr_cache.clear()
        self.image_override().unlink(missing_ok=True)  # a new cluster starts on its own version
        listed = docker("ps", "-a", "--format", '{{.Names}}\t{{.Label "com.docker.compose.project"}}',
                        check=False).stdout.splitlines()
        nodes = set(self.nodes())
        ours = [name for name, _, project in (line.partition("\t") for line in listed)
                if name in nodes or project == self.project]
        if ours:  # SIGKILL and removal in one call
            docker("rm", "-f", "-v", *ours, check=False, timeout=300)
        volumes = set(docker("volume", "ls", "-q", check=False).stdout.split())
        gone = [v for v in (self.volume_name(n) for n in self.nodes()) if v in volumes]
        gone += [v for v in volumes if v.startswith(f"{self.project}_") and v not in gone]
        if gone:
            docker("volume", "rm", "-f", *gone, check=False, timeout=300)
        if docker("network", "ls", "-q", "--filter", f"name=^{self.network_name()}$", check=False).stdout.strip():
            docker("network", "rm", self.network_name(), check=False)
        left = docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}",
                      check=False).stdout.split()
        if left:  # whatever docker would not remove: compose's own way, as before
            self.conf_dir().mkdir(parents=True, exist_ok=True)  # compose needs the mount path to parse
            self.compose("down", "-v", "--remove-orphans", "-t", "1", timeout=600)
        self.size_override().unlink(missing_ok=True)  # a new cluster starts at its own size

    def close(self) -> None:
        """Release client resources held by this object (Kafka: kazoo, AdminClient)."""

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, volumes and networks of this project still present (for tests)."""
        def names(*args: str) -> list[str]:
            out = docker(*args, check=False).stdout or ""
            return [line for line in out.split() if line]
        label = f"label=com.docker.compose.project={self.project}"
        return {
            "containers": names("ps", "-a", "--filter", label, "--format", "{{.Names}}"),
            "volumes": names("volume", "ls", "-q", "--filter", label),
            "networks": names("network", "ls", "-q", "--filter", label),
        }


def _image_overrides(path: Path) -> dict[str, str]:
    """The nodes an earlier upgrade left on another image: node -> image."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {n: s["image"] for n, s in (data.get("services") or {}).items() if isinstance(s, dict) and s.get("image")}
