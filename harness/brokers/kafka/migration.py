"""Kafka's ZooKeeper-to-KRaft migration (KIP-866, Kafka 3.9's documented path), the pure parts:
each phase's configuration and what shows that a phase took effect.

The phases, in the order an operator walks them (``PHASES``), each an operation step
(``migrate_to_kraft`` with ``params.phase``):

- ``controllers``: three dedicated controllers (ctrl1..3, node ids 3001..3003; migration runs
  on dedicated controllers only, with a static quorum) formatted with the ZooKeeper cluster's
  id and started in migration mode, connected to ZooKeeper. Shown by: a raft leader the
  controllers' majority names.
- ``brokers``: each broker rolled with ``zookeeper.metadata.migration.enable`` and the
  controllers' quorum; once all have registered with the controllers, the active one copies
  ZooKeeper's metadata into its log and becomes the cluster's controller (dual writes to
  ZooKeeper from then on). Shown by: a controller's log says the copy completed.
- ``kraft``: each broker rolled into KRaft mode (``process.roles=broker``, its broker id as
  node id, no ZooKeeper settings). Shown by: each broker's log since its restart says its
  KRaft broker server started.
- ``finalize``: each controller rolled without the migration settings; ZooKeeper is no
  longer written. Shown by: every controller runs its new configuration and the quorum has a
  leader, every broker registered.

Rollback to ZooKeeper is possible until ``finalize`` (the docs' "reverting to ZooKeeper
mode"); it is not offered here.

The phase begun last is recorded in the cluster's state directory (``MigrationRecord``), which
the cluster's readers follow; the operation itself is the ZooKeeper cluster's ``Migration``
component (``operations.ZooKeeperMigration``).
"""
from __future__ import annotations

import json
import re
from typing import Any

from harness.brokers.kafka.kraft import CONTROLLER_PORT, ZOOKEEPER_KEYS
from harness.brokers.kafka.nodes import CONTROLLERS, controller_id

PHASES = ("controllers", "brokers", "kraft", "finalize")
MIGRATION_FLAG = "zookeeper.metadata.migration.enable"
# KRaftMigrationDriver's line once ZooKeeper's metadata is in the controllers' log
MIGRATED = "Completed migration of metadata from ZooKeeper to KRaft"
# a broker's start by mode: BrokerServer (KRaft) / KafkaServer (ZooKeeper)
KRAFT_BROKER_STARTED = re.compile(r"\[BrokerServer id=\d+\] Transition from STARTING to STARTED")
ZK_BROKER_STARTED = re.compile(r"\[KafkaServer id=\d+\] started")
# a controller's QuorumController told who leads (or that it does): back in its quorum
CONTROLLER_JOINED = re.compile(r"\[QuorumController id=\d+\] (?:In the new epoch \d+, the leader is \d+|"
                               r"Becoming the active controller)")
# its server's start finished (on 4.1 after the line above, and after its "Kafka version")
CONTROLLER_STARTED = "Kafka Server started"


def check_phase(phase: Any) -> str:
    if phase not in PHASES:
        raise ValueError(f"params.phase must be one of {', '.join(PHASES)}, not {phase!r}")
    return str(phase)


def phase_index(phase: str | None) -> int:
    """-1: no migration begun; else the position of the last phase begun."""
    return PHASES.index(phase) if phase in PHASES else -1


def quorum_voters() -> str:
    return ",".join(f"{controller_id(n)}@{n}:{CONTROLLER_PORT}" for n in CONTROLLERS)


def _controller_listener(props: dict[str, Any]) -> dict[str, Any]:
    return {"controller.quorum.voters": quorum_voters(), "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": _with_controller(str(props["listener.security.protocol.map"]))}


def _with_controller(protocol_map: str) -> str:
    return protocol_map if "CONTROLLER:" in protocol_map else f"{protocol_map},CONTROLLER:PLAINTEXT"


def broker_properties(props: dict[str, Any], phase: str | None) -> dict[str, Any]:
    """A ZooKeeper-mode broker's server.properties mapping as the phase wants it: unchanged
    before ``brokers``; then in migration mode (ZooKeeper still its metadata store, the
    controllers its controller); from ``kraft`` on a KRaft broker."""
    i = phase_index(phase)
    if i < PHASES.index("brokers"):
        return dict(props)
    if i < PHASES.index("kraft"):
        return {**props, MIGRATION_FLAG: "true", "inter.broker.protocol.version": "3.9", **_controller_listener(props)}
    out = {k: v for k, v in props.items()
           if k not in ZOOKEEPER_KEYS and k not in ("broker.id", MIGRATION_FLAG, "inter.broker.protocol.version")}
    return {"process.roles": "broker", "node.id": props["broker.id"], **out, **_controller_listener(props)}


def controller_properties(node: str, broker_props: dict[str, Any], phase: str | None) -> dict[str, Any]:
    """A dedicated controller's: in migration mode (connected to ZooKeeper, reaching the
    ZooKeeper-mode brokers on their inter-broker listener) until ``finalize``, then without."""
    props = {
        "process.roles": "controller",
        "node.id": controller_id(node),
        "listeners": f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT}",
        "advertised.listeners": f"CONTROLLER://{node}:{CONTROLLER_PORT}",
        **_controller_listener(broker_props),
        "inter.broker.listener.name": broker_props["inter.broker.listener.name"],
        "log.dirs": broker_props["log.dirs"],
        "num.network.threads": 2,
        "num.io.threads": 2,
    }
    if phase_index(phase) < PHASES.index("finalize"):
        props.update({MIGRATION_FLAG: "true", "zookeeper.connect": broker_props["zookeeper.connect"],
                      "zookeeper.session.timeout.ms": broker_props.get("zookeeper.session.timeout.ms", 18000)})
    return props


def zk_cluster_id(data: Any) -> str:
    """ZooKeeper's /cluster/id (``{"version": "1", "id": "..."}``): what the controllers are
    formatted with."""
    if not isinstance(data, dict) or not data.get("id"):
        raise ValueError(f"no cluster id in ZooKeeper's /cluster/id: {data!r}")
    return str(data["id"])


def broker_mode(log_since_start: str) -> str | None:
    """``kraft`` / ``zookeeper``: the mode a broker's log since its last start shows it
    started in; None: not started (yet)."""
    kraft = KRAFT_BROKER_STARTED.search(log_since_start)
    zk = ZK_BROKER_STARTED.search(log_since_start)
    if kraft and zk:  # both in one window: the later start counts
        return "kraft" if kraft.start() > zk.start() else "zookeeper"
    return "kraft" if kraft else "zookeeper" if zk else None


def reached(phase: str, state: dict[str, Any]) -> bool:
    """Does the cluster's migration state (``ZooKeeperCluster.migration_state``) show the
    phase done?"""
    brokers = state.get("broker_modes") or {}
    if phase == "controllers":
        return bool(state.get("controller_leader"))
    if phase == "brokers":
        return bool(state.get("controller_leader")) and bool(state.get("migrated"))
    if phase == "kraft":
        return bool(brokers) and all(m == "kraft" for m in brokers.values())
    return (bool(state.get("controller_leader")) and not state.get("controllers_migrating")
            and bool(brokers) and all(m == "kraft" for m in brokers.values())
            and state.get("registered") == sorted(brokers))


MIGRATION_FILE = "migration.json"  # the migration's phase begun last (a dead run's heal reads it)


class MigrationRecord:
    """The phase begun last, in the cluster's state directory: recorded before the phase acts,
    gone with the cluster."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def phase(self) -> str | None:
        """None: no phase begun (the cluster is ZooKeeper's)."""
        try:
            return json.loads((self.cluster.state_dir / MIGRATION_FILE).read_text()).get("phase")
        except (OSError, ValueError, AttributeError):
            return None

    def past(self, phase: str) -> bool:
        """Has ``phase`` begun (or one after it)?"""
        return phase_index(self.phase()) >= PHASES.index(phase)

    def begin(self, phase: str) -> None:
        (self.cluster.state_dir / MIGRATION_FILE).write_text(json.dumps({"phase": phase}))

    def clear(self) -> None:
        (self.cluster.state_dir / MIGRATION_FILE).unlink(missing_ok=True)


__all__ = ["MIGRATED", "MIGRATION_FILE", "MIGRATION_FLAG", "PHASES", "MigrationRecord", "broker_mode",
           "broker_properties", "check_phase", "controller_properties", "phase_index", "quorum_voters", "reached",
           "zk_cluster_id"]
