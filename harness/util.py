"""Small helpers shared by the harness: bounded waiting, command running."""
from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable

# The nice value of what a batch runs beside a run's faults (its checks' JVM, the pictures):
# the CPU goes to it only when the run's brokers and clients leave it idle.
BACKGROUND_NICE = 19


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
