"""Runs under any URI Spark reads (hdfs://, s3a://, gs://, abfs://, file://...).

Local paths are found and opened by Python (checkers.trend.find_runs,
checkers.history.open_runs). A URI is listed by Spark itself, through the
same Hadoop file system layer that then reads the histories, so whatever
Spark can read (with its connector on the class path) can be analyzed:
- one listing job (`binaryFile`, recursive, without the files' content)
  names every file with its size and modification time;
- run.json and check.json are read in a second small job;
- the Parquet copy's `_meta.json` (a name Spark's listing hides) through the
  Hadoop FileSystem API.
A run is a directory with run.json or history/ (the shallowest one: nothing
below a run is another run). Directories named `latest` below the argument
are the harness's links to runs already listed: skipped.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from harness import store
from checkers.history import JSONL_BYTES_PER_RECORD, META, PARQUET_BYTES_PER_RECORD, PARQUET_DIR, Run, _respell

SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def is_uri(arg: str) -> bool:
    return bool(SCHEME.match(arg)) and not re.match(r"^[a-zA-Z]:[\\/]", arg)


@dataclass
class Listed:
    dir: str                                   # as Spark spells it (file:/..., s3a://...)
    files: dict[str, tuple[int, float]] = field(default_factory=dict)  # path below dir -> (bytes, mtime)
    meta: dict | None = None                   # run.json
    meta_error: str | None = None
    check: dict | None = None                  # check.json

    def history(self, kind: str) -> list[str]:
        return sorted(f"{self.dir}/{p}" for p in self.files
                      if re.fullmatch(rf"history/{kind}[^/]*\.jsonl", p))


_HISTORY_FILE = re.compile(r"^(.*)/(history/(?:parquet/.*|[^/]+))$")


def _split(path: str) -> tuple[str, str] | None:
    """(run dir, path below it) for the files that say where their run is."""
    if path.endswith(f"/{store.RUN_JSON}"):
        return path[: -len(f"/{store.RUN_JSON}")], store.RUN_JSON
    m = _HISTORY_FILE.match(path)
    return (m.group(1), m.group(2)) if m else None


def _segments(uri: str) -> list[str]:
    return _respell(uri.rstrip("/")).split("/")


def find(spark, uri: str) -> tuple[list[Listed], list[tuple[str, str]]]:
    """The runs below one URI (a run, a directory of runs, or a glob)."""
    try:
        files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(uri)
                 .select("path", "length", "modificationTime").collect())
    except Exception as e:  # noqa: BLE001 - py4j/analysis errors: the URI is reported, not a crash
        text = str(e).strip()
        msg = text.splitlines()[0] if text else type(e).__name__
        if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
            msg = "no such run directory"
        return [], [(uri, f"Spark could not list it: {msg[:300]}")]
    depth = len(_segments(uri))
    runs: dict[str, Listed] = {}
    checks: dict[str, tuple[int, float]] = {}
    for f in files:
        if f.path.endswith(f"/{store.CHECK_JSON}"):  # a run's verdict; it does not make a run
            checks[f.path[: -len(f"/{store.CHECK_JSON}")]] = (int(f.length), f.modificationTime.timestamp())
            continue
        split = _split(f.path)
        if split is None:
            continue
        d, below = split
        if store.LATEST in _segments(d)[depth:]:
            continue  # the harness's `latest` link to a run listed under its own name
        runs.setdefault(d, Listed(d)).files[below] = (int(f.length), f.modificationTime.timestamp())
    # The shallowest: a directory below a run is part of that run.
    dirs = sorted(runs)
    keep = [d for d in dirs if not any(d.startswith(o + "/") for o in dirs if o != d)]
    listed = [runs[d] for d in keep]
    for r in listed:
        if r.dir in checks:
            r.files[store.CHECK_JSON] = checks[r.dir]
    if not listed:
        return [], [(uri, "no run directory (run.json or history/) in it or below it")]
    _read_small(spark, listed)
    return listed, []


def _read_small(spark, listed: list[Listed]) -> None:
    paths = [f"{r.dir}/{name}" for r in listed for name in (store.RUN_JSON, store.CHECK_JSON) if name in r.files]
    if not paths:
        return
    by_dir = {r.dir: r for r in listed}
    for row in spark.read.format("binaryFile").load(paths).select("path", "content").collect():
        d, name = row.path.rsplit("/", 1)
        r = by_dir.get(d)
        if r is None:
            continue
        try:
            value = json.loads(bytes(row.content).decode("utf-8"))
            err = None if isinstance(value, dict) else f"{name} is not a JSON object"
        except (ValueError, UnicodeDecodeError) as e:
            value, err = None, f"{name} is not valid JSON: {e}"
        if name == store.RUN_JSON:
            r.meta, r.meta_error = (value if err is None else None), err
        else:
            r.check = value if err is None else None


def _hadoop_text(spark, path: str) -> tuple[str, float] | None:
    """A small file's text and modification time through Hadoop's FileSystem
    (for names the listing hides, such as _meta.json); None if absent."""
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(p):
        return None
    mtime = fs.getFileStatus(p).getModificationTime() / 1000.0
    stream = fs.open(p)
    try:
        text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()
    return text, mtime


def open_listed(spark, listed: list[Listed], prefer_parquet: bool = True
                ) -> tuple[list[Run], list[tuple[str, str]]]:
    """Runs for the checker (as checkers.history.open_runs makes them)."""
    runs, errors = [], []
    for r in listed:
        produce, consume = r.history("produce"), r.history("consume")
        if not produce:
            errors.append((r.dir, "no history/produce*.jsonl file"))
            continue
        if r.meta_error:
            errors.append((r.dir, r.meta_error))
            continue
        jsonl_bytes = sum(r.files[p[len(r.dir) + 1:]][0] for p in produce + consume)
        run = Run(r.dir, produce, consume, r.meta or {}, recorded=r.meta is not None,
                  records=jsonl_bytes // JSONL_BYTES_PER_RECORD, replica=r.history("replica"))
        pq = _fresh_parquet(spark, r) if prefer_parquet else None
        if pq is not None:
            run.use_parquet(pq, r.dir)
            run.records = sum(b for p, (b, _) in r.files.items()
                              if p.startswith("history/parquet/") and p.endswith(".parquet")
                              ) // PARQUET_BYTES_PER_RECORD
        runs.append(run)
    return runs, errors


def _fresh_parquet(spark, r: Listed) -> dict | None:
    if not any(p.startswith("history/parquet/produce/") for p in r.files):
        return None
    got = _hadoop_text(spark, f"{r.dir}/{PARQUET_DIR}/{META}")
    if got is None:
        return None
    text, mtime = got
    newest = max((t for p, (_, t) in r.files.items() if p.endswith(".jsonl")), default=0.0)
    if mtime < newest:
        return None  # the JSONL grew after the conversion: it is the record
    try:
        return json.loads(text)
    except ValueError:
        return None
