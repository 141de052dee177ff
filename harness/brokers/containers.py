"""A cluster whose nodes are Docker containers named after the nodes (``rabbit1``, ``zk1``,
``kafka1`` ...): node access (Jepsen's control/docker ``DockerRemote``) and node control by
plain ``docker`` calls, and the nodes' logs.

What makes the containers (a compose project, its network and volumes) is
``harness.brokers.compose``; this class only needs their names, the network they sit on
(``network_name``) and the volume holding each node's data (``volume_name``).
"""
from __future__ import annotations

import abc

import json
import logging
import os
import shlex
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import store
from harness.brokers.protocol import Cluster, ClusterError, NodeExitedError
from harness.util import run, wait_until


log = logging.getLogger(__name__)


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return run(["docker", *args], check=check, timeout=timeout)


class NodeGate:
    """Keeps a ``docker exec`` from starting into a container while it is being frozen. An
    exec's ``runc init`` that joins the cgroup as the freezer takes it stays frozen in D state
    holding the container's lock: every later docker call on that node hangs (seen: a
    pause_kill's pause racing the observer's quorum-state read stalled an hour-long run). A
    pause waits for the execs already running there (at most ``drain_s``); an exec asked for
    meanwhile is refused at once (a paused node runs no exec anyway)."""

    def __init__(self, drain_s: float = 15.0) -> None:
        self.drain_s = drain_s
        self._cond = threading.Condition()
        self._running: dict[str, int] = {}
        self._freezing: set[str] = set()

    @contextmanager
    def exec_into(self, node: str):
        with self._cond:
            if node in self._freezing:
                raise ClusterError(f"exec on {node} refused: it is being paused")
            self._running[node] = self._running.get(node, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._running[node] -= 1
                self._cond.notify_all()

    @contextmanager
    def freezing(self, node: str):
        with self._cond:
            self._freezing.add(node)
            drained = self._cond.wait_for(lambda: not self._running.get(node), self.drain_s)
        if not drained:
            log.warning("pausing %s with an exec still running in it (waited %.0f s)", node, self.drain_s)
        try:
            yield
        finally:
            with self._cond:
                self._freezing.discard(node)


GATE = NodeGate()  # one per process: every cluster object of the run execs and pauses through it


class ContainerCluster(Cluster):
    """Node access and control of a cluster whose nodes are containers of one Docker network
    (``network_key`` in project ``project``), each node's data in its own volume."""

    network_key: str             # network name in the compose file
    data_mounts: dict[str, str]  # in-container data path, by node-name prefix

    def __init__(self, project: str) -> None:
        self.project = project
        # each node's last address: a stopped container has none on the network, yet the
        # rules naming it (a partition's, a heal's) still need the one it had
        self._addr_cache: dict[str, str] = {}

    def network_name(self) -> str:
        return f"{self.project}_{self.network_key}"

    def forget_address(self, node: str) -> None:
        """Drop ``node``'s remembered address (its container made again has another)."""
        self._addr_cache.pop(node, None)

    def volume_name(self, node: str) -> str:
        return f"{self.project}_{node}-data"

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
            with GATE.exec_into(node):
                proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"exec on {node} timed out after {timeout}s: {shlex.join(cmd)}") from exc
        out = (proc.stdout or "") + (proc.stderr or "")
        if check and proc.returncode != 0:
            raise ClusterError(f"exec on {node} failed ({proc.returncode}): {shlex.join(cmd)}\n{out[-3000:]}")
        return proc.returncode, out

    def archive(self, node: str, directory: str, pattern: str = "*", timeout: float = 120) -> bytes:
        """A tar of ``directory``'s entries matching the shell ``pattern`` on a running
        ``node``, as the node sees them (its own mounts): bytes, through docker exec."""
        args = ["docker", "exec", node, "sh", "-c", 'cd "$1" && exec tar -cf - $2', "sh", directory, pattern]
        try:
            proc = subprocess.run(args, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"archive of {directory} on {node} timed out after {timeout}s") from exc
        if proc.returncode != 0:
            raise ClusterError(f"archive of {directory} on {node} failed ({proc.returncode}): "
                               f"{proc.stderr.decode(errors='replace')[-1000:]}")
        return proc.stdout

    # ---- storage: a file on a node, changed in place (running) or through a copy (stopped) --
    def newest_files(self, node: str, directory: str, path_glob: str, name_glob: str,
                     per_dir: bool = True) -> list[tuple[str, int]]:
        """(path, size) of the newest file (by name: brokers number their segments and logs
        with zero-padded counters) matching the globs under ``directory`` on a running
        node: in each directory that holds some (``per_dir``), or over all."""
        _, out = self.exec(node, ["find", directory, "-path", path_glob, "-name", name_glob, "-type", "f",
                                  "-printf", "%h\t%f\t%s\n"], timeout=60)
        newest: dict[str, tuple[str, int]] = {}
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) != 3 or not parts[2].isdigit():
                continue
            d, name, size = parts
            key = d if per_dir else ""
            if key not in newest or name > newest[key][0].rsplit("/", 1)[1]:
                newest[key] = (f"{d}/{name}", int(size))
        return sorted(newest.values())

    def file_bytes(self, node: str, path: str, positions: list[int]) -> dict[int, int]:
        if not self.running(node):
            with self._copied(node, path) as local:
                data = local.read_bytes()
                return {p: data[p] for p in positions if p < len(data)}
        script = ('f="$1"; shift; for p in "$@"; do printf "%s:" "$p"; '
                  'dd if="$f" bs=1 skip="$p" count=1 2>/dev/null | od -An -tu1 | tr -d " \\n"; echo; done')
        _, out = self.exec(node, ["sh", "-c", script, "sh", path, *map(str, positions)], timeout=60)
        got = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        return {p: int(got[str(p)]) for p in positions if got.get(str(p), "").isdigit()}

    def patch_file(self, node: str, path: str, changes: dict[int, int] | None = None,
                   size: int | None = None) -> None:
        if not self.running(node):
            with self._copied(node, path) as local:
                data = bytearray(local.read_bytes())
                for p, b in (changes or {}).items():
                    data[p] = b
                local.write_bytes(bytes(data[:size] if size is not None else data))
                docker("cp", "-a", str(local), f"{node}:{path}")
            return
        if size is not None:
            self.exec(node, ["truncate", "-s", str(size), path], timeout=60)
        for p, b in (changes or {}).items():  # in place: the broker's open file sees it
            self.exec(node, ["sh", "-c", f"printf '\\{b:03o}' | dd of=\"$1\" bs=1 seek={p} count=1 conv=notrunc "
                                         "2>/dev/null", "sh", path], timeout=60)

    @contextmanager
    def _copied(self, node: str, path: str):
        """A stopped node's file, copied out (owner and mode kept) for the time of the block."""
        with tempfile.TemporaryDirectory(prefix="mqchaos-file-") as tmp:
            docker("cp", "-a", f"{node}:{path}", tmp)
            yield Path(tmp) / Path(path).name

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

    def pause(self, node: str, tries: int = 3) -> None:
        """docker pause, tried again when the freezer gives up (runc's "unable to freeze": a
        task of the container in uninterruptible I/O under load; runc thaws it back, so the
        container runs and a second try is safe)."""
        for attempt in range(1, tries + 1):
            if self.paused(node):
                return
            with GATE.freezing(node):
                done = docker("pause", node, check=False)
            if done.returncode == 0:
                return
            if "unable to freeze" not in (done.stderr or "") or attempt == tries:
                raise ClusterError(f"docker pause {node} failed: {(done.stderr or '').strip()[-300:]}")
            log.warning("pause %s: the freezer gave up (try %d of %d); again once it runs", node, attempt, tries)
            wait_until(lambda: self.running(node) and not self.paused(node), 30, f"{node} thawed after a failed pause")

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
        out = Path(run_dir) / store.LOGS
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
        log.info("%s: %s after %.1fs", self.kind, what, time.monotonic() - t0)

    def status(self) -> dict[str, str]:
        res = {}
        for node in self.nodes():
            st = self.state(node)
            res[node] = st.get("Status", "absent") if st else "absent"
        return res


class NodeFiles(abc.ABC):
    """The data-files ability (``harness.brokers.capabilities.DataFiles``) of a cluster of
    containers, its generic part: reading and changing a file on a node. The plug-in's
    subclass names its kinds and finds its newest files (``ContainerCluster.newest_files``)."""

    def __init__(self, cluster: ContainerCluster) -> None:
        self.cluster = cluster

    @abc.abstractmethod
    def kinds(self) -> dict[str, str]: ...

    @abc.abstractmethod
    def data_files(self, node: str, kind: str, subject: str | None) -> list[tuple[str, int]]: ...

    def file_bytes(self, node: str, path: str, positions: list[int]) -> dict[int, int]:
        return self.cluster.file_bytes(node, path, positions)

    def patch_file(self, node: str, path: str, changes: dict[int, int] | None = None,
                   size: int | None = None) -> None:
        self.cluster.patch_file(node, path, changes, size)
