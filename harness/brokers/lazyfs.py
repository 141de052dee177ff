"""The harness's side of the power-loss file system (``fs: lazy``): the compose override
that mounts nemesis/lazyfs.py in the data nodes, and the power cut that asks it to forget.

nemesis/lazyfs.py itself runs inside the containers (stdlib + fusepy, the containers'
python3), so it is bind-mounted there as a file rather than imported; everything the
harness does with it is here; ``ComposeCluster`` calls it.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from harness.brokers.protocol import ClusterError, NodeAccess

ROOT = Path(__file__).resolve().parent.parent.parent
# The power-loss file system: a script run inside the containers, bind-mounted there.
LAZYFS_SCRIPT = ROOT / "nemesis" / "lazyfs.py"
LAZYFS_IN_NODE = "/mqchaos/lazyfs.py"


def override(data_dirs: dict[str, str], writeback_s: float | None) -> dict[str, Any]:
    """The compose override for ``data_dirs`` (node -> the data directory to serve): each
    node mounts it through nemesis/lazyfs.py, with the FUSE device and CAP_SYS_ADMIN (to
    mount), not privileged."""
    env = {"MQCHAOS_LAZYFS_WRITEBACK": str(writeback_s or "")}
    # (Docker's default AppArmor profile forbids mount even with CAP_SYS_ADMIN)
    services = {n: {"devices": ["/dev/fuse:/dev/fuse"], "cap_add": ["NET_ADMIN", "SYS_ADMIN"],
                    "security_opt": ["apparmor:unconfined"],
                    "environment": {"MQCHAOS_LAZYFS": d, **env},
                    "volumes": [f"{LAZYFS_SCRIPT}:{LAZYFS_IN_NODE}:ro"]}
                for n, d in data_dirs.items()}
    return {"version": "2.4", "services": services}


def wanted(settings: Any) -> bool:
    """Whether ``settings`` (a ``cluster:`` block, None before one) ask for ``fs: lazy``."""
    return getattr(settings, "fs", None) == "lazy"


def write_override(path: Path, data_dirs: dict[str, str], writeback_s: float | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(override(data_dirs, writeback_s), indent=1))  # YAML too


def mounted(info: dict | None) -> bool:
    """Whether a container (``docker inspect``'s answer, None: no container) runs with the
    file system: its MQCHAOS_LAZYFS names a directory."""
    return any(e.startswith("MQCHAOS_LAZYFS=") and e != "MQCHAOS_LAZYFS="
               for e in ((info or {}).get("Config") or {}).get("Env") or [])


class PowerNodes(NodeAccess, Protocol):
    """What a power cut needs of a cluster (a ``ComposeCluster`` is one): declared here, not
    imported, because compose.py builds on this module."""

    def lazy_fs(self, node: str) -> bool:
        """Whether ``node`` runs with the file system (``mounted``)."""

    def running(self, node: str) -> bool: ...

    def kill(self, node: str) -> None: ...


def power_off(cluster: PowerNodes, nodes: list[str]) -> dict[str, Any]:
    """Every node of ``nodes`` forgets its unsynced writes at once (the file systems refuse
    every change from then on), then is SIGKILLed, as at a power cut."""
    bare = [n for n in nodes if not cluster.lazy_fs(n)]
    if bare:
        raise ClusterError(f"power loss needs the cluster up with `fs: lazy`; {', '.join(bare)} "
                           "has no power-loss file system")
    down = [n for n in nodes if not cluster.running(n)]
    if down:  # a paused node's file system cannot answer; a stopped one has no power to lose
        raise ClusterError(f"power loss of {', '.join(down)}, which is not running")

    def off(node: str) -> dict[str, Any]:
        try:
            _, out = cluster.exec(node, ["python3", LAZYFS_IN_NODE, "ctl", "power-off"], timeout=60)
            return json.loads(out)["dropped"]
        finally:  # dies right after its own cut, whatever the answer
            cluster.kill(node)
    with ThreadPoolExecutor(len(nodes)) as pool:  # as close to one instant as docker exec allows
        return dict(zip(nodes, pool.map(off, nodes)))


class PowerSwitch:
    """The power-loss ability (``harness.brokers.capabilities.PowerLoss``) of a cluster whose
    nodes' data directories the lazy file system may serve (settings ``fs: lazy``)."""

    def __init__(self, cluster: PowerNodes) -> None:
        self.cluster = cluster

    def power_off(self, nodes: list[str]) -> dict[str, Any]:
        return power_off(self.cluster, nodes)
