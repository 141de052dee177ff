"""Dedicated KRaft controllers (ctrl1..3, node ids 3001..3003), apart from the brokers: a
ZooKeeper cluster's migration adds them (``migration``), a KRaft cluster brought up with
``cluster.kraft_controllers: dedicated`` starts with them (issue 52: a claim whose premise is
a leader cut from its followers that still reaches the cluster's metadata cannot happen in
combined mode, where the followers are two of the three voters).

- Configuration: each controller is a migration's finalized controller
  (``migration.controller_properties``: ``process.roles=controller``, the static quorum of
  ctrl1..3 on the CONTROLLER listener ``ctrlN:19093``) over the cluster's own settings, since
  in KRaft the controller applies the settings that decide about topics (default replication
  factor, unclean leader election, min.insync.replicas for the ELR, leader rebalancing); each
  broker a migration's KRaft broker (``migration.broker_properties``: ``process.roles=broker``,
  its broker id as node id, the controllers' quorum, no CONTROLLER listener of its own).
- Containers: copies of the compose file's kafka3 in a compose override of their own, no
  published port, read back by a dead run's heal from that override (``ControllerNodes``, a
  service of the cluster's: ``services``).
- The quorum they form: ``quorum.ControllerQuorum`` (the same value as a combined quorum's,
  its voters ctrl1..3).
- The cluster's view (``agreed_view``): no broker holds the controller's record, and a
  controller answers no client's Metadata request, so the cluster's leader and ISR are the
  view the brokers agree on, each broker's answer taken only when every other answering
  broker's image lists it as alive: a broker cut from the controllers is fenced by them, the
  brokers that still reach them drop it from their images, and its own frozen image (which
  still lists everyone) is passed over. No plurality: unknown, no guess.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Mapping

from harness.brokers.kafka import migration
from harness.brokers.kafka.kraft import ZOOKEEPER_KEYS
from harness.brokers.kafka.nodes import CONTROLLERS
from harness.brokers.kafka.services import write_copies

TOPOLOGIES = ("combined", "dedicated")
Topology = Literal["combined", "dedicated"]
# what only a broker has: its id, role and listeners (the controller gets its own)
BROKER_ONLY = ("broker.id", "node.id", "process.roles", "listeners", "advertised.listeners", *ZOOKEEPER_KEYS)
OVERRIDE = "controllers.override.yml"
CONTROLLER_OCTETS = {node: 30 + i for i, node in enumerate(CONTROLLERS, 1)}  # 172.28.20.31..33


def broker_properties(props: dict[str, Any]) -> dict[str, Any]:
    """A broker of a KRaft cluster with dedicated controllers, from its ZooKeeper-mode mapping."""
    return migration.broker_properties(props, "kraft")


def controller_properties(node: str, cluster_props: dict[str, Any]) -> dict[str, Any]:
    """A dedicated controller's, from a broker's ZooKeeper-mode mapping (the cluster's settings
    and extra keys included)."""
    shared = {k: v for k, v in cluster_props.items() if k not in BROKER_ONLY}
    return {**shared, **migration.controller_properties(node, cluster_props, "finalize")}


def agreed_view(views: Mapping[str, list[dict]], alive: Mapping[str, list[str] | None]) -> tuple[list[str], list[dict]] | None:
    """The brokers whose view is the cluster's and that view: of the brokers every other
    answering broker's image lists as alive (``alive``: each answer's broker list), the view
    most of them share; None when none is shared by more than any other."""
    current = [n for n in views if all(n in (alive.get(o) or ()) for o in views if o != n)]
    groups: dict[str, list[str]] = {}
    for n in current:
        key = json.dumps([(p["partition"], p["leader"], sorted(p["isr"]), p["replicas"]) for p in views[n]])
        groups.setdefault(key, []).append(n)
    ranked = sorted(groups.values(), key=len, reverse=True)
    if not ranked or (len(ranked) > 1 and len(ranked[1]) == len(ranked[0])):
        return None
    return sorted(ranked[0]), views[ranked[0][0]]


class ControllerNodes:
    """ctrl1..3 as a compose service of their own (kafkatest's isolated controllers): their
    override file, whose presence is the record that the cluster has them (a dead run's heal
    reads it). The cluster places it right after the size override, so that the later
    overrides (an upgraded node's image, the CPU weight) apply to them too; placed last, their
    copied image line would undo an upgrade of theirs (U4c's first run)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def override(self) -> Path:
        return self.cluster.state_dir / OVERRIDE

    def present(self) -> bool:
        return self.override().exists()

    def write(self, what: str) -> None:
        """ctrl1..3 as copies of the compose file's kafka3, no published port (only the
        cluster's nodes talk to a controller)."""
        write_copies(self.cluster, self.override(), what,
                     {node: (octet, None) for node, octet in CONTROLLER_OCTETS.items()})

    def remove(self) -> None:
        self.override().unlink(missing_ok=True)


__all__ = ["BROKER_ONLY", "ControllerNodes", "TOPOLOGIES", "Topology", "agreed_view", "broker_properties",
           "controller_properties"]
