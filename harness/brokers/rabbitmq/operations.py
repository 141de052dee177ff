"""RabbitMQ's operator operations, each an optional ability of its cluster
(``harness.brokers.capabilities``): a component built from the ``RabbitCluster`` and listed in
its ``components``; the nemesis asks ``ability(cluster, Protocol)`` for it.

- ``RabbitMembership``: a quorum queue's / stream's members (rabbitmq-queues add_member /
  delete_member; issue 39)
- ``RabbitVersions``: what a node reports of its version (the image swap is compose's)
- ``RabbitFeatures``: the feature flags, enabled as the upgrade guide asks
- ``RabbitSync``: a mirrored queue's synchronisation, started and cancelled
- ``RabbitPlacement``: a mirrored queue's replicas moved by a policy above the run's own
- ``RabbitFiles``: the data files a ``corrupt`` step names
- ``RabbitRestartApp``: rabbitmqctl stop_app / start_app
"""
from __future__ import annotations

import re
import urllib.parse
from typing import Any

from harness.brokers.compose import ImageVersions
from harness.brokers.containers import NodeFiles
from harness.brokers.protocol import ClusterError
from harness.brokers.rabbitmq import ctl, mgmt, queues
from harness.brokers.rabbitmq.nodes import erlang_node

# a component's cluster is a RabbitCluster, not imported here: the cluster module imports this one
RabbitCluster = Any


def running_node(cluster: RabbitCluster, what: str) -> str:
    """The first node that runs, to ask it ``what`` (ClusterError: none runs)."""
    node = next((n for n in cluster.brokers() if cluster.running(n)), None)
    if node is None:
        raise ClusterError(f"no node runs to {what}")
    return node


class _Part:
    """A component of one ``RabbitCluster``."""

    def __init__(self, cluster: RabbitCluster) -> None:
        self.cluster = cluster


class RabbitMembership(_Part):
    """``Membership``: the run's quorum queue's / stream's members."""

    def members(self, subject: str) -> list[str]:
        return queues.members_of(self.cluster.queue(subject) or {})["members"]

    def change_member(self, op: str, node: str, subject: str) -> None:
        """rabbitmq-queues add_member / delete_member, run on a running node other than
        ``node`` (the member removed may be down)."""
        c = self.cluster
        verb = {"add": "add_member", "remove": "delete_member"}[op]
        at = next((n for n in c.brokers() if n != node and c.running(n)), node)
        c.exec(at, ["rabbitmq-queues", verb, subject, erlang_node(node)], timeout=120)


class RabbitVersions(ImageVersions):
    """``Versions``: a node's container made again from another version's image (compose's
    part), and the version the node itself reports (rabbitmqctl version)."""

    def node_version(self, node: str) -> str | None:
        return ctl.server_version(self.cluster, node) if self.cluster.running(node) else None


class RabbitFeatures(_Part):
    """``Features``: the feature flags (issue 39's ``finalize``)."""

    def features(self) -> dict[str, str]:
        """Each feature flag's state, as a running node lists them."""
        node = running_node(self.cluster, "list the flags")
        return {f["name"]: str(f.get("state")) for f in ctl.feature_flags(self.cluster, node)}

    def finalize_features(self, params: dict) -> dict[str, str]:
        """``rabbitmqctl enable_feature_flag all``, what the upgrade guide asks after a rolling
        upgrade: every stable flag must then be enabled."""
        c = self.cluster
        node = running_node(c, "enable the feature flags")
        stable = [f["name"] for f in ctl.feature_flags(c, node) if f.get("stability") in ("stable", "required")]
        c.rabbitmqctl(node, "enable_feature_flag", "all", timeout=float(params.get("timeout", 120)))
        return {name: "enabled" for name in stable}


class RabbitSync(_Part):
    """``Sync``: a classic mirrored queue's synchronisation, started and cancelled."""

    def sync_subject(self, op: str, subject: str) -> None:
        """The management API's queue action (``sync`` / ``cancel_sync``): asynchronous, as
        ``rabbitmqctl sync_queue`` is not (it waits for the end)."""
        path = f"queues/%2F/{urllib.parse.quote(subject, safe='')}/actions"
        node = running_node(self.cluster, f"{op} {subject}")
        resp = self.cluster.http(node, "POST", path, json={"action": {"sync": "sync", "cancel": "cancel_sync"}[op]})
        if resp.status_code not in (200, 201, 204):
            raise ClusterError(f"{op} {subject} through {node}: HTTP {resp.status_code} {resp.text[:200]}")

    def sync_state(self, subject: str) -> dict[str, Any]:
        q = self.cluster.queue(subject) or {}
        m = queues.mirrors_of(q)
        state = str(q.get("state"))
        return {"syncing": "sync" in state, "state": state,
                "unsynchronised": sorted(set(m["mirrors"]) - set(m["synchronised"]))}


class RabbitPlacement(_Part):
    """``Placement``: the operator's move (seed 000's "trick", seed 001's "nodes" policy): a
    policy above the run's own (priority 0), ha-mode nodes on the chosen nodes, synchronised
    automatically."""
    POLICY, PRIORITY = "mqchaos-place", 10

    def place_subject(self, subject: str, nodes: list[str] | None) -> None:
        if nodes is None:
            mgmt.delete_policy(self.cluster, self.POLICY)
            return
        self.cluster.set_policy(self.POLICY, f"^{re.escape(subject)}$",
                                {"ha-mode": "nodes", "ha-params": [erlang_node(n) for n in nodes],
                                 "ha-sync-mode": "automatic"}, priority=self.PRIORITY)

    def placement(self, subject: str) -> dict[str, Any]:
        q = self.cluster.queue(subject) or {}
        m = queues.mirrors_of(q)
        return {"placed": q.get("policy") == self.POLICY, "master": m["master"],
                "replicas": sorted({m["master"], *m["mirrors"]} - {None})}


class RabbitFiles(NodeFiles):
    """``DataFiles``: the files under the mnesia base (RABBITMQ_MNESIA_BASE) a ``corrupt``
    step may name."""
    KINDS = {"wal": "the quorum queues' newest Ra write-ahead log file",
             "segment": "each quorum queue member's newest Ra segment file",
             "stream": "each stream's newest segment file",
             "khepri": "the metadata store's (Khepri's) newest Ra write-ahead log file",
             "mnesia": "Mnesia's table of durable queues on disc (rabbit_durable_queue.DCL, else .DCD)"}
    # kind -> (path glob under the mnesia base, file name glob, newest per directory or overall)
    FILES = {"wal": ("*/quorum/*", "*.wal", False), "segment": ("*/quorum/*", "*.segment", True),
             "stream": ("*/stream/*", "*.segment", True),
             # the metadata store: Khepri's Ra system (4.x) and Mnesia's table of durable queues
             "khepri": ("*/coordination/*", "*.wal", False),
             # the log (DCL) when the node has one, else the dump (DCD): the newest by name
             "mnesia": ("*", "rabbit_durable_queue.DC?", False)}

    def kinds(self) -> dict[str, str]:
        return dict(self.KINDS)

    def data_files(self, node: str, kind: str, subject: str | None) -> list[tuple[str, int]]:
        if kind not in self.FILES:
            raise ClusterError(f"no {kind!r} data files (kinds: {', '.join(self.KINDS)})")
        path, name, per_dir = self.FILES[kind]
        base = self.cluster.fs_dirs["rabbit"]
        return self.cluster.newest_files(node, base, f"{base}/{path}", name, per_dir)


class RabbitRestartApp(_Part):
    """``RestartApp``: the broker's application restarted inside its running node."""

    def restart_app(self, node: str) -> None:
        ctl.restart_app(self.cluster, node)


COMPONENTS = (RabbitRestartApp, RabbitFiles, RabbitMembership, RabbitVersions, RabbitFeatures, RabbitSync,
              RabbitPlacement)

__all__ = ["COMPONENTS", "RabbitFeatures", "RabbitFiles", "RabbitMembership", "RabbitPlacement", "RabbitRestartApp",
           "RabbitSync", "RabbitVersions", "running_node"]
