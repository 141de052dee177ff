"""The RabbitMQ plug-in: three nodes (rabbit1..3) from Debian's rabbitmq-server, classic
mirrored and quorum queues, pika clients with publisher confirms."""
from __future__ import annotations

from typing import Any

from harness.brokers.base import Broker, ImageSpec
from harness.brokers.rabbitmq import observe, workload
from harness.brokers.rabbitmq.cluster import RabbitCluster, RabbitConfig
from harness.brokers.rabbitmq.model import RabbitScenario
from harness.brokers.rabbitmq.probes import RabbitProbes


class RabbitMQ(Broker):
    name = "rabbitmq"
    scenario_model = RabbitScenario
    settings_model = RabbitConfig
    image = ImageSpec(repo="mqchaos/rabbitmq", context="rabbitmq")

    def cluster_class(self) -> type[RabbitCluster]:
        return RabbitCluster

    def cluster(self, project: str | None = None) -> RabbitCluster:
        return RabbitCluster(project)

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
        return observe.measure(samples, logs, consume)

    def probes(self, run: Any) -> RabbitProbes:
        return RabbitProbes(run)


PLUGIN = RabbitMQ()
