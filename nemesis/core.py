"""The Nemesis: applies faults to a real cluster, records them, and always heals.

Use::

    cluster = brokers.get(name).cluster(version=settings.version); cluster.up(settings)
    with Nemesis(cluster, run_dir, clock=clock, seed=seed) as nem:   # heals first
        ...start clients...
        nem.run(schedule.parse(scenario["nemesis"]), stop=stop_event)
        nem.heal()              # lift everything, wait until the cluster is whole
        ...recovery period, drain...
    # leaving the block (normally, on an exception, SIGINT or SIGTERM) heals again

``nem.apply(fault, targets, duration=None, **params)`` applies one fault by hand and
``nem.end(fault)`` lifts it. Every fault is one line of ``<run_dir>/nemesis.jsonl``, written
when it ends (``t_end`` is null only for a fault still active when the nemesis is closed
without a heal). While faults are active, ``<run_dir>/nemesis-state.json`` holds them in
full, so ``mqchaos heal --run-dir`` can undo them after the harness died.
"""
from __future__ import annotations

import heapq
import json
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import brokers, store
from harness.brokers.base import NodeExitedError
from harness.history import JsonlWriter, RunClock
from harness.util import wait_until
from harness.windows import OPERATOR
from nemesis import faults as F
from nemesis import net
from nemesis.schedule import CLOSING, FAULTS, Step, parse
from nemesis.targets import NoNodeNow, resolve

# How long a fault waits for a role that names no node at the moment it is due.
TARGET_WAIT_S = 15.0

STATE_FILE = store.NEMESIS_STATE
LOG_FILE = store.NEMESIS_LOG
FINDINGS_FILE = store.FINDINGS
POLL = 0.5  # how often a step's ``when`` is looked at again


class PreconditionError(RuntimeError):
    """A step's ``when`` never held: the state its fault needs did not happen."""


def log(msg: str) -> None:
    print(f"[nemesis] {msg}", file=sys.stderr, flush=True)


class Nemesis:
    def __init__(self, cluster: Any, run_dir: str | os.PathLike | None = None,
                 clock: RunClock | None = None, seed: int = 0, stale_after: float | None = None,
                 heal_timeout: float = 240.0, handle_signals: bool = True,
                 subject: str | None = None, settle: float = 5.0) -> None:
        self.cluster = cluster
        self.subject = subject  # what a bare role target (leader, queue_master...) is about
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
    def _write(self, record: dict) -> None:
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
        state = {"version": 1, "kind": self.cluster.kind, "project": self.cluster.project,
                 "t0": self.clock.t0, "pid": os.getpid(), "active": [f.to_json() for f in self._active]}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, path)  # atomic: a reader never sees half a state

    def _finish(self, f: F.Fault) -> None:
        f.t_end = self.clock.now()
        if f in self._active:
            self._active.remove(f)
        self._write(f.record())
        self._save_state()
        log(f"{f.fault} {f.targets} over at t={f.t_end:.1f}")

    def _plan(self, f: F.Fault, st: Step) -> None:
        """Resolve the step's targets into the fault's plan. A role may name no node for a
        moment (its leader or controller being elected: K9-kraft on 3.9, where the cut
        voter's return forced an election): then wait for one, bounded, with the random
        draws replayed so the seed picks the same nodes, and record the wait."""
        rng_state, t0, last = self.rng.getstate(), time.monotonic(), []

        def plan() -> bool:
            try:
                self.rng.setstate(rng_state)
                F.PLANNERS[st.fault](self._ctx(), f, st.targets, dict(st.params))
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
        return F.Ctx(self.cluster, self.rng, self.clock.now, self.subject)

    # ---- faults ---------------------------------------------------------------------------
    def apply(self, fault: str | Step, targets: Any = None, duration: float | None = None,
              condition: dict | None = None, **params: Any) -> F.Fault | None:
        """Apply one fault now; returns it (None for start/unpause/heal, which end faults).
        ``condition`` is what the step's ``when`` found (recorded with the fault)."""
        st = fault if isinstance(fault, Step) else Step(0.0, fault, targets, duration, params)
        if st.fault not in FAULTS:
            raise ValueError(f"unknown fault {st.fault!r} (one of {FAULTS})")
        if st.targets is None:
            st = Step(st.at, st.fault, F.DEFAULT_TARGETS.get(st.fault, "random:1"), st.duration, st.params)
        if condition and condition.get("failed"):
            a, b = condition["same"]
            why = "the schedule ended before its condition held" if condition.get("cut_short") else \
                "its condition never held"
            raise PreconditionError(f"{why}: {a} and {b} were {condition['seen'][0]} and "
                                    f"{condition['seen'][1]} after {condition['waited_s']:g} s")
        with self._lock:
            if st.fault in CLOSING:
                self._close_step(st)
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
            log(f"{f.fault} {f.targets} at t={f.t_start:.1f}")
            try:
                F.execute(self._ctx(), f, dict(st.params))
            except BaseException as exc:
                f.details["error"] = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                if f.instant and not f.pending():
                    self._finish(f)
                else:
                    self._save_state()
            return f

    def _close_step(self, st: Step) -> None:
        if st.fault == "heal":
            self.heal(wait=bool(st.params.get("wait", True)), timeout=st.params.get("timeout"))
            return
        nodes = set(resolve(self.cluster, st.targets, self.rng, self.subject))
        key = "start" if st.fault == "start" else "unpause"
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

    # ---- schedules ------------------------------------------------------------------------
    def run(self, steps: Any, stop: threading.Event | None = None, duration: float | None = None,
            on_error: str = "record") -> None:
        """Run a schedule (``Step``s, or the raw ``nemesis:`` data of a scenario): each step at
        ``at`` seconds after the call, each fault with a ``duration`` lifted that long after it
        started. With ``duration`` the call lasts exactly that long (later steps are skipped,
        and lifts due later are left to the heal); without, it returns after the last step or
        lift. Faults without a duration stay active. ``stop`` (or ``nem.stop()``) ends it early.
        ``on_error="record"`` writes a failed step as a record with ``details.error`` and goes
        on; ``"raise"`` re-raises."""
        if not isinstance(steps, (list, tuple)) or not all(isinstance(s, Step) for s in steps):
            steps = parse(steps)
        start = time.monotonic()
        end = start + duration if duration is not None else None
        queue: list[tuple[float, int, str, Any]] = []
        for i, st in enumerate(steps):
            if duration is None or st.at < duration:
                heapq.heappush(queue, (start + st.at, i, "apply", st))
        seq = len(queue)
        deadlines: dict[int, float] = {}  # a waiting step's id -> when its ``when`` gives up
        # each step yields at most one lift, and a waiting step one re-check per POLL: bounded
        bound = 4 * seq + 1 + sum(int(st.when["within"] / POLL) + 2 for st in steps if st.when)
        for _ in range(bound):
            if not queue or (end is not None and queue[0][0] >= end):
                break
            when, key, action, obj = heapq.heappop(queue)
            if self._wait_until(when, stop):
                return
            if action == "end":
                self.end(obj)
                continue
            cond = self._ready(obj, key, deadlines) if obj.when else None
            if cond is not None and not cond:
                heapq.heappush(queue, (time.monotonic() + POLL, key, action, obj))
                continue
            f = self._apply_step(obj, on_error, cond)
            if f is not None and obj.duration is not None and f in self._active:
                seq += 1
                heapq.heappush(queue, (time.monotonic() + obj.duration, seq, "end", f))
        # a step still waiting for its condition when the schedule ends did not happen: say so
        # (a silent skip would let the run be judged as if it had)
        for _, key, action, obj in queue:
            if action == "apply" and key in deadlines:
                self._apply_step(obj, on_error, self._ready(obj, key, deadlines, cut_short=True))
        if end is not None:
            self._wait_until(end, stop)

    def _ready(self, st: Step, key: int, deadlines: dict[int, float], cut_short: bool = False) -> dict:
        """What a step's ``when`` found: {} to look again later. Past its ``within``, or
        ``cut_short`` by the schedule's end, the step goes ahead to fail (``apply`` raises,
        ``_apply_step`` records why): the claim's set-up never happened, so nothing after it
        may count as evidence."""
        now = time.monotonic()
        deadlines.setdefault(key, now + st.when["within"])
        ok, seen = self._condition(st.when)
        waited = round(st.when["within"] - (deadlines[key] - now), 2)
        if ok and not cut_short:
            return {"same": st.when["same"], "nodes": seen[0], "waited_s": waited}
        if cut_short:
            return {"same": st.when["same"], "seen": seen, "waited_s": waited, "failed": True, "cut_short": True}
        if now >= deadlines[key]:
            return {"same": st.when["same"], "seen": seen, "waited_s": waited, "failed": True}
        return {}

    def _condition(self, cond: dict) -> tuple[bool, list]:
        seen = []
        for expr in cond["same"]:
            try:
                seen.append(sorted(resolve(self.cluster, expr, self.rng, self.subject)))
            except Exception as exc:  # noqa: BLE001 - a role nobody holds (mid-election): not yet
                seen.append(f"{type(exc).__name__}: {exc}")
        return seen[0] == seen[1] and isinstance(seen[0], list), seen

    def _wait_until(self, when: float, stop: threading.Event | None) -> bool:
        """Wait for a scheduled time; True if told to stop first."""
        while True:
            if self._stop.is_set() or (stop is not None and stop.is_set()):
                return True
            left = when - time.monotonic()
            if left <= 0:
                return False
            (stop or self._stop).wait(min(left, 0.2))

    def _apply_step(self, st: Step, on_error: str, condition: dict | None = None) -> F.Fault | None:
        try:
            return self.apply(st, condition=condition)
        except Exception as exc:  # noqa: BLE001 - a failed step is recorded, the run goes on
            if on_error == "raise":
                raise
            t = self.clock.now()
            log(f"step {st.fault} {st.targets!r} failed: {exc}")
            failed = [f for f in self._active if f.details.get("error")]
            if not failed:
                self._write({"fault": st.fault, "targets": [], "t_start": t, "t_end": t,
                             "details": {"spec": st.targets, "params": st.params, "when": condition,
                                         "error": f"{type(exc).__name__}: {exc}"}})
            return failed[-1] if failed else None

    # ---- heal -----------------------------------------------------------------------------
    def heal(self, wait: bool = True, timeout: float | None = None) -> None:
        """Lift every fault this nemesis knows of and everything the project's rules could have
        left on any node (a rule from a crashed run, a frozen container, a stopped node); then,
        with ``wait``, wait until the cluster is whole (up to ``timeout``, default
        ``heal_timeout``; TimeoutError after). Idempotent."""
        with self._lock:
            self._healing = True
            try:
                self._heal(wait, timeout or self.heal_timeout)
            finally:
                self._healing = False

    def _heal(self, wait: bool, timeout: float) -> None:
        t0 = time.monotonic()
        had_faults = bool(self._active)
        for key in F.UNDO_ORDER:  # across all faults: thaw every node before touching rules
            for f in self._active:
                F.undo(self.cluster, f, (key,))
        swept = sweep(self.cluster)
        for f in list(self._active):
            self._finish(f)
        self._save_state()
        if wait and all(self.cluster.exists(n) for n in self.cluster.nodes()):
            settle, self.settle = self.settle, (self.settle if had_faults or swept else 0.0)
            try:
                self.wait_whole(timeout)
            finally:
                self.settle = settle
            log(f"healed; cluster whole after {time.monotonic() - t0:.1f}s")

    def restart_stuck(self, timeout: float | None = None, why: str = "") -> list[str]:
        """What an operator does when the cluster does not recover by itself after
        the heal: restart the nodes that do not serve (the broker says which), then wait
        until whole (TimeoutError if still not): one operator event. Returns the nodes."""
        c = self.cluster
        stuck = c.stuck_nodes()

        def restart() -> None:
            for n in stuck:
                if c.running(n):
                    c.stop(n)
                c.start(n)
            self.wait_whole(timeout)
        self.operator("restart", stuck, {"reason": why[:500]}, restart)
        return stuck

    def operator(self, action: str, targets: list[str], details: dict, act: Callable[[], Any]) -> Any:
        """Run ``act``, something the harness does to the cluster that is not the scenario's
        fault (an operator's restart, a stale partition's repair, an election it asks for),
        as an operator event in nemesis.jsonl with its times: the run is then not self-healed,
        and no measurement that decides a verdict is taken over its window (harness.windows)."""
        t, error = self.clock.now(), None
        try:
            return act()
        except BaseException as e:
            error = f"{type(e).__name__}: {e}"[:500]
            raise
        finally:
            rec = {"fault": OPERATOR, "action": action, "targets": list(targets), "t_start": round(t, 3),
                   "t_end": round(self.clock.now(), 3), "details": {**details, **({"error": error} if error else {})}}
            self.operator_events.append(rec)
            self._write(rec)
            log(f"operator event: {action} {list(targets)} ({rec['t_end'] - rec['t_start']:.1f}s)")

    def wait_whole(self, timeout: float | None = None) -> None:
        """Until the broker says the cluster serves again, steadily; a recovery the broker
        needed on the way is run and recorded as a finding."""
        self.cluster.wait_whole(timeout or self.heal_timeout, self._steady, self._recover,
                                stale_after=self.stale_after)

    def _steady(self, cond: Any) -> Any:
        """``cond`` made to hold for ``settle`` seconds in a row (for ``wait_until``); a flap
        (whole, then not) is logged, since it is the broker's behaviour worth knowing."""
        since: list[float | None] = [None]

        def check() -> bool:
            gone = self.cluster.exited()  # every fault is lifted: nothing holds a node down
            if gone:
                raise NodeExitedError("; ".join(f"{n} failed by itself ({why})" for n, why in gone.items()))
            try:
                ok = bool(cond())
            except Exception:  # noqa: BLE001 - an unanswered check means "not whole yet"
                ok = False
            now = time.monotonic()
            if not ok:
                if since[0] is not None:
                    log(f"cluster looked whole for {now - since[0]:.1f}s, then not: waiting again")
                since[0] = None
                return False
            since[0] = since[0] or now
            return now - since[0] >= self.settle
        return check

    def _recover(self, finding: dict, action: Any) -> None:
        """Run a recovery step the broker needed after the heal: an operator event, and the
        finding that made it necessary in findings.jsonl."""
        finding = {**finding, "t": self.clock.now()}
        self.operator(finding.get("recovery") or finding.get("finding") or "recover",
                      [finding["node"]] if finding.get("node") else [], finding, action)
        self.findings.append(finding)
        if self.run_dir is not None:
            with JsonlWriter(self.run_dir / FINDINGS_FILE) as w:
                w.write(finding)


def sweep(cluster: Any) -> dict[str, str]:
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
