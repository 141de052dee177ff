"""A standalone Spark cluster on this machine: one master and one worker,
started from the pyspark install, bound to 127.0.0.1 only.

    with Standalone() as master_url:            # "spark://127.0.0.1:7077"
        spark = session(master_url, "job")      # or spark-submit --master master_url ...

Or around any command, which gets the master URL in MQCHAOS_SPARK_MASTER (and
in place of `{master}` in its arguments):

    .venv/bin/python -m checkers.spark.standalone -- .venv/bin/spark-submit --master {master} \\
        --conf spark.driver.host=127.0.0.1 harness/trend_report.py results --out results/analysis/sa

The pip package of pyspark ships `bin/spark-class` but not `sbin/start-master.sh`,
so the daemons are started with `spark-class org.apache.spark.deploy.master.Master`
and `...worker.Worker`, in the foreground of processes this module owns (their
own process group), logged to files in `work_dir`. Readiness is the master's
JSON status page (http://127.0.0.1:<webui>/json): ALIVE, then the worker listed
as ALIVE with its cores. Stopping terminates exactly those process groups.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from harness.util import entry_point, wait_until

HOST = "127.0.0.1"  # never anything else: no traffic off this machine


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.environ.get("SPARK_HOME") or _find_spark_home()


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


class Standalone:
    """One Spark master + one worker on 127.0.0.1; a context manager yielding the master URL.

    Ports: 7077 (master) and 8080 (master UI, serves /json) by default, as the
    Spark documentation uses; pass `port=0` / `webui_port=0` for free ones. The
    worker's own ports are free ones, bound to 127.0.0.1 as well.
    """

    def __init__(self, *, port: int = 7077, webui_port: int = 8080, cores: int | None = None,
                 memory: str = "8g", work_dir: str | None = None, start_timeout: float = 120.0,
                 python: str | None = None):
        self.port = port or free_port()
        self.webui_port = webui_port or free_port()
        self.cores = cores or os.cpu_count() or 2
        self.memory = memory
        self.start_timeout = start_timeout
        self.python = python or os.environ.get("PYSPARK_PYTHON") or sys.executable
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="mqchaos-spark-"))
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def status_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}/json"

    def env(self) -> dict:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": spark_home(),
            "SPARK_LOCAL_IP": HOST,          # RPC and web UIs bind here
            "SPARK_MASTER_HOST": HOST,
            "SPARK_PUBLIC_DNS": HOST,        # what the UIs advertise
            "PYSPARK_PYTHON": self.python,   # executors' Python = the driver's
            "PYSPARK_DRIVER_PYTHON": self.python,
            "SPARK_WORKER_DIR": str(self.work_dir / "worker"),
            # No REST submission server (it would take a fixed port, 6066).
            "SPARK_MASTER_OPTS": (env.get("SPARK_MASTER_OPTS", "") + " -Dspark.master.rest.enabled=false").strip(),
        })
        return env

    def status(self) -> dict:
        with urllib.request.urlopen(self.status_url, timeout=5) as r:
            return json.loads(r.read())

    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.work_dir / f"{name}.log", "ab")
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args]
        try:
            p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                                 cwd=self.work_dir, start_new_session=True)
        finally:
            log.close()
        self.procs[name] = p
        return p

    def _alive(self, name: str) -> None:
        p = self.procs[name]
        if p.poll() is not None:
            raise RuntimeError(f"spark {name} exited with {p.returncode}; log:\n{self.log(name)[-3000:]}")

    def log(self, name: str) -> str:
        f = self.work_dir / f"{name}.log"
        return f.read_text(errors="replace") if f.exists() else ""

    def start(self) -> str:
        for port in (self.port, self.webui_port):
            if not _port_free(port):
                raise RuntimeError(f"port {HOST}:{port} is in use (another Spark master?); "
                                   "pass other ports (0 = a free one)")
        (self.work_dir / "worker").mkdir(parents=True, exist_ok=True)
        try:
            self._start("master", ["org.apache.spark.deploy.master.Master", "--host", HOST,
                                   "--port", str(self.port), "--webui-port", str(self.webui_port)])

            def master_up():
                self._alive("master")
                return self.status().get("status") == "ALIVE"

            wait_until(master_up, self.start_timeout, f"spark master at {self.status_url}",
                       reraise=(RuntimeError,))
            self._start("worker", ["org.apache.spark.deploy.worker.Worker", "--host", HOST,
                                   "--webui-port", str(free_port()), "--cores", str(self.cores),
                                   "--memory", self.memory, "--work-dir", str(self.work_dir / "worker"),
                                   self.url])

            def worker_registered():
                self._alive("master")
                self._alive("worker")
                st = self.status()
                return [w for w in st.get("workers", []) if w.get("state") == "ALIVE"
                        and w.get("cores", 0) >= self.cores]

            wait_until(worker_registered, self.start_timeout,
                       f"spark worker registered with {self.url}", reraise=(RuntimeError,))
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self, timeout: float = 30.0) -> None:
        # Worker first (it ends its executors), then the master; each its own process group.
        for name in ("worker", "master"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
            except ProcessLookupError:
                pass
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m checkers.spark.standalone",
        description="Start a Spark master + worker on 127.0.0.1, run COMMAND with "
                    "MQCHAOS_SPARK_MASTER set to its URL (and {master} in COMMAND replaced by it), "
                    "stop them. Without COMMAND: run until Ctrl-C.")
    ap.add_argument("--port", type=int, default=7077)
    ap.add_argument("--webui-port", type=int, default=8080)
    ap.add_argument("--cores", type=int, default=None)
    ap.add_argument("--memory", default="8g", help="memory the worker offers executors")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    sa = Standalone(port=a.port, webui_port=a.webui_port, cores=a.cores, memory=a.memory)
    with sa as url:
        print(f"spark standalone: {url} (status {sa.status_url})", file=sys.stderr, flush=True)
        env = dict(os.environ, MQCHAOS_SPARK_MASTER=url, SPARK_LOCAL_IP=HOST)
        env.setdefault("PYSPARK_PYTHON", sys.executable)   # spark-submit's driver Python too
        cmd = [c.replace("{master}", url) for c in cmd]
        if not cmd:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
            return 0
        return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    with entry_point():
        sys.exit(main())
