"""The Nemesis: applies faults to a real cluster, records them, and always heals.

Use::

    cluster = brokers.get(name).cluster(version=settings.version); cluster.up(settings)
    with Nemesis(cluster, run_dir, clock=clock, seed=seed) as nem:   # heals first
        ...start clients...
        nem.run(scenario.steps, stop=stop_event)   # the schedule the scenario loader parsed
        nem.heal()              # lift everything, wait until the cluster is whole
        ...recovery period, drain...
    # leaving the block (normally, on an exception, SIGINT or SIGTERM) heals again

``nem.apply(fault, targets, duration=None, **params)`` applies one fault by hand and
``nem.end(fault)`` lifts it. Every fault is one line of ``<run_dir>/nemesis.jsonl``, written
when it ends (``t_end`` is null only for a fault still active when the nemesis is closed
without a heal). While faults are active, ``<run_dir>/nemesis-state.json`` holds them in
full, so ``mqchaos cluster heal --run-dir`` can undo them after the harness died.

This module keeps the records, the state file and the public API; running a schedule is
nemesis/scheduler.py's, healing and the harness's own recovery steps nemesis/recovery.py's,
what each kind of fault is nemesis/faults.py's registry.
"""
from __future__ import annotations

import json
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import brokers, store
from harness.brokers.protocol import Cluster
from harness.history import JsonlWriter, RunClock
from harness.util import wait_until
from nemesis import faults as F
from nemesis import recovery
from nemesis.schedule import Step
from nemesis.scheduler import Scheduler
from nemesis.targets import NoNodeNow, resolve

log = logging.getLogger(__name__)

# How long a fault waits for a role that names no node at the moment it is due.
TARGET_WAIT_S = 15.0

STATE_FILE = store.NEMESIS_STATE
LOG_FILE = store.NEMESIS_LOG
FINDINGS_FILE = recovery.FINDINGS_FILE
sweep = recovery.sweep  # public here, as it was before recovery moved out (heal scripts, tests)


class PreconditionError(RuntimeError):
    """A step's ``when`` never held: the state its fault needs did not happen."""


class Nemesis:
    def __init__(self, cluster: Cluster, run_dir: str | os.PathLike | None = None,
                 clock: RunClock | None = None, seed: int = 0, stale_after: float | None = None,
                 heal_timeout: float = 240.0, handle_signals: bool = True,
                 subject: str | None = None, settle: float = 5.0) -> None:
        self.cluster: Cluster = cluster
        self.subject = subject  # what a bare role target (leader, queue_master...) is about
        # the run's producers, once the load starts (an operation may move them: move_producers)
        self.producers: Callable[[], list] | None = None
        self.run_dir = Path(run_dir) if run_dir else None
        self.clock = clock or RunClock()
        self.seed = seed
        self.rng = random.Random(seed)
        self.stale_after = stale_after
        self.heal_timeout = heal_timeout
        self.settle = settle  # "whole" must hold this long: RabbitMQ can look whole, then flap
        self.handle_signals = handle_signals
        self._active: list[F.Fault] = []
        self.records: list[dict] = []
        self.findings: list[dict] = []
        self.operator_events: list[dict] = []  # the harness's own hand on the cluster
        self._n = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._writer: JsonlWriter | None = None
        self._healing = False
        self._deferred: int | None = None
        self._old_handlers: dict[int, Any] = {}

    # ---- context: heal on entry, on exit, on SIGINT/SIGTERM -------------------------------
    def __enter__(self) -> "Nemesis":
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        self.heal()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        try:
            self.heal()
        finally:
            self.close()

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._healing:  # never interrupt a heal: finish it, then die
            self._deferred = signum
            return
        self._stop.set()
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    def close(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()
        if self._writer:
            self._writer.close()
        if self._deferred is not None:
            signum, self._deferred = self._deferred, None
            raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    def active(self) -> str:
        """The active faults in a few words, for a progress line ('' when none). Lock-free (a
        copy of the list): a progress thread must not wait for a heal that takes minutes."""
        return "; ".join(f.describe() for f in list(self._active))

    def active_faults(self) -> list[F.Fault]:
        return list(self._active)

    def stop(self) -> None:
        """Ask a running ``run`` to return at its next wait."""
        self._stop.set()

    # ---- records and state ----------------------------------------------------------------
    def write(self, record: dict) -> None:
        """One line of nemesis.jsonl (a fault over, a failed step, an operator event)."""
        self.records.append(record)
        if self.run_dir is None:
            return
        if self._writer is None:
            self._writer = JsonlWriter(self.run_dir / LOG_FILE)
        self._writer.write(record)

    def _save_state(self) -> None:
        if self.run_dir is None:
            return
        path = self.run_dir / STATE_FILE
        if not self._active:
            path.unlink(missing_ok=True)
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(5):  # a slow step's details may grow in its own thread meanwhile
            try:
                text = json.dumps({"version": 1, "kind": self.cluster.kind, "project": self.cluster.project,
                                   "t0": self.clock.t0, "pid": os.getpid(),
                                   "active": [f.to_json() for f in list(self._active)]}, indent=1)
                break
            except RuntimeError:
                if attempt == 4:
                    raise
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: a reader never sees half a state

    def _finish(self, f: F.Fault) -> None:
        if f.t_end is not None and f not in self._active:
            return  # finished already (a heal during a slow step): one record per fault
        f.t_end = self.clock.now()
        if f in self._active:
            self._active.remove(f)
        self.write(f.record())
        self._save_state()
        log.info("%s %s over at t=%.1f", f.fault, f.targets, f.t_end)

    def finish_all(self) -> None:
        """Record every active fault as over (the heal has lifted them)."""
        for f in list(self._active):
            self._finish(f)
        self._save_state()

    def _plan(self, f: F.Fault, st: Step) -> None:
        """Resolve the step's targets into the fault's plan. A role may name no node for a
        moment (its leader or controller being elected: K9-kraft on 3.9, where the cut
        voter's return forced an election): then wait for one, bounded, with the random
        draws replayed so the seed picks the same nodes, and record the wait."""
        rng_state, t0, last = self.rng.getstate(), time.monotonic(), []

        def plan() -> bool:
            try:
                self.rng.setstate(rng_state)
                F.FAULT_TYPES[st.fault].plan(self._ctx(), f, st.targets, dict(st.params))
                return True
            except NoNodeNow as e:
                last[:] = [e]
                return False
        try:
            wait_until(plan, TARGET_WAIT_S, "", interval=0.25, reraise=(Exception,))
        except TimeoutError:
            raise NoNodeNow(f"{last[0]} (waited {TARGET_WAIT_S:g} s)") from None
        if last:
            f.details["target_wait_s"] = round(time.monotonic() - t0, 2)

    def _ctx(self) -> F.Ctx:
        return F.Ctx(self.cluster, self.rng, self.clock.now, self.subject, self.producers)

    # ---- faults ---------------------------------------------------------------------------
    def apply(self, fault: str | Step, targets: Any = None, duration: float | None = None,
              condition: dict | None = None, **params: Any) -> F.Fault | None:
        """Apply one fault now; returns it (None for start/unpause/heal, which end faults).
        ``condition`` is what the step's ``when`` found (recorded with the fault)."""
        st = fault if isinstance(fault, Step) else Step(0.0, fault, targets, duration, params)
        if st.fault not in F.FAULT_TYPES:
            raise ValueError(f"unknown fault {st.fault!r} (one of {F.FAULTS})")
        kind = F.FAULT_TYPES[st.fault]
        if st.targets is None:
            st = Step(st.at, st.fault, kind.default_targets, st.duration, st.params)
        if condition and condition.get("failed"):
            a, b = condition["same"]
            why = "the schedule ended before its condition held" if condition.get("cut_short") else \
                "its condition never held"
            raise PreconditionError(f"{why}: {a} and {b} were {condition['seen'][0]} and "
                                    f"{condition['seen'][1]} after {condition['waited_s']:g} s")
        with self._lock:
            if kind.closes:
                self._close_step(st, kind.closes)
                return None
            self._n += 1
            f = F.Fault(id=f"f{self._n}", fault=st.fault, targets=[],
                        details={"spec": st.targets, "params": dict(st.params)})
            self._plan(f, st)  # under the lock: a heal waits for it, at most TARGET_WAIT_S
            if st.duration is not None:
                f.details["duration"] = st.duration
            if condition:
                f.details["when"] = condition
            f.t_start = self.clock.now()
            self._active.append(f)
            self._save_state()  # before any side effect: a crash mid-apply stays healable
            log.info("%s %s at t=%.1f", f.fault, f.targets, f.t_start)
            if not kind.slow:
                self._execute(f, st)
                return f
        # a slow step (an operation, minutes of it) acts outside the lock: the faults and lifts
        # due meanwhile go on (nemesis.scheduler's operations lane); it is recorded all the same
        self._execute(f, st)
        return f

    def _execute(self, f: F.Fault, st: Step) -> None:
        try:
            F.execute(self._ctx(), f, dict(st.params))
        except BaseException as exc:
            f.details["error"] = f"{type(exc).__name__}: {exc}"
            exc.nemesis_fault = f  # type: ignore[attr-defined] - recorded already: the scheduler writes no second record
            raise
        finally:
            with self._lock:
                if f.instant and not f.pending():
                    self._finish(f)
                else:
                    self._save_state()

    def _close_step(self, st: Step, key: str) -> None:
        """A step that ends earlier faults: ``key`` is the undo key it lifts (F.ALL: a heal)."""
        if key == F.ALL:
            self.heal(wait=bool(st.params.get("wait", True)), timeout=st.params.get("timeout"))
            return
        nodes = set(resolve(self.cluster, st.targets, self.rng, self.subject))
        for n in (n for n in self.cluster.nodes() if n in nodes):  # ZooKeeper before brokers
            (self.cluster.start if key == "start" else self.cluster.unpause)(n)
        for f in list(self._active):  # t_end: when the container runs again
            if set(f.undo.get(key) or ()) & nodes:
                f.undo[key] = [n for n in f.undo[key] if n not in nodes]
                if not f.pending():
                    self._finish(f)
        self._save_state()

    def end(self, f: F.Fault) -> None:
        """Lift one fault (exactly its own rules / nodes) and record it."""
        with self._lock:
            if f not in self._active:
                return
            F.undo(self.cluster, f)
            if f.pending():
                self._save_state()  # frozen nodes hold some of it: the final heal will finish
            else:
                self._finish(f)

    # ---- schedules (nemesis/scheduler.py) -------------------------------------------------
    def run(self, steps: Any, stop: threading.Event | None = None, duration: float | None = None,
            on_error: str = "record") -> None:
        """Run a schedule (``Step``s: a scenario's ``steps``, parsed when it was loaded; or raw
        ``nemesis:`` data, by hand): each step at ``at`` seconds after the call, each fault with
        a ``duration`` lifted that long after it started. With ``duration`` the call lasts
        exactly that long (later steps are skipped, and lifts due later are left to the heal);
        without, it returns after the last step or lift. Faults without a duration stay
        active. ``stop`` (or ``nem.stop()``) ends it early. ``on_error="record"`` writes a
        failed step as a record with ``details.error`` and goes on; ``"raise"`` re-raises."""
        Scheduler(self, self._stop, stop, on_error).run(steps, duration)

    # ---- heal and recovery (nemesis/recovery.py) ------------------------------------------
    def heal(self, wait: bool = True, timeout: float | None = None) -> None:
        """Lift every fault this nemesis knows of and everything the project's rules could have
        left on any node (a rule from a crashed run, a frozen container, a stopped node); then,
        with ``wait``, wait until the cluster is whole (up to ``timeout``, default
        ``heal_timeout``; TimeoutError after). Idempotent."""
        with self._lock:
            self._healing = True
            try:
                recovery.heal(self, wait, timeout or self.heal_timeout)
            finally:
                self._healing = False

    def restart_stuck(self, timeout: float | None = None, why: str = "") -> list[str]:
        """Restart the nodes that do not serve after the heal, as an operator would: one
        operator event (``recovery.restart_stuck``). Returns the nodes."""
        return recovery.restart_stuck(self, timeout, why)

    def operator(self, action: str, targets: list[str], details: dict, act: Callable[[], Any]) -> Any:
        """Run ``act`` as an operator event: the harness's hand on the cluster, not the
        scenario's fault (``recovery.operator``)."""
        return recovery.operator(self, action, targets, details, act)

    def wait_whole(self, timeout: float | None = None) -> None:
        """Until the broker says the cluster serves again, steadily (``recovery.wait_whole``)."""
        recovery.wait_whole(self, timeout)


def heal_run_dir(run_dir: str | os.PathLike, wait: bool = True) -> dict | None:
    """``mqchaos heal --run-dir``: undo and record the faults a dead harness left active."""
    path = Path(run_dir) / STATE_FILE
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    cluster = brokers.get_cluster(state["kind"])
    cluster.project = state.get("project", cluster.project)
    nem = Nemesis(cluster, run_dir, clock=RunClock(float(state["t0"])), handle_signals=False)
    nem._active = [F.Fault.from_json(f) for f in state["active"]]
    nem._n = len(nem._active) + 1000  # ids of any new record never clash with the dead run's
    for f in nem._active:
        f.details["healed_by"] = "mqchaos heal"
    heal_and_close(nem, wait)
    return state


def heal_and_close(nem: Nemesis, wait: bool = True) -> None:
    """Heal, then release the nemesis (signal handlers) and the cluster's clients."""
    try:
        nem.heal(wait=wait)
    finally:
        nem.close()
        nem.cluster.close()
