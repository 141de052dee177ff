"""Append-only JSONL history writers: the crash-safe record of a run.

Each record is one line, flushed as soon as it is written, so a crash loses at
most the line being written. The format is a public contract: docs/history.md.

Version 2 (write-ahead): a producer writes an ``invoke`` record before it sends a
message and the completion (``ok`` / ``fail`` / ``info``) when it learns the outcome;
a confirm that arrives after the client gave up (``info``) is written as a later
``ok`` completion. A message with an invoke and no completion is unknown (``info``).
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any


HISTORY_VERSION = 3  # run.json "history_version" (docs/history.md); histories without it are version 1
OUTCOMES = ("ok", "fail", "info")
INVOKE = "invoke"


class RunClock:
    """Seconds since the run started, from one monotonic clock.

    Child processes get the same origin through MQCHAOS_RUN_T0 (a
    `time.monotonic()` reading; CLOCK_MONOTONIC is system-wide on Linux).
    """

    ENV = "MQCHAOS_RUN_T0"

    def __init__(self, t0: float | None = None):
        if t0 is None:
            t0 = float(os.environ.get(self.ENV, time.monotonic()))
        self.t0 = t0

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 6)

    def export(self) -> None:
        os.environ[self.ENV] = repr(self.t0)


class JsonlWriter:
    """Thread-safe, line-buffered JSONL appender."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._f.write(line + "\n")
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def produce_record(*, msg_id: str, producer: str, seq: int, outcome: str,
                   t_invoke: float, t_complete: float, node: str | None,
                   error: str | None = None, **extra: Any) -> dict[str, Any]:
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be ok, fail or info, not {outcome!r}")
    return {"msg_id": msg_id, "producer": producer, "seq": seq, "outcome": outcome,
            "t_invoke": t_invoke, "t_complete": t_complete, "node": node,
            "error": error, **extra}


def invoke_record(*, msg_id: str, producer: str, seq: int, t_invoke: float, node: str | None,
                  **extra: Any) -> dict[str, Any]:
    """Written before the message is sent: a crash after it leaves the message unknown,
    never unexpected."""
    return {"msg_id": msg_id, "producer": producer, "seq": seq, "outcome": INVOKE,
            "t_invoke": t_invoke, "node": node, **extra}


def consume_record(*, msg_id: str, consumer: str, t: float, redelivered: bool,
                   source: str, offset: int | None, node: str | None,
                   producer: str | None, seq: int | None, **extra: Any) -> dict[str, Any]:
    return {"msg_id": msg_id, "consumer": consumer, "t": t, "redelivered": redelivered,
            "source": source, "offset": offset, "node": node,
            "producer": producer, "seq": seq, **extra}
