"""The broker plug-ins, by name. Adding a broker: a package here exposing ``PLUGIN`` (a
``harness.brokers.protocol.Broker``), listed in ``PLUGINS``. Nothing outside this package
names a broker."""
from __future__ import annotations

import importlib

from harness.brokers.compose import ComposeCluster
from harness.brokers.protocol import Broker, Cluster, ClusterError, RoleError

# name -> module holding PLUGIN (imported on first use: a kafka run never loads pika)
PLUGINS = {"rabbitmq": "harness.brokers.rabbitmq", "kafka": "harness.brokers.kafka"}
KINDS = tuple(PLUGINS)
# The versions the seed texts describe (issue 54: the atlas's "at the seeds' versions", harness.atlas):
# RabbitMQ 3.10 and Kafka 3.9 with ZooKeeper (the generation "3.9"; "3.9-kraft" is KRaft). Each is its
# plug-in's default generation, so a run that recorded no version asked for ran it (tests/test_atlas.py
# holds both).
SEED_VERSIONS = {"rabbitmq": "3.10", "kafka": "3.9"}
_loaded: dict[str, Broker] = {}


def get(name: str) -> Broker:
    if name not in PLUGINS:
        raise ValueError(f"unknown broker {name!r} (one of {', '.join(KINDS)})")
    if name not in _loaded:
        _loaded[name] = importlib.import_module(PLUGINS[name]).PLUGIN
    return _loaded[name]


def plugins() -> list[Broker]:
    return [get(n) for n in KINDS]


def get_cluster(name: str) -> Cluster:
    """The cluster already up here, of the version its last ``up`` recorded (the default if
    none): what ``mqchaos heal / status / down / logs / nemesis`` act on. A cluster to bring
    up is the plug-in's ``cluster(version=...)``."""
    plugin = get(name)
    recorded = plugin.cluster_class().recorded_version()
    return plugin.cluster(version=recorded if recorded in plugin.generations else None)


__all__ = ["Broker", "Cluster", "ClusterError", "ComposeCluster", "KINDS", "PLUGINS", "RoleError", "SEED_VERSIONS",
           "get", "get_cluster", "plugins"]
