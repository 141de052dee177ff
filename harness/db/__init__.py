"""Cluster lifecycle + introspection: ``get_cluster("rabbitmq" | "kafka")``."""
from __future__ import annotations

from harness.db.base import Cluster, ClusterError, ComposeCluster

KINDS = ("rabbitmq", "kafka")


def get_cluster(kind: str) -> ComposeCluster:
    if kind == "rabbitmq":
        from harness.db.rabbitmq import RabbitCluster
        return RabbitCluster()
    if kind == "kafka":
        from harness.db.kafka import KafkaCluster
        return KafkaCluster()
    raise ValueError(f"unknown cluster kind {kind!r} (one of {KINDS})")


__all__ = ["Cluster", "ClusterError", "ComposeCluster", "KINDS", "get_cluster"]
