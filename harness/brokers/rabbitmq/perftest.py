"""RabbitMQ PerfTest (the source's tool for R13), run on this machine against a node's
published port, as seed 003 ran it on the machine of its nodes."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from harness.engine import apt_install
from harness.util import run

HERE = Path(__file__).resolve().parent
LIB = HERE.parents[2] / "build" / "perftest" / "lib"
MAIN = "com.rabbitmq.perf.PerfTest"
_AVG = re.compile(r"(sending|receiving) rate avg: ([0-9.]+) msg/s")


class PerfTestError(RuntimeError):
    pass


def ensure_jars() -> Path:
    """PerfTest and its dependencies from Maven Central (once; kept under build/)."""
    if any(LIB.glob("perf-test-*.jar")):
        return LIB
    if not shutil.which("mvn"):
        apt_install(["maven"])  # as the images do: Maven Central is reachable, the tool may not be here
    LIB.mkdir(parents=True, exist_ok=True)
    run(["mvn", "-q", "-B", "-f", str(HERE / "perftest-pom.xml"), "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={LIB}"], timeout=900)
    if not any(LIB.glob("perf-test-*.jar")):
        raise PerfTestError(f"maven did not resolve perf-test into {LIB}")
    return LIB


def command(host: str, port: int, queue: str, seconds: float) -> list[str]:
    """PerfTest -a as in seed 003: one publisher (no confirms, non-persistent messages), one
    auto-ack consumer; -p: the queue is ours (declared on the master's node, with the policy)."""
    java = shutil.which("java")
    if not java:
        raise PerfTestError("PerfTest needs a Java runtime (java on PATH)")
    return [java, "-cp", f"{ensure_jars()}/*", MAIN, "-h", f"amqp://guest:guest@{host}:{port}/%2F",
            "-a", "-u", queue, "-p", "-z", str(max(1, round(seconds)))]


def rates(output: str) -> dict[str, float]:
    """{"sending": msg/s, "receiving": msg/s} from PerfTest's closing lines."""
    out = {kind: float(v) for kind, v in _AVG.findall(output)}
    if "receiving" not in out:
        raise PerfTestError("PerfTest printed no receiving rate: " + (output.strip().splitlines() or ["nothing"])[-1])
    return out


def measure(host: str, port: int, queue: str, seconds: float, log: Path) -> dict[str, float]:
    proc = run(command(host, port, queue, seconds), timeout=seconds + 120, check=False)
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise PerfTestError(f"PerfTest exited {proc.returncode}: see {log}")
    return rates(proc.stdout)
