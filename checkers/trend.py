"""The Spark side of `mqchaos summarize` (once `mqchaos analyze`): one Spark job over many runs, the trend rows.

    mqchaos summarize results/ [--master URL] [--out DIR]
    spark-submit --master spark://127.0.0.1:7077 harness/trend_report.py results/ --out DIR

Every run's figures come from the checker itself (`checkers.check.check_runs`,
all runs in one job): this module only aggregates them. What it writes into
--out (default results/analysis/<UTC timestamp>/):

  runs.parquet/        one row per run (RUN_SCHEMA)
  by_version.parquet/  per scenario and broker version (the summary's first table)
  by_day.parquet/      per scenario and run date (the trend)

and the rows it returns (`build`), which harness.trend_report presents:
summary.md, summary.html, summary.json, loss_rate.png, unavailable.png.

Definitions (docs/nightly.md):
  runs                  runs checked: status `completed` (or no status: a run not
                        written by the harness); `harness-error` runs are counted
                        apart and never judged, `interrupted` / `running` ones
                        (killed mid-run) are counted as incomplete
  runs_with_loss        checked runs with lost > 0
  lost_per_million      sum(lost) / sum(ok) * 1e6 over the group's checked runs
  duplicated_per_million  sum(duplicated) / sum(ok) * 1e6 (per million confirmed, too)
  unavailable p50/p99   of the runs' unavailable_s (each run's total), percentiles by
                        linear interpolation between closest ranks: with the values
                        sorted x[0..n-1], p at rank r = p*(n-1), x[floor r] + (r - floor r)
                        * (x[floor r + 1] - x[floor r]) (Spark's `percentile`, numpy's default)
  held / not_held / undecided / no_prediction
                        check.json `prediction.held` true / false / null / absent
"""
from __future__ import annotations

import json
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from harness import store
from harness.results import CheckResult, value_type
from harness.verdicts import INCOMPLETE, RunStatus

HARNESS_ERROR = RunStatus.HARNESS_ERROR
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2})")


class AnalyzeError(ValueError):
    pass


# -- finding runs ------------------------------------------------------------------------

def _local(arg: str) -> str:
    if arg.startswith("file://"):
        return arg[len("file://"):]
    if arg.startswith("file:"):
        return arg[len("file:"):]
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", arg):
        raise AnalyzeError(f"{arg}: only local paths (and file: URIs) are found here; other "
                           "URIs are listed by Spark (checkers.spark.listing, through collect)")
    return arg


def find_runs(args: list[str]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Run directories named by the arguments (runs, globs, directories with runs below them,
    file: URIs): the store's discovery (harness.store.find_runs)."""
    return store.find_runs(args, local=_local)


# -- what each run says about itself -----------------------------------------------------

def _started(meta: dict, run_dir: str) -> datetime | None:
    s = meta.get("started_at")
    if isinstance(s, str):
        try:
            t = datetime.fromisoformat(s.replace("Z", "+00:00"))
            return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        except ValueError:
            pass
    m = _STAMP.search(run_dir.rstrip("/").rsplit("/", 1)[-1])  # results/<scenario>/<UTC timestamp>/
    if m:
        return datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}:{m.group(3)}:{m.group(4)}+00:00")
    return None


def broker_version(meta: dict) -> str:
    """The broker's own version from run.json `brokers` ({"rabbitmq": "3.10.8", "erlang": ...}
    or {"kafka": "kafka_2.13-3.9.1.jar"} -> "3.9.1"), else "unknown"."""
    brokers = meta.get("brokers") if isinstance(meta.get("brokers"), dict) else {}
    broker = meta.get("broker")
    v = brokers.get(broker) if broker else None
    if v is None:
        vals = [str(x) for k, x in sorted(brokers.items()) if k not in ("error", "erlang") and x]
        v = vals[0] if vals else None
    if v is None:
        return "unknown"
    v = str(v)
    m = re.match(r"^[a-z]+_[0-9.]+-(.+?)(\.jar)?$", v)  # a jar's name: <artifact>_<scala>-<version>.jar
    return m.group(1) if m else v


def _prediction(check: dict | None) -> tuple[str, str | None]:
    pred = (check or {}).get("prediction")
    if not isinstance(pred, dict) or "held" not in pred:
        return "none", None
    return {True: "held", False: "not_held"}.get(pred["held"], "undecided"), pred.get("reason")


# -- the per-run table ----------------------------------------------------------------------

# The Spark type of a check result's figure, by its type in harness.results.CheckResult.
SPARK_TYPE = {int: "bigint", float: "double", bool: "boolean", str: "string"}
# The check result's figures the per-run table keeps, by their CheckResult names.
FIGURES = ("source", "ordering", "attempted", "ok", "fail", "info", "delivered", "lost", "duplicated",
           "unexpected", "recovered", "ordering_violations", "malformed_lines", "unavailable_s", "valid")


def _figures(*names: str) -> list[tuple[str, str]]:
    return [(n, SPARK_TYPE[value_type(CheckResult, n)]) for n in names]


RUN_FIELDS = [  # (name, Spark type); the columns' order is the table's
    ("run_dir", "string"), ("scenario", "string"), ("scenario_id", "string"), ("broker", "string"),
    ("broker_version", "string"), ("brokers", "string"), ("started_at", "timestamp"),
    ("run_date", "date"), ("status", "string"), ("category", "string"), ("error", "string"),
    *_figures(*FIGURES[:-1]),
    ("unavailable_intervals", "int"), ("longest_unavailable_s", "double"),
    *_figures(FIGURES[-1]), ("prediction", "string"), ("prediction_reason", "string"),
]
RUN_SCHEMA = ", ".join(f"{n} {t}" for n, t in RUN_FIELDS)
# category: checked | harness_error | incomplete | unreadable


def _row(run_dir: str, meta: dict, check: dict | None) -> dict:
    """run_dir: a local path or a URI (s3a://bucket/results/R1/<ts>)."""
    started = _started(meta, run_dir)
    status = meta.get("status") if isinstance(meta.get("status"), str) else None
    category = ("harness_error" if status == HARNESS_ERROR else
                "incomplete" if status in INCOMPLETE else "checked")
    pred, reason = _prediction(check)
    row = {n: None for n, _ in RUN_FIELDS}
    row.update({
        "run_dir": str(run_dir),
        "scenario": str(meta.get("scenario") or run_dir.rstrip("/").rsplit("/", 2)[-2]),
        "scenario_id": meta.get("id"), "broker": meta.get("broker"),
        "broker_version": broker_version(meta),
        "brokers": json.dumps(meta.get("brokers"), sort_keys=True) if meta.get("brokers") else None,
        "started_at": started, "run_date": started.date() if started else None,
        "status": status, "category": category,
        "error": meta.get("error") if category == "harness_error" else None,
        "prediction": pred, "prediction_reason": reason,
    })
    return row


def _with_result(row: dict, res: dict) -> dict:
    for k in FIGURES:
        row[k] = res.get(k)
    iv = res.get("unavailable") or []
    row["unavailable_intervals"] = len(iv)
    row["longest_unavailable_s"] = round(max((z - a for a, z in iv), default=0.0), 3)
    return row


def collect(spark, args: list[str], *, ordering: str | None = None, threshold: float = 1.0,
            prefer_parquet: bool = True, list_with_spark: bool = False
            ) -> tuple[list[dict], list[tuple[str, str]]]:
    """Rows of the per-run table (every run found, checked or not) and the
    arguments that named no run. The checked runs go through check_runs in one job.

    Local paths (and file: URIs) are found by Python; other URIs (hdfs://,
    s3a://...) are listed by Spark (checkers.spark.listing), as are file: URIs with
    `list_with_spark` (how that path is tested here)."""
    from checkers.spark import listing
    from checkers.check import check_runs
    from checkers.history import open_runs

    def spark_listed(a: str) -> bool:
        return listing.is_uri(a) and (list_with_spark or not a.startswith("file:"))

    dirs, arg_errors = find_runs([a for a in args if not spark_listed(a)])
    rows: dict[str, dict] = {}
    to_check: list[str] = []
    for d in dirs:
        meta, err = store.read_json(d / store.RUN_JSON)
        check, _ = store.read_json(d / store.CHECK_JSON)
        row = _row(str(d), meta or {}, check)
        rows[str(d)] = row
        if err:
            row["category"], row["error"] = "unreadable", err
        elif row["category"] == "checked":
            to_check.append(str(d))
    runs, open_errors = open_runs(to_check, prefer_parquet=prefer_parquet)
    listed, key_of = [], {}
    for a in args:
        if not spark_listed(a):
            continue
        found, errors = listing.find(spark, a)
        arg_errors += errors
        for r in found:
            # once per run: a file: run also named by a local path is the same run
            key = os.path.realpath(r.dir[len("file:"):]) if r.dir.startswith("file:") else r.dir
            if key in rows:
                continue
            key_of[r.dir] = key
            row = rows[key] = _row(r.dir, r.meta or {}, r.check)
            if r.meta_error:
                row["category"], row["error"] = "unreadable", r.meta_error
            elif row["category"] == "checked":
                listed.append(r)
    more, more_errors = listing.open_listed(spark, listed, prefer_parquet=prefer_parquet)
    runs += more
    for p, e in open_errors + more_errors:
        key = key_of.get(p) or (p if p in rows else os.path.realpath(p))
        if key in rows:
            rows[key]["category"], rows[key]["error"] = "unreadable", e
        else:
            arg_errors.append((p, e))
    by_dir = {r["run_dir"]: r for r in rows.values()}
    if runs:  # one job for all of them, Parquet-read and JSONL-read runs alike
        results = check_runs(spark, runs, ordering=ordering, threshold=threshold)
        for run_dir, res in results.items():
            _with_result(by_dir.get(run_dir) or rows[os.path.realpath(run_dir)], res)
    return list(rows.values()), arg_errors


# -- aggregation (Spark) --------------------------------------------------------------------

def _aggregates(F, dates: bool = True) -> list:
    checked = F.col("category") == "checked"

    def n(cond):
        return F.sum(F.when(cond, 1).otherwise(0)).cast("int")

    def s(c):
        return F.sum(F.when(checked, F.col(c))).cast("bigint")

    pct = F.expr("percentile(CASE WHEN category = 'checked' THEN unavailable_s END, array(0.5, 0.99))")
    cols = [
        n(checked).alias("runs"),
        n(checked & (F.col("lost") > 0)).alias("runs_with_loss"),
        n(checked & (F.col("valid") == F.lit(False))).alias("runs_invalid"),
        s("attempted").alias("attempted"), s("ok").alias("confirmed"), s("lost").alias("lost"),
        s("duplicated").alias("duplicated"), s("malformed_lines").alias("malformed_lines"),
        # null, not an error, when nothing was confirmed (Spark 4 divides in ANSI mode)
        (F.try_divide(s("lost"), s("ok")) * 1e6).alias("lost_per_million"),
        (F.try_divide(s("duplicated"), s("ok")) * 1e6).alias("duplicated_per_million"),
        pct[0].alias("unavailable_p50"), pct[1].alias("unavailable_p99"),
        F.max(F.when(checked, F.col("unavailable_s"))).alias("unavailable_max"),
        n(checked & (F.col("prediction") == "held")).alias("held"),
        n(checked & (F.col("prediction") == "not_held")).alias("not_held"),
        n(checked & (F.col("prediction") == "undecided")).alias("undecided"),
        n(checked & (F.col("prediction") == "none")).alias("no_prediction"),
        n(F.col("category") == "harness_error").alias("harness_errors"),
        n(F.col("category") == "incomplete").alias("incomplete"),
        n(F.col("category") == "unreadable").alias("unreadable"),
    ]
    if dates:
        cols += [F.min("run_date").alias("first_date"), F.max("run_date").alias("last_date")]
    return cols


_CAST = {"double": float, "bigint": int, "int": int}


def _typed(row: dict) -> dict:
    return {n: (_CAST[t](row[n]) if t in _CAST and row[n] is not None else row[n]) for n, t in RUN_FIELDS}


def aggregate(spark, rows: list[dict]):
    """(runs, by_version, by_day) DataFrames."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([_typed(r) for r in rows], RUN_SCHEMA)
    by_version = (df.groupBy("scenario", "broker", "broker_version").agg(*_aggregates(F))
                  .orderBy("scenario", "broker_version"))
    by_day = (df.groupBy("scenario", "run_date")
              .agg(F.concat_ws(", ", F.array_sort(F.collect_set("broker_version"))).alias("versions"),
                   *_aggregates(F, dates=False))
              .orderBy("scenario", "run_date"))
    return df, by_version, by_day




# -- the whole job (Spark) ----------------------------------------------------------------------

class Trend(NamedTuple):
    """What `build` returns: the per-run rows, the aggregates' rows, the arguments that named
    no run (path, error) and the job's figures (summary.json's head)."""
    runs: list[dict]
    by_version: list[dict]
    by_day: list[dict]
    errors: list[tuple[str, str]]
    meta: dict


def build(spark, args: list[str], out: Path, *, ordering: str | None = None, threshold: float = 1.0,
          prefer_parquet: bool = True, list_with_spark: bool = False) -> Trend:
    """The Spark job on a given session: the runs found and checked, their aggregates
    written as Parquet into `out`, and returned as rows."""
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    rows, errors = collect(spark, args, ordering=ordering, threshold=threshold,
                           prefer_parquet=prefer_parquet, list_with_spark=list_with_spark)
    if not rows:
        raise AnalyzeError("no run directory found: " + "; ".join(f"{p}: {e}" for p, e in errors))
    df, by_version, by_day = aggregate(spark, rows)
    df.coalesce(1).write.mode("overwrite").parquet(str(out / "runs.parquet"))
    by_version.coalesce(1).write.mode("overwrite").parquet(str(out / "by_version.parquet"))
    by_day.coalesce(1).write.mode("overwrite").parquet(str(out / "by_day.parquet"))
    bv = [r.asDict() for r in by_version.collect()]
    bd = [r.asDict() for r in by_day.collect()]
    cat = [r["category"] for r in rows]
    meta = {"generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "inputs": list(args), "out": str(out), "master": spark.sparkContext.master,
            "runs_found": len(rows), "runs_checked": cat.count("checked"),
            "harness_errors": cat.count("harness_error"), "incomplete": cat.count("incomplete"),
            "unreadable": cat.count("unreadable"), "seconds": round(time.monotonic() - t0, 1)}
    return Trend(rows, bv, bd, errors, meta)


def submitted_master() -> str | None:
    """The master spark-submit was given, when this process runs under it (the
    session builder would otherwise override it with local[*])."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master", None)
