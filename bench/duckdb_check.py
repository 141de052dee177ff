"""The checker's figures computed by DuckDB: the baseline bench/checker_bench.py times
against Spark's `checkers.check.check_runs`.

It reads the same Parquet copy (`history/parquet/{produce,consume}`, as `mqchaos convert`
or bench.checker_bench.lay_out writes it) in one connection, and computes, for a queue's
history (no replica logs, no transactions, no positions in a log: others are refused), every
figure of check.json the Spark checker computes for it, by the same definitions
(checkers/analysis.py):

  per message  one row per msg_id: its produce records aggregated, its consume records
               aggregated, the two joined (full outer): attempts, invokes, best outcome,
               deliveries, rejections, flags, its ok confirmation's time
  identity     counts over those rows; samples: the SAMPLES smallest ids per kind
  loss detail  the lost messages' node and producer (greatest of their ok records');
               delivered ok messages confirmed no later than the last lost one
  ordering     per group (rule), a delivery whose seq is below the highest seq of the
               deliveries before it; samples: the first SAMPLES by (t, msg_id)
  unavailable  failed writes grouped by the last success at or before them (from time
               buckets narrower than the threshold, as Spark finds it), merged intervals
  read gaps    per consumer, successive deliveries at least the threshold apart

SQL only over the records; Python touches the result rows (a few intervals, one row of
counts). No pyspark import: the constants Spark's checker uses are repeated here (the
tests compare them with checkers.analysis's).
"""
from __future__ import annotations

import json
from pathlib import Path

import duckdb

SAMPLES = 20                # checkers.analysis.SAMPLES
LARGE_INPUT = 2_000_000     # checkers.analysis.LARGE_INPUT: no read gaps from this many records
MIN_BUCKET_S = 0.05         # checkers.analysis.MIN_BUCKET_S
BUCKET_S = 10.0             # checkers.analysis.BUCKET_S
ORDERINGS = ("none", "fifo", "monotonic", "strict")  # harness.results.ORDERINGS
ANOMALY_KINDS = ("lost", "duplicated", "unexpected", "recovered", "recovered_fail", "id_conflicts")

# check.json's keys this baseline computes (and bench.checker_bench compares with Spark's)
FIGURES = ("attempted", "ok", "fail", "info", "produce_records", "delivered", "deliveries",
           "duplicate_deliveries", "malformed_lines", "lost", "unexpected", "duplicated", "recovered",
           "recovered_fail", "id_conflicts", "poison", "lost_poison", "lost_other", "dead_lettered",
           "gave_up", "rejections", "lost_window", "lost_by_node", "lost_by_producer",
           "kept_before_lost_last", "ordering", "ordering_violations", "unavailable", "unavailable_s",
           "unavailable_by_producer", "unavailable_s_producer_max", "read_gaps", "read_gap_max_s",
           "samples")

PRODUCE_COLUMNS = {"msg_id": "VARCHAR", "producer": "VARCHAR", "seq": "BIGINT", "outcome": "VARCHAR",
                   "t_invoke": "DOUBLE", "t_complete": "DOUBLE", "node": "VARCHAR", "poison": "BOOLEAN",
                   "source": "VARCHAR", "offset": "BIGINT", "txn": "VARCHAR",
                   "_pos": 'STRUCT("file" VARCHAR, "row" BIGINT)'}
CONSUME_COLUMNS = {"msg_id": "VARCHAR", "consumer": "VARCHAR", "t": "DOUBLE", "redelivered": "BOOLEAN",
                   "source": "VARCHAR", "offset": "BIGINT", "producer": "VARCHAR", "seq": "BIGINT",
                   "rejected": "BOOLEAN", "dead_lettered": "BOOLEAN", "gave_up": "BOOLEAN"}

REJECTED = "coalesce(rejected, false)"
HAS_WRITER = "(producer IS NOT NULL AND seq IS NOT NULL)"


def _d(x: float) -> str:
    """A DOUBLE literal, exactly ``x`` (a bare 1.5 is a DECIMAL in DuckDB)."""
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def _files(directory: Path) -> list[str]:
    # as Spark lists a directory: its *.parquet files, not _SUCCESS or hidden ones
    return sorted(str(p) for p in directory.glob("*.parquet") if not p.name.startswith(("_", ".")))


def _view(con, name: str, files: list[str], columns: dict[str, str]) -> None:
    """``name``: the files' records with ``columns`` (null where a file lacks one, as Spark
    reads the copy with the history's schema), plus each record's file and row."""
    if not files:
        cols = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in columns.items())
        con.execute(f"CREATE TEMP VIEW {name} AS SELECT {cols}, CAST(NULL AS VARCHAR) AS filename, "
                    "CAST(NULL AS BIGINT) AS file_row_number WHERE false")
        return
    src = "read_parquet([" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "], " \
          "filename = true, file_row_number = true)"
    have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()}
    cols = ", ".join(f'"{c}"' if c in have else f'CAST(NULL AS {t}) AS "{c}"' for c, t in columns.items())
    con.execute(f"CREATE TEMP VIEW {name} AS SELECT {cols}, filename, file_row_number FROM {src}")


def _queue_only(con) -> None:
    """What Spark's check asks first (checkers.check.present): whether any record has a
    position in a log or a transaction. Those histories have figures this baseline does not
    compute (checkers.logs, checkers.txn, checkers.cycles): refused."""
    pos = 'source IS NOT NULL AND "offset" IS NOT NULL'
    positioned, txn = con.execute(
        f"SELECT bool_or({pos}) OR coalesce((SELECT bool_or({pos}) FROM consume), false), bool_or(txn IS NOT NULL) "
        "FROM produce").fetchone()
    if positioned or txn:
        raise ValueError("the DuckDB baseline checks queue histories only: this one has "
                         + ("positions in a log" if positioned else "transactions"))


def _rule(run: Path, override: str | None) -> str:
    meta = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
    rule = override or (meta or {}).get("ordering") or "none"
    if rule not in ORDERINGS:
        raise ValueError(f"run.json: ordering must be one of {', '.join(ORDERINGS)}, not {rule!r}")
    return rule


# -- per message and identity ----------------------------------------------------------------

PER_MESSAGE = f"""
CREATE TEMP TABLE m AS
WITH pa AS (
  SELECT msg_id,
         count(*) FILTER (WHERE outcome IN ('ok', 'info', 'fail')) AS attempts,
         count(*) FILTER (WHERE outcome = 'invoke') AS inv,
         max(CASE outcome WHEN 'ok' THEN 3 WHEN 'info' THEN 2 WHEN 'fail' THEN 1 END) AS best,
         min(producer) AS pmin, max(producer) AS pmax,
         max(t_complete) FILTER (WHERE outcome = 'ok') AS ok_t,
         bool_or(coalesce(poison, false)) AS poison
  FROM produce GROUP BY msg_id),
ca AS (
  SELECT msg_id,
         count(*) FILTER (WHERE NOT {REJECTED}) AS dlv,
         count(*) FILTER (WHERE NOT {REJECTED} AND NOT {HAS_WRITER}) AS nw,
         count(*) FILTER (WHERE {REJECTED}) AS rej,
         bool_or(NOT {REJECTED} AND coalesce(dead_lettered, false)) AS dead_lettered,
         bool_or(NOT {REJECTED} AND coalesce(gave_up, false)) AS gave_up
  FROM consume GROUP BY msg_id)
SELECT msg_id, attempts, inv, best, b, dlv, nw, rej, ok_t, pmin, pmax, poison, dead_lettered, gave_up,
       attempts + inv > 0 AS seen,
       b = 3 AND dlv = 0 AS lost
FROM (SELECT coalesce(pa.msg_id, ca.msg_id) AS msg_id, coalesce(attempts, 0) AS attempts,
             coalesce(inv, 0) AS inv, best,
             -- invoked, never completed (the run died first): unknown, info
             coalesce(best, CASE WHEN inv > 0 THEN 2 END) AS b,
             coalesce(dlv, 0) AS dlv, coalesce(nw, 0) AS nw, coalesce(rej, 0) AS rej, ok_t, pmin, pmax,
             coalesce(pa.poison, false) AS poison, coalesce(ca.dead_lettered, false) AS dead_lettered,
             coalesce(ca.gave_up, false) AS gave_up
      FROM pa FULL OUTER JOIN ca ON pa.msg_id = ca.msg_id)
"""

KINDS = {
    "lost": "lost",
    "unexpected": "(NOT seen AND dlv > 0)",
    "duplicated": "(dlv > 1)",
    "recovered": "(b IN (1, 2) AND dlv > 0)",
    "recovered_fail": "(b = 1 AND dlv > 0)",
    "id_conflicts": "(pmin <> pmax)",
}

COUNTS = {
    "attempted": "count(*) FILTER (WHERE seen)",
    "ok": "count(*) FILTER (WHERE b = 3)",
    "info": "count(*) FILTER (WHERE b = 2)",
    "fail": "count(*) FILTER (WHERE b = 1)",
    "produce_records": "sum(attempts)",
    "delivered": "count(*) FILTER (WHERE dlv > 0)",
    "deliveries": "sum(dlv)",
    "duplicate_deliveries": "sum(greatest(dlv - 1, 0))",
    # deliveries lacking producer/seq whose message has a produce record (ordering looks
    # their writer up)
    "no_writer": "sum(CASE WHEN seen THEN nw ELSE 0 END)",
    **{k: f"count(*) FILTER (WHERE {c})" for k, c in KINDS.items()},
    "poison": "count(*) FILTER (WHERE poison)",
    "lost_poison": "count(*) FILTER (WHERE lost AND poison)",
    "lost_other": "count(*) FILTER (WHERE lost AND NOT poison)",
    "dead_lettered": "count(*) FILTER (WHERE dead_lettered)",
    "gave_up": "count(*) FILTER (WHERE gave_up)",
    "rejections": "sum(rej)",
}

IDENTITY = ("SELECT " + ", ".join(f"{e} AS {k}" for k, e in COUNTS.items())
            + ", min(ok_t) FILTER (WHERE lost) AS lost_first, max(ok_t) FILTER (WHERE lost) AS lost_last, "
            + ", ".join(f"min(msg_id, {SAMPLES}) FILTER (WHERE {c}) AS s_{k}" for k, c in KINDS.items())
            + " FROM m")


def _identity(con) -> dict:
    cur = con.execute(IDENTITY)
    names = [c[0] for c in cur.description]
    row = dict(zip(names, cur.fetchone()))
    d = {k: int(row[k] or 0) for k in COUNTS}
    d["samples"] = {k: list(row[f"s_{k}"] or []) for k in ANOMALY_KINDS}
    d["lost_window"] = [row["lost_first"], row["lost_last"]] if row["lost_first"] is not None else None
    return d


def _loss_detail(con, lost_last: float) -> dict:
    """The lost messages by the node and the producer of their ok records (the greatest of
    each), and the delivered ok messages confirmed no later than the last lost one."""
    rows = con.execute("""
        SELECT grouping(node) AS by_producer, node, producer, count(*) AS n
        FROM (SELECT coalesce(nullif(max(p.node), ''), '?') AS node,
                     coalesce(nullif(max(p.producer), ''), '?') AS producer FROM produce p
              SEMI JOIN (SELECT msg_id FROM m WHERE lost) l ON p.msg_id = l.msg_id
              WHERE p.outcome = 'ok' GROUP BY p.msg_id)
        GROUP BY GROUPING SETS ((node), (producer))
    """).fetchall()
    kept = con.execute(f"SELECT count(*) FROM m WHERE best = 3 AND dlv > 0 AND ok_t <= {_d(lost_last)}").fetchone()[0]
    return {"lost_by_node": dict(sorted((n, int(c)) for g, n, _, c in rows if not g)),
            "lost_by_producer": dict(sorted((p, int(c)) for g, _, p, c in rows if g)),
            "kept_before_lost_last": int(kept)}


# -- ordering --------------------------------------------------------------------------------

def _ordering(con, rule: str, lookup: bool) -> dict:
    """Deliveries below the highest seq delivered before them in their group: per producer
    and consumer (and partition, for positioned reads) under monotonic, per producer and
    source under fifo / strict; redeliveries skipped but under strict."""
    if rule == "none":
        return {"ordering_violations": 0, "samples": []}
    good = f"NOT {REJECTED}"
    d = (f"SELECT msg_id, consumer, source, \"offset\", t, redelivered, producer, seq FROM consume "
         f"WHERE {good} AND {HAS_WRITER}")
    if lookup:
        # deliveries lacking their writer take that of the message's first produce record
        # (its place in the JSONL, `_pos`; else its file and row in the copy)
        d += (f" UNION ALL SELECT c.msg_id, c.consumer, c.source, c.\"offset\", c.t, c.redelivered, "
              f"w.w.producer, w.w.seq FROM consume c JOIN (SELECT msg_id, arg_min({{'producer': producer, "
              f"'seq': seq}}, coalesce(_pos, {{'file': 'file:' || filename, 'row': file_row_number}})) AS w "
              f"FROM produce SEMI JOIN (SELECT msg_id FROM consume WHERE {good} AND NOT {HAS_WRITER}) k "
              f"ON produce.msg_id = k.msg_id GROUP BY msg_id) w ON c.msg_id = w.msg_id "
              "WHERE NOT coalesce(c.rejected, false) AND NOT (c.producer IS NOT NULL AND c.seq IS NOT NULL)")
    if rule == "monotonic":
        k1, k2 = "consumer", "CASE WHEN \"offset\" IS NOT NULL THEN source END"
    else:
        k1, k2 = "source", "CAST(NULL AS VARCHAR)"
    where = "true" if rule == "strict" else "NOT redelivered"
    n, ids = con.execute(f"""
        WITH grp AS (SELECT producer, {k1} AS k1, {k2} AS k2, "offset", t, seq, msg_id FROM ({d}) WHERE {where})
        SELECT count(*), arg_min(msg_id, {{'t': t, 'm': msg_id}}, {SAMPLES}) FROM (
          SELECT seq, t, msg_id, max(seq) OVER (PARTITION BY producer, k1, k2
                   ORDER BY "offset" ASC NULLS LAST, t, seq
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max
          FROM grp) WHERE seq < prev_max""").fetchone()
    return {"ordering_violations": int(n), "samples": list(ids or [])}


# -- unavailability --------------------------------------------------------------------------

POOLED = "chr(1)"  # the run's key; a producer's is chr(2) || producer


def _failed_bucketed(threshold: float) -> str:
    """Failed writes with `s_prev`, the last success at or before them, per key: from each
    time bucket's first and last success and the last success of the buckets before
    (buckets narrower than the threshold: a failure between two successes of its own
    bucket lies in a gap too short to count, and is dropped)."""
    width = threshold * (1 - 1e-9)
    return f"""
    p AS (SELECT producer, outcome = 'ok' AS ok, t_invoke, t_complete, floor(t_complete / {_d(width)}) AS b
          FROM produce WHERE outcome <> 'invoke'),
    buckets AS (
      SELECT key, b, first_ok, last_ok, max(last_ok) OVER (PARTITION BY key ORDER BY b
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS carry
      FROM (SELECT CASE WHEN grouping(producer) = 1 THEN {POOLED} ELSE chr(2) || producer END AS key, b,
                   min(t_complete) FILTER (WHERE ok) AS first_ok, max(t_complete) FILTER (WHERE ok) AS last_ok
            FROM p GROUP BY GROUPING SETS ((b), (producer, b)))),
    f AS (SELECT unnest([{POOLED}, chr(2) || producer]) AS key, t_invoke, t_complete, b FROM p WHERE NOT ok),
    failed AS (
      SELECT f.key, f.t_invoke, f.t_complete,
             CASE WHEN w.last_ok IS NULL OR f.t_complete < w.first_ok THEN w.carry ELSE w.last_ok END AS s_prev
      FROM f JOIN buckets w ON f.key = w.key AND f.b = w.b
      WHERE NOT (w.last_ok IS NOT NULL AND f.t_complete >= w.first_ok AND f.t_complete < w.last_ok))"""


def _failed_sorted() -> str:
    """The same for thresholds too small for buckets: a running max of the successes over
    the buckets that hold a failure."""
    return f"""
    p AS (SELECT unnest([{POOLED}, chr(2) || producer]) AS key, outcome = 'ok' AS ok, t_invoke, t_complete,
                 floor(t_complete / {_d(BUCKET_S)}) AS b FROM produce WHERE outcome <> 'invoke'),
    bad AS (SELECT key, b, carry FROM (
              SELECT key, b, n_bad, max(last_ok) OVER (PARTITION BY key ORDER BY b
                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS carry
              FROM (SELECT key, b, count(*) FILTER (WHERE NOT ok) AS n_bad,
                           max(t_complete) FILTER (WHERE ok) AS last_ok FROM p GROUP BY key, b))
            WHERE n_bad > 0),
    failed AS (
      SELECT key, t_invoke, t_complete, s_prev FROM (
        SELECT p.key, p.ok, p.t_invoke, p.t_complete,
               coalesce(max(CASE WHEN p.ok THEN p.t_complete END) OVER (PARTITION BY p.key, p.b
                          ORDER BY p.t_complete, p.ok DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
                        w.carry) AS s_prev
        FROM p JOIN bad w ON p.key = w.key AND p.b = w.b) WHERE NOT ok)"""


def _unavailable(con, threshold: float) -> tuple[list, dict]:
    """Merged intervals with failed writes and no successful one: the run's and each
    producer's. Each group of failures with one previous success spans from that success
    (or its first invoke, if later) to its last completion; merged where they overlap."""
    failed = _failed_bucketed(threshold) if threshold >= MIN_BUCKET_S else _failed_sorted()
    rows = con.execute(f"""
        WITH {failed},
        gaps AS (SELECT key, ua, uz FROM (SELECT key, greatest(s_prev, min(t_invoke)) AS ua, max(t_complete) AS uz
                                          FROM failed GROUP BY key, s_prev) WHERE uz - ua >= {_d(threshold)}),
        starts AS (SELECT key, ua, uz, CASE WHEN ua <= max(uz) OVER (PARTITION BY key ORDER BY ua, uz
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS start FROM gaps),
        islands AS (SELECT key, ua, uz, sum(start) OVER (PARTITION BY key ORDER BY ua, uz
                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island FROM starts)
        SELECT key, min(ua) AS a, max(uz) AS z FROM islands GROUP BY key, island ORDER BY key, a""").fetchall()
    pooled: list = []
    by_producer: dict[str, list] = {}
    for key, a, z in rows:  # the merged intervals (a few), rounded as checkers.analysis.merge does
        (pooled if key == "\x01" else by_producer.setdefault(key[1:], [])).append([round(a, 6), round(z, 6)])
    return pooled, by_producer


def _read_gaps(con, threshold: float) -> dict:
    rows = con.execute(f"""
        SELECT consumer, ra, rz FROM (SELECT consumer, lag(t) OVER (PARTITION BY consumer ORDER BY t) AS ra,
                                             t AS rz FROM consume)
        WHERE rz - ra >= {_d(threshold)} ORDER BY consumer, ra, rz""").fetchall()
    out: dict[str, list] = {}
    for reader, a, z in rows:
        out.setdefault(reader, []).append([a, z])
    return out


def _records(con, files: list[str]) -> int:
    """The records in the copy's files (their footers), as checkers.history.records_estimate."""
    if not files:
        return 0
    lst = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    return int(con.execute(f"SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata({lst})").fetchone()[0])


def check(run: str | Path, *, ordering: str | None = None, threshold: float = 1.0,
          read_gaps: bool | None = None, threads: int | None = None) -> dict:
    """The run's figures (FIGURES) from its Parquet copy. ``ordering``: the rule, else
    run.json's; ``read_gaps``: computed or not (None: as Spark decides, not from
    LARGE_INPUT records on, where read_gaps and read_gap_max_s are None)."""
    run = Path(run)
    base = run / "history" / "parquet"
    rule = _rule(run, ordering)
    if any((run / "history").glob("replica*.jsonl")):
        raise ValueError("the DuckDB baseline checks queue histories only: this one has replica logs")
    meta_file = base / "_meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    try:
        pfiles, cfiles = _files(base / "produce"), _files(base / "consume")
        _view(con, "produce", pfiles, PRODUCE_COLUMNS)
        _view(con, "consume", cfiles, CONSUME_COLUMNS)
        _queue_only(con)
        if read_gaps is None:
            read_gaps = _records(con, pfiles + cfiles) < LARGE_INPUT
        con.execute(PER_MESSAGE)
        d = _identity(con)
        no_writer = d.pop("no_writer")
        d["malformed_lines"] = sum((meta.get("malformed") or {}).values())
        if d["lost"] and d["lost_window"]:
            d.update(_loss_detail(con, d["lost_window"][1]))
        else:
            d.update({"lost_by_node": {}, "lost_by_producer": {}, "kept_before_lost_last": None})
        o = _ordering(con, rule, lookup=no_writer > 0)
        d["ordering"] = rule
        d["ordering_violations"] = o["ordering_violations"]
        d["samples"]["ordering"] = o["samples"]
        d["unavailable"], d["unavailable_by_producer"] = _unavailable(con, threshold)
        d["unavailable_s"] = round(sum(z - a for a, z in d["unavailable"]), 3)
        d["unavailable_s_producer_max"] = round(max(
            (sum(z - a for a, z in iv) for iv in d["unavailable_by_producer"].values()), default=0.0), 3)
        # Spark's read gaps need the run's consume history (history/consume*.jsonl)
        consumed = any(f.is_file() for f in (run / "history").glob("consume*.jsonl"))
        reads = (_read_gaps(con, threshold) if cfiles else {}) if read_gaps and consumed else None
        d["read_gaps"] = reads
        d["read_gap_max_s"] = (round(max((z - a for iv in reads.values() for a, z in iv), default=0.0), 3)
                               if reads is not None else None)
    finally:
        con.close()
    return {k: d[k] for k in FIGURES}


def figures(result: dict) -> dict:
    """The compared figures of a check result (Spark's check.json dict or check()'s)."""
    out = {k: result[k] for k in FIGURES}
    out["samples"] = {k: list(result["samples"].get(k, [])) for k in (*ANOMALY_KINDS, "ordering")}
    return out


def differences(a, b, tol: float = 1e-6, path: str = "") -> list[str]:
    """Where two figure trees differ (floats within ``tol`` are equal): '' each, empty if none."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return [] if a == b and type(a) is type(b) else [f"{path or '.'}: {a!r} != {b!r}"]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return [] if abs(a - b) <= tol else [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: missing on one side" for k in sorted(set(a) ^ set(b), key=str)]
        for k in sorted(set(a) & set(b), key=str):
            out += differences(a[k], b[k], tol, f"{path}.{k}")
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)} items ({list(a)[:5]!r}... vs {list(b)[:5]!r}...)"]
        return [x for i, (p, q) in enumerate(zip(a, b)) for x in differences(p, q, tol, f"{path}[{i}]")]
    return [f"{path}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"]
