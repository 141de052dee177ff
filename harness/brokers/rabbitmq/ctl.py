"""What rabbitmqctl says, asked through ``docker exec`` on a node (its own, local view; it
works when the client path is cut). Each function takes the ``RabbitCluster`` to ask."""
from __future__ import annotations

import json
import re

from harness.brokers.rabbitmq.nodes import NODES, short_node


def cluster_status(cluster, node: str, timeout: float = 30) -> dict:
    """``rabbitmqctl cluster_status`` on ``node``, as JSON (its own, local view)."""
    _, out = cluster.rabbitmqctl(node, "-q", "cluster_status", "--formatter", "json", timeout=timeout)
    start = out.find("{")
    return json.loads(out[start:]) if start >= 0 else {}


def partitions(cluster) -> dict[str, list[str]]:
    """Each running node's own partition list: {node: [nodes it is partitioned from]}.

    Asked with rabbitmqctl on each node (its local view, also when the client path is
    cut). A node whose broker is not running (stopped, or paused by pause_minority) is
    left out. Under pause_minority the majority records the partition only once the
    paused node comes back, so an empty list during a cut is RabbitMQ's own view.
    A version without the call (4.3) reports nothing: {} (``reports_partitions``)."""
    res: dict[str, list[str]] = {}
    if not cluster.reports_partitions():
        return res
    for node in NODES:
        if not cluster.running(node):
            continue
        rc, out = cluster.exec(node, ["rabbitmqctl", "-q", "eval", "rabbit_node_monitor:partitions()."],
                               check=False, timeout=30)
        if rc != 0:
            continue
        res[node] = sorted(short_node(p) for p in erl_atoms(out))
    return res


def app_running(cluster, node: str) -> bool:
    """Is the rabbit application running on the node (False when pause_minority paused it)?"""
    if not cluster.running(node):
        return False
    rc, out = cluster.exec(node, ["rabbitmqctl", "-q", "eval", "rabbit:is_running()."], check=False, timeout=30)
    return rc == 0 and out.strip().endswith("true")


def restart_app(cluster, node: str) -> None:
    """``rabbitmqctl stop_app && start_app``: the documented recovery from a partition."""
    cluster.rabbitmqctl(node, "stop_app", timeout=120)
    cluster.rabbitmqctl(node, "start_app", timeout=120)


def list_queues(cluster, node: str, *info: str, timeout: float = 60) -> list[dict]:
    """``rabbitmqctl list_queues`` on ``node`` (asks the queue processes: not the stats DB).
    Default columns: name, type, messages, pid (the master's / leader's node)."""
    cols = list(info) or ["name", "type", "messages", "pid"]
    _, out = cluster.rabbitmqctl(node, "-q", "list_queues", "--formatter", "json", *cols, timeout=timeout)
    start = out.find("[")
    rows = json.loads(out[start:]) if start >= 0 else []
    for row in rows:
        if isinstance(row.get("pid"), str) and "@" in row["pid"]:
            row["node"] = short_node(row["pid"].split("<", 1)[-1].split(".", 1)[0]) \
                if row["pid"].startswith("<") else short_node(row["pid"])
    return rows


def queue_length(cluster, name: str, node: str | None = None) -> int | None:
    """Messages in the queue, asked of the queue itself through ``node`` (a running node)."""
    node = node or next(n for n in NODES if cluster.running(n))
    for row in cluster.list_queues(node, "name", "messages"):
        if row.get("name") == name:
            return int(row["messages"])
    return None


def synchronised_now(cluster, name: str, node: str = "rabbit1") -> list[str]:
    """The nodes of ``name``'s synchronised mirrors as the broker holds them now
    (rabbitmqctl; the management API's copy can be seconds old, and a mirror restarted
    a moment ago may still be listed there as synchronised)."""
    name_bin = name.replace("\\", "\\\\").replace('"', '\\"')
    expr = (f'case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"{name_bin}">>)) of '
            '{ok, Q} -> [node(P) || P <- amqqueue:get_sync_slave_pids(Q)]; _ -> [] end.')
    _, out = cluster.rabbitmqctl(node, "eval", expr, timeout=30)
    return sorted(re.findall(r"@([\w.-]+)", out))


def recoverable_mirrors(cluster, node: str) -> dict[str, list[str]] | None:
    """{queue: its recoverable mirrors' nodes} for the classic queues mastered on ``node``:
    the list ``forget_cluster_node --offline`` promotes from (the queue is deleted when it is
    empty). None when the node cannot say."""
    expr = ("[{amqqueue:get_name(Q), amqqueue:get_recoverable_slaves(Q)} || Q <- rabbit_amqqueue:list(), "
            "is_pid(amqqueue:get_pid(Q)), node(amqqueue:get_pid(Q)) =:= node()].")
    code, out = cluster.rabbitmqctl(node, "eval", expr, check=False, timeout=30)
    return parse_recoverable(out) if code == 0 else None


def parse_recoverable(out: str) -> dict[str, list[str]]:
    """``[{{resource,<<"/">>,queue,<<"q">>},[rabbit@rabbit2]}]`` (an eval's printed term) as
    {"q": ["rabbit2"]}; a queue outside the default vhost is named "vhost/q"."""
    found = re.findall(r'<<"([^"]*)">>,\s*queue,\s*<<"([^"]*)">>\},\s*\[([^\]]*)\]', out)
    return {(q if vhost == "/" else f"{vhost}/{q}"): re.findall(r"@([\w.-]+)", nodes) for vhost, q, nodes in found}


def erl_atoms(text: str) -> list[str]:
    """Atoms like 'rabbit@rabbit2' out of an Erlang term printed by rabbitmqctl eval."""
    return re.findall(r"'?(rabbit@[A-Za-z0-9_.-]+)'?", text)


def feature_flags(cluster, node: str, timeout: float = 60) -> list[dict]:
    """``rabbitmqctl list_feature_flags``: each flag's name, state and stability."""
    _, out = cluster.rabbitmqctl(node, "-q", "list_feature_flags", "name", "state", "stability",
                                 "--formatter", "json", timeout=timeout)
    start = out.find("[")
    return json.loads(out[start:]) if start >= 0 else []


def server_version(cluster, node: str, timeout: float = 30) -> str | None:
    """The running node's own version (``rabbitmq-diagnostics server_version``)."""
    rc, out = cluster.exec(node, ["rabbitmq-diagnostics", "-q", "server_version"], check=False, timeout=timeout)
    found = re.findall(r"^\s*([0-9]+\.[0-9]+\.[0-9][0-9A-Za-z.+\-]*)\s*$", out, re.M) if rc == 0 else []
    return found[-1] if found else None
