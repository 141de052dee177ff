"""The compose services a Kafka cluster adds to its compose file's: the brokers beyond three
(kafka4, kafka5: ``BrokerNodes``, with ``cluster.brokers``: claim 60; rendered into
``ComposeCluster.size_override``, each with its own published port) and the dedicated
controllers (ctrl1..3: ``controllers.ControllerNodes``), each node a copy of the file's kafka3
(its own name, data volume, address) in an override file of its own, which a dead run's heal,
in another process, reads back: the override is the record of the topology brought up (every
broker list comes from ``KafkaCluster.brokers()``, which reads it)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from harness.brokers.compose import COMPOSE_DIR
from harness.brokers.kafka.nodes import BROKERS, KAFKA_PORTS, broker_id, broker_names


def write_copies(cluster: Any, path: Path, what: str, nodes: dict[str, tuple[int, list[str] | None]]) -> None:
    """A compose override of services copied from the compose file's kafka3, each with its
    own name, data volume, address (node -> (last octet, published ports or None))."""
    base = yaml.safe_load((COMPOSE_DIR / cluster.compose_file).read_text())
    last = base["services"][BROKERS[-1]]
    services, volumes = {}, {}
    for node, (octet, ports) in nodes.items():
        svc = copy.deepcopy(last)
        svc["hostname"] = svc["container_name"] = node
        svc["environment"]["KAFKA_NODE"] = node
        svc["volumes"] = [v.replace(f"{BROKERS[-1]}-data:", f"{node}-data:") for v in svc["volumes"]]
        if ports is None:
            svc.pop("ports", None)
        else:
            svc["ports"] = ports
        net = svc["networks"][cluster.network_key]
        net["ipv4_address"] = net["ipv4_address"].rsplit(".", 1)[0] + f".{octet}"
        services[node], volumes[f"{node}-data"] = svc, {}
    cluster.state_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# rendered by harness/brokers/kafka/services.py: {what}\n"
                    + yaml.safe_dump({"version": base.get("version", "2.4"), "services": services,
                                      "volumes": volumes}, sort_keys=False))


class BrokerNodes:
    """The brokers, kafka1..N: as many as the last ``up`` here brought up (a dead run's heal,
    in another process, finds its kafka4 and kafka5 in the size override)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.count = self._recorded()

    def _recorded(self) -> int:
        try:
            services = (yaml.safe_load(self.cluster.size_override().read_text()) or {}).get("services") or {}
        except (OSError, yaml.YAMLError):
            return len(BROKERS)
        return len(BROKERS) + sum(1 for name in services if name.startswith("kafka"))

    def names(self) -> list[str]:
        return broker_names(self.count)

    def resize(self, count: int) -> None:
        """``count`` brokers from now on: kafka4.. as copies of the compose file's kafka3 (its
        own name, port, address and volume), or no override for three."""
        self.count = count
        path = self.cluster.size_override()
        if count <= len(BROKERS):
            path.unlink(missing_ok=True)
            return
        write_copies(self.cluster, path, "the brokers beyond three", {
            node: (20 + broker_id(node), [f"127.0.0.1:{KAFKA_PORTS[node]}:{KAFKA_PORTS[node]}"])
            for node in broker_names(count)[len(BROKERS):]})


__all__ = ["BrokerNodes", "write_copies"]
