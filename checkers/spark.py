"""One place that starts Spark, quiet and bound to loopback."""
from __future__ import annotations

import os
import sys


def session(master: str | None = None, app: str = "mqchaos", *,
            driver_memory: str | None = None, shuffle_partitions: int | None = None):
    # Spark must never bind or advertise anything but loopback on this machine.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    master = master or os.environ.get("MQCHAOS_SPARK_MASTER") or "local[*]"
    parts = shuffle_partitions or int(os.environ.get("MQCHAOS_SHUFFLE_PARTITIONS", 0)) \
        or max(4, 2 * (os.cpu_count() or 2))
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(parts))
         .config("spark.sql.adaptive.enabled", "true")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory",
                 driver_memory or os.environ.get("MQCHAOS_DRIVER_MEMORY", "4g")))
    if master.startswith("local"):
        b = b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
