"""Running a schedule: each step at its time, each fault with a ``duration`` lifted that long
after it started, a step with ``when`` applied once its state holds (or failed when it never
does). Apart from the faults themselves (Jepsen's generator/interpreter.clj runs generators
apart from the nemesis): the scheduler only asks the nemesis to apply and end faults.

A slow step (``FaultType.slow``: an operator's change, a restart waited for) runs on an
operations lane, one thread taking them in their order, so that a rolling upgrade or a
finalize retrying for a minute does not hold back the faults and lifts due meanwhile (U3b's
cut lasted far longer than its 20 s while a finalize ran; M4's kill came only once a removal
had returned). Slow steps still follow one another: the next waits for the one before.
"""
from __future__ import annotations

import dataclasses
import heapq
import logging
import queue as queues
import threading
import time
from typing import Any, Protocol

from harness.brokers.protocol import Cluster
from nemesis.faults import FAULT_TYPES, Fault
from nemesis.schedule import Step, bound_ref, is_bound, parse
from nemesis.targets import resolve

log = logging.getLogger(__name__)

POLL = 0.5  # how often a step's ``when`` is looked at again


class Applies(Protocol):
    """What the scheduler asks of the nemesis (nemesis.core.Nemesis)."""
    cluster: Cluster
    rng: Any
    subject: str | None
    clock: Any

    def apply(self, fault: Step, condition: dict | None = None) -> Fault | None: ...

    def end(self, f: Fault) -> None: ...

    def active_faults(self) -> list[Fault]: ...

    def write(self, record: dict) -> None: ...


class Scheduler:
    """One run of a schedule against a nemesis; ``own_stop`` is the nemesis's own stop
    (``Nemesis.stop``), ``stop`` the caller's: either ends the run early."""

    def __init__(self, nem: Applies, own_stop: threading.Event, stop: threading.Event | None = None,
                 on_error: str = "record") -> None:
        self.nem = nem
        self.own_stop = own_stop
        self.stop = stop
        self.on_error = on_error
        self.hit: dict[str, list[str]] = {}  # a labelled step -> the nodes it hit (choreographies)
        self._lane: queues.Queue | None = None  # the slow steps waiting their turn
        self._lane_thread: threading.Thread | None = None
        self._lane_error: BaseException | None = None  # on_error="raise": the lane's first, raised at its end

    def run(self, steps: Any, duration: float | None = None) -> None:
        """See ``Nemesis.run``."""
        if not isinstance(steps, (list, tuple)) or not all(isinstance(s, Step) for s in steps):
            steps = parse(steps)  # raw data given by hand; a scenario's come parsed (sc.steps)
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
            if self._wait_until(when):
                return
            if action == "end":
                self.nem.end(obj)
                continue
            cond = self._ready(obj, key, deadlines) if obj.when else None
            if cond is not None and not cond:
                heapq.heappush(queue, (time.monotonic() + POLL, key, action, obj))
                continue
            if is_slow(obj):
                self._to_lane(obj, cond)
                continue
            f = self._apply_step(obj, cond)
            if f is not None and obj.duration is not None and f in self.nem.active_faults():
                seq += 1
                heapq.heappush(queue, (time.monotonic() + obj.duration, seq, "end", f))
        # a step still waiting for its condition when the schedule ends did not happen: say so
        # (a silent skip would let the run be judged as if it had)
        for _, key, action, obj in queue:
            if action == "apply" and key in deadlines:
                self._apply_step(obj, self._ready(obj, key, deadlines, cut_short=True))
        if end is not None and self._wait_until(end):
            return
        self._drain_lane()

    # ---- the operations lane ----------------------------------------------------------
    def _to_lane(self, st: Step, cond: dict | None) -> None:
        if self._lane is None:
            self._lane = queues.Queue()
            self._lane_thread = threading.Thread(target=self._run_lane, name="nemesis-operations", daemon=True)
            self._lane_thread.start()
        self._lane.put((st, cond))

    def _run_lane(self) -> None:
        assert self._lane is not None
        while (item := self._lane.get()) is not None:
            if self._stopped() or self._lane_error is not None:  # later operations do not start
                continue
            try:
                self._apply_step(*item)
            except BaseException as exc:  # noqa: BLE001 - on_error="raise": handed to the caller
                self._lane_error = exc

    def _drain_lane(self) -> None:
        """Until the slow steps already started or queued are over (each bounded by its own
        timeouts), or the run is stopped: the heal must not race an operation."""
        if self._lane is None or self._lane_thread is None:
            return
        self._lane.put(None)
        while self._lane_thread.is_alive() and not self._stopped():
            self._lane_thread.join(0.2)
        if self._lane_error is not None:
            raise self._lane_error

    def _stopped(self) -> bool:
        return self.own_stop.is_set() or (self.stop is not None and self.stop.is_set())

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
                seen.append(sorted(resolve(self.nem.cluster, expr, self.nem.rng, self.nem.subject)))
            except Exception as exc:  # noqa: BLE001 - a role nobody holds (mid-election): not yet
                seen.append(f"{type(exc).__name__}: {exc}")
        return seen[0] == seen[1] and isinstance(seen[0], list), seen

    def _wait_until(self, when: float) -> bool:
        """Wait for a scheduled time; True if told to stop first."""
        while True:
            if self._stopped():
                return True
            left = when - time.monotonic()
            if left <= 0:
                return False
            (self.stop or self.own_stop).wait(min(left, 0.2))

    def bind(self, targets: str) -> list[str]:
        """A choreography's bound target (nemesis.schedule.BOUND): the nodes an earlier part
        hit, or brokers it did not hit, drawn with the nemesis's seeded generator."""
        ref, pick = bound_ref(targets)
        if ref not in self.hit:
            raise ValueError(f"{targets}: the step labelled {ref} hit nothing (it failed or has not run)")
        if pick is None:
            return list(self.hit[ref])
        pool = sorted(set(self.nem.cluster.brokers()) - set(self.hit[ref]))
        if len(pool) < pick:
            raise ValueError(f"{targets}: {pick} broker(s) outside {sorted(self.hit[ref])} wanted, {len(pool)} left")
        return sorted(self.nem.rng.sample(pool, pick))

    def _apply_step(self, st: Step, condition: dict | None = None) -> Fault | None:
        try:
            if is_bound(st.targets):
                st = dataclasses.replace(st, targets=self.bind(st.targets))
            f = self.nem.apply(st, condition=condition)
            if st.label and f is not None and not f.details.get("error"):
                self.hit[st.label] = _struck(f)
            return f
        except Exception as exc:  # noqa: BLE001 - a failed step is recorded, the run goes on
            if self.on_error == "raise":
                raise
            t = self.nem.clock.now()
            log.error("step %s %r failed: %s", st.fault, st.targets, exc)
            known = getattr(exc, "nemesis_fault", None)
            if known is not None:  # the fault itself holds the error (and, once over, its record)
                return known
            failed = [f for f in self.nem.active_faults() if f.details.get("error")]
            if not failed:
                self.nem.write({"fault": st.fault, "targets": [], "t_start": t, "t_end": t,
                                "details": {"spec": st.targets, "params": st.params, "when": condition,
                                            "error": f"{type(exc).__name__}: {exc}"}})
            return failed[-1] if failed else None


def is_slow(st: Step) -> bool:
    kind = FAULT_TYPES.get(st.fault)
    return bool(kind and kind.slow)


def _struck(f: Fault) -> list[str]:
    """The nodes a fault struck: a cut's smallest side (the isolated minority), else its targets."""
    sides = f.details.get("sides")
    if sides:
        return sorted(min(sides, key=len))
    return sorted(f.targets)
