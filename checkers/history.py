"""Find run directories and load their histories into Spark DataFrames.

Many runs are read in one scan: each row carries `run`, the index of its run
directory, recovered from the file Spark read it from.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import urllib.parse
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from checkers import schema as S
from harness import store

PARQUET_DIR = "history/parquet"
META = "_meta.json"


class HistoryError(Exception):
    """A run directory that cannot be checked (missing, no produce history...)."""


@dataclass
class Run:
    dir: str                       # the run's real path (harness.store.find_runs)
    produce: list[str]
    consume: list[str]
    meta: dict = field(default_factory=dict)        # run.json (harness.store)
    recorded: bool = True                           # False: no run.json (harness.verdicts.NO_RECORD)
    parquet_malformed: dict | None = None           # set when the Parquet copy is read
    records: int | None = None                      # an estimate, when the lister knows the sizes
    buckets: int | None = None                      # the Parquet copy is bucketed by msg_id in this many
    # each replica's log read from its files (history/replica-*.jsonl): always JSONL, small
    replica: list[str] = field(default_factory=list)

    def files(self, kind: str) -> list[str]:
        return {"produce": self.produce, "consume": self.consume, "replica": self.replica}[kind]

    def use_parquet(self, meta: dict, base: str) -> None:
        """Read the Parquet copy (its _meta.json is `meta`) instead of the JSONL."""
        self.parquet_malformed = meta.get("malformed", {})
        b = meta.get("buckets")
        self.buckets = b if isinstance(b, int) and not isinstance(b, bool) and b > 0 else None
        self.produce = [f"{base}/{PARQUET_DIR}/produce"]
        self.consume = [f"{base}/{PARQUET_DIR}/consume"] if self.consume else []


def _parquet_fresh(run_dir: Path, jsonl: list[str]) -> dict | None:
    meta = run_dir / PARQUET_DIR / META
    if not meta.is_file():
        return None
    newest = max((os.path.getmtime(f) for f in jsonl), default=0.0)
    if os.path.getmtime(meta) < newest:
        return None  # the JSONL grew after the conversion: it is the record
    try:
        return json.loads(meta.read_text())
    except ValueError:
        return None


def open_runs(paths: list[str], prefer_parquet: bool = True) -> tuple[list[Run], list[tuple[str, str]]]:
    dirs, errors = store.find_runs(paths)
    runs = []
    for d in dirs:
        produce, consume = store.history_files(d, "produce"), store.history_files(d, "consume")
        if not produce:
            errors.append((str(d), "no history/produce*.jsonl file"))
            continue
        meta, err = store.read_json(d / store.RUN_JSON)
        if err:
            errors.append((str(d), err))
            continue
        run = Run(str(d), produce, consume, meta or {}, recorded=meta is not None,
                  replica=store.history_files(d, "replica"))
        pq = _parquet_fresh(d, produce + consume) if prefer_parquet else None
        if pq is not None:
            run.use_parquet(pq, str(d))
        runs.append(run)
    return runs, errors


# Spark reports paths as URIs (file:/a%20b/...); decode them back to the
# strings Python globbed, leaving '+' alone (url_decode would make it a space).
def _run_key(col):
    path = F.regexp_replace(col, r"^file:(//)?", "")
    path = F.url_decode(F.regexp_replace(path, r"\+", "%2B"))
    return F.regexp_extract(path, r"^(.*)/history/", 1)


def run_ids(spark: SparkSession, runs: list[Run]) -> dict[int, Run]:
    """Each run's id in the `run` column: its index in `runs`."""
    return dict(enumerate(runs))


FILE = "_mqchaos_file"  # the file a row was read from, while its run is looked up


def _with_run(df: DataFrame, runs: list[Run]) -> DataFrame:
    """``df`` with the run id of each row (``run``), from the file it was read from.

    One run: a constant. Several: the files Spark will read, each mapped to its run once,
    joined to the rows by file (broadcast: no shuffle). A map literal looked up per row was
    a linear search over every file's path: a cost per row that grew with the number of runs
    (analyze over 1,000 runs: docs/benchmarks.md). Decoding the path stays as the fallback
    for a file whose URI Spark spells differently from its listing."""
    if len(runs) == 1:
        return df.withColumn("run", F.lit(0))
    by_dir = {r.dir: i for i, r in enumerate(runs)}
    # Runs listed by Spark (checkers.spark.listing) are named by URI, in Spark's spelling.
    by_uri = {_respell(r.dir): i for i, r in enumerate(runs)}
    by_file: dict[str, int] = {}
    unmatched = False
    for uri in df.inputFiles():
        run = by_uri.get(_respell(uri.rsplit("/history/", 1)[0]))
        if run is None:
            path = urllib.parse.unquote(urllib.parse.urlparse(uri).path)
            run = by_dir.get(path.rsplit("/history/", 1)[0])
        if run is None:
            unmatched = True
            continue
        for spelling in {uri, _respell(uri)}:
            by_file[spelling] = run
    out = df.withColumn(FILE, F.col("_metadata.file_path"))
    if by_file:
        files = df.sparkSession.createDataFrame(list(by_file.items()), f"`{FILE}` string, run int")
        out = out.join(F.broadcast(files), FILE, "left")
    else:
        out = out.withColumn("run", F.lit(None).cast("int"))
    if unmatched or not by_file:
        by_key = F.create_map(*[F.lit(x) for kv in by_dir.items() for x in kv])
        out = out.withColumn("run", F.coalesce(F.col("run"), F.element_at(by_key, _run_key(F.col(FILE)))))
    return out.drop(FILE)


def _respell(uri: str) -> str:
    return re.sub(r"^file:///", "file:/", uri)


def copy_schema(kind: str) -> T.StructType:
    """The Parquet copy's columns: the history's and each record's place in the JSONL (`_pos`),
    which the copy, bucketed and sorted by msg_id, no longer keeps by its order: a message's
    writer is its first record, a reader's reads at one `t` come in the order it wrote them."""
    s = S.COPY[kind]
    return s if S.POS in s.fieldNames() else T.StructType(s.fields + [T.StructField(S.POS, S.POS_TYPE)])


def load(spark: SparkSession, runs: list[Run], kind: str) -> DataFrame | None:
    """All runs' records of one kind, with `run` (id) and `_bad` (malformed line).

    Runs read from JSONL and runs read from their Parquet copy can be mixed:
    each part is named by its files before the union. Produce records also
    carry `_pos` (their place in the JSONL) when the copy kept it, else null;
    consume records always do (null only from a copy written before it kept it)."""
    schema, required = S.KINDS[kind]
    copied = (lambda r: r.parquet_malformed is not None and kind in S.COPY)  # the replica logs have no copy
    json_files = [f for r in runs if not copied(r) for f in r.files(kind)]
    pq_files = [f for r in runs if copied(r) for f in r.files(kind)]
    parts = []
    if json_files:
        df = (spark.read.schema(S.with_corrupt(schema))
              .option("mode", "PERMISSIVE")
              .option("columnNameOfCorruptRecord", S.CORRUPT)
              .json(json_files))
        bad = [f"`{S.CORRUPT}` IS NOT NULL"] + [f"`{c}` IS NULL" for c in required]
        extra = []
        if kind == "produce":
            outcomes = ", ".join(f"'{o}'" for o in (*S.OUTCOMES, S.INVOKE))
            bad += [f"NOT outcome IN ({outcomes})", f"(t_complete IS NULL AND outcome != '{S.INVOKE}')"]
            extra = [f"CAST(NULL AS {S.POS_TYPE.simpleString()}) AS `{S.POS}`"]
        elif kind == "consume":
            # a reader's reads at one `t` are in the order it wrote them (checkers.logs): taken
            # at the scan, where Spark's partitions of one file follow the file
            extra = [f"named_struct('file', _metadata.file_name, 'row', monotonically_increasing_id()) AS `{S.POS}`"]
        # as SQL text: a few py4j calls where Column objects took hundreds
        df = df.selectExpr("*", f"coalesce({' OR '.join(bad)}, true) AS `_bad`", *extra).drop(S.CORRUPT)
        parts.append(df)
    if pq_files:
        df = spark.read.schema(copy_schema(kind)).parquet(*pq_files)
        parts.append(df.withColumn("_bad", F.lit(False)))
    if not parts:
        return None
    parts = [_with_run(df, runs) for df in parts]
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


# A bucketed copy is read as a table, the only way Spark knows its layout:
# at most this many runs per job go that way (each is a branch of the plan).
BUCKETED_RUNS_MAX = 8


@contextmanager
def bucketed(spark: SparkSession, runs: dict[int, Run]):
    """{run id: (produce, consume or None)}: the runs' bucketed Parquet copies
    as DataFrames Spark knows are partitioned and sorted by msg_id (read as
    catalogue tables: the only way Spark learns a layout), so the checker
    matches attempts with deliveries bucket by bucket: no shuffle, no hash
    map, no sort. Empty when there are more than BUCKETED_RUNS_MAX such runs.
    The tables are dropped on exit (their files are left alone: external)."""
    chosen = {rid: r for rid, r in runs.items() if r.buckets}  # set only for a Parquet copy
    if len(chosen) > BUCKETED_RUNS_MAX:
        chosen = {}
    names: list[str] = []
    try:
        out = {}
        for rid, run in chosen.items():
            frames = []
            for kind in ("produce", "consume"):
                if not run.files(kind):
                    frames.append(None)
                    continue
                name = f"mqchaos_{kind}_{uuid.uuid4().hex}"
                cols = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in copy_schema(kind))
                location = run.files(kind)[0].replace("'", "\\'")
                spark.sql(f"CREATE TABLE {name} ({cols}) USING parquet CLUSTERED BY (msg_id) "
                          f"SORTED BY (msg_id) INTO {run.buckets} BUCKETS LOCATION '{location}'")
                names.append(name)
                frames.append(spark.table(name))
            out[rid] = tuple(frames)
        yield out
    finally:
        for name in names:
            spark.sql(f"DROP TABLE IF EXISTS {name}")


JSONL_BYTES_PER_RECORD = 150
PARQUET_BYTES_PER_RECORD = 20  # when a footer cannot be read


def records_estimate(runs: list[Run]) -> int:
    """About how many records the runs' histories hold: exact for the Parquet
    copies (their footers), from the size for JSONL."""
    import pyarrow.parquet as pq

    n = 0
    for run in runs:
        if run.records is not None:
            n += run.records
            continue
        for f in run.produce + run.consume:
            if run.parquet_malformed is None:
                n += os.path.getsize(f) // JSONL_BYTES_PER_RECORD
                continue
            for part in sorted(Path(f).glob("*.parquet")):
                try:
                    n += pq.ParquetFile(part).metadata.num_rows
                except (OSError, ValueError):
                    n += part.stat().st_size // PARQUET_BYTES_PER_RECORD
    return n


# Records of the produce log per bucket of the Parquet copy (a check's task
# holds one bucket's messages in a hash map).
BUCKET_RECORDS = 1_000_000
MIN_BUCKETS = 4


def buckets_for(records: int) -> int:
    return max(MIN_BUCKETS, math.ceil(records / BUCKET_RECORDS))


def write_copy(spark: SparkSession, frames: dict[str, DataFrame], out: str, malformed: dict,
               attempts: int) -> dict:
    """Write a run's good records as its Parquet copy under `out` (replacing
    it): both kinds bucketed by msg_id in the same number of files, one file
    per bucket, sorted by msg_id, so the checker aggregates and matches them
    per message as it streams (checkers.history.bucketed). The files stay
    plain Parquet for any reader. `attempts`: the produce records (sets
    the bucket count)."""
    out = os.path.abspath(out)  # a relative table path would be taken as inside the warehouse
    buckets = buckets_for(attempts)
    shutil.rmtree(out, ignore_errors=True)
    for kind, df in frames.items():
        if S.POS not in df.columns:
            df = df.withColumn(S.POS, F.lit(None).cast(S.POS_TYPE))
        name = f"mqchaos_copy_{kind}_{uuid.uuid4().hex}"
        try:
            (df.select(*copy_schema(kind).fieldNames()).repartition(buckets, "msg_id")
             .write.format("parquet").bucketBy(buckets, "msg_id").sortBy("msg_id")
             .option("path", f"{out}/{kind}").saveAsTable(name))
        finally:
            spark.sql(f"DROP TABLE IF EXISTS {name}")
    Path(out).mkdir(parents=True, exist_ok=True)
    return {"malformed": malformed, "buckets": buckets, "bucketed_by": "msg_id", "sorted_by": "msg_id"}


def convert(spark: SparkSession, run_dir: str) -> dict:
    """Write the run's history as Parquet next to the JSONL, once, after the run."""
    runs, errors = open_runs([run_dir], prefer_parquet=False)
    if errors:
        raise HistoryError("; ".join(f"{p}: {e}" for p, e in errors))
    (run,) = runs
    out = Path(run.dir) / PARQUET_DIR
    malformed, frames, cached, good = {}, {}, [], {}
    for kind in ("produce", "consume"):
        df = load(spark, [run], kind)
        if df is None:
            malformed[kind] = 0
            continue
        if kind == "produce":
            # The record's place in the JSONL, taken before the copy is bucketed.
            df = df.withColumn(S.POS, F.struct(F.col("_metadata.file_name").alias("file"),
                                               F.monotonically_increasing_id().alias("row")))
        df = df.cache()
        cached.append(df)
        row = df.agg(F.count(F.lit(1)).alias("n"), F.count_if(F.col("_bad")).alias("bad")).first()
        malformed[kind], good[kind] = row.bad, row.n - row.bad
        frames[kind] = df.filter(~F.col("_bad"))
    try:
        meta = write_copy(spark, frames, str(out), malformed, good.get("produce", 0))
    finally:
        for df in cached:
            df.unpersist()
    meta["source"] = [os.path.basename(f) for f in run.produce + run.consume]
    (out / META).write_text(json.dumps(meta, indent=1))
    return meta
