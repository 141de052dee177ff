"""A KRaft controller quorum as a value of its cluster (kafkatest's quorum.py makes the
metadata quorum a value): its voters are the brokers themselves (combined mode: every kafka
node a broker and a voter) or three controllers of their own (dedicated: ctrl1..3, a service
apart, ``controllers.ControllerNodes``; a ZooKeeper cluster's migration adds such a quorum).

Read from each voter's own ``quorum-state`` file (``docker exec``, all at once): the active
controller is the leader named at the highest epoch (``kraft.active_controller``), and the
quorum serves when a majority of the voters' own views name it at that epoch
(``kraft.quorum_leader``)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from harness.brokers.kafka import migration
from harness.brokers.kafka.kraft import QUORUM_STATE, active_controller, quorum_leader, quorum_state


class ControllerQuorum:
    """``voters``: the nodes the cluster's configuration names as voters now (a static
    quorum, whatever each voter's state; none before a migration has added its controllers)."""

    def __init__(self, cluster: Any, voters: Callable[[], list[str]]) -> None:
        self.cluster = cluster
        self._voters = voters

    def voters(self) -> list[str]:
        return self._voters()

    def views(self) -> dict[str, dict | None]:
        """Each voter's persisted quorum state (None: not readable: down, frozen, not yet
        formatted), read from all of them at once."""
        def read(node: str) -> dict | None:
            try:
                code, out = self.cluster.exec(node, ["cat", QUORUM_STATE], check=False, timeout=5)
                return quorum_state(out) if code == 0 else None
            except (ValueError, RuntimeError):  # half-written, or docker exec timed out
                return None
        nodes = self.voters()
        if not nodes:
            return {}
        with ThreadPoolExecutor(len(nodes)) as pool:
            return dict(zip(nodes, pool.map(read, nodes)))

    def leader(self, views: dict[str, dict | None] | None = None) -> str | None:
        """The active controller, if a majority of the voters' own views (``views``, if already
        read) name it at its epoch (None: no voters yet, or no leader they agree on)."""
        voters = self.voters()
        if not voters:
            return None
        return quorum_leader(self.views() if views is None else views, voters)

    def active(self, views: dict[str, dict | None] | None = None) -> tuple[str | None, int | None]:
        """The active controller and its epoch as the highest-epoch view names them."""
        return active_controller(self.views() if views is None else views)

    def serves(self) -> bool:
        return self.leader() is not None

    def back(self, node: str) -> bool:
        """A controller started again is back: running, its log since its start says its server
        started and its controller was told who leads (or leads), and the quorum serves."""
        c = self.cluster
        if not c.running(node) or c.paused(node):
            return False
        log = c.since_start(node)
        return (migration.CONTROLLER_STARTED in log and bool(migration.CONTROLLER_JOINED.search(log))
                and self.serves())


__all__ = ["ControllerQuorum"]
