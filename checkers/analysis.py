"""The checker proper: a pure function of the histories (as DataFrames).

Definitions (docs/history.md): identity is `msg_id`; a message's outcome is
the best of its completions (ok > info > fail), so a late confirm written after
a timeout upgrades info to ok; a message with an invoke record (history
version 2) and no completion is info, never unexpected.
  lost            outcome ok, never delivered (lost_window: when those were confirmed)
  unexpected      delivered, never attempted
  duplicated      delivered more than once (duplicate_deliveries: the extra ones)
  recovered       outcome fail or info, delivered anyway (recovered_fail: fail only)
  ordering        per producer, a delivery whose seq is below the highest seen
                  before it under the rule (monotonic / fifo / strict)
  unavailable     between two successful writes, from the first failing attempt
                  to the last failure observed, if longer than the threshold
A consume line marked `rejected` (handed back to the broker) is not a delivery: it
counts in `rejections` only. Poison messages (produce records marked `poison`) are
counted (`poison`), and so are the lost ones among them (`lost_poison`, the rest
`lost_other`); messages read from a dead-letter queue (`dead_lettered`) or taken after
a bounded number of rejects (`gave_up`) are delivered, and counted as such.

How it stays fast (docs/benchmarks.md has the figures):
- the queries are Spark SQL text over the history's DataFrames (`sql`): one
  py4j call builds a query that, from Column objects, took thousands (a warm
  100k-message check spent a fifth of its time building its plan);
- every aggregation buffer is fixed-width (numbers only) where all messages
  pass: Spark runs a string min/max/first as a sort-based aggregation, several
  times slower. Producer names are compared by a 64-bit hash, certified
  collision-free per run by a small exact check (`collisions_query`);
- a run whose Parquet copy is bucketed and sorted by msg_id (`mqchaos
  convert`) has its attempts and deliveries matched bucket by bucket as they
  stream: no shuffle, no hash map, no sort (checkers.history.bucketed);
- identity, counts, samples and the loss's detail are one job with the rest:
  the per-message rows are computed after one shuffle of every record; each
  message counts once in its run's totals and once more per anomaly kind it
  has (the first SAMPLES ids per kind: a bounded top-k), all partially
  aggregated before the only other shuffle;
- ordering needs the produce log only for deliveries that do not carry their
  writer, and then only those messages' records (a broadcast semi-join); on
  large inputs its window is partitioned by a 64-bit hash of the group;
- unavailable intervals come from per-bucket extremes of the successful
  writes (buckets narrower than the threshold), then the failed writes alone:
  no sort of the produce log. The run's pooled intervals and each producer's
  are one computation, keyed by run or by run and producer.
"""
from __future__ import annotations

import inspect
import uuid
from typing import Callable

from pyspark.sql import DataFrame, Window, functions as F

from checkers import schema as S
from harness.results import COUNT_FIELDS, ORDERINGS  # noqa: F401 - kept as A.*: bench and tests read them here

SAMPLES = 20
RANK = {"fail": 1, "info": 2, "ok": 3}
BUCKET_S = 10.0  # time buckets of the exact (small-threshold) unavailability query
# Below this threshold (seconds) the bucketed unavailability query would need
# too many buckets: the exact sort-based one is used instead.
MIN_BUCKET_S = 0.05
# Deliveries lacking producer/seq are given their writer by a broadcast of
# their ids when there are at most this many; else by a shuffle join.
BROADCAST_IDS = 2_000_000
# History records from which the checker takes its large-input paths (the
# bucketed Parquet copy, the hashed ordering window).
LARGE_INPUT = 2_000_000

# A message's flags (bits, or-ed over its records): marked poison by its producer; read
# from a dead-letter queue; taken by a consumer that gave up rejecting it.
POISON, DEAD_LETTERED, GAVE_UP, ABORTED = 1, 2, 4, 8
LOG_ANOMALIES = ("inconsistent_offsets", "poll_skips", "nonmonotonic_polls",
                 # and what no committed-read isolation allows (checkers.txn)
                 "aborted_reads", "uncommitted_reads", "torn_transactions",
                 # circular information flow between committed transactions (checkers.cycles)
                 "cycles_g1c_wr")
ANOMALY_KINDS = ("lost", "duplicated", "unexpected", "recovered", "recovered_fail", "id_conflicts")


def sql(text: str, **args) -> DataFrame:
    """Spark SQL in which each `{name}` is args[name]: a DataFrame (registered as a
    temporary view while the query is analysed, then dropped: the query keeps its plan,
    and its use of a cached DataFrame) or a piece of SQL text."""
    frames = [v for v in args.values() if isinstance(v, DataFrame)]
    spark = frames[0].sparkSession
    names, views = {}, []
    for k, v in args.items():
        if isinstance(v, DataFrame):
            names[k] = f"mqchaos_{uuid.uuid4().hex}"
            v.createOrReplaceTempView(names[k])
            views.append(names[k])
        else:
            names[k] = v
    try:
        return spark.sql(text.format(**names))
    finally:
        # Through the session's catalogue: Catalog.dropTempView would also uncache
        # every DataFrame with the view's plan (the check's cached history).
        catalog = spark._jsparkSession.sessionState().catalog()
        for name in views:
            catalog.dropTempView(name)


def _d(x: float) -> str:
    """A double literal, exactly `x` (a bare 1.5 is a decimal in Spark SQL)."""
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def _ids(ids) -> str:
    """`run IN (...)` over the run ids (false when there are none)."""
    ids = [int(i) for i in ids]
    return f"run IN ({', '.join(map(str, ids))})" if ids else "false"


# min_by(value, order, k) (Spark >= 4.2): the k values of the smallest
# orders, in order, from a bounded buffer. Older Spark: a sorted list, cut.
_MIN_BY_K = "k" in inspect.signature(F.min_by).parameters


def _first(value: str, order: str, k: int = SAMPLES) -> str:
    """Aggregate: the values of the k smallest `order`s (nulls skipped), in order."""
    if _MIN_BY_K:
        return f"min_by({value}, {order}, {k})"
    return (f"transform(slice(array_sort(collect_list(CASE WHEN ({order}) IS NOT NULL THEN "
            f"struct({order} AS o, {value} AS v) END)), 1, {k}), x -> x.v)")


def _sample(cond: str, value: str, order: str) -> str:
    """Aggregate: ``value`` of the first SAMPLES rows meeting ``cond``, by ``order``."""
    return _first(f"CASE WHEN {cond} THEN {value} END", f"CASE WHEN {cond} THEN {order} END")


def _int(cond: str) -> str:
    return f"CASE WHEN {cond} THEN 1 ELSE 0 END"


def _rank(col: str) -> str:
    return f"CASE {col} WHEN 'ok' THEN {RANK['ok']} WHEN 'info' THEN {RANK['info']} WHEN 'fail' THEN {RANK['fail']} END"


_BAD = "`_bad`"
HAS_WRITER = "(producer IS NOT NULL AND seq IS NOT NULL)"
REJECTED = "coalesce(rejected, false)"  # a consume line handed back to the broker: not a delivery
# A delivery's flags (a rejected line has none).
CONSUME_FLAGS = (f"CASE WHEN {REJECTED} THEN 0 ELSE "
                 f"(CASE WHEN coalesce(dead_lettered, false) THEN {DEAD_LETTERED} ELSE 0 END) | "
                 f"(CASE WHEN coalesce(gave_up, false) THEN {GAVE_UP} ELSE 0 END) END")
PRODUCE_FLAGS = (f"(CASE WHEN coalesce(poison, false) THEN {POISON} ELSE 0 END) | "
                 f"(CASE WHEN coalesce(aborted, false) THEN {ABORTED} ELSE 0 END)")
# a transactional message's transaction, as a fixed-width key (checkers.txn)
TXN_HASH = "CASE WHEN txn IS NOT NULL THEN xxhash64(txn) END"


def _count_if(cond):
    return F.sum(F.when(cond, 1).otherwise(0))


Query = tuple[DataFrame, Callable[[list], dict]]


def run_queries(queries: list[Query | None]) -> list:
    """Run several queries as ONE Spark job (a union, each part tagged), so
    their independent stages share the cores; decode each part's rows (None
    for a query that is None)."""
    dfs = [df.withColumn("part", F.lit(i)) for i, q in enumerate(queries) if q for df in [q[0]]]
    if not dfs:
        return [None] * len(queries)
    union = dfs[0]
    for df in dfs[1:]:
        union = union.unionByName(df, allowMissingColumns=True)
    parts: dict[int, list] = {}
    for r in union.collect():
        parts.setdefault(r.part, []).append(r)
    return [q[1](parts.get(i, [])) if q else None for i, q in enumerate(queries)]


# -- per message -----------------------------------------------------------------------------

def _per_message(produce: DataFrame, consume: DataFrame | None, txn: bool = False) -> DataFrame:
    """(run, msg_id) -> the message's attempts and deliveries, from one
    shuffle of every record."""
    # One narrow row per record through the shuffle. r: 0 malformed line,
    # 1 / 2 / 3 a completion (fail / info / ok), 4 a delivery that carries its
    # writer, 5 one that does not, 6 an invoke (history version 2), 7 a rejected
    # delivery (handed back). fl: the record's flags (POISON...).
    rows = (f"SELECT run, msg_id, CASE WHEN {_BAD} THEN 0 WHEN outcome = '{S.INVOKE}' THEN 6 "
            f"ELSE {_rank('outcome')} END AS r, "
            f"CASE WHEN NOT {_BAD} AND outcome = 'ok' THEN t_complete END AS tc, "
            f"CASE WHEN NOT {_BAD} THEN xxhash64(producer) END AS ph, "
            f"CASE WHEN {_BAD} THEN 0 ELSE {PRODUCE_FLAGS} END AS fl"
            + (f", CASE WHEN NOT {_BAD} THEN {TXN_HASH} END AS th, CASE WHEN NOT {_BAD} THEN t_commit END AS tcm, "
               "CAST(NULL AS DOUBLE) AS td" if txn else "") + " FROM {produce}")
    if consume is not None:
        rows += (f" UNION ALL SELECT run, msg_id, CASE WHEN {_BAD} THEN 0 WHEN {REJECTED} THEN 7 "
                 f"WHEN {HAS_WRITER} THEN 4 ELSE 5 END, CAST(NULL AS DOUBLE), CAST(NULL AS BIGINT), "
                 f"CASE WHEN {_BAD} THEN 0 ELSE {CONSUME_FLAGS} END"
                 + (f", CAST(NULL AS BIGINT), CAST(NULL AS DOUBLE), CASE WHEN NOT {_BAD} AND NOT {REJECTED} THEN t END"
                    if txn else "") + " FROM {consume}")
    attempt = "r BETWEEN 1 AND 3"
    # Message ids are (nearly) all distinct: an aggregation before the shuffle
    # would only cost. Shuffled first, the aggregation runs once, after it
    # (spark.sql.execution.combineAdjacentAggregation, set by checkers.spark).
    text = (f"SELECT run, msg_id, sum({_int(attempt)}) AS attempts, sum({_int('r = 6')}) AS inv, "
            f"max(CASE WHEN {attempt} THEN r END) AS best, sum({_int('r IN (4, 5)')}) AS dlv, "
            f"sum({_int('r = 0')}) AS bad, min(ph) AS pmin, max(ph) AS pmax, max(tc) AS ok_t, "
            f"sum({_int('r = 5')}) AS nw, sum({_int('r = 7')}) AS rej, bit_or(fl) AS fl"
            + (", max(th) AS th, max(tcm) AS tcm, min(td) AS td" if txn else "") + " "
            f"FROM (SELECT /*+ REPARTITION(run, msg_id) */ * FROM ({rows})) GROUP BY run, msg_id")
    return sql(text, produce=produce, consume=consume) if consume is not None else sql(text, produce=produce)


def _per_message_bucketed(rid: int, produce: DataFrame, consume: DataFrame | None, txn: bool = False) -> DataFrame:
    """The same for one run whose Parquet copy is bucketed by msg_id (only
    good records): each side aggregated, then joined, bucket by bucket."""
    ok = F.col("outcome") == "ok"
    inv = F.col("outcome") == S.INVOKE
    m = produce.groupBy("msg_id").agg(
        _count_if(~inv).alias("attempts"), _count_if(inv).alias("inv"),
        F.max(F.expr(_rank("outcome"))).alias("best"),
        F.min(F.xxhash64("producer")).alias("pmin"), F.max(F.xxhash64("producer")).alias("pmax"),
        F.max(F.when(ok, F.col("t_complete"))).alias("ok_t"), F.bit_or(F.expr(PRODUCE_FLAGS)).alias("pfl"),
        *([F.max(F.expr(TXN_HASH)).alias("th"), F.max("t_commit").alias("tcm")] if txn else []))
    if consume is None:
        m = m.select("*", *[F.lit(0).cast("long").alias(k) for k in ("dlv", "nw", "rej")],
                     F.lit(0).alias("cfl"), *([F.lit(None).cast("double").alias("td")] if txn else []))
    else:
        rej = F.expr(REJECTED)
        d = consume.groupBy("msg_id").agg(_count_if(~rej).alias("dlv"), _count_if(~rej & ~F.expr(HAS_WRITER)).alias("nw"),
                                          _count_if(rej).alias("rej"), F.bit_or(F.expr(CONSUME_FLAGS)).alias("cfl"),
                                          *([F.min(F.when(~rej, F.col("t"))).alias("td")] if txn else []))
        m = m.join(d, "msg_id", "full_outer")
    zero = (lambda c: F.coalesce(c, F.lit(0)).cast("long"))
    return m.select(F.lit(rid).alias("run"), "msg_id",
                    zero("attempts").alias("attempts"), zero("inv").alias("inv"), "best",
                    zero("dlv").alias("dlv"), F.lit(0).cast("long").alias("bad"),
                    "pmin", "pmax", "ok_t", zero("nw").alias("nw"), zero("rej").alias("rej"),
                    F.coalesce("pfl", F.lit(0)).bitwiseOR(F.coalesce("cfl", F.lit(0))).alias("fl"),
                    *(["th", "tcm", "td"] if txn else []))


def per_message(produce: DataFrame | None, consume: DataFrame | None,
                bucketed: dict[int, tuple] | None = None, txn: bool = False) -> DataFrame:
    """One row per (run, msg_id): the input of identity_query and loss_query; with ``txn``
    also each message's transaction (``th``, a hash), commit time (``tcm``) and first
    delivery (``td``), the input of checkers.txn.

    `bucketed`: {run id: (produce, consume)} of runs whose copies are
    bucketed by msg_id (checkers.history.bucketed): those are matched bucket
    by bucket, the others by one shuffle of all their records."""
    bucketed = bucketed or {}
    parts = [_per_message_bucketed(rid, p, c, txn) for rid, (p, c) in bucketed.items()]
    if produce is not None:  # None: every run is in `bucketed`
        if bucketed:
            rest = f"NOT {_ids(bucketed)}"
            produce = produce.where(rest)
            consume = consume.where(rest) if consume is not None else None
        parts.append(_per_message(produce, consume, txn))
    m = parts[0]
    for part in parts[1:]:
        m = m.unionByName(part)
    return m


# A message's outcome rank (a message invoked but never completed, the run died first,
# is unknown: info), and the conditions on a per-message row.
_B = f"coalesce(best, CASE WHEN inv > 0 THEN {RANK['info']} END)"
_SEEN = "(attempts + inv) > 0"
KINDS = {
    "lost": f"({_B} = 3 AND dlv = 0)",
    "unexpected": f"(NOT {_SEEN} AND dlv > 0)",
    "duplicated": "(dlv > 1)",
    "recovered": f"({_B} IN (1, 2) AND dlv > 0)",
    "recovered_fail": f"({_B} = 1 AND dlv > 0)",
    "id_conflicts": "(pmin != pmax)",
}


def _flag(bit: int) -> str:
    return f"((fl & {bit}) != 0)"


def identity_query(produce: DataFrame | None, consume: DataFrame | None,
                   bucketed: dict[int, tuple] | None = None, m: DataFrame | None = None) -> Query:
    """Counts and sample ids per run, from `m` (per_message's rows; built from the
    other arguments when not given).

    Each run's dict also holds `no_writer`: good deliveries without
    producer/seq (the ordering then looks them up in the produce log)."""
    if m is None:
        m = per_message(produce, consume, bucketed)
    per_msg = {
        "attempted": _int(_SEEN), "ok": _int(f"{_B} = 3"), "info": _int(f"{_B} = 2"),
        "fail": _int(f"{_B} = 1"), "produce_records": "attempts", "delivered": _int("dlv > 0"),
        "deliveries": "dlv", "duplicate_deliveries": "greatest(dlv - 1, 0)",
        "malformed_lines": "bad",
        # deliveries lacking producer/seq whose message has a produce record
        # (the others, unexpected, have no writer to look up)
        "no_writer": f"CASE WHEN {_SEEN} THEN nw ELSE 0 END",
        **{k: _int(cond) for k, cond in KINDS.items()},
        "poison": _int(_flag(POISON)),
        "lost_poison": _int(f"{KINDS['lost']} AND {_flag(POISON)}"),
        "lost_other": _int(f"{KINDS['lost']} AND NOT {_flag(POISON)}"),
        "dead_lettered": _int(_flag(DEAD_LETTERED)),
        "gave_up": _int(_flag(GAVE_UP)),
        "rejections": "rej",
    }
    sums = list(per_msg)
    # Each message counts once in its run's totals (kind "") and once more per
    # anomaly kind it has, under which the first ids are kept (a bounded
    # top-k); both are partially aggregated before the shuffle.
    kind = "explode(array('', " + ", ".join(f"CASE WHEN {c} THEN '{k}' END" for k, c in KINDS.items()) + "))"
    total = "kind = ''"
    sid = "CASE WHEN kind != '' THEN msg_id END"
    text = ("SELECT run, kind, "
            + ", ".join(f"sum(CASE WHEN {total} THEN CAST({e} AS BIGINT) END) AS {k}" for k, e in per_msg.items())
            + f", min(CASE WHEN {total} AND lost THEN ok_t END) AS lost_first"
            + f", max(CASE WHEN {total} AND lost THEN ok_t END) AS lost_last"
            + f", {_first(sid, sid)} AS ids"
            + f" FROM (SELECT *, {KINDS['lost']} AS lost, {kind} AS kind FROM {{m}})"
            + " WHERE kind IS NOT NULL GROUP BY run, kind")
    return sql(text, m=m), lambda rows: _decode_identity(rows, sums)


def _decode_identity(rows: list, sums: list[str]) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for row in rows:
        if row.kind == "":
            d = out.setdefault(row.run, {"samples": {k: [] for k in ANOMALY_KINDS}})
            d.update({k: int(row[k] or 0) for k in sums})
            # When the lost messages were confirmed: the window of the loss.
            d["lost_window"] = [row.lost_first, row.lost_last] if row.lost_first is not None else None
    for row in rows:
        if row.kind != "":
            out[row.run]["samples"][row.kind] = list(row.ids or [])
    for d in out.values():
        for ids in d["samples"].values():
            ids.sort()
    return out


def loss_detail(m: DataFrame, produce: DataFrame, lost_last: dict[int, float], lost: int) -> dict[int, dict]:
    """For the runs with loss ({run id: the last lost message's confirm time}): the lost
    messages by the node and the producer that wrote them (R7/R8: the loser's side; a
    message's greatest of its confirmed records'), and how many delivered messages had been
    confirmed no later than the last lost one (0: the loss is exactly every write up to a
    moment, R2). A second, small job, over `m` (per_message's rows, cached by the caller)
    once identity has counted the loss (`lost` messages): lossless runs skip it."""
    runs = _ids(lost_last)
    # the lost messages' records only: a broadcast of their ids, when they are few
    hint = "/*+ BROADCAST(l) */" if lost <= BROADCAST_IDS else ""
    lost_ids = f"SELECT run, msg_id FROM {{m}} WHERE {runs} AND {KINDS['lost']}"
    side = (f"SELECT run, 'side' AS what, node, producer, count(*) AS n FROM ("
            f"SELECT {hint} p.run, max(p.node) AS node, max(p.producer) AS producer FROM {{produce}} p "
            f"LEFT SEMI JOIN ({lost_ids}) l ON p.run = l.run AND p.msg_id = l.msg_id "
            f"WHERE NOT p.{_BAD} AND p.outcome = 'ok' AND p.{runs} GROUP BY p.run, p.msg_id) "
            f"GROUP BY run, node, producer")
    # each lossy run's moment joined to its rows (broadcast): an OR of one term per run,
    # evaluated on every row, cost rows x runs (analyze over 1,000 runs: docs/benchmarks.md)
    last = m.sparkSession.createDataFrame([(int(r), float(t)) for r, t in lost_last.items()],
                                          "run int, last double")
    # (the lossy runs named as well: a filter on the grouping key reaches the scan, so an
    # uncached `m` is recomputed for those runs only)
    kept = ("SELECT /*+ BROADCAST(t) */ x.run, 'kept', NULL, NULL, count(*) FROM {m} x JOIN {last} t "
            f"ON x.run = t.run WHERE x.{runs} AND x.best = 3 AND x.dlv > 0 AND x.ok_t <= t.last GROUP BY x.run")
    out = {r: {"lost_by_node": {}, "lost_by_producer": {}, "kept_before_lost_last": 0} for r in lost_last}
    for row in sql(f"{side} UNION ALL {kept}", m=m, produce=produce, last=last).collect():
        d = out[row.run]
        if row.what == "kept":
            d["kept_before_lost_last"] = int(row.n)
            continue
        for key, name in (("lost_by_node", row.node or "?"), ("lost_by_producer", row.producer or "?")):
            d[key][name] = d[key].get(name, 0) + int(row.n)
    for d in out.values():
        d["lost_by_node"] = dict(sorted(d["lost_by_node"].items()))
        d["lost_by_producer"] = dict(sorted(d["lost_by_producer"].items()))
    return out


def collisions_query(produce: DataFrame) -> Query:
    """Runs in which two distinct producer names share a 64-bit hash (then
    `id_conflicts`, computed on hashes, must be recomputed exactly)."""
    names = sql(f"SELECT DISTINCT run FROM (SELECT run FROM (SELECT DISTINCT run, producer FROM {{produce}} "
                f"WHERE NOT {_BAD}) GROUP BY run, xxhash64(producer) HAVING count(*) > 1)", produce=produce)
    return names, lambda rows: {r.run for r in rows}


def exact_id_conflicts(produce: DataFrame, runs: set[int]) -> dict[int, tuple[int, list[str]]]:
    """id_conflicts by comparing names (slow path, only after a hash collision)."""
    rows = (produce.where(~F.col("_bad") & F.col("run").isin(*runs))
            .groupBy("run", "msg_id").agg(F.countDistinct("producer").alias("n"))
            .where(F.col("n") > 1))
    w = Window.partitionBy("run").orderBy("msg_id")
    agg = (rows.withColumn("rn", F.row_number().over(w))
           .groupBy("run").agg(F.count(F.lit(1)).alias("n"),
                               F.collect_list(F.when(F.col("rn") <= SAMPLES, F.col("msg_id"))).alias("ids")))
    out = {r: (0, []) for r in runs}
    for row in agg.collect():
        out[row.run] = (int(row.n), sorted(row.ids))
    return out


def _with_writer(consume: DataFrame, produce: DataFrame, lookup: dict[int, int] | None) -> DataFrame:
    """Deliveries with the producer/seq they carry, else those of the produce log.

    `lookup`: runs -> number of deliveries lacking them. The harness's own
    consumers always carry them: no join at all then. Otherwise only the
    produce records of those messages are read back (a broadcast of their
    ids when few), and a message's writer is its first record, in file order.
    """
    c = consume.where(f"NOT {_BAD} AND NOT {REJECTED}")  # a rejected line is no delivery
    if lookup is None:  # not counted by the caller
        lookup = {r.run: r["count"] for r in c.where(f"NOT {HAS_WRITER}").groupBy("run").count().collect()}
    if not lookup:
        return c.where(HAS_WRITER)
    has = c.where(HAS_WRITER)
    missing = c.where(f"NOT {HAS_WRITER} AND {_ids(lookup)}").drop("producer", "seq")
    keys = missing.select("run", "msg_id").distinct()
    if sum(lookup.values()) <= BROADCAST_IDS:
        keys = F.broadcast(keys)
    # A record's position: its file, then its place in the file (Spark's
    # partitions of one file follow the file), taken before any shuffle; a
    # bucketed Parquet copy kept the JSONL's (`_pos`).
    here = F.struct(F.input_file_name().alias("file"), F.monotonically_increasing_id().alias("row"))
    records = (produce.where(~F.col("_bad") & F.col("run").isin(*lookup))
               .select("run", "msg_id", "producer", "seq", F.coalesce(F.col("_pos"), here).alias("pos"))
               .join(keys, ["run", "msg_id"], "left_semi"))
    writer = (records.groupBy("run", "msg_id")
              .agg(F.min_by(F.struct("producer", "seq"), "pos").alias("w"))
              .select("run", "msg_id", F.col("w.producer").alias("producer"), F.col("w.seq").alias("seq")))
    filled = missing.join(writer, ["run", "msg_id"], "inner")
    return has.unionByName(filled.select(*has.columns))


def ordering(produce: DataFrame, consume: DataFrame, rule_by_run: dict[int, str],
             lookup: dict[int, int] | None = None, exact: bool = False) -> dict[int, dict]:
    q = ordering_query(produce, consume, rule_by_run, lookup, exact=exact)
    out = run_queries([q])[0] if q else {}
    if out.pop(COLLISION, False):  # two groups share a hash: the exact window
        out = ordering(produce, consume, rule_by_run, lookup, exact=True)
    return out


# Key in ordering's result: two groups shared a 64-bit hash (then it must be
# run again with exact=True).
COLLISION = "group_hash_collision"


def group_hash(*cols: str) -> str:
    """The ordering group's 64-bit hash, as SQL (a function: tests make it collide)."""
    return f"xxhash64({', '.join(cols)})"


def ordering_query(produce: DataFrame, consume: DataFrame, rule_by_run: dict[int, str],
                   lookup: dict[int, int] | None = None, exact: bool = False) -> Query | None:
    """Ordering violations per run, each run under its own rule (None: no
    run has a rule).

    A violation is a delivery whose seq is below the highest seq of the
    deliveries before it in its group (a running max over the group's order).
    The window is partitioned by one 64-bit hash of the group: its sort then
    compares a long and the order's numbers, never the group's strings. The
    groups are also counted per hash (an aggregation that partial-aggregates
    to a few rows per task): a hash shared by two groups is reported
    (COLLISION) and the caller runs it again, `exact`."""
    rules = {r: x for r, x in rule_by_run.items() if x != "none"}
    if not rules:
        return None
    by_rule = {x: [r for r, y in rules.items() if y == x] for x in set(rules.values())}

    def of(rule):
        return f"({_ids(by_rule.get(rule, []))})"

    if lookup is not None:
        lookup = {r: n for r, n in lookup.items() if r in rules and n}
    d = _with_writer(consume, produce, lookup)
    # monotonic: per producer, consumer (and partition, for Kafka offsets);
    # fifo / strict: per producer, source, positioned reads (in offset order) apart from reads
    # the broker gave no offset (in time order): one with no position is no step back
    # (issue 52). A queue's reads have none: one group, as before.
    mono = of("monotonic")
    group = ["run", "producer", "k1", "k2"]
    rows = (f"SELECT run, producer, CASE WHEN {mono} THEN consumer ELSE source END AS k1, "
            f"CASE WHEN {mono} AND `offset` IS NOT NULL THEN source "
            f"WHEN NOT {mono} AND `offset` IS NULL THEN 'unpositioned' END AS k2, `offset`, t, seq, msg_id "
            f"FROM {{d}} WHERE {_ids(rules)} AND ({of('strict')} OR NOT redelivered)")
    if not exact:
        rows = f"SELECT *, {group_hash(*group)} AS g FROM ({rows})"
    over = (f"PARTITION BY {', '.join(group if exact else ['g'])} ORDER BY `offset` ASC NULLS LAST, t, seq "
            "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING")
    # The violations are few: counted, and the earliest kept, in one aggregation.
    text = (f"WITH grp AS ({rows}) "
            f"SELECT run, count(*) AS n, {_first('msg_id', 'struct(t, msg_id)')} AS ids FROM "
            f"(SELECT run, seq, t, msg_id, max(seq) OVER ({over}) AS prev_max FROM grp) "
            "WHERE seq < prev_max GROUP BY run")
    if not exact:
        text += (f" UNION ALL SELECT -1, count(*), NULL FROM "
                 f"(SELECT g FROM grp GROUP BY g, {', '.join(group)}) GROUP BY g HAVING count(*) > 1")
    df = sql(text, d=d)

    def decode(rows):
        out = {r.run: {"ordering_violations": int(r.n), "samples": list(r.ids or [])}
               for r in rows if r.run != -1}
        if any(r.run == -1 for r in rows):
            out[COLLISION] = True
        return out
    return df, decode


_SEP = "\u0001"  # between run and producer in the unavailability's keys


def _unavailable_rows(produce: DataFrame, width: float) -> str:
    """The produce log's completions, each twice: under its run (the pooled intervals)
    and under its run and producer (`run` SEP `producer`), with its time bucket `b`."""
    return (f"SELECT key, outcome = 'ok' AS ok, t_invoke, t_complete, floor(t_complete / {_d(width)}) AS b "
            f"FROM {{produce}} LATERAL VIEW explode(array(CAST(run AS STRING), "
            f"concat_ws(chr(1), CAST(run AS STRING), producer))) k AS key "
            f"WHERE NOT {_BAD} AND outcome != '{S.INVOKE}'")


def unavailable_query(produce: DataFrame, threshold: float) -> Query:
    """Intervals with failed/unknown writes and no successful one, per run and, per run
    and producer (one producer's outage is not hidden by another's successes), in one
    computation; decoded as ({run: intervals}, {run: {producer: intervals}}).

    Every failed write belongs to the gap between the last success at or
    before it and the next one; such a group spans at most its gap. With time
    buckets narrower than the threshold, a gap inside one bucket cannot yield
    an interval: its failures are dropped. Every other failure finds its
    previous success from its bucket's extremes (first / last success) or
    from the last success of the buckets before: no sort of the log."""
    if threshold < MIN_BUCKET_S:
        return _unavailable_sorted(produce, threshold)
    width = threshold * (1 - 1e-9)  # strictly narrower: float rounding cannot widen a bucket
    okt = "CASE WHEN ok THEN t_complete END"
    text = (f"WITH p AS ({_unavailable_rows(produce, width)}), "
            f"buckets AS (SELECT key, b, first_ok, last_ok, max(last_ok) OVER (PARTITION BY key ORDER BY b "
            f"ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS carry FROM "
            f"(SELECT key, b, min({okt}) AS first_ok, max({okt}) AS last_ok FROM p GROUP BY key, b)) "
            f"SELECT /*+ BROADCAST(w) */ p.key, p.t_invoke, p.t_complete, "
            f"CASE WHEN w.last_ok IS NULL OR p.t_complete < w.first_ok THEN w.carry ELSE w.last_ok END AS s_prev "
            f"FROM p JOIN buckets w ON p.key = w.key AND p.b = w.b WHERE NOT p.ok "
            # between two successes of its own bucket: a gap narrower than the threshold
            f"AND NOT (w.last_ok IS NOT NULL AND p.t_complete >= w.first_ok AND p.t_complete < w.last_ok)")
    return _gaps(text, produce, threshold)


def _gaps(failed: str, produce: DataFrame, threshold: float) -> Query:
    """Failed writes with `s_prev` (their previous success) -> merged intervals."""
    text = (f"SELECT key AS ukey, ua, uz FROM (SELECT key, greatest(s_prev, min(t_invoke)) AS ua, "
            f"max(t_complete) AS uz FROM ({failed}) GROUP BY key, s_prev) WHERE uz - ua >= {_d(threshold)}")

    def decode(rows):
        found: dict = {}
        for row in rows:
            found.setdefault(row.ukey, []).append([row.ua, row.uz])
        by_run: dict[int, list] = {}
        by_producer: dict[int, dict[str, list]] = {}
        for key, iv in found.items():
            run, sep, producer = key.partition(_SEP)
            if sep:
                by_producer.setdefault(int(run), {})[producer] = merge(iv)
            else:
                by_run[int(run)] = merge(iv)
        return by_run, by_producer
    return sql(text, produce=produce), decode


def _unavailable_sorted(produce: DataFrame, threshold: float) -> Query:
    """The same, for any threshold: the latest success at or before each
    failure by a running max over the produce log in time order (per bucket)."""
    okt = "CASE WHEN ok THEN t_complete END"
    # Only buckets holding a failure matter; within them, the latest success
    # at or before each failure names the gap the failure falls in.
    text = (f"WITH p AS ({_unavailable_rows(produce, BUCKET_S)}), "
            f"bad AS (SELECT key, b, carry FROM (SELECT key, b, n_bad, max(last_ok) OVER (PARTITION BY key "
            f"ORDER BY b ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS carry FROM "
            f"(SELECT key, b, sum({_int('NOT ok')}) AS n_bad, max({okt}) AS last_ok FROM p GROUP BY key, b)) "
            f"WHERE n_bad > 0) "
            f"SELECT key, t_invoke, t_complete, s_prev FROM (SELECT /*+ BROADCAST(w) */ p.key, p.ok, p.t_invoke, "
            f"p.t_complete, coalesce(max(CASE WHEN p.ok THEN p.t_complete END) OVER (PARTITION BY p.key, p.b "
            f"ORDER BY p.t_complete, p.ok DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), w.carry) AS s_prev "
            f"FROM p JOIN bad w ON p.key = w.key AND p.b = w.b) WHERE NOT ok")
    return _gaps(text, produce, threshold)


def read_gaps_query(consume: DataFrame, threshold: float) -> Query:
    """Per run and consumer, the stretches of at least ``threshold`` seconds between two
    successive deliveries: how long each reader was left without messages (the read side
    of unavailability; decoded as {run: {consumer: [[from, to], ...]}})."""
    gaps = sql(f"SELECT run, consumer AS reader, ra, rz FROM (SELECT run, consumer, "
               f"lag(t) OVER (PARTITION BY run, consumer ORDER BY t) AS ra, t AS rz FROM {{consume}} "
               f"WHERE NOT {_BAD}) WHERE rz - ra >= {_d(threshold)}", consume=consume)

    def decode(rows):
        out: dict[int, dict[str, list]] = {}
        for row in rows:
            out.setdefault(row.run, {}).setdefault(row.reader, []).append([row.ra, row.rz])
        for readers in out.values():
            for iv in readers.values():
                iv.sort()
        return out
    return gaps, decode


def merge(intervals: list[list[float]]) -> list[list[float]]:
    merged: list[list[float]] = []
    for a, z in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], z)
        else:
            merged.append([a, z])
    return [[round(a, 6), round(z, 6)] for a, z in merged]


def verdict(d: dict) -> tuple[bool | None, str]:
    if d["id_conflicts"]:
        return None, "history breaks its contract: a msg_id was written by more than one producer"
    if d["attempted"] == 0:
        return None, "nothing was attempted"
    # the log anomalies no reading of a log allows (checkers.logs): two messages at one
    # position, a reader that skipped a known position or stepped back on an assigned one
    bad = [k for k in ("lost", "unexpected", "ordering_violations", *LOG_ANOMALIES) if d.get(k)]
    if bad:
        return False, ", ".join(f"{k}={d[k]}" for k in bad)
    return True, "no lost, unexpected or out-of-order messages"
