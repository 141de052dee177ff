"""What the management HTTP API says, through the nodes' published ports: a GET through the
first node that answers, policies, the versions the nodes report, and the cluster's
membership as each node's own listener sees it. Each function takes the ``RabbitCluster``
to ask (its ``http``, ``api`` and ``nodes_view``)."""
from __future__ import annotations

import urllib.parse
from typing import Any

import requests

from harness.brokers.protocol import ClusterError
from harness.brokers.rabbitmq.nodes import NODES, short_node


def get(cluster, path: str, node: str | None = None, timeout: float = 10, among: list[str] | None = None) -> Any:
    """GET a management API path through ``node`` or the first node (of ``among``) that answers."""
    errors = []
    for n in ([node] if node else among or NODES):
        try:
            resp = cluster.http(n, "GET", path, timeout=timeout)
            if resp.status_code == 404:
                return None
            resp.raise_for_status()
            return resp.json()
        except requests.RequestException as exc:
            errors.append(f"{n}: {exc}")
    raise ClusterError(f"management API {path} unanswered: {'; '.join(errors)}")


def _policy_path(name: str, vhost: str) -> str:
    return f"policies/{urllib.parse.quote(vhost, safe='')}/{urllib.parse.quote(name, safe='')}"


def _change(cluster, method: str, path: str, what: str, nodes: list[str], gone_is_done: bool = False,
            **kw) -> None:
    """A PUT or DELETE through the first of ``nodes`` that takes it (with
    ``gone_is_done``, a 404 is taken too: nothing left to delete)."""
    errors = []
    for n in nodes:
        try:
            resp = cluster.http(n, method, path, **kw)
            if not (gone_is_done and resp.status_code == 404):
                resp.raise_for_status()
            return
        except requests.RequestException as exc:
            errors.append(f"{n}: {exc}")
    raise ClusterError(f"{what} failed: {'; '.join(errors)}")


def delete_policy(cluster, name: str, vhost: str = "/") -> None:
    """DELETE a policy through the first node that takes it (gone already: done)."""
    _change(cluster, "DELETE", _policy_path(name, vhost), f"delete policy {name}", NODES, gone_is_done=True)


def put_policy(cluster, name: str, pattern: str, definition: dict, apply_to: str = "queues",
               priority: int = 0, vhost: str = "/", node: str | None = None) -> None:
    """PUT a policy through ``node`` or the first node that takes it."""
    body = {"pattern": pattern, "definition": definition, "apply-to": apply_to, "priority": priority}
    _change(cluster, "PUT", _policy_path(name, vhost), f"set_policy {name}", [node] if node else NODES, json=body)


def versions(cluster) -> dict[str, Any]:
    """What the nodes run: the cluster's versions (the first node's overview), and per
    node its image and the versions its own management listener reports."""
    ov = cluster.api("overview") or {}
    nodes: dict[str, Any] = cluster.node_images()
    for node, entry in nodes.items():
        try:
            own = cluster.api("overview", node=node, timeout=5) or {}
        except ClusterError:
            own = {}
        entry.update(rabbitmq=own.get("rabbitmq_version"), erlang=own.get("erlang_version"))
    return {"rabbitmq": ov.get("rabbitmq_version"), "erlang": ov.get("erlang_version"), "nodes": nodes}


def healthy(cluster) -> bool:
    """Every node runs and sees the nodes of its site running, and none reports a partition."""
    sites = cluster.sites()
    for node in NODES:
        if not cluster.running(node):
            return False
        view = cluster.nodes_view(node)
        if sorted(short_node(n["name"]) for n in view if n.get("running")) != next(s for s in sites if node in s):
            return False
        if any(n.get("partitions") for n in view):
            return False
    return True


def rejoined(cluster, node: str) -> bool:
    """``node``'s broker serves and every running node sees it running in the cluster."""
    if not cluster.app_serving(node):
        return False
    return all(node in [short_node(x["name"]) for x in cluster.nodes_view(n) if x.get("running")]
               for n in NODES if cluster.running(n))
