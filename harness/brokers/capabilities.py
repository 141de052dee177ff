"""A cluster's optional abilities, as small protocols asked by type (Jepsen's db.clj:
``Kill``, ``Pause``, ``Primary``, ``LogFiles``; nemesis/combined.clj builds only the faults a
db satisfies).

An operation family (membership, upgrades, feature levels, a metadata migration, ...) is an
ability a cluster may have or lack. A plug-in gives its cluster one by listing a
**component** in ``Cluster.components``: a class built from the cluster (``Component(cluster)``)
whose instances satisfy one protocol below. The nemesis asks ``ability(cluster, Membership)``
and gets the component, never a method of the cluster; a cluster class's capability names are
derived from the protocols its components satisfy (``offered``), so a capability without its
methods cannot be declared. A version may still lack one (``Generation.lacks``): a scenario
that needs what its cluster lacks is refused at load time, naming it.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar, runtime_checkable

# Node control every cluster has (``Cluster.kill`` ... ``wipe`` are abstract there).
KILL, STOP, START, PAUSE, WIPE = "kill", "stop", "start", "pause", "wipe"
NODE_CONTROL = frozenset({KILL, STOP, START, PAUSE, WIPE})


class CapabilityError(RuntimeError):
    """A cluster asked for an ability it does not have (validation refuses such a scenario
    first: this is a plug-in or harness defect)."""


@runtime_checkable
class RestartApp(Protocol):
    """The broker's application restarts inside its running node (rabbitmqctl stop_app /
    start_app)."""

    def restart_app(self, node: str) -> None: ...


@runtime_checkable
class PowerLoss(Protocol):
    """The nodes' data directories can forget what was never fsynced (the lazy file system)."""

    def power_off(self, nodes: list[str]) -> dict[str, Any]:
        """Cut the power of ``nodes`` at once: each forgets what it never fsynced and dies;
        return what each dropped."""
        ...


@runtime_checkable
class DataFiles(Protocol):
    """The nodes' data files can be listed, read and changed in place (storage corruption)."""

    def kinds(self) -> dict[str, str]:
        """What a ``corrupt`` step may name in ``params.files``: kind -> what it is."""
        ...

    def data_files(self, node: str, kind: str, subject: str | None) -> list[tuple[str, int]]:
        """The running node's newest data files of ``kind``, for ``subject`` (the run's queue
        / topic): (path on the node, size)."""
        ...

    def file_bytes(self, node: str, path: str, positions: list[int]) -> dict[int, int]:
        """The bytes at ``positions`` of a file on the node (running or not)."""
        ...

    def patch_file(self, node: str, path: str, changes: dict[int, int] | None = None,
                   size: int | None = None) -> None:
        """Overwrite bytes in place (``changes``: position -> byte), or cut the file to
        ``size`` bytes; on a stopped node through a copy out and back."""
        ...


@runtime_checkable
class Membership(Protocol):
    """The run's replicated queue / partition can lose and gain members: an operator's
    change, not a fault (issue 39)."""

    def members(self, subject: str) -> list[str]:
        """The nodes holding a member (replica) of ``subject`` now."""
        ...

    def change_member(self, op: str, node: str, subject: str) -> None:
        """``op`` ``add`` or ``remove``: ``node``'s member of ``subject``, as the broker's
        own tool does it."""
        ...


@runtime_checkable
class QuorumMembership(Protocol):
    """The metadata quorum's voters can change (Kafka's KIP-853)."""

    def voters(self) -> list[str]:
        """The nodes voting in the metadata quorum now."""
        ...

    def change_voter(self, op: str, node: str) -> None:
        """``op`` ``add`` or ``remove`` ``node`` as a voter, as the broker's own tool does it."""
        ...


@runtime_checkable
class Versions(Protocol):
    """A node can run another version's image on its kept data (a rolling upgrade)."""

    def node_version(self, node: str) -> str | None:
        """The version the running ``node`` reports of itself (its own answer, not its
        image's label); None when it does not answer."""
        ...

    def upgrade_reason(self, version: str) -> str | None:
        """Why this cluster's nodes cannot move to ``version`` (None: they can)."""
        ...

    def upgrade_node(self, node: str, version: str) -> None:
        """Run the stopped ``node`` on ``version``'s image, its data kept, and start it."""
        ...


@runtime_checkable
class Features(Protocol):
    """The cluster's feature level can be raised once every node runs it."""

    def features(self) -> dict[str, str]:
        """The cluster's features and the level (or state) each is finalized at."""
        ...

    def finalize_features(self, params: dict) -> dict[str, str]:
        """Raise the feature level as the broker's own tool does it; return what
        ``features()`` must then show: each named feature's level, or its start (``4.1-``)."""
        ...


@runtime_checkable
class Migration(Protocol):
    """The cluster's metadata can move to another system under load, phase by phase
    (Kafka's ZooKeeper-to-KRaft migration, KIP-866)."""

    def migrate(self, phase: str, params: dict, now: Callable[[], float], steps: list[dict[str, Any]]) -> None:
        """Do ``phase``, rolling nodes as the documentation says; each node's step appended
        to ``steps`` as it goes (times from ``now``), so a failed step leaves what it did."""
        ...

    def migration_state(self) -> dict[str, Any]:
        """Where the migration stands, as the nodes themselves show it (the evidence)."""
        ...

    def migration_reached(self, phase: str, state: dict[str, Any]) -> bool:
        """Does ``state`` show ``phase`` done?"""
        ...


@runtime_checkable
class Sync(Protocol):
    """The run's queue's replicas can be synchronised, and a synchronisation cancelled, by
    the operator's command (RabbitMQ's sync_queue / cancel_sync_queue)."""

    def sync_subject(self, op: str, subject: str) -> None:
        """``op`` ``sync`` (returns at once, the synchronisation goes on) or ``cancel``."""
        ...

    def sync_state(self, subject: str) -> dict[str, Any]:
        """``{"syncing": bool, "unsynchronised": [nodes]}``: where the replicas stand."""
        ...


@runtime_checkable
class Placement(Protocol):
    """The run's queue's replicas can be moved onto chosen nodes by the operator, and the
    move lifted (RabbitMQ's ha-mode nodes policy of a higher priority)."""

    def place_subject(self, subject: str, nodes: list[str] | None) -> None:
        """Move ``subject``'s replicas onto ``nodes`` (returns once the broker took the
        change; the move goes on); ``None`` lifts the move."""
        ...

    def placement(self, subject: str) -> dict[str, Any]:
        """``{"placed": bool, "master": node, "replicas": [nodes]}``."""
        ...


# capability name -> its protocol: the one table (what fault kinds ``need`` and a
# generation ``lacks`` name)
RESTART_APP, POWER_LOSS, CORRUPT = "restart_app", "power_loss", "corrupt"
MEMBERSHIP, QUORUM_MEMBERSHIP = "membership", "quorum_membership"
UPGRADE, FEATURES, MIGRATION, SYNC, PLACEMENT = "upgrade", "features", "migration", "sync", "placement"
FAMILIES: dict[str, type] = {
    RESTART_APP: RestartApp, POWER_LOSS: PowerLoss, CORRUPT: DataFiles, MEMBERSHIP: Membership,
    QUORUM_MEMBERSHIP: QuorumMembership, UPGRADE: Versions, FEATURES: Features, MIGRATION: Migration,
    SYNC: Sync, PLACEMENT: Placement,
}
CAPABILITIES = NODE_CONTROL | frozenset(FAMILIES)

T = TypeVar("T")


def offered(components: tuple[type, ...]) -> frozenset[str]:
    """The capability names ``components`` give a cluster: one per protocol a component
    class satisfies."""
    return frozenset(name for name, proto in FAMILIES.items() if any(issubclass(c, proto) for c in components))


def ability(cluster: Any, proto: type[T]) -> T:
    """``cluster``'s component that satisfies ``proto`` (CapabilityError when it has none)."""
    found = cluster.ability(proto)
    if found is None:
        name = next((n for n, p in FAMILIES.items() if p is proto), proto.__name__)
        raise CapabilityError(f"a {getattr(cluster, 'kind', type(cluster).__name__)} cluster has no {name!r} ability")
    return found
