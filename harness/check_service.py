"""The work of `mqchaos check`, done in this process or by a check server that keeps one
warm Spark session (`mqchaos check-server`).

A one-off check pays for a JVM's start and its first compiles (issue 42: 11-19 s for a run
of 20k messages, of which the check itself is 3 s once warm). A server started once answers
each later `mqchaos check` with the same function, ``check_command``, over a Unix socket:
the same SQL, the same check.json, verdict and report. A server runs the code it was started
with, so it answers only a client whose code (``code_digest``) and Spark master are its own;
any other client, or no server, checks in its own process, as before.

The protocol: one JSON line per request ({"op": "check" | "status" | "stop", ...}), answered
by JSON lines: {"out": text} / {"err": text} as the check prints, then {"exit": code}, or
{"refused": why} (the client then checks by itself).
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable

from harness.verdicts import EXIT_UNKNOWN

log = logging.getLogger(__name__)

SOCKET_ENV = "MQCHAOS_CHECK_SOCKET"
IDLE_TIMEOUT_S = 3600.0  # a forgotten server ends by itself
CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 3600.0  # the longest a client waits for one check's next line
_PACKAGES = ("harness", "checkers")


def socket_path() -> Path:
    return Path(os.environ.get(SOCKET_ENV) or f"/tmp/mqchaos-check-{os.getuid()}.sock")


def code_digest(root: Path | None = None) -> str:
    """A digest of the Python sources of the packages a check runs (names and contents):
    a server and a client agree on it only when they run the same code. A broker plug-in's
    own tests (harness/brokers/<broker>/tests/) are no code a check runs: left out."""
    root = root or Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            if "tests" in f.relative_to(root).parts:
                continue
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def check_command(run_dirs: list[str], *, ordering: str | None = None, master: str | None = None,
                  threshold: float = 1.0, json_only: bool = False, spark=None, out=None, err=None) -> int:
    """Check the runs in one Spark job (``spark``: a running session, else one is started),
    write check.json into each; a harness run is judged again and its report rewritten. The
    exit code merged over the runs; a run that could not be checked counts as unknown.
    Printed to ``out`` and ``err`` (default stdout, stderr)."""
    from checkers.check import main as check_main
    from harness.judge import rejudge
    from harness.report import write as write_report
    from harness.store import find_runs, read_run
    from harness.verdicts import merge_codes, run_exit_code

    out, err = out or sys.stdout, err or sys.stderr
    results: dict = {}
    check_main(list(run_dirs), ordering=ordering, master=master, threshold=threshold,
               prefer_parquet=not json_only, out=out, err=err, results_out=results, spark=spark)
    found, errors = find_runs(list(run_dirs))
    codes = [EXIT_UNKNOWN] * (len(errors) + sum(1 for d in found if str(d) not in results))
    for d, result in results.items():
        pred = rejudge(d)
        if pred is not None:
            result["prediction"] = pred
            print(f"{d}: {pred['reason']}", file=out)  # "prediction held", "could not decide: ..."
        else:  # not a harness run (or its scenario no longer validates): a report all the same
            try:
                write_report(Path(d), None, result, read_run(d) or {})
            except Exception as e:  # noqa: BLE001 - the check stands without its report
                print(f"{d}: no report ({type(e).__name__}: {e})", file=err)
        codes.append(run_exit_code(result))
    return merge_codes(codes) if codes else EXIT_UNKNOWN


# ---- client ------------------------------------------------------------------------------

def _ask(request: dict, path: Path, on_line: Callable[[dict], Any] | None = None) -> dict | None:
    """Send one request; each answer line but the last to ``on_line``; the last line, or None
    when no server answers or the answer broke off."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.settimeout(CONNECT_TIMEOUT_S)
            s.connect(str(path))
            s.sendall(json.dumps(request).encode() + b"\n")
            s.settimeout(ANSWER_TIMEOUT_S)
            with s.makefile("rb") as f:
                for raw in f:
                    msg = json.loads(raw)
                    if not msg.keys() & _STREAMED:  # the answer itself
                        return msg
                    if on_line:
                        on_line(msg)
        except (OSError, ValueError):
            return None
    return None


_STREAMED = frozenset({"out", "err"})  # what the check prints, before the answer


def _echo(msg: dict) -> None:
    if "out" in msg:
        sys.stdout.write(msg["out"])
        sys.stdout.flush()
    if "err" in msg:
        sys.stderr.write(msg["err"])
        sys.stderr.flush()


def remote_check(run_dirs: list[str], *, ordering: str | None, master: str | None, threshold: float,
                 json_only: bool, path: Path | None = None) -> int | None:
    """The check done by a running server, its output printed here; its exit code, or None
    when there is no server, it refused (other code, another master: said on stderr), or it
    stopped mid-check (the check is then done here again: check.json is rewritten whole)."""
    path = path or socket_path()
    if not path.exists():
        return None
    request = {"op": "check", "code": code_digest(), "master": master,
               "run_dirs": [os.path.abspath(d) for d in run_dirs],
               "ordering": ordering, "threshold": threshold, "json_only": json_only}
    answer = _ask(request, path, _echo)
    if answer is None:
        print(f"check server at {path} gave no answer: checking here", file=sys.stderr)
        return None
    if "refused" in answer:
        print(f"check server at {path}: {answer['refused']}: checking here", file=sys.stderr)
        return None
    return int(answer["exit"])


def status(path: Path | None = None) -> dict | None:
    return _ask({"op": "status"}, path or socket_path())


def stop(path: Path | None = None) -> bool:
    return _ask({"op": "stop"}, path or socket_path()) is not None


def run_check(run_dirs: list[str], *, ordering: str | None = None, master: str | None = None,
              threshold: float = 1.0, json_only: bool = False, use_server: bool = True) -> int:
    """`mqchaos check`: by a running check server when one answers for this code, else here."""
    if use_server:
        code = remote_check(run_dirs, ordering=ordering, master=master, threshold=threshold,
                            json_only=json_only)
        if code is not None:
            return code
    return check_command(run_dirs, ordering=ordering, master=master, threshold=threshold,
                         json_only=json_only)


# ---- server ------------------------------------------------------------------------------

class _Lines(io.TextIOBase):
    """A text stream whose writes go to the client as {key: text} lines."""

    def __init__(self, conn: socket.socket, key: str):
        self._conn, self._key = conn, key

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            with contextlib.suppress(OSError):  # a client gone: the check still finishes
                self._conn.sendall(json.dumps({self._key: text}).encode() + b"\n")
        return len(text)


class CheckServer:
    """One warm session answering check requests, one at a time, until stopped or idle for
    ``idle_timeout`` s. ``session_factory`` starts (and restarts) the session."""

    def __init__(self, path: Path, master: str | None, session_factory: Callable[[], Any],
                 idle_timeout: float = IDLE_TIMEOUT_S, check: Callable[..., int] = check_command):
        self.path, self.master, self.idle_timeout = path, master, idle_timeout
        self._factory, self._check = session_factory, check
        self.code = code_digest()
        self.spark = None
        self.checks, self.since = 0, time.time()

    def _session(self):
        from checkers.spark import stopped

        if self.spark is None or stopped(self.spark):
            self.spark = self._factory()
        return self.spark

    def _bind(self) -> socket.socket:
        if self.path.exists():
            if status(self.path) is not None:
                raise RuntimeError(f"a check server already answers at {self.path}")
            self.path.unlink()  # left by a server that was killed
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is its owner's alone
        try:
            s.bind(str(self.path))
        finally:
            os.umask(old)
        s.listen(8)
        return s

    def serve(self, ready: Callable[[], Any] | None = None) -> None:
        sock = self._bind()
        try:
            self._session()
            log.info("check server at %s (code %s, master %s): ready", self.path, self.code,
                     self.master or "local[*]")
            if ready:
                ready()
            sock.settimeout(self.idle_timeout)
            while True:
                try:
                    conn, _ = sock.accept()
                except socket.timeout:
                    log.info("check server: idle %.0f s, stopping", self.idle_timeout)
                    return
                with conn:
                    if not self._answer(conn):
                        return
        finally:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _answer(self, conn: socket.socket) -> bool:
        """Answer one request; False when asked to stop."""
        def send(msg: dict) -> None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps(msg).encode() + b"\n")
        conn.settimeout(CONNECT_TIMEOUT_S)
        try:
            with conn.makefile("rb") as f:
                req = json.loads(f.readline() or b"{}")
        except (OSError, ValueError) as e:
            send({"refused": f"unreadable request ({e})"})
            return True
        op = req.get("op")
        if op == "stop":
            send({"stopping": True})
            return False
        if op == "status":
            send({"server": "ready", "pid": os.getpid(), "code": self.code, "master": self.master,
                  "checks": self.checks, "since": self.since})
            return True
        why = self.refuses(req)
        if why:
            send({"refused": why})
            return True
        conn.settimeout(None)
        code, out, err = EXIT_UNKNOWN, _Lines(conn, "out"), _Lines(conn, "err")
        try:
            code = self._check(req["run_dirs"], ordering=req.get("ordering"), master=self.master,
                               threshold=float(req.get("threshold", 1.0)), json_only=bool(req.get("json_only")),
                               spark=self._session(), out=out, err=err)
        except Exception as e:  # noqa: BLE001 - the run is undecided; the server goes on
            print(f"error: check failed in the server: {type(e).__name__}: {e}", file=err)
        self.checks += 1
        send({"exit": code})
        return True

    def refuses(self, req: dict) -> str | None:
        """Why this server must not answer the request (None: it may)."""
        if req.get("op") != "check" or not isinstance(req.get("run_dirs"), list):
            return f"not a check request: {req.get('op')!r}"
        if req.get("code") != self.code:
            return f"it runs other code ({self.code}, the client's {req.get('code')})"
        if req.get("master") not in (None, self.master):
            return f"it runs on {self.master or 'local[*]'}, not {req['master']}"
        return None


def serve(master: str | None = None, idle_timeout: float = IDLE_TIMEOUT_S, path: Path | None = None) -> None:
    """`mqchaos check-server`: a warm session (warmed up on a tiny history, as a batch's) that
    answers checks until stopped, or idle for ``idle_timeout`` s."""
    from checkers.spark import session
    from checkers.spark.cds import warm_up

    def factory():
        spark = session(master, "mqchaos-check-server")
        warm_up(spark)
        return spark
    CheckServer(path or socket_path(), master, factory, idle_timeout).serve()
