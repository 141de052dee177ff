"""What a broker plug-in provides, as small protocols (Jepsen's db / client split), and the
Docker Compose cluster most plug-ins build on.

A plug-in is one package under ``harness/brokers/`` exposing ``PLUGIN``, a ``Broker``:

=================  =========================================================================
lifecycle          ``Cluster``: up(settings), down, wait_healthy, collect_logs, versions
node control       ``Cluster.capabilities`` + kill / stop / start / pause / unpause / wipe /
                   restart_app: the nemesis asks; a scenario needing a capability the broker
                   lacks is refused at validation
roles              ``Cluster.roles`` and ``Cluster.role(name, arg) -> nodes`` (leader, followers,
                   controller, queue_master, zk, ...): what nemesis targets resolve against
recovery           ``Cluster.wait_whole``, ``stuck_nodes``, ``wait_rejoined``
typed settings     ``Broker.settings_model``: the scenario's ``cluster:`` block
scenario model     ``Broker.scenario_model``: a ``harness.spec.BaseScenario`` subclass
clients            ``Broker.declare / producers / consumers / prefill / drain``
observation        ``Broker.sample`` (each second, during the run) and ``Broker.measure``
                   (pure, afterwards), ``measurement_names`` (what ``expect:`` may name)
probes             ``Broker.probes(run)``: extra measurements some rows need
image              ``Broker.image``: how ``mqchaos images`` builds it
=================  =========================================================================

Every node is a container named after the node (``rabbit1``, ``zk1``, ``kafka1`` ...) in a
compose project (``mqchaos-<broker>``). Addresses are read from Docker; clients reach brokers
only through ports published on 127.0.0.1.
"""
from __future__ import annotations

import abc
import difflib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.engine import compose_cmd
from harness.probes import Probes
from harness.util import StopWaiting, run, wait_until

ROOT = Path(__file__).resolve().parent.parent.parent
COMPOSE_DIR = ROOT / "compose"
STATE_DIR = Path(os.environ.get("MQCHAOS_STATE_DIR", ROOT / "build" / "clusters"))

# Node-control capabilities (what the nemesis may ask of a broker's nodes).
KILL, STOP, START, PAUSE, WIPE, RESTART_APP = "kill", "stop", "start", "pause", "wipe", "restart_app"
POWER_LOSS = "power_loss"  # the nodes' data directories can forget what was never fsynced
CONTAINER_CAPABILITIES = frozenset({KILL, STOP, START, PAUSE, WIPE, POWER_LOSS})
# The power-loss file system: a script run inside the containers, bind-mounted there.
LAZYFS_SCRIPT = ROOT / "nemesis" / "lazyfs.py"
LAZYFS_IN_NODE = "/mqchaos/lazyfs.py"
VERSION_FILE = "version"  # in a kind's state directory: the version its last up brought up


# cgroup CPU shares of a cluster's nodes: normal (docker's default), and the weight of a
# cluster a batch starts while another run's load goes on (harness.batch)
CPU_SHARES_NORMAL = 1024
CPU_SHARES_BACKGROUND = 2


class ClusterError(RuntimeError):
    """A cluster did not reach the state asked for; the message carries the nodes' logs."""


class NodeExitedError(ClusterError, StopWaiting):
    """A node that had to stay up exited while waiting (fails a health wait at once)."""


class RoleError(ValueError):
    """A role name the broker does not have, or an argument it cannot use."""


def log(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return run(["docker", *args], check=check, timeout=timeout)


@dataclass(frozen=True)
class Role:
    """A role nemesis targets may name. ``arg`` says what its argument is (None: it takes
    none); a bare role with an argument refers to the run's own queue / topic."""
    name: str
    help: str
    arg: str | None = None


# Runs a recovery step the broker needed after a heal (the callable) and records it, with
# the finding that made it necessary, in nemesis.jsonl and findings.jsonl.
Recorder = Callable[[dict, Callable[[], None]], None]
# Makes a condition hold for the nemesis's settle time in a row before it counts.
Steady = Callable[[Callable[[], Any]], Callable[[], bool]]


class Cluster(abc.ABC):
    """Lifecycle, node control, roles and recovery of one broker's cluster."""

    kind: ClassVar[str]
    capabilities: ClassVar[frozenset[str]] = CONTAINER_CAPABILITIES
    roles: ClassVar[dict[str, Role]] = {}
    # target names this topology lacks though another of the broker's has them, with why
    # (Kafka in KRaft mode: no ZooKeeper): a scenario naming one is refused at load time
    absent_targets: ClassVar[dict[str, str]] = {}
    # traffic a partition may cut alone (a step's params.ports): name -> TCP ports
    ports: ClassVar[dict[str, tuple[int, ...]]] = {}

    # ---- lifecycle ----------------------------------------------------------------------
    @abc.abstractmethod
    def up(self, settings: Any = None) -> None:
        """Bring the cluster up with ``settings`` (the plug-in's settings model); wait until healthy."""

    @abc.abstractmethod
    def down(self) -> None:
        """Remove the containers, networks and volumes."""

    @abc.abstractmethod
    def wait_healthy(self, timeout: float) -> None: ...

    @abc.abstractmethod
    def healthy(self) -> bool: ...

    @abc.abstractmethod
    def versions(self) -> dict[str, Any]:
        """What the nodes report they run ({"<broker>": version, ...}), for run.json."""

    def seen_before(self, fault: str, node: str, params: dict) -> dict | None:
        """What the plug-in reads from ``node`` before ``fault`` acts on it (recorded in the
        fault's details as evidence of the state it acted on); None: nothing to read."""
        return None

    def describe(self) -> dict[str, Any]:
        """The broker's own view of the cluster, for ``mqchaos status``."""
        return {"healthy": self.healthy()}

    @abc.abstractmethod
    def nodes(self) -> list[str]: ...

    @abc.abstractmethod
    def brokers(self) -> list[str]: ...

    @abc.abstractmethod
    def client_endpoints(self) -> dict[str, str]: ...

    def close(self) -> None:
        """Release client resources held by this object."""

    def set_background(self, on: bool) -> None:
        """Start (or keep) the nodes at a CPU weight that yields to any other run's work (a
        batch brings the next cluster up while a run's load goes on), or give them back
        the normal weight. A broker that cannot does nothing: its next cluster then starts
        at the normal weight."""

    @classmethod
    def recorded_version(cls) -> str | None:
        """The version the last ``up`` here brought up, None if unknown."""
        return None

    # ---- node control (``capabilities`` says which of these work) ------------------------
    @abc.abstractmethod
    def kill(self, node: str) -> None: ...

    @abc.abstractmethod
    def stop(self, node: str, timeout: float = 60) -> None: ...

    @abc.abstractmethod
    def start(self, node: str) -> None: ...

    @abc.abstractmethod
    def pause(self, node: str) -> None: ...

    @abc.abstractmethod
    def unpause(self, node: str) -> None: ...

    @abc.abstractmethod
    def wipe(self, node: str, start: bool = True, **options: Any) -> None: ...

    @abc.abstractmethod
    def exists(self, node: str) -> bool: ...

    @abc.abstractmethod
    def running(self, node: str) -> bool: ...

    @abc.abstractmethod
    def paused(self, node: str) -> bool: ...

    def node_states(self) -> dict[str, str]:
        """Each existing node's state: "running", "paused" or "stopped" (a heal's sweep reads
        them all at once)."""
        return {n: "paused" if self.paused(n) else "running" if self.running(n) else "stopped"
                for n in self.nodes() if self.exists(n)}

    # ---- roles --------------------------------------------------------------------------
    def role(self, name: str, arg: str | None) -> list[str]:
        """The nodes holding role ``name`` now (``arg``: the queue / topic it is about)."""
        raise RoleError(f"a {self.kind} cluster has no role {name!r}")

    # ---- recovery -----------------------------------------------------------------------
    @abc.abstractmethod
    def wait_whole(self, timeout: float, steady: Steady, record: Recorder) -> None:
        """Wait until the cluster serves again after the faults were lifted (TimeoutError)."""

    def exited(self) -> dict[str, str]:
        """Nodes that died by themselves (e.g. did not boot), each with what it died of."""
        return {}

    @abc.abstractmethod
    def stuck_nodes(self) -> list[str]:
        """Nodes that do not serve (what an operator would restart)."""

    @abc.abstractmethod
    def wait_rejoined(self, node: str, timeout: float) -> None:
        """Wait until ``node``, started again, is back in the cluster."""

    def restart_app(self, node: str) -> None:
        raise NotImplementedError(f"a {self.kind} cluster cannot restart_app")

    def power_off(self, nodes: list[str]) -> dict[str, Any]:
        """Cut the power of ``nodes`` at once: each forgets what it never fsynced and dies;
        return what each dropped."""
        raise NotImplementedError(f"a {self.kind} cluster cannot lose power")


class ComposeCluster(Cluster):
    """What both kinds share: compose project handling and per-node container operations."""

    compose_file: str          # file name in compose/
    network_key: str           # network name in the compose file
    # the image of each version: the compose file's variables (RABBITMQ_IMAGE ...) get
    # ``image_ref(image_repo, generation)`` unless the environment sets them (an official
    # image, say, which then runs whatever the version's rendering asks of it)
    image_repo: ClassVar[str] = ""
    image_vars: ClassVar[tuple[str, ...]] = ()
    generations: ClassVar[dict[str, Generation]] = {}
    data_mounts: dict[str, str]  # in-container data path, by node-name prefix
    # the data directory the power-loss file system serves (settings ``fs: lazy``), by prefix
    fs_dirs: dict[str, str] = {}

    def __init__(self, project: str | None = None) -> None:
        self.project = project or f"mqchaos-{self.kind}"
        self.state_dir = self.kind_dir()
        self._addr_cache: dict[str, str] = {}
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
        files = [COMPOSE_DIR / self.compose_file] + [p for p in [self.fs_override(), self.cpu_override()]
                                                     if p.exists()]
        cmd = [*compose_cmd(), "-p", self.project, *(a for f in files for a in ("-f", str(f))), *args]
        return run(cmd, check=check, timeout=timeout, env=self.compose_env())

    # ---- the power-loss file system -------------------------------------------------
    def fs_override(self) -> Path:
        return self.state_dir / "lazyfs.override.yml"

    def fs_dir(self, node: str) -> str | None:
        return next((d for prefix, d in self.fs_dirs.items() if node.startswith(prefix)), None)

    def write_fs_override(self, settings: Any) -> None:
        """``fs: lazy``: the data nodes mount their data directory through nemesis/lazyfs.py,
        with the FUSE device and CAP_SYS_ADMIN (to mount), not privileged."""
        path = self.fs_override()
        if getattr(settings, "fs", None) != "lazy":
            path.unlink(missing_ok=True)
            return
        env = {"MQCHAOS_LAZYFS_WRITEBACK": str(settings.fs_writeback_s or "")}
        # (Docker's default AppArmor profile forbids mount even with CAP_SYS_ADMIN)
        services = {n: {"devices": ["/dev/fuse:/dev/fuse"], "cap_add": ["NET_ADMIN", "SYS_ADMIN"],
                        "security_opt": ["apparmor:unconfined"],
                        "environment": {"MQCHAOS_LAZYFS": self.fs_dir(n), **env},
                        "volumes": [f"{LAZYFS_SCRIPT}:{LAZYFS_IN_NODE}:ro"]}
                    for n in self.nodes() if self.fs_dir(n)}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"version": "2.4", "services": services}, indent=1))  # YAML too

    def lazy_fs(self, node: str) -> bool:
        info = self._inspect(node) or {}
        return any(e.startswith("MQCHAOS_LAZYFS=") and e != "MQCHAOS_LAZYFS="
                   for e in (info.get("Config") or {}).get("Env") or [])

    def power_off(self, nodes: list[str]) -> dict[str, Any]:
        """Every node of ``nodes`` forgets its unsynced writes at once (the file systems refuse
        every change from then on), then is SIGKILLed, as at a power cut."""
        bare = [n for n in nodes if not self.lazy_fs(n)]
        if bare:
            raise ClusterError(f"power loss needs the cluster up with `fs: lazy`; {', '.join(bare)} "
                               "has no power-loss file system")
        down = [n for n in nodes if not self.running(n)]
        if down:  # a paused node's file system cannot answer; a stopped one has no power to lose
            raise ClusterError(f"power loss of {', '.join(down)}, which is not running")

        def off(node: str) -> dict[str, Any]:
            try:
                _, out = self.exec(node, ["python3", LAZYFS_IN_NODE, "ctl", "power-off"], timeout=60)
                return json.loads(out)["dropped"]
            finally:  # dies right after its own cut, whatever the answer
                self.kill(node)
        with ThreadPoolExecutor(len(nodes)) as pool:  # as close to one instant as docker exec allows
            return dict(zip(nodes, pool.map(off, nodes)))

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

    def network_name(self) -> str:
        return f"{self.project}_{self.network_key}"

    def volume_name(self, node: str) -> str:
        return f"{self.project}_{node}-data"

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

    # ---- containers -----------------------------------------------------------------
    def _inspect(self, node: str) -> dict | None:
        proc = docker("inspect", node, check=False, timeout=30)
        if proc.returncode != 0:
            return None
        return json.loads(proc.stdout)[0]

    def state(self, node: str) -> dict:
        info = self._inspect(node)
        return info["State"] if info else {}

    def running(self, node: str) -> bool:
        st = self.state(node)
        return bool(st.get("Running")) and not st.get("Paused")

    def _inspect_all(self, fmt: str) -> dict[str, list[str]]:
        """``fmt``'s fields for every existing node, in one docker inspect (a node that does
        not exist is left out)."""
        proc = docker("inspect", "--format", "{{.Name}} " + fmt, *self.nodes(), check=False, timeout=30)
        got = {name.lstrip("/"): rest for name, *rest in (line.split() for line in proc.stdout.splitlines() if line)}
        return {n: got[n] for n in self.nodes() if n in got}

    def node_states(self) -> dict[str, str]:
        return {n: "paused" if f[0] == "true" else "running" if f[1] == "true" else "stopped"
                for n, f in self._inspect_all("{{.State.Paused}} {{.State.Running}}").items()}

    def paused(self, node: str) -> bool:
        return bool(self.state(node).get("Paused"))

    def exists(self, node: str) -> bool:
        return self._inspect(node) is not None

    def address(self, node: str) -> str:
        info = self._inspect(node)
        if info:
            net = info["NetworkSettings"]["Networks"].get(self.network_name()) or {}
            addr = net.get("IPAddress") or (net.get("IPAMConfig") or {}).get("IPv4Address")
            if addr:
                self._addr_cache[node] = addr
                return addr
        if node in self._addr_cache:
            return self._addr_cache[node]
        raise ClusterError(f"{node} has no address on {self.network_name()} (is the cluster up?)")

    def addresses(self) -> dict[str, str]:
        return {n: self.address(n) for n in self.nodes()}

    def gateway(self) -> str:
        out = docker("network", "inspect", self.network_name(), "--format",
                     "{{range .IPAM.Config}}{{.Gateway}} {{end}}").stdout.split()
        if not out:
            raise ClusterError(f"network {self.network_name()} has no gateway")
        return out[0]

    def subnet(self) -> str:
        return docker("network", "inspect", self.network_name(), "--format",
                      "{{range .IPAM.Config}}{{.Subnet}} {{end}}").stdout.split()[0]

    def exec(self, node: str, cmd: list[str], check: bool = True, timeout: float = 60,
             user: str | None = None) -> tuple[int, str]:
        args = ["docker", "exec"] + (["-u", user] if user else []) + [node, *cmd]
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"exec on {node} timed out after {timeout}s: {shlex.join(cmd)}") from exc
        out = (proc.stdout or "") + (proc.stderr or "")
        if check and proc.returncode != 0:
            raise ClusterError(f"exec on {node} failed ({proc.returncode}): {shlex.join(cmd)}\n{out[-3000:]}")
        return proc.returncode, out

    # ---- node control -----------------------------------------------------------------
    def kill(self, node: str) -> None:
        """SIGKILL the node's main process (the container stays, stopped). Works on a paused
        (frozen) node too, without letting it run first."""
        if self.state(node).get("Running"):
            docker("kill", "-s", "KILL", node)
        wait_until(lambda: not self.state(node).get("Running"), 30, f"{node} to die after SIGKILL", 0.2)

    def stop(self, node: str, timeout: float = 60) -> None:
        """Graceful stop: SIGTERM, then SIGKILL after ``timeout`` seconds."""
        if self.paused(node):
            docker("unpause", node, check=False)
        docker("stop", "-t", str(int(timeout)), node, timeout=timeout + 60)

    def start(self, node: str) -> None:
        if self.paused(node):
            docker("unpause", node)
        elif not self.state(node).get("Running"):
            docker("start", node)

    def pause(self, node: str) -> None:
        if not self.paused(node):
            docker("pause", node)

    def unpause(self, node: str) -> None:
        if self.paused(node):
            docker("unpause", node)

    def exited(self) -> dict[str, str]:
        """Nodes whose container has exited (nothing of the harness's holds them down), each
        with the last lines it logged: what it died of."""
        out = {}
        for node in self.nodes():
            st = self.state(node)
            if st and st.get("Status") == "exited":
                # docker's timestamp prefix dropped: the broker's own line is the evidence
                tail = [line.split(" ", 1)[-1] for line in self.logs(node, tail=60).splitlines() if line.strip()]
                hint = [line for line in tail if "BOOT FAILED" in line or "rror" in line or "xception" in line]
                out[node] = f"exit {st.get('ExitCode')}: " + " | ".join((hint or tail)[-4:])[-800:]
        return out

    def exit_code(self, node: str) -> int | None:
        st = self.state(node)
        return None if st.get("Running") else st.get("ExitCode")

    def erase_data(self, node: str) -> None:
        """Delete everything in the node's data volume (the node must not be running)."""
        if self.state(node).get("Running"):
            raise ClusterError(f"cannot erase the data of running node {node}")
        image = self._inspect(node)["Config"]["Image"]  # type: ignore[index]
        mount = self.data_mount(node)
        docker("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh",
               "-v", f"{self.volume_name(node)}:{mount}", image, "-c",
               f"find {mount} -mindepth 1 -delete", timeout=120)

    def data_mount(self, node: str) -> str:
        for prefix, path in self.data_mounts.items():
            if node.startswith(prefix):
                return path
        raise KeyError(node)

    def wipe(self, node: str, start: bool = True, **options: Any) -> None:
        """Lose the node's data: SIGKILL it, erase its data volume, start it again (if ``start``).
        ``options`` are the fault's params (a plug-in may read its own)."""
        self.kill(node)
        self.erase_data(node)
        if start:
            self.start(node)

    def logs(self, node: str, tail: int | None = None, since: str | None = None) -> str:
        """The node's container log (``since``: a docker timestamp, e.g. its last start)."""
        args = (["logs", "--timestamps"] + (["--tail", str(tail)] if tail else [])
                + (["--since", since] if since else []) + [node])
        proc = docker(*args, check=False, timeout=120)
        return (proc.stdout or "") + (proc.stderr or "")

    def collect_logs(self, run_dir: str | os.PathLike) -> None:
        out = Path(run_dir) / "logs"
        out.mkdir(parents=True, exist_ok=True)
        for node in self.nodes():
            (out / f"{node}.log").write_text(self.logs(node) if self.exists(node) else "(no container)\n")

    def logs_tail(self, lines: int = 40) -> str:
        parts = []
        for node in self.nodes():
            st = self.state(node)
            parts.append(f"--- {node} (running={st.get('Running')}, exit={st.get('ExitCode')}) ---\n"
                         + self.logs(node, tail=lines))
        return "\n".join(parts)

    def _wait_healthy_or_explain(self, cond, timeout: float, what: str,
                                 must_run: list[str] | None = None) -> None:
        """Wait for ``cond``; fail at once (with logs) if a node of ``must_run`` exits."""
        t0 = time.monotonic()

        def check():
            for node in must_run or []:
                st = self.state(node)
                if st and not st.get("Running"):
                    raise NodeExitedError(f"{self.kind} node {node} exited (code {st.get('ExitCode')}) "
                                       f"while waiting for {what}\n{self.logs_tail()}")
            return cond()
        try:
            wait_until(check, timeout, what, interval=1.0, reraise=(NodeExitedError,))
        except TimeoutError as exc:
            raise ClusterError(f"{self.kind} cluster not healthy: {exc}\n{self.logs_tail()}") from None
        log(f"{self.kind}: {what} after {time.monotonic() - t0:.1f}s")

    def status(self) -> dict[str, str]:
        res = {}
        for node in self.nodes():
            st = self.state(node)
            res[node] = st.get("Status", "absent") if st else "absent"
        return res


# ---- the plug-in ------------------------------------------------------------------------------

# ---- the broker's own configuration names -------------------------------------------------
# Each plug-in ships config-keys.json: the names its broker accepts, dumped from the broker
# itself when its image is built (Broker.dump_config_keys; a test compares the two), so a
# typo is refused before a run rather than silently ignored by the broker.

@cache
def config_keys(path: str, kind: str) -> tuple[str, ...]:
    return tuple(json.loads(Path(path).read_text())[kind])


@cache
def _key_pattern(path: str, kind: str) -> re.Pattern:
    """Names with placeholders (RabbitMQ's schema: ``...nodes.$name``) match any segment."""
    alts = [re.sub(r"\\\$[A-Za-z_]+", "[^.]+", re.escape(k)) for k in config_keys(path, kind)]
    return re.compile("^(?:" + "|".join(alts) + ")$")


def known_key(path: str, kind: str, key: str) -> bool:
    return bool(_key_pattern(path, kind).match(key))


def closest(key: str, names: list[str] | tuple[str, ...]) -> str:
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


def raw_text(value: Any) -> str:
    """A raw configuration line's value as the broker spells it: YAML's true / false are
    written lower-case (cuttlefish's enum [true, false] refuses "True")."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def is_boolean(value: Any) -> bool:
    """A boolean as the brokers' own parsers take one: true / false (any case, as text)."""
    return isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false"))


class Settings(BaseModel):
    """A broker's ``cluster:`` block: typed fields (or the broker's own names for them, in
    ``aliases``); any other key must be one of the broker's own configuration names
    (``keys_file``) and goes to ``extra``, rendered as a raw line; a deliberate raw line
    the broker does not list goes under ``extra:`` explicitly."""
    model_config = ConfigDict(extra="forbid")
    aliases: ClassVar[dict[str, str]] = {}
    keys_file: ClassVar[Path | None] = None    # the plug-in's config-keys.json
    broker: ClassVar[str] = ""

    extra: dict[str, str] = Field(default_factory=dict)
    healthy_timeout: float = 120.0
    # The broker's version (a name of ``Broker.generations``): set by the harness from
    # --version, the scenario's ``version:`` or the environment (``choose_version``), never
    # written in a ``cluster:`` block; it picks the image and what the rendering leaves out.
    version: str | None = Field(None, exclude=True)  # recorded as the scenario's version
    # "lazy": the data directories forget what was never fsynced at a power loss
    # (nemesis/lazyfs.py); a scenario with a power_loss fault gets it unless it says "plain"
    fs: Literal["plain", "lazy"] | None = None
    # with fs: lazy, unsynced writes this old count as written back (the kernel's periodic
    # writeback, 30 s on Linux); None: never (the worst case, LazyFS's model)
    fs_writeback_s: float | None = Field(None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _raw_keys_to_extra(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        names = set(cls.model_fields) - {"extra"}
        known: dict[str, Any] = {}
        extra = {k: raw_text(v) for k, v in (data.get("extra") or {}).items()}
        unknown = []
        for k, v in data.items():
            key = cls.aliases.get(k, k.replace("-", "_"))
            if k == "extra":
                continue
            if key in names:
                if cls.model_fields[key].annotation is bool and not is_boolean(v):
                    # pydantic would read yes / on / 1 as true; the broker itself takes only
                    # true or false, so anything else is a mistake, not a spelling
                    unknown.append(f"{k!r}: {v!r} is not a boolean (true or false)")
                known[key] = v
            elif cls.keys_file is None or known_key(str(cls.keys_file), "broker", k):
                extra[k] = raw_text(v)
            else:
                choices = sorted(names | set(cls.aliases)) + list(config_keys(str(cls.keys_file), "broker"))
                unknown.append(f"{k!r} is neither a setting of the harness nor a {cls.broker} "
                               f"configuration name{closest(k, choices)}; a deliberate raw line goes under extra:")
        if unknown:
            raise ValueError("; ".join(unknown))
        return {**known, "extra": extra}

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> "Settings":
        return cls.model_validate(settings)


# ---- generations: the versions of a broker the harness runs -------------------------------

@dataclass(frozen=True)
class Generation:
    """One version of a broker: the Debian suite its image is built on, the Dockerfile's
    build arguments (pinned packages, jars), and what it cannot do that the plug-in would
    otherwise ask of it (``lacks``: node-control capabilities and the plug-in's own feature
    names, e.g. RabbitMQ 4.0's ``mirrored_queues``)."""
    name: str                                     # "3.10", "4.0", "3.9-kraft" ...
    suite: str = "bookworm"                       # the base image: debian:<suite>-slim
    build_args: tuple[tuple[str, str], ...] = ()  # Dockerfile ARGs
    lacks: frozenset[str] = frozenset()
    default: bool = False                         # today's image: <repo>:<hash> and <repo>:latest
    # the tag of the image it runs when another generation's (Kafka 3.9 in KRaft mode runs
    # 3.9's image: ""); None: its own, tagged by its name
    tag: str | None = None

    def has(self, feature: str) -> bool:
        return feature not in self.lacks

    def stem(self) -> str:
        """The image's tag stem: "" for today's image (<repo>:<hash>, <repo>:latest)."""
        return "" if self.default else self.name if self.tag is None else self.tag

    def args(self) -> dict[str, str]:
        return dict(self.build_args)


VERSION_SOURCES = ("cli", "scenario", "env", "default")
VERSION_LABEL = "mqchaos.version"  # on the images ``mqchaos images`` builds: the generation


def named_generation(generations: dict[str, Generation], version: str | None) -> Generation:
    """The generation named ``version`` among a plug-in's (None: its default one)."""
    if version is None:
        return next(g for g in generations.values() if g.default)
    return generations[version]


def version_env(broker: str) -> str:
    """The environment variable that picks ``broker``'s version (MQCHAOS_RABBITMQ_VERSION)."""
    return f"MQCHAOS_{broker.upper()}_VERSION"


def choose_version(broker: str, generations: dict[str, Generation], cli: Any = None, scenario: Any = None,
                   env: dict[str, str] | None = None) -> tuple[str, str]:
    """The one rule for a broker's version: ``--version`` over the scenario's ``version:``
    over $MQCHAOS_<BROKER>_VERSION over the default generation. Returns (version, where it
    came from); ValueError naming the source and the versions there are."""
    env = os.environ if env is None else env
    default = next(g.name for g in generations.values() if g.default)
    for source, value in (("cli", cli), ("scenario", scenario), ("env", env.get(version_env(broker)) or None)):
        if value is None:
            continue
        text = version_text(value)
        if text not in generations:
            where = {"cli": "--version", "scenario": "version", "env": version_env(broker)}[source]
            hint = (f"; quote it (version: \"{_quoted_hint(value, generations)}\")"
                    if not isinstance(value, str) and _quoted_hint(value, generations) else "")
            raise ValueError(f"{where}: {value!r} is not a {broker} version the harness runs "
                             f"(one of {', '.join(generations)}){hint}")
        return text, source
    return default, "default"


def version_text(value: Any) -> str:
    """A version as its text (YAML reads ``version: 4.0`` as a number)."""
    return value if isinstance(value, str) else str(value)


def _quoted_hint(value: Any, generations: dict[str, Generation]) -> str | None:
    """The version a number meant: YAML turns 3.10 into 3.1."""
    if isinstance(value, float):
        for name in generations:
            try:
                if float(name) == value:
                    return name
            except ValueError:
                continue
    return None


@dataclass(frozen=True)
class ImageSpec:
    """How ``mqchaos images`` builds a broker's image from compose/<context>/ (once per
    generation, with the generation's build arguments)."""
    repo: str                                   # e.g. mqchaos/rabbitmq
    context: str                                # directory under compose/
    inputs: tuple[str, ...] = ("Dockerfile",)   # files whose content makes the image's tag
    tools: tuple[tuple[str, str], ...] = ()     # (command, Debian package) the preparation needs
    # fills the build context (e.g. jars) for a generation
    prepare: Callable[[Path, Generation], None] | None = None

    def ref(self, generation: Generation, digest: str | None = None) -> str:
        return image_ref(self.repo, generation, digest)


def image_ref(repo: str, generation: Generation, digest: str | None = None) -> str:
    """A generation's image: today's tags (``<repo>:<hash>``, ``<repo>:latest``) for the
    default one, ``<repo>:<version>-<hash>`` and ``<repo>:<version>`` for the others."""
    stem = generation.stem()
    if not stem:
        return f"{repo}:{digest or 'latest'}"
    return f"{repo}:{stem}-{digest}" if digest else f"{repo}:{stem}"


class Broker(abc.ABC):
    """One broker plug-in: its models, its cluster, its clients, its observation."""

    name: ClassVar[str]
    scenario_model: ClassVar[type]          # a harness.spec.BaseScenario subclass
    settings_model: ClassVar[type]          # the ``cluster:`` block
    image: ClassVar[ImageSpec]
    # the versions it runs, by name (one of them ``default``)
    generations: ClassVar[dict[str, Generation]] = {"default": Generation("default", default=True)}

    def generation(self, version: str | None = None) -> Generation:
        """The generation named ``version`` (None: the default one)."""
        if version is not None and version not in self.generations:
            raise ValueError(f"{version!r} is not a {self.name} version (one of {', '.join(self.generations)})")
        return named_generation(self.generations, version)

    def version(self, cli: Any = None, scenario: Any = None, env: dict[str, str] | None = None) -> tuple[str, str]:
        """The version to run and where it came from (``choose_version``: the one rule)."""
        return choose_version(self.name, self.generations, cli, scenario, env)

    def capabilities_of(self, version: str | None = None) -> frozenset[str]:
        """What the nodes of this version can do (a generation may lack one: no FUSE)."""
        return self.capabilities - self.generation(version).lacks

    @abc.abstractmethod
    def cluster(self, project: str | None = None, version: str | None = None) -> Cluster:
        """The cluster of ``version`` (None: the default one); its topology may depend on it."""

    def dump_config_keys(self, image_ref: str) -> dict[str, Any]:
        """The configuration names the broker in ``image_ref`` accepts ({"version": ...,
        "broker": [...], ...}), read from the broker itself: what config-keys.json holds."""
        return {}

    @property
    def capabilities(self) -> frozenset[str]:
        return self.cluster_class().capabilities

    @abc.abstractmethod
    def cluster_class(self) -> type[Cluster]: ...

    def settings(self, values: dict[str, Any]) -> Any:
        """The settings model from ``key: value`` pairs (a scenario's ``cluster:``, ``--set``)."""
        return self.settings_model.model_validate(values)

    # ---- clients (Jepsen's client) ------------------------------------------------------
    @abc.abstractmethod
    def declare(self, run: Any) -> None:
        """Create what the clients use (queue, topic, policies)."""

    @abc.abstractmethod
    def producers(self, run: Any) -> list: ...

    @abc.abstractmethod
    def consumers(self, run: Any) -> list:
        """Consumers that run during the load ([] if the broker is read in the drain only)."""

    def prefill(self, run: Any) -> dict:
        """Publish ``workload.prefill`` messages before the load; what it took."""
        return {}

    @abc.abstractmethod
    def drain(self, run: Any) -> dict:
        """Consume until empty and idle: {"complete": bool, "seconds": ..., ...}."""

    # ---- observation ----------------------------------------------------------------------
    @abc.abstractmethod
    def sample(self, cluster: Cluster, sc: Any) -> dict:
        """One observation of the broker's state (leader, ISR, master, ...), each second."""

    @abc.abstractmethod
    def measure(self, sc: Any, samples: list[dict], logs: dict[str, str], produce: list[dict],
                consume: list[dict], fault_start: float | None) -> dict:
        """Measurements from the run's artefacts (pure: a run can be re-measured offline)."""

    def probes(self, run: Any) -> Probes:
        """The scenario's probes (hooks setup / before_faults / after_heal, .measurements)."""
        return Probes(run)
