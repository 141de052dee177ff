"""One warm Spark session for a batch of runs (harness.batch).

The session starts (and warms up on a tiny history) when the batch does, so its JVM
start-up overlaps the first cluster's. Its JVM runs at the lowest CPU priority: it gets
the CPU only when the running workload's brokers and clients leave it idle, so a check
may run beside the next run's load. A single thread checks each run as soon as its
history is closed and judges it once the run loop is done with it: check.json, the
verdict, the report's text. What only a person or a later Spark job needs goes, once the
run is judged, to a second lane, which may run beside the next run's check: the report's
pictures (drawn by a process at the lowest priority) and the history's Parquet copy (in the
same session, its jobs in a pool whose tasks yield to a check's: checkers/spark/fairscheduler.xml).
A check that fails leaves that run undecided and the next one checked: a session the
failure stopped is started again.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from checkers.spark.cds import warm_up
from checkers.spark import session, stopped
from harness.runner import RunHandle
from harness.util import background_priority
from harness.verdicts import EXIT_UNKNOWN

log = logging.getLogger(__name__)


class CheckQueue:
    """Two single-worker queues over one Spark session: "check" (the session's start, then
    each run's check and judging, in the order submitted) and "keep" (pictures and Parquet
    copies, after each verdict). What it uses of a run is ``harness.runner.RunHandle``;
    judging is harness.judge's, through the handle."""

    def __init__(self, master: str | None = None, app: str = "mqchaos-batch",
                 spark_factory: Callable[[], Any] | None = None, warm: bool | None = None) -> None:
        self._factory = spark_factory or (lambda: session(master, app))
        self.warm = spark_factory is None if warm is None else warm
        self._spark: Any = None
        self._session_lock = threading.RLock()
        self._cond = threading.Condition()
        # two lanes, a thread each: the session's start and the checks; then the Parquet
        # copies (beside the checks: both read the JSONL) and the pictures (after judging)
        self._lanes: dict[str, deque[Callable[[], None]]] = {"check": deque([self._start]), "keep": deque()}
        self._busy = 0                      # items under way
        self._closing = False
        self._drawing: list[tuple[Any, Any]] = []  # (run dir, its drawing process)
        self._threads = [threading.Thread(target=self._loop, args=(lane,), name=f"checker-{lane}", daemon=True)
                         for lane in self._lanes]
        for t in self._threads:
            t.start()

    # -- the batch's side ------------------------------------------------------------------
    def submit(self, run: RunHandle, done: Callable[[int, str | None], None]) -> None:
        """Check ``run`` (its history closed); ``done(exit code, error)`` once judged."""
        with self._cond:
            self._lanes["check"].append(partial(self._check, run, done, time.monotonic()))
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until nothing at all is left, pictures drawn; False if ``timeout`` passed."""
        with self._cond:
            idle = self._cond.wait_for(lambda: not (any(self._lanes.values()) or self._busy), timeout)
        if idle:
            self.wait_drawn()
        return idle

    def close(self) -> None:
        """Everything submitted done, pictures drawn, then the threads end (the session
        stays: a later batch in the same process reuses it)."""
        self.wait_idle()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for t in self._threads:
            t.join()

    def wait_drawn(self) -> None:
        """Until every picture process started so far has ended (failures said, not raised)."""
        while self._drawing:
            run_dir, proc = self._drawing.pop(0)
            if proc is None:  # drawn already (a run that draws in-process)
                continue
            try:
                _, err = proc.communicate(timeout=300)
                if proc.returncode:
                    log.warning("checker: %s: pictures failed: %s", run_dir, err.strip()[-800:])
            except Exception as e:  # noqa: BLE001 - a picture is not a verdict
                proc.kill()
                log.warning("checker: %s: pictures failed: %s: %s", run_dir, type(e).__name__, e)

    # -- the threads ----------------------------------------------------------------------
    def _next(self, lane: str) -> Callable[[], None] | None:
        with self._cond:
            self._cond.wait_for(lambda: self._lanes[lane] or self._closing)
            if not self._lanes[lane]:
                return None  # closing
            self._busy += 1
            return self._lanes[lane].popleft()

    def _loop(self, lane: str) -> None:
        while (item := self._next(lane)) is not None:
            try:
                item()
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()


    def _session_in(self, pool: str) -> Any:
        """The session, this thread's jobs in scheduler ``pool`` (checkers/spark/fairscheduler.xml:
        a check's tasks before a copy's)."""
        spark = self._session()
        try:
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
        except Exception:  # noqa: BLE001 - a session without pools (a test's) runs it anyway
            pass
        return spark

    def _session(self) -> Any:
        with self._session_lock:  # both lanes ask; one session
            if self._spark is not None and stopped(self._spark):
                log.warning("checker: the Spark session stopped; starting another")
                self._spark = None
            if self._spark is None:
                t0 = time.monotonic()
                with background_priority():  # the JVM it launches, and every thread of it
                    self._spark = self._factory()
                log.info("checker: Spark session ready in %.1fs", time.monotonic() - t0)
            return self._spark

    def _start(self) -> None:
        try:
            spark = self._session()
            if self.warm:
                # a first check compiles most of what it runs: done now, while the first
                # cluster comes up, not while the next run waits for a verdict
                t0 = time.monotonic()
                warm_up(spark, copy=False)
                log.info("checker: warmed up in %.1fs", time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - each check tries again and says why
            log.error("checker: Spark did not start: %s: %s", type(e).__name__, e)

    def _run_later(self, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a picture or a copy is not a verdict
            log.warning("checker: %s failed: %s: %s", what, type(e).__name__, e)

    def _check(self, run: RunHandle, done: Callable[[int, str | None], None], queued: float) -> None:
        t0 = time.monotonic()
        result, error = None, None
        try:
            result = run.check(self._session_in("checks"))
            if result is None:
                error = "the history could not be opened"
        except Exception as e:  # noqa: BLE001 - this run undecided, the next still checked
            error = f"check failed: {type(e).__name__}: {e}"
            log.error("checker: %s: %s", run.dir, error)
        t1 = time.monotonic()
        run.executed.wait()  # run.json is the run loop's until it returns
        t2 = time.monotonic()
        # where the check's time went (make bench-main): queued, Spark, waiting for the run
        # loop to be done with run.json (its cluster going down), judging
        timing = {"queued_s": round(t0 - queued, 2), "check_s": round(t1 - t0, 2),
                  "wait_run_s": round(t2 - t1, 2)}
        run.info["check_timing"] = timing
        code = EXIT_UNKNOWN
        try:
            if result is not None:
                code = run.finish(result, pictures=False)
        except Exception as e:  # noqa: BLE001
            error = f"judging failed: {type(e).__name__}: {e}"
            log.error("checker: %s: %s", run.dir, error)
        timing["judge_s"] = round(time.monotonic() - t2, 2)
        run.info["exit_code"] = code
        run.save_info()
        done(code, error)
        if result is not None:  # after the verdict, off its path; maybe beside the next check
            with self._cond:
                self._lanes["keep"].append(partial(self._run_later, f"{run.dir}: pictures",
                                                   lambda: self._drawing.append((run.dir, run.draw()))))
                self._lanes["keep"].append(partial(self._run_later, f"{run.dir}: Parquet copy",
                                                   lambda: run.keep_copy(self._session_in("copies"))))
                self._cond.notify_all()
