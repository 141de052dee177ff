"""Small helpers shared by the harness: bounded waiting (``wait_until``), command running
(``run``), the background CPU priority (``background_priority``), logging set-up, and every
entry point's exit on a harness error (``entry_point``).

Every module logs through its own ``logging.getLogger(__name__)``; each process entry point
calls ``setup_logging`` once (stderr, lines prefixed by ``LOG_PREFIXES``, e.g. ``[run]``) and
runs inside ``entry_point``: the ``mqchaos`` group (harness.cli._Main) and every ``__main__``
but nemesis/lazyfs.py, which runs in the containers."""
from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any, Callable

from harness import store
from harness.verdicts import EXIT_UNKNOWN

# The nice value of what a batch runs beside a run's faults (its checks' JVM, the pictures):
# the CPU goes to it only when the run's brokers and clients leave it idle.
BACKGROUND_NICE = 19

# The short prefix of each module's lines on stderr (the longest matching name wins; any other
# module shows its own name): the prefixes the harness printed before it used `logging`.
LOG_PREFIXES = {"harness.runner": "run", "harness.checking": "run", "harness.batch": "run",
                "harness.judge": "judge", "harness.brokers": "cluster", "harness.images": "images",
                "harness.engine": "engine", "nemesis": "nemesis"}
LOGGERS = ("harness", "nemesis")


def log_prefix(name: str) -> str:
    """The short prefix of logger ``name``'s lines (``harness.runner`` -> ``run``)."""
    keys = [k for k in LOG_PREFIXES if name == k or name.startswith(k + ".")]
    return LOG_PREFIXES[max(keys, key=len)] if keys else name


class _PrefixFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"[{log_prefix(record.name)}] {super().format(record)}"


class _StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record comes (pytest's capture replaces it)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr


def setup_logging(level: int = logging.INFO) -> None:
    """One stderr handler on the ``harness`` and ``nemesis`` loggers, lines as ``[run] ...``.
    For every process entry point; idempotent (a second call only sets the level).
    Records still propagate (pytest's caplog sees them)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(level)
        if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
            handler = _StderrHandler()
            handler.setFormatter(_PrefixFormatter("%(message)s"))
            logger.addHandler(handler)


@contextlib.contextmanager
def entry_point() -> Iterator[None]:
    """Around every process entry point (the ``mqchaos`` group, each ``__main__``): an uncaught
    exception exits EXIT_UNKNOWN, 2, where Python's own exit 1 would read as "anomalies found";
    its traceback is appended to the results root's harness-errors.log
    (``harness.store.log_harness_error``) and one line on stderr names the error and the log.
    SystemExit (click's usage errors, a command's own code) and KeyboardInterrupt (the run
    loop's Ctrl-C, which heals first) pass as they are."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - nothing is above this but the interpreter
        text = traceback.format_exc()
        path = store.log_harness_error(text)
        what = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"
        where = f"traceback in {path}" if path else f"no log could be written:\n{text}"
        print(f"harness error (exit {EXIT_UNKNOWN}): {what}; {where}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_UNKNOWN) from None


class StopWaiting(Exception):
    """Raised by a condition that can no longer become true (a node that had to run has
    exited): ends ``wait_until`` at once, whoever called it."""


def wait_until(cond: Callable[[], Any], timeout: float, msg: str, interval: float = 0.5,
               reraise: tuple[type[BaseException], ...] = ()) -> Any:
    """Call ``cond`` until it returns something truthy; return that value.

    Bounded in time: raises ``TimeoutError(msg)`` (with the last exception seen, if any)
    after ``timeout`` seconds. Exceptions raised by ``cond`` count as "not yet", except
    those of the types in ``reraise``, which propagate at once.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = cond()
            if value:
                return value
            last_exc = None
        except (StopWaiting, *reraise):
            raise
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready yet"
            last_exc = exc
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            detail = f" (last error: {type(last_exc).__name__}: {last_exc})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s: {msg}{detail}")
        time.sleep(min(interval, remaining))


def run(cmd: list[str], *, check: bool = True, timeout: float = 600, env: dict | None = None,
        cwd: str | None = None, capture: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    """Run a command with a time bound; on failure raise RuntimeError with its output."""
    try:
        proc = subprocess.run(cmd, capture_output=capture, text=True, timeout=timeout, env=env,
                              cwd=cwd, input=input)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"command timed out after {timeout}s: {' '.join(cmd)}") from exc
    if check and proc.returncode != 0:
        out = ((proc.stdout or "") + (proc.stderr or "")).strip()
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{out[-4000:]}")
    return proc


@contextlib.contextmanager
def background_priority() -> Iterator[None]:
    """The calling thread at the lowest CPU priority meanwhile: what it starts (a JVM, a
    process) keeps that priority, all its threads included (Linux: a thread's own nice value,
    inherited by what it creates). Raising it back needs root (as the harness runs); without,
    the thread stays low, which only slows it."""
    tid = threading.get_native_id()
    before = os.getpriority(os.PRIO_PROCESS, tid)
    os.setpriority(os.PRIO_PROCESS, tid, BACKGROUND_NICE)
    try:
        yield
    finally:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, before)
        except PermissionError:
            pass


def same_release(reported: str | None, version: str) -> bool:
    """Does a node's own version string (4.1.1) belong to a harness version (4.1, 3.9-kraft)?"""
    release = version.split("-")[0]
    return bool(reported) and (reported == release or str(reported).startswith(release + "."))
