"""One place that starts Spark, quiet and bound to loopback.

Start-up and the first job of a fresh JVM are most of a small check's time
(docs/benchmarks.md), so the driver JVM is started with:
- the parallel collector (throughput: the checker is a batch job);
- C2 (the optimising JIT) compiling only methods 4x hotter than by default:
  in a 2-core machine the compiler threads compete with the tasks, and most
  of the code a check runs is not hot enough to repay a C2 compilation;
- a class-data-sharing archive of the classes Spark loads, when one was
  built for this Java and this pyspark (`python -m checkers.spark.cds
  --build-cds`, about a minute, once): it halves the start-up. Without it
  (or when the JVM finds it stale) everything works as before, only slower.

A one-off JVM that checks a small history (`session(small=True)`: `mqchaos check` below
`LARGE_INPUT` records) compiles with C1 alone: its time goes in warming up, and C2's
compilations never repay themselves in a job of a few seconds (docs/benchmarks.md, "Cold
check"). A long-lived session (a batch's, a bench's) keeps C2: at 10^7 C1 alone is slower.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

# Set when the session chose its shuffle partitions itself: the checker may
# then fit them to the input (fit_partitions).
AUTO_PARTITIONS = "spark.mqchaos.shufflePartitions.auto"
# About this many history records per shuffle partition: a task's hash map
# (identity, one entry per message) stays small enough to be quick.
RECORDS_PER_PARTITION = 1_000_000

COLD_OPTIONS = "-XX:TieredStopAtLevel=1"
JVM_OPTIONS = ("-XX:+UseParallelGC -XX:Tier4InvocationThreshold=20000 -XX:Tier4MinInvocationThreshold=2400 "
               "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=160000")
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
# Bumped when checkers.spark.cds._exercise loads other classes (3: the bucketed copy's catalogue
# tables; 4: invoke records, per-producer unavailability, read gaps).
EXERCISE = 4


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    return os.path.realpath(java)


def cds_archive() -> Path:
    """Where the class-data-sharing archive for this Java and pyspark lives
    ($MQCHAOS_CDS_ARCHIVE, else a file named after both in ~/.cache/mqchaos)."""
    if os.environ.get("MQCHAOS_CDS_ARCHIVE"):
        return Path(os.environ["MQCHAOS_CDS_ARCHIVE"])
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    java = _java()
    # The JVM refuses an archive whose class path moved: the jars' directory is part of the key.
    stamp = [pyspark.__version__, str(jars.resolve()), java, os.path.getmtime(java) if os.path.exists(java) else 0,
             sorted((p.name, p.stat().st_size) for p in jars.glob("*.jar")) if jars.is_dir() else [],
             JVM_OPTIONS, EXERCISE]
    key = hashlib.sha1(json.dumps(stamp, default=str).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mqchaos"
    return cache / f"spark-{pyspark.__version__}-{key}.jsa"


def _java_options(small: bool = False) -> str:
    opts = [JVM_OPTIONS] + ([COLD_OPTIONS] if small else [])
    if os.environ.get("MQCHAOS_CDS", "on") != "off":
        archive = cds_archive()
        if archive.is_file():
            opts.append(f"-XX:SharedArchiveFile={archive} {QUIET_CDS}")
    if os.environ.get("MQCHAOS_JAVA_OPTIONS"):
        opts.append(os.environ["MQCHAOS_JAVA_OPTIONS"])
    return " ".join(opts)


def session(master: str | None = None, app: str = "mqchaos", *,
            driver_memory: str | None = None, shuffle_partitions: int | None = None, small: bool = False):
    # Spark must never bind or advertise anything but loopback on this machine.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    master = master or os.environ.get("MQCHAOS_SPARK_MASTER") or "local[*]"
    explicit = shuffle_partitions or int(os.environ.get("MQCHAOS_SHUFFLE_PARTITIONS", 0))
    parts = explicit or max(4, 2 * (os.cpu_count() or 2))
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(parts))
         .config(AUTO_PARTITIONS, "false" if explicit else "true")
         .config("spark.sql.adaptive.enabled", "true")
         # Coalesce small shuffle partitions only up to this (default 64 MB of
         # compressed rows: a million messages in one task's hash map).
         .config("spark.sql.adaptive.advisoryPartitionSizeInBytes", "16m")
         .config("spark.sql.execution.combineAdjacentAggregation", "true")
         # A per-row checksum of shuffled data (to detect retries that differ):
         # 3 % of a check's time, for queries that are deterministic.
         .config("spark.sql.shuffle.orderIndependentChecksum.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC")
         # A bucketed copy's files are each sorted by msg_id (one file per
         # bucket): said so, the checker's per-message aggregation and join
         # stream over them, with no hash map and no sort.
         .config("spark.sql.legacy.bucketedTableScan.outputOrdering", "true")
         .config("spark.sql.execution.replaceHashWithSortAgg", "true")
         # Bucketed copies are read as external tables of the in-memory
         # catalogue: nothing is written to the warehouse, but Spark would
         # create it in the working directory.
         .config("spark.sql.warehouse.dir", os.path.join(tempfile.gettempdir(), "mqchaos-spark-warehouse"))
         # Jobs of two threads (a batch's check and a copy, harness.checking) share the
         # cores by pool: a check first (checkers/spark/fairscheduler.xml); one thread's jobs
         # run as before.
         .config("spark.scheduler.mode", "FAIR")
         # (the file stays beside the checkers' modules, one directory up from this package)
         .config("spark.scheduler.allocation.file", str(Path(__file__).with_name("fairscheduler.xml")))
         .config("spark.driver.memory",
                 driver_memory or os.environ.get("MQCHAOS_DRIVER_MEMORY", "4g"))
         .config("spark.driver.extraJavaOptions", _java_options(small))
         .config("spark.executor.extraJavaOptions", JVM_OPTIONS))
    if master.startswith("local"):
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stopped(spark) -> bool:
    """The session can no longer run a job (its context stopped, or its JVM gone)."""
    try:
        return spark.sparkContext._jsc is None or spark.sparkContext._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - a gateway that does not answer is as good as stopped
        return True


def fit_partitions(spark, records: int) -> None:
    """Shuffle partitions for an input of about `records` history records,
    when the session chose them itself (set by `session`, else left alone)."""
    if spark.conf.get(AUTO_PARTITIONS, "false") != "true":
        return
    cores = spark.sparkContext.defaultParallelism
    parts = max(2 * cores, math.ceil(records / RECORDS_PER_PARTITION))
    spark.conf.set("spark.sql.shuffle.partitions", str(parts))
