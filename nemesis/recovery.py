"""Bringing the cluster back: the heal (every fault lifted, whatever any run left swept
away), waiting until the broker says the cluster is whole and steadily so, and the
harness's own hand on the cluster when it is not (operator events: a restart of the nodes
that do not serve, a stale partition's repair), each recorded as such. Jepsen's
``:final-generator`` heal, kept apart from the faults and the schedule.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Callable, Protocol

from harness import store
from harness.brokers.protocol import Cluster, NodeExitedError
from harness.history import JsonlWriter
from harness.windows import OPERATOR
from nemesis import faults as F
from nemesis import net

log = logging.getLogger(__name__)

FINDINGS_FILE = store.FINDINGS


class Heals(Protocol):
    """What recovery asks of the nemesis (nemesis.core.Nemesis)."""
    cluster: Cluster
    clock: Any
    run_dir: Path | None
    settle: float
    heal_timeout: float
    stale_after: float | None
    findings: list[dict]
    operator_events: list[dict]

    def active_faults(self) -> list[F.Fault]: ...

    def finish_all(self) -> None: ...

    def write(self, record: dict) -> None: ...

    def operator(self, action: str, targets: list[str], details: dict, act: Callable[[], Any]) -> Any: ...


def heal(nem: Heals, wait: bool, timeout: float) -> None:
    """Lift every fault the nemesis knows of, sweep what anything else left, record the
    faults as over; with ``wait``, wait until the cluster is whole (see ``Nemesis.heal``)."""
    t0 = time.monotonic()
    active = nem.active_faults()
    for key in F.UNDO_ORDER:  # across all faults: thaw every node before touching rules
        for f in active:
            F.undo(nem.cluster, f, (key,))
    swept = sweep(nem.cluster)
    nem.finish_all()
    if wait and all(nem.cluster.exists(n) for n in nem.cluster.nodes()):
        # nothing was lifted: nothing can flap, so "whole" need not hold a while
        settle, nem.settle = nem.settle, (nem.settle if active or swept else 0.0)
        try:
            wait_whole(nem, timeout)
        finally:
            nem.settle = settle
        log.info("healed; cluster whole after %.1fs", time.monotonic() - t0)


def sweep(cluster: Cluster) -> dict[str, str]:
    """Whatever anything left: thaw frozen containers, remove every project rule, chain and
    qdisc (on every node at once), start stopped nodes (ZooKeeper before brokers: ``nodes()``
    order). Returns what was done per node."""
    done: dict[str, str] = {}
    states = cluster.node_states()
    for n, st in states.items():
        if st == "paused":
            cluster.unpause(n)
            done[n] = "unpaused"
    live = [n for n, st in states.items() if st != "stopped"]
    if live:
        with ThreadPoolExecutor(len(live)) as pool:
            list(pool.map(lambda n: net.clear_node(cluster, n), live))
    for n, st in states.items():
        if st == "stopped":
            cluster.start(n)
            done[n] = "started"
    return done


def restart_stuck(nem: Heals, timeout: float | None = None, why: str = "") -> list[str]:
    """What an operator does when the cluster does not recover by itself after
    the heal: restart the nodes that do not serve (the broker says which), then wait
    until whole (TimeoutError if still not): one operator event. Returns the nodes."""
    c = nem.cluster
    stuck = c.stuck_nodes()

    def restart() -> None:
        for n in stuck:
            if c.running(n):
                c.stop(n)
            c.start(n)
        wait_whole(nem, timeout)
    nem.operator("restart", stuck, {"reason": why[:500]}, restart)
    return stuck


def operator(nem: Heals, action: str, targets: list[str], details: dict, act: Callable[[], Any]) -> Any:
    """Run ``act``, something the harness does to the cluster that is not the scenario's
    fault (an operator's restart, a stale partition's repair, an election it asks for),
    as an operator event in nemesis.jsonl with its times: the run is then not self-healed,
    and no measurement that decides a verdict is taken over its window (harness.windows)."""
    t, error = nem.clock.now(), None
    try:
        return act()
    except BaseException as e:
        error = f"{type(e).__name__}: {e}"[:500]
        raise
    finally:
        rec = {"fault": OPERATOR, "action": action, "targets": list(targets), "t_start": round(t, 3),
               "t_end": round(nem.clock.now(), 3), "details": {**details, **({"error": error} if error else {})}}
        nem.operator_events.append(rec)
        nem.write(rec)
        log.info("operator event: %s %s (%.1fs)", action, list(targets), rec["t_end"] - rec["t_start"])


def wait_whole(nem: Heals, timeout: float | None = None) -> None:
    """Until the broker says the cluster serves again, steadily; a recovery the broker
    needed on the way is run and recorded as a finding."""
    nem.cluster.wait_whole(timeout or nem.heal_timeout, partial(_steady, nem), partial(_recover, nem),
                           stale_after=nem.stale_after)


def _steady(nem: Heals, cond: Any) -> Any:
    """``cond`` made to hold for ``settle`` seconds in a row (for ``wait_until``); a flap
    (whole, then not) is logged, since it is the broker's behaviour worth knowing."""
    since: list[float | None] = [None]

    def check() -> bool:
        gone = nem.cluster.exited()  # every fault is lifted: nothing holds a node down
        if gone:
            raise NodeExitedError("; ".join(f"{n} failed by itself ({why})" for n, why in gone.items()))
        try:
            ok = bool(cond())
        except Exception:  # noqa: BLE001 - an unanswered check means "not whole yet"
            ok = False
        now = time.monotonic()
        if not ok:
            if since[0] is not None:
                log.info("cluster looked whole for %.1fs, then not: waiting again", now - since[0])
            since[0] = None
            return False
        since[0] = since[0] or now
        return now - since[0] >= nem.settle
    return check


def _recover(nem: Heals, finding: dict, action: Any) -> None:
    """Run a recovery step the broker needed after the heal: an operator event, and the
    finding that made it necessary in findings.jsonl."""
    finding = {**finding, "t": nem.clock.now()}
    nem.operator(finding.get("recovery") or finding.get("finding") or "recover",
                 [finding["node"]] if finding.get("node") else [], finding, action)
    nem.findings.append(finding)
    if nem.run_dir is not None:
        with JsonlWriter(nem.run_dir / FINDINGS_FILE) as w:
            w.write(finding)
