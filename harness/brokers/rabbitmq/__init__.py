"""The RabbitMQ plug-in: three nodes (rabbit1..3) from Debian's rabbitmq-server, classic
mirrored and quorum queues and streams, pika clients with publisher confirms.

The plug-in checklist's items (docs/plugins.md), module by module:

    P1-P4, P9           this module (``RabbitMQ``: one cluster class for every version)
    P5                  cluster.py (``RabbitConfig``), values.py (rabbitmq.conf's schema, policies,
                        queue arguments)
    P6-P7               generations.py (3.10, 4.0, 4.3), compose/rabbitmq/ (Debian's packages)
    P8, P16-P17         cluster.py (``RabbitCluster``), nodes.py, ctl.py, mgmt.py
    P18-P19             harness.brokers.containers / compose (every ``ComposeCluster``)
    P20                 queues.py (``queue_master``, ``queue_mirrors`` ...)
    P21-P23             recovery.py (a stale partition's stop_app / start_app, a wiped node
                        forgotten, a failed boot)
    P10-P13, P24        workload.py (declare, prefill, drain, links), clients.py
    P14-P15             observe.py (``sample``, ``measure``: this module's delegate to it)
    P25                 model.py (queues, streams, poison messages, dead-lettering, sites, links)
    P26                 probes.py, load_probes.py, perftest.py
    P28                 operations.py (``COMPONENTS``)
"""
from __future__ import annotations

import re
from typing import Any

from harness.brokers import balancer
from harness.brokers.containers import docker
from harness.brokers.generations import ImageSpec
from harness.brokers.protocol import Broker
from harness.clients.base import Worker
from harness.context import Drained, RunContext
from harness.brokers.rabbitmq import observe, workload
from harness.brokers.rabbitmq.cluster import RabbitCluster, RabbitConfig
from harness.brokers.rabbitmq.generations import GENERATIONS
from harness.brokers.rabbitmq.model import RabbitScenario
from harness.brokers.rabbitmq.probes import RabbitProbes


class RabbitMQ(Broker):
    name = "rabbitmq"
    scenario_model = RabbitScenario
    settings_model = RabbitConfig
    image = ImageSpec(repo="mqchaos/rabbitmq", context="rabbitmq")
    generations = GENERATIONS

    def cluster_class(self, version: str | None = None) -> type[RabbitCluster]:
        return RabbitCluster  # one topology for every version (4.3's lack of power loss: its generation's)

    def cluster(self, project: str | None = None, version: str | None = None) -> RabbitCluster:
        return RabbitCluster(project)  # one topology for every version: the settings carry it

    def dump_config_keys(self, image_ref: str) -> dict[str, Any]:
        """rabbitmq.conf's names: the cuttlefish schema files the server ships (their
        ``{mapping, "name", ...}``; ``$name`` stands for any segment)."""
        script = ("cat $(find /usr/lib/rabbitmq -name '*.schema' -path '*priv*' | sort); "
                  "echo; echo VERSION $(ls /usr/lib/rabbitmq/lib | sed -n 's/^rabbitmq_server-//p')")
        out = docker("run", "--rm", "--network", "none", "--entrypoint", "sh", image_ref, "-c", script,
                     timeout=120).stdout
        keys = sorted(set(re.findall(r'\{mapping,\s*"([^"]+)"', out)))
        version = re.search(r"^VERSION (\S+)", out, re.M)
        return {"version": version.group(1) if version else None, "broker": keys}

    def declare(self, ctx: RunContext) -> None:
        workload.declare(ctx.cluster, ctx.sc)

    def producers(self, ctx: RunContext) -> list[Worker]:
        return workload.producers(ctx)

    def consumers(self, ctx: RunContext) -> list[Worker]:
        return workload.consumers(ctx)

    def prefill(self, ctx: RunContext) -> dict:
        return workload.prefill(ctx)

    def drain(self, ctx: RunContext, consumers: list[Worker]) -> Drained:
        return workload.drain(ctx, consumers)

    def sample(self, cluster: Any, sc: Any) -> dict:
        return observe.sample(cluster, sc)

    def measure(self, sc, samples, logs, produce, consume, fault_start) -> dict:
        m = observe.measure(samples, logs, consume, produce, fault_start)
        if sc.link and sc.link.bidirectional:
            m["missing_at_a_site"] = observe.missing_at_a_site(list(produce), list(consume), sc.link.sites())
        # publishes the broker returned as unroutable (mandatory): no binding took them
        m["unroutable"] = sum(1 for r in produce if r.get("error") == "unroutable")
        syncs = observe.sync_durations(logs, sc.queue.name)  # the longest: the one the claim is about
        m["sync_duration_s"] = max(syncs) if syncs else None
        if sc.queue.type == "quorum":
            m.update(sc.version_facts())
        if sc.cluster.balancer:
            m.update(balancer.removals(logs.get(balancer.NAME)))
        return m

    def probes(self, ctx: RunContext) -> RabbitProbes:
        return RabbitProbes(ctx)


PLUGIN = RabbitMQ()
