"""The RabbitMQ plug-in: three nodes (rabbit1..3) from Debian's rabbitmq-server, classic
mirrored and quorum queues and streams, pika clients with publisher confirms."""
from __future__ import annotations

import re
from typing import Any

from harness.brokers.containers import docker
from harness.brokers.generations import ImageSpec
from harness.brokers.protocol import Broker
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

    def cluster_class(self) -> type[RabbitCluster]:
        return RabbitCluster

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

    def declare(self, run: Any) -> None:
        workload.declare(run.cluster, run.sc)

    def producers(self, run: Any) -> list:
        return workload.producers(run)

    def consumers(self, run: Any) -> list:
        return workload.consumers(run)

    def prefill(self, run: Any) -> dict:
        return workload.prefill(run)

    def drain(self, run: Any) -> dict:
        return workload.drain(run)

    def sample(self, cluster: Any, sc: Any) -> dict:
        return observe.sample(cluster, sc)

    def measure(self, sc, samples, logs, produce, consume, fault_start) -> dict:
        m = observe.measure(samples, logs, consume)
        if sc.queue.type == "quorum":
            m.update(sc.version_facts())
        return m

    def probes(self, run: Any) -> RabbitProbes:
        return RabbitProbes(run)


PLUGIN = RabbitMQ()
