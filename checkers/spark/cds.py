"""The JVM class-data-sharing archive Spark starts from (about a minute to build, once per
Java / pyspark / options; it halves Spark's start-up). ``make venv`` runs
``python -m checkers.spark.cds --ensure-cds``.

The archive is made by a child process that checks a small synthetic history (JSONL and
Parquet) on a JVM that writes the classes it loaded when it exits.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pyspark import SparkContext

from checkers import analysis as A
from checkers.check import check_runs
from checkers.history import convert, open_runs
from checkers.spark import cds_archive, session
from checkers.synth import write_run
from harness.util import entry_point

def build_cds(archive: Path | None = None, timeout: float = 900) -> Path:
    """Build the archive: a child process checks a small synthetic history (JSONL
    and Parquet) on a JVM that writes the classes it loaded when it exits."""
    archive = Path(archive or cds_archive())
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(archive.name + f".{os.getpid()}.tmp")
    env = dict(os.environ, MQCHAOS_CDS="off",
               MQCHAOS_JAVA_OPTIONS=f"-XX:ArchiveClassesAtExit={tmp} -Xlog:cds=off -Xlog:cds+dynamic=off")
    try:
        out = subprocess.run([sys.executable, "-m", "checkers.spark.cds", "--exercise"], env=env,
                             timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if out.returncode:
            raise RuntimeError(f"the exercise failed (exit {out.returncode}): {out.stderr[-1500:]}")
        if not tmp.is_file():
            raise RuntimeError(f"the JVM wrote no archive ({tmp})")
        os.replace(tmp, archive)
    finally:
        tmp.unlink(missing_ok=True)
    return archive


def warm_up(spark, copy: bool = True) -> None:
    """What a check does, on a tiny history (2,000 messages; JSONL, then, with ``copy``, its
    Parquet copy): the classes the archive should hold, the code a warm session compiled."""
    with tempfile.TemporaryDirectory() as d:
        produce, consume = [], []
        for i in range(2000):
            p = f"p{i % 4}"
            outcome = "ok" if i % 10 else ("fail" if i % 20 else "info")
            produce.append({"msg_id": f"{p}-{i}", "producer": p, "seq": i, "outcome": "invoke",
                            "t_invoke": i * 0.01, "node": "n"})  # history version 2: written ahead
            produce.append({"msg_id": f"{p}-{i}", "producer": p, "seq": i, "outcome": outcome,
                            "t_invoke": i * 0.01, "t_complete": i * 0.01 + 0.005, "node": "n", "error": None})
            if i % 50:
                consume.append({"msg_id": f"{p}-{i}", "consumer": f"c{i % 2}", "t": i * 0.01 + 0.02,
                                "redelivered": i % 97 == 0, "source": "q", "offset": None, "node": "n",
                                "producer": p if i % 13 else None, "seq": i if i % 13 else None})
        # written as the tests' and the benchmarks' synthetic runs are (one bad line: the
        # malformed-line path's classes too)
        write_run(Path(d, "run"), produce, consume, malformed_produce=["{bad"], meta={"ordering": "monotonic"})
        runs, _ = open_runs([str(Path(d, "run"))], prefer_parquet=False)
        check_runs(spark, runs)
        if not copy:
            return
        convert(spark, str(Path(d, "run")))
        runs, _ = open_runs([str(Path(d, "run"))])
        check_runs(spark, runs, ordering="strict", threshold=0.0)


def _exercise() -> None:
    A.LARGE_INPUT = 0  # the large-input paths' classes too
    spark = session(None, "mqchaos-cds")
    warm_up(spark)
    # The JVM writes the archive as it exits: end it (EOF on its stdin) and wait.
    proc = SparkContext._gateway.proc
    spark.stop()
    proc.stdin.close()
    proc.wait(timeout=600)


if __name__ == "__main__":
    with entry_point():
        if sys.argv[1:] == ["--exercise"]:
            _exercise()
        elif sys.argv[1:] == ["--build-cds"]:
            print(f"class-data-sharing archive written: {build_cds()}")
        elif sys.argv[1:] == ["--ensure-cds"]:
            # make's targets call this: build once per Java/pyspark/options, never fail the caller
            if cds_archive().is_file() or os.environ.get("MQCHAOS_CDS", "on") == "off":
                sys.exit(0)
            try:
                print(f"class-data-sharing archive written (Spark starts faster): {build_cds()}")
            except (OSError, RuntimeError, subprocess.SubprocessError) as e:
                print(f"warning: no class-data-sharing archive ({e}); Spark starts slower", file=sys.stderr)
        elif sys.argv[1:] == ["--cds-archive"]:
            print(cds_archive())
        else:
            print("usage: python -m checkers.spark.cds --build-cds | --ensure-cds | --cds-archive", file=sys.stderr)
            sys.exit(2)
