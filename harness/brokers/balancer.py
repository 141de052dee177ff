"""A load balancer in front of a cluster's nodes (a ``cluster:`` block's ``balancer:``): the
clients know one address, HAProxy's, and HAProxy takes a node out of its rotation once its
health check fails (seed 000: "Доступ к кластеру через балансировщик нагрузки и удаление
приостановленных/упавших узлов из списка, как только они обнаружены").

Broker-neutral: a plug-in whose clients can go through one gives the port behind it and the
check that tells a serving node (``ComposeCluster.balancer_port`` / ``balancer_check``). The
balancer is a container of the cluster's compose project (so ``down`` removes it) on the
cluster's network, not one of its nodes: no fault targets it. Its log, with Docker's
timestamps, is the evidence of what it removed (``logs/lb.log``, ``removals``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.brokers.generations import Generation, ImageSpec

NAME = "lb"                    # its container's suffix and its log's name (logs/lb.log)
PORT = 5670                    # published on 127.0.0.1; the nodes' own ports are 5672..
IMAGE = ImageSpec("mqchaos/haproxy", "haproxy")
GENERATION = Generation("default", default=True)  # one image, on the default suite: <repo>:latest
CONF_IN_CONTAINER = "/mqchaos/lb/haproxy.cfg"


class Balancer(BaseModel):
    """How quickly the balancer drops a node and takes it back: a check every ``interval_ms``,
    a node out after ``fall`` failed checks in a row and back after ``rise`` good ones; a
    connection to a node that does not answer within ``connect_timeout_ms`` goes to the next
    one (``option redispatch``)."""
    model_config = ConfigDict(extra="forbid")
    interval_ms: int = Field(500, gt=0)
    fall: int = Field(2, gt=0)
    rise: int = Field(2, gt=0)
    connect_timeout_ms: int = Field(1000, gt=0)


def config(servers: dict[str, str], port: int, check: list[str], settings: Balancer) -> str:
    """haproxy.cfg: one TCP front on ``PORT``, round robin over ``servers`` (name ->
    address) at ``port``, each checked by the plug-in's ``check`` (tcp-check lines). Clients
    keep their connections for as long as they like (the client's and server's timeouts are
    an hour: the broker's heartbeats decide when a connection is dead)."""
    lines = [
        "global",
        "  maxconn 2000",
        "  log stdout format raw local0",  # each client session, logged as it ends: which node it was on
        "defaults",
        "  log global",
        "  option tcplog",
        "  mode tcp",
        f"  timeout connect {settings.connect_timeout_ms}ms",
        f"  timeout check {settings.interval_ms}ms",
        "  timeout client 1h",
        "  timeout server 1h",
        "  retries 3",
        "  option redispatch",
        "listen balanced",
        f"  bind :{PORT}",
        "  balance roundrobin",
        "  option tcp-check",
        *(f"  {c}" for c in check),
        f"  default-server inter {settings.interval_ms}ms fall {settings.fall} rise {settings.rise}",
        *(f"  server {name} {addr}:{port} check" for name, addr in servers.items()),
    ]
    return "\n".join(lines) + "\n"


def run_args(project: str, network: str, conf: Path, image: str) -> list[str]:
    """``docker run``'s arguments for the balancer of ``project``: labelled as one of the
    project's containers, on its network, published on 127.0.0.1 only."""
    return ["run", "-d", "--name", f"{project}-{NAME}", "--label", f"com.docker.compose.project={project}",
            "--network", network, "-p", f"127.0.0.1:{PORT}:{PORT}",
            "-v", f"{conf}:{CONF_IN_CONTAINER}:ro", image, "haproxy", "-db", "-f", CONF_IN_CONTAINER]


# HAProxy's own line when a check takes a server out or puts it back, after Docker's
# timestamp; the stderr copy ("[WARNING]"), as the log's copy says the same again:
# "... [WARNING]  (1) : Server balanced/rabbit3 is DOWN, reason: ..."
_STATE = re.compile(r"^\S+ \[WARNING\]\s+\(\d+\) : Server balanced/(\S+) is (DOWN|UP)\b", re.M)
# A client session's line (option tcplog), written when it ends: client [accept date]
# frontend backend/server Tw/Tc/Tt bytes termination-state ...
_SESSION = re.compile(r"^\S+ \S+ \[[^\]]+\] balanced balanced/(\S+) \S+ \S+ (\S+) ", re.M)


def removals(log: str | None) -> dict[str, Any]:
    """What the balancer's log (windowed as any node's) says: the servers it took out of its
    rotation and how many times, and the client sessions that ended, by the node they were on
    (the clients a fault on that node reached: evidence that it had any)."""
    text = log or ""
    events = [(m.group(1), m.group(2)) for m in _STATE.finditer(text)]
    down = [s for s, state in events if state == "DOWN"]
    ended: dict[str, int] = {}
    for m in _SESSION.finditer(text):
        if m.group(1) != "<NOSRV>":
            ended[m.group(1)] = ended.get(m.group(1), 0) + 1
    return {"balancer_removed": sorted(set(down)), "balancer_removed_count": len(down),
            "balancer_restored_count": sum(1 for _, state in events if state == "UP"),
            "balancer_sessions_ended": dict(sorted(ended.items()))}


MEASUREMENTS = {"balancer_removed", "balancer_removed_count", "balancer_restored_count", "balancer_sessions_ended"}


def measurement_names(nodes: list[str]) -> set[str]:
    """What a run with a balancer measures, each node's count of ended sessions by name."""
    return MEASUREMENTS | {f"balancer_sessions_ended.{n}" for n in nodes}
