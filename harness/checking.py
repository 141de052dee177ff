"""One warm Spark session for a batch of runs (harness.batch).

The session starts (and warms up on a tiny history) when the batch does, so its JVM
start-up overlaps the first cluster's. A single thread then checks each run as soon as its
history is closed and judges it once the run loop is done with it: check.json, the verdict,
the report's text. What only a person or a later Spark job needs (the report's pictures,
the history's Parquet copy) is done between runs only: while a window is open (``release``:
a run's load is over, the next cluster comes up) and never past ``hold`` (a run is about to
start its workload), which lets the item under way finish and keeps the rest for the next
window or for ``close``. A check that fails leaves that run undecided and the next one
checked: a session the failure stopped is started again.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from checkers.cds import warm_up
from checkers.spark import session
from harness.runner import Run, log
from harness.verdicts import EXIT_UNKNOWN


class Checker:
    def __init__(self, master: str | None = None, app: str = "mqchaos-batch",
                 spark_factory: Callable[[], Any] | None = None, warm: bool | None = None) -> None:
        self._factory = spark_factory or (lambda: session(master, app))
        self.warm = spark_factory is None if warm is None else warm
        self._spark: Any = None
        self._cond = threading.Condition()
        # each item a callable: checks (and the session's start) first; pictures and copies
        # only while a window is open
        self._urgent: deque[Callable[[], None]] = deque([self._start])
        self._later: deque[Callable[[], None]] = deque()
        self._open = True                   # the first cluster is coming up: a window
        self._busy = False                  # an item is under way
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="checker", daemon=True)
        self._thread.start()

    # -- the batch's side ------------------------------------------------------------------
    def submit(self, run: Run, done: Callable[[int, str | None], None]) -> None:
        """Check ``run`` (its history closed); ``done(exit code, error)`` once judged."""
        with self._cond:
            self._urgent.append(partial(self._check, run, done, time.monotonic()))
            self._cond.notify_all()

    def hold(self, timeout: float | None = None) -> bool:
        """Close the window: until every check is judged and no item is under way (a run's
        workload never shares the machine with the checker); False if ``timeout`` passed."""
        with self._cond:
            self._open = False
            return self._cond.wait_for(lambda: not self._urgent and not self._busy, timeout)

    def release(self) -> None:
        """Open a window: what waits for one may run."""
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until nothing at all is left (window open)."""
        with self._cond:
            self._open = True
            self._cond.notify_all()
            return self._cond.wait_for(lambda: not (self._urgent or self._later or self._busy), timeout)

    def close(self) -> None:
        """Everything submitted done, then the thread ends (the session stays: a later batch
        in the same process reuses it)."""
        self.wait_idle()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()

    # -- the thread -----------------------------------------------------------------------
    def _next(self) -> Callable[[], None] | None:
        with self._cond:
            self._cond.wait_for(lambda: self._urgent or (self._open and self._later) or self._closing)
            if self._urgent:
                item = self._urgent.popleft()
            elif self._open and self._later:
                item = self._later.popleft()
            else:
                return None  # closing
            self._busy = True
            return item

    def _loop(self) -> None:
        while (item := self._next()) is not None:
            try:
                item()
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _session(self) -> Any:
        if self._spark is not None and _stopped(self._spark):
            log("checker: the Spark session stopped; starting another")
            self._spark = None
        if self._spark is None:
            t0 = time.monotonic()
            self._spark = self._factory()
            log(f"checker: Spark session ready in {time.monotonic() - t0:.1f}s")
        return self._spark

    def _start(self) -> None:
        try:
            spark = self._session()
            if self.warm:
                # a first check compiles most of what it runs: done now, while the first
                # cluster comes up, not while the next run waits for a verdict
                t0 = time.monotonic()
                warm_up(spark, copy=False)
                log(f"checker: warmed up in {time.monotonic() - t0:.1f}s")
        except Exception as e:  # noqa: BLE001 - each check tries again and says why
            log(f"checker: Spark did not start: {type(e).__name__}: {e}")

    def _run_later(self, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a picture or a copy is not a verdict
            log(f"checker: {what} failed: {type(e).__name__}: {e}")

    def _check(self, run: Run, done: Callable[[int, str | None], None], queued: float) -> None:
        t0 = time.monotonic()
        result, error = None, None
        try:
            result = run.check(self._session())
            if result is None:
                error = "the history could not be opened"
        except Exception as e:  # noqa: BLE001 - this run undecided, the next still checked
            error = f"check failed: {type(e).__name__}: {e}"
            log(f"checker: {run.dir}: {error}")
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
            log(f"checker: {run.dir}: {error}")
        timing["judge_s"] = round(time.monotonic() - t2, 2)
        run.info["exit_code"] = code
        run.save_info()
        done(code, error)
        if result is not None:
            with self._cond:
                self._later.append(partial(self._run_later, f"{run.dir}: pictures", lambda: run.draw(result)))
                self._later.append(partial(self._run_later, f"{run.dir}: Parquet copy",
                                           lambda: run.keep_copy(self._session())))


def _stopped(spark: Any) -> bool:
    try:
        return spark.sparkContext._jsc is None or spark.sparkContext._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - a gateway that does not answer is as good as stopped
        return True
