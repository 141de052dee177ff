"""What every workload client shares: identity, limits, counters, the stop signal."""
from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from harness.history import JsonlWriter, RunClock


@dataclass
class Stats:
    ok: int = 0
    fail: int = 0
    info: int = 0
    delivered: int = 0
    last_error: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def revise(self, old: str, new: str) -> None:
        """A later completion replaces an earlier one (a late confirm)."""
        with self._lock:
            setattr(self, old, getattr(self, old) - 1)
            setattr(self, new, getattr(self, new) + 1)

    def add(self, outcome: str, error: str | None = None) -> None:
        with self._lock:
            setattr(self, outcome, getattr(self, outcome) + 1)
            if error:
                self.last_error = error


class Worker(threading.Thread):
    """A client thread. Subclasses implement `work()`; `stop()` asks it to end."""

    def __init__(self, name: str, writer: JsonlWriter, clock: RunClock, stop_all: threading.Event):
        super().__init__(name=name, daemon=True)
        self.writer, self.clock = writer, clock
        self.stop_all = stop_all           # the run is over
        self.stop_me = threading.Event()   # this client only (producers stop before consumers)
        self.stats = Stats()
        self.error: BaseException | None = None
        self.where: str | None = None  # the crash's innermost frames (file:line), to find its cause
        # what went wrong in the client library and was survived (a producer replaced): run.json
        self.events: list[dict] = []

    def stopping(self) -> bool:
        return self.stop_all.is_set() or self.stop_me.is_set()

    def stop(self) -> None:
        self.stop_me.set()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as e:  # noqa: BLE001 - a client crash is a harness error, reported
            self.error, self.where = e, frames(e)
        finally:
            self.writer.close()

    def work(self) -> None:
        raise NotImplementedError


@runtime_checkable
class Movable(Protocol):
    """A producer an operation may redeploy against other nodes (nemesis: move_producers)."""
    name: str
    moves: list[dict]

    def move_to(self, nodes: list[str]) -> None:
        """Go on publishing through ``nodes`` alone, after the window's confirms."""

    def serving_on(self) -> str | None:
        """The node of the session publishing now; None between sessions or while moving."""


class RateLimiter:
    """How many more messages may go now, at `rate` per second (None: unlimited).

    After a stall (an outage, a blocked connection) it allows at most one
    second's worth at once: the load stays the scenario's, not a catch-up burst.
    """

    def __init__(self, rate: float | None, t0: float):
        self.rate, self.t0 = rate, t0

    def budget(self, now: float, sent: int) -> float:
        if not self.rate:
            return float("inf")
        behind = (now - self.t0) * self.rate - sent
        if behind > self.rate:
            self.t0 = now - (sent + self.rate) / self.rate
            behind = self.rate
        return behind


def frames(e: BaseException, last: int = 3) -> str:
    """The innermost ``last`` frames of an exception's traceback, as file:line function."""
    tb = traceback.extract_tb(e.__traceback__)[-last:]
    return " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb))
