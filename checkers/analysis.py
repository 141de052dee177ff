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
- every aggregation buffer is fixed-width (numbers only): Spark runs a string
  min/max/first as a sort-based aggregation, several times slower. Producer
  names are compared by a 64-bit hash, certified collision-free per run by a
  small exact check (`collisions_query`);
- a run whose Parquet copy is bucketed and sorted by msg_id (`mqchaos
  convert`) has its attempts and deliveries matched bucket by bucket as they
  stream: no shuffle, no hash map, no sort (checkers.history.bucketed);
- identity, counts and samples are one job: the per-message aggregation is
  computed once; anomalous messages keep their id, the others collapse into
  one row per run before the only other shuffle, where the counts and the
  first SAMPLES ids per kind (a bounded top-k) are taken from the same rows;
- ordering needs the produce log only for deliveries that do not carry their
  writer, and then only those messages' records (a broadcast semi-join); on
  large inputs its window is partitioned by a 64-bit hash of the group;
- unavailable intervals come from per-bucket extremes of the successful
  writes (buckets narrower than the threshold), then the failed writes alone:
  no sort of the produce log.
"""
from __future__ import annotations

import inspect
from typing import Callable

from pyspark.sql import DataFrame, Window, functions as F

from checkers import schema as S

SAMPLES = 20
RANK = {"fail": 1, "info": 2, "ok": 3}
ORDERINGS = ("none", "fifo", "monotonic", "strict")
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

COUNT_FIELDS = ("attempted", "ok", "fail", "info", "produce_records", "delivered",
                "deliveries", "lost", "duplicated", "duplicate_deliveries", "unexpected",
                "recovered", "recovered_fail", "id_conflicts", "malformed_lines",
                "poison", "lost_poison", "lost_other", "dead_lettered", "gave_up", "rejections")
# A message's flags (bits, or-ed over its records): marked poison by its producer; read
# from a dead-letter queue; taken by a consumer that gave up rejecting it.
POISON, DEAD_LETTERED, GAVE_UP = 1, 2, 4
ANOMALY_KINDS = ("lost", "duplicated", "unexpected", "recovered", "recovered_fail", "id_conflicts")


# min_by(value, order, k) (Spark >= 4.2): the k values of the smallest
# orders, in order, from a bounded buffer. Older Spark: a sorted list, cut.
_MIN_BY_K = "k" in inspect.signature(F.min_by).parameters


def _first(value, order, k: int = SAMPLES):
    """Aggregate: the values of the k smallest `order`s (nulls skipped), in order."""
    if _MIN_BY_K:
        return F.min_by(value, order, k)
    pairs = F.collect_list(F.when(order.isNotNull(), F.struct(order.alias("o"), value.alias("v"))))
    return F.transform(F.slice(F.array_sort(pairs), 1, k), lambda x: x["v"])


def _count_if(cond):
    return F.sum(F.when(cond, 1).otherwise(0))


def _int(cond):
    return F.when(cond, 1).otherwise(0)


def _rank(col):
    return (F.when(col == "ok", RANK["ok"]).when(col == "info", RANK["info"])
            .when(col == "fail", RANK["fail"]))


def _has_writer():
    return F.col("producer").isNotNull() & F.col("seq").isNotNull()


def _rejected():
    """A consume line handed back to the broker: not a delivery."""
    return F.coalesce(F.col("rejected"), F.lit(False))


def _consume_flags():
    """A delivery's flags (a rejected line has none)."""
    on = (lambda c, bit: F.when(F.coalesce(F.col(c), F.lit(False)), bit).otherwise(0))
    return F.when(_rejected(), 0).otherwise(on("dead_lettered", DEAD_LETTERED).bitwiseOR(on("gave_up", GAVE_UP)))


def _produce_flags():
    return F.when(F.coalesce(F.col("poison"), F.lit(False)), POISON).otherwise(0)


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
    rows = union.collect()
    return [q[1]([r for r in rows if r.part == i]) if q else None for i, q in enumerate(queries)]


def _per_message(produce: DataFrame, consume: DataFrame | None) -> DataFrame:
    """(run, msg_id) -> the message's attempts and deliveries, from one
    shuffle of every record."""
    # One narrow row per record through the shuffle. r: 0 malformed line,
    # 1 / 2 / 3 a completion (fail / info / ok), 4 a delivery that carries its
    # writer, 5 one that does not, 6 an invoke (history version 2), 7 a rejected
    # delivery (handed back). fl: the record's flags (POISON...).
    bad = F.col("_bad")
    p = produce.select(
        "run", "msg_id", F.when(bad, 0).when(F.col("outcome") == S.INVOKE, 6)
        .otherwise(_rank(F.col("outcome"))).alias("r"),
        F.when(~bad & (F.col("outcome") == "ok"), F.col("t_complete")).alias("tc"),
        F.when(~bad, F.xxhash64("producer")).alias("ph"),
        F.when(bad, 0).otherwise(_produce_flags()).alias("fl"))
    parts = p
    if consume is not None:
        c = consume.select(
            "run", "msg_id", F.when(bad, 0).when(_rejected(), 7).when(_has_writer(), 4).otherwise(5).alias("r"),
            F.lit(None).cast("double").alias("tc"), F.lit(None).cast("long").alias("ph"),
            F.when(bad, 0).otherwise(_consume_flags()).alias("fl"))
        parts = p.unionByName(c)
    r = F.col("r")
    attempt = r.between(1, 3)
    # Message ids are (nearly) all distinct: an aggregation before the shuffle
    # would only cost. Shuffled first, the aggregation runs once, after it
    # (spark.sql.execution.combineAdjacentAggregation, set by checkers.spark).
    return parts.repartition("run", "msg_id").groupBy("run", "msg_id").agg(
        _count_if(attempt).alias("attempts"),
        _count_if(r == 6).alias("inv"),
        F.max(F.when(attempt, r)).alias("best"),
        _count_if(r.isin(4, 5)).alias("dlv"),
        _count_if(r == 0).alias("bad"),
        F.min("ph").alias("pmin"),
        F.max("ph").alias("pmax"),
        F.max("tc").alias("ok_t"),
        _count_if(r == 5).alias("nw"),
        _count_if(r == 7).alias("rej"),
        F.bit_or("fl").alias("fl"),
    )


def _per_message_bucketed(rid: int, produce: DataFrame, consume: DataFrame | None) -> DataFrame:
    """The same for one run whose Parquet copy is bucketed by msg_id (only
    good records): each side aggregated, then joined, bucket by bucket."""
    ok = F.col("outcome") == "ok"
    inv = F.col("outcome") == S.INVOKE
    m = produce.groupBy("msg_id").agg(
        _count_if(~inv).alias("attempts"), _count_if(inv).alias("inv"),
        F.max(_rank(F.col("outcome"))).alias("best"),
        F.min(F.xxhash64("producer")).alias("pmin"), F.max(F.xxhash64("producer")).alias("pmax"),
        F.max(F.when(ok, F.col("t_complete"))).alias("ok_t"), F.bit_or(_produce_flags()).alias("pfl"))
    if consume is None:
        m = m.select("*", *[F.lit(0).cast("long").alias(k) for k in ("dlv", "nw", "rej")],
                     F.lit(0).alias("cfl"))
    else:
        rej = _rejected()
        d = consume.groupBy("msg_id").agg(_count_if(~rej).alias("dlv"), _count_if(~rej & ~_has_writer()).alias("nw"),
                                          _count_if(rej).alias("rej"), F.bit_or(_consume_flags()).alias("cfl"))
        m = m.join(d, "msg_id", "full_outer")
    zero = (lambda c: F.coalesce(c, F.lit(0)).cast("long"))
    return m.select(F.lit(rid).alias("run"), "msg_id",
                    zero("attempts").alias("attempts"), zero("inv").alias("inv"), "best",
                    zero("dlv").alias("dlv"), F.lit(0).cast("long").alias("bad"),
                    "pmin", "pmax", "ok_t", zero("nw").alias("nw"), zero("rej").alias("rej"),
                    F.coalesce("pfl", F.lit(0)).bitwiseOR(F.coalesce("cfl", F.lit(0))).alias("fl"))


def identity_query(produce: DataFrame | None, consume: DataFrame | None,
                   bucketed: dict[int, tuple] | None = None) -> Query:
    """Counts and sample ids per run.

    `bucketed`: {run id: (produce, consume)} of runs whose copies are
    bucketed by msg_id (checkers.history.bucketed): those are matched bucket
    by bucket, the others by one shuffle of all their records.
    Each run's dict also holds `no_writer`: good deliveries without
    producer/seq (the ordering then looks them up in the produce log)."""
    bucketed = bucketed or {}
    parts = [_per_message_bucketed(rid, p, c) for rid, (p, c) in bucketed.items()]
    if produce is not None:  # None: every run is in `bucketed`
        if bucketed:
            rest = ~F.col("run").isin(*bucketed)
            produce = produce.where(rest)
            consume = consume.where(rest) if consume is not None else None
        parts.append(_per_message(produce, consume))
    m = parts[0]
    for part in parts[1:]:
        m = m.unionByName(part)
    # A message invoked but never completed (the run died first) is unknown: info.
    m = m.withColumn("best", F.coalesce(F.col("best"), F.when(F.col("inv") > 0, F.lit(RANK["info"]))))
    best, dlv = F.col("best"), F.col("dlv")
    seen = (F.col("attempts") + F.col("inv")) > 0
    flag = (lambda bit: (F.col("fl").bitwiseAND(bit)) != 0)
    kinds = {
        "lost": (best == 3) & (dlv == 0),
        "unexpected": ~seen & (dlv > 0),
        "duplicated": dlv > 1,
        "recovered": best.isin(1, 2) & (dlv > 0),
        "recovered_fail": (best == 1) & (dlv > 0),
        "id_conflicts": F.col("pmin") != F.col("pmax"),
    }
    anomalous = F.lit(False)
    for cond in kinds.values():
        anomalous = anomalous | F.coalesce(cond, F.lit(False))
    # One row per message, reduced at once: anomalous messages keep their id
    # (`sid`), every other one folds into a single (run, null) row per task.
    per_msg = {
        "attempted": _int(seen), "ok": _int(best == 3), "info": _int(best == 2),
        "fail": _int(best == 1), "produce_records": F.col("attempts"), "delivered": _int(dlv > 0),
        "deliveries": dlv, "duplicate_deliveries": F.greatest(dlv - 1, F.lit(0)),
        "malformed_lines": F.col("bad"),
        # deliveries lacking producer/seq whose message has a produce record
        # (the others, unexpected, have no writer to look up)
        "no_writer": F.when(seen, F.col("nw")).otherwise(0),
        **{k: _int(cond) for k, cond in kinds.items()},
        "poison": _int(flag(POISON)),
        "lost_poison": _int(kinds["lost"] & flag(POISON)),
        "lost_other": _int(kinds["lost"] & ~flag(POISON)),
        "dead_lettered": _int(flag(DEAD_LETTERED)),
        "gave_up": _int(flag(GAVE_UP)),
        "rejections": F.col("rej"),
    }
    sums = list(per_msg)
    a1 = (m.select("run", F.when(anomalous, F.col("msg_id")).alias("sid"),
                   F.when(kinds["lost"], F.col("ok_t")).alias("lost_t"),
                   *[c.cast("long").alias(k) for k, c in per_msg.items()])
          .groupBy("run", "sid")
          .agg(*[F.sum(k).alias(k) for k in sums],
               F.min("lost_t").alias("lost_first"), F.max("lost_t").alias("lost_last")))
    # Each of those rows counts once in its run's totals (kind "") and once
    # more per anomaly kind it has, under which the first ids are kept (a
    # bounded top-k: only anomalies and the folded rows get this far).
    kind = F.explode(F.array(F.lit(""), *[F.when(F.col(k) > 0, F.lit(k)) for k in kinds])).alias("kind")
    e = a1.select("*", kind).where(F.col("kind").isNotNull())
    total = F.col("kind") == ""
    sid = F.when(~total, F.col("sid"))
    df = (e.groupBy("run", "kind")
          .agg(*[F.sum(F.when(total, F.col(k))).alias(k) for k in sums],
               F.min(F.when(total, F.col("lost_first"))).alias("lost_first"),
               F.max(F.when(total, F.col("lost_last"))).alias("lost_last"),
               _first(sid, sid).alias("ids")))
    return df, lambda rows: _decode_identity(rows, sums)


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


def loss_detail(produce: DataFrame, consume: DataFrame | None, lost_last: dict[int, float]) -> dict[int, dict]:
    """For the runs with loss ({run id: the last lost message's confirm time}): the lost
    messages by the node and the producer that wrote them (R7/R8: the loser's side), and how
    many delivered messages had been confirmed no later than the last lost one (0: the loss
    is exactly every write up to a moment, R2). A second, small job: lossless runs skip it."""
    runs = list(lost_last)
    ok = (produce.where(~F.col("_bad") & (F.col("outcome") == "ok") & F.col("run").isin(*runs))
          .groupBy("run", "msg_id")
          .agg(F.max("node").alias("node"), F.max("producer").alias("producer"), F.max("t_complete").alias("t")))
    if consume is None:
        got = ok.select("run", "msg_id").limit(0)
    else:
        got = (consume.where(~F.col("_bad") & ~_rejected() & F.col("run").isin(*runs))
               .select("run", "msg_id").distinct())
    lost = (ok.join(got, ["run", "msg_id"], "left_anti")
            .groupBy("run", "node", "producer").count())
    bounds = ok.sparkSession.createDataFrame([(r, float(t)) for r, t in lost_last.items()], "run int, last double")
    kept = (ok.join(got, ["run", "msg_id"], "left_semi").join(F.broadcast(bounds), "run")
            .where(F.col("t") <= F.col("last")).groupBy("run").count())
    out = {r: {"lost_by_node": {}, "lost_by_producer": {}, "kept_before_lost_last": 0} for r in runs}

    def by_side(rows):
        for row in rows:
            d = out[row.run]
            for key, name in (("lost_by_node", row.node or "?"), ("lost_by_producer", row.producer or "?")):
                d[key][name] = d[key].get(name, 0) + int(row["count"])
        return out

    def before(rows):
        for row in rows:
            out[row.run]["kept_before_lost_last"] = int(row["count"])
        return out

    run_queries([(lost, by_side), (kept.select("run", "count"), before)])
    for d in out.values():
        d["lost_by_node"] = dict(sorted(d["lost_by_node"].items()))
        d["lost_by_producer"] = dict(sorted(d["lost_by_producer"].items()))
    return out


def collisions_query(produce: DataFrame) -> Query:
    """Runs in which two distinct producer names share a 64-bit hash (then
    `id_conflicts`, computed on hashes, must be recomputed exactly)."""
    names = (produce.where(~F.col("_bad")).select("run", "producer").distinct()
             .groupBy("run", F.xxhash64("producer").alias("h")).count()
             .where(F.col("count") > 1).select("run").distinct())
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
    c = consume.where(~F.col("_bad") & ~_rejected())  # a rejected line is no delivery
    if lookup is None:  # not counted by the caller
        lookup = {r.run: r["count"] for r in c.where(~_has_writer()).groupBy("run").count().collect()}
    if not lookup:
        return c.where(_has_writer())
    has = c.where(_has_writer())
    missing = c.where(~_has_writer() & F.col("run").isin(*lookup)).drop("producer", "seq")
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


def group_hash(*cols):
    """The ordering group's 64-bit hash (a function: tests make it collide)."""
    return F.xxhash64(*cols)


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
        return F.col("run").isin(*by_rule[rule]) if rule in by_rule else F.lit(False)

    if lookup is not None:
        lookup = {r: n for r, n in lookup.items() if r in rules and n}
    d = _with_writer(consume, produce, lookup)
    d = d.where(F.col("run").isin(*rules) & (of("strict") | ~F.col("redelivered")))
    # monotonic: per producer, consumer (and partition, for Kafka offsets);
    # fifo / strict: per producer, source.
    mono = of("monotonic")
    k1 = F.when(mono, F.col("consumer")).otherwise(F.col("source"))
    k2 = F.when(mono & F.col("offset").isNotNull(), F.col("source"))
    group = ["run", "producer", "k1", "k2"]
    rows = d.select("run", "producer", k1.alias("k1"), k2.alias("k2"), "offset", "t", "seq", "msg_id")
    if not exact:
        rows = rows.withColumn("g", group_hash(*group))
    w = (Window.partitionBy(*(group if exact else ["g"]))
         .orderBy(F.col("offset").asc_nulls_last(), F.col("t"), F.col("seq"))
         .rowsBetween(Window.unboundedPreceding, -1))
    v = rows.withColumn("prev_max", F.max("seq").over(w)).where(F.col("seq") < F.col("prev_max"))
    # The violations are few: counted, and the earliest kept, in one aggregation.
    df = v.groupBy("run").agg(F.count(F.lit(1)).alias("n"),
                              _first(F.col("msg_id"), F.struct("t", "msg_id")).alias("ids"))
    if not exact:
        shared = (rows.groupBy("g", *group).agg(F.count(F.lit(1)).alias("n"))
                  .groupBy("g").count().where(F.col("count") > 1)
                  .select(F.lit(-1).alias("run"), F.col("count").alias("n")))
        df = df.unionByName(shared, allowMissingColumns=True)

    def decode(rows):
        out = {r.run: {"ordering_violations": int(r.n), "samples": list(r.ids or [])}
               for r in rows if r.run != -1}
        if any(r.run == -1 for r in rows):
            out[COLLISION] = True
        return out
    return df, decode


PRODUCER_KEY = "pkey"  # run and producer, for the per-producer intervals
_SEP = "\u0001"


def unavailable_query(produce: DataFrame, threshold: float, per_producer: bool = False) -> Query:
    """Intervals with failed/unknown writes and no successful one, per run (or, with
    ``per_producer``, per run and producer: one producer's outage is not hidden by
    another's successes; decoded as {run: {producer: intervals}}).

    Every failed write belongs to the gap between the last success at or
    before it and the next one; such a group spans at most its gap. With time
    buckets narrower than the threshold, a gap inside one bucket cannot yield
    an interval: its failures are dropped. Every other failure finds its
    previous success from its bucket's extremes (first / last success) or
    from the last success of the buckets before: no sort of the log."""
    out = PRODUCER_KEY if per_producer else "run"
    if per_producer:  # the same computation, keyed by run and producer
        produce = produce.withColumn("run", F.concat_ws(_SEP, F.col("run").cast("string"), F.col("producer")))
    if threshold < MIN_BUCKET_S:
        return _unavailable_sorted(produce, threshold, out)
    width = threshold * (1 - 1e-9)  # strictly narrower: float rounding cannot widen a bucket
    p = (produce.where(~F.col("_bad") & (F.col("outcome") != S.INVOKE))
         .select("run", (F.col("outcome") == "ok").alias("ok"), "t_invoke", "t_complete",
                 F.floor(F.col("t_complete") / width).alias("b")))
    okt = F.when(F.col("ok"), F.col("t_complete"))
    buckets = p.groupBy("run", "b").agg(F.min(okt).alias("first_ok"), F.max(okt).alias("last_ok"))
    before = Window.partitionBy("run").orderBy("b").rowsBetween(Window.unboundedPreceding, -1)
    buckets = buckets.withColumn("carry", F.max("last_ok").over(before))
    f = p.where(~F.col("ok")).join(F.broadcast(buckets), ["run", "b"])
    tc = F.col("t_complete")
    f = f.select(
        "run", "t_invoke", "t_complete",
        F.when(F.col("last_ok").isNull() | (tc < F.col("first_ok")), F.col("carry"))
        .otherwise(F.col("last_ok")).alias("s_prev"),
        # between two successes of its own bucket: a gap narrower than the threshold
        (F.col("last_ok").isNotNull() & (tc >= F.col("first_ok")) & (tc < F.col("last_ok"))).alias("inner"))
    return _gaps(f.where(~F.col("inner")), threshold, out)


def _gaps(f: DataFrame, threshold: float, out: str = "run") -> Query:
    """Failed writes with `s_prev` (their previous success) -> merged intervals."""
    gaps = (f.groupBy("run", "s_prev")
            .agg(F.min("t_invoke").alias("a"), F.max("t_complete").alias("z"))
            .select(F.col("run").alias(out), F.greatest(F.col("s_prev"), F.col("a")).alias("start"),
                    F.col("z").alias("end"))
            .where(F.col("end") - F.col("start") >= threshold))

    def decode(rows):
        found: dict = {}
        for row in rows:
            found.setdefault(row[out], []).append([row.start, row.end])
        if out == "run":
            return {r: merge(iv) for r, iv in found.items()}
        by_run: dict[int, dict[str, list]] = {}
        for key, iv in found.items():
            run, producer = key.split(_SEP, 1)
            by_run.setdefault(int(run), {})[producer] = merge(iv)
        return by_run
    return gaps, decode


def _unavailable_sorted(produce: DataFrame, threshold: float, out: str = "run") -> Query:
    """The same, for any threshold: the latest success at or before each
    failure by a running max over the produce log in time order (per bucket)."""
    p = (produce.where(~F.col("_bad") & (F.col("outcome") != S.INVOKE))
         .select("run", (F.col("outcome") == "ok").alias("ok"), "t_invoke", "t_complete",
                 F.floor(F.col("t_complete") / BUCKET_S).alias("b")))
    buckets = p.groupBy("run", "b").agg(
        _count_if(~F.col("ok")).alias("n_bad"),
        F.max(F.when(F.col("ok"), F.col("t_complete"))).alias("last_ok"))
    before = Window.partitionBy("run").orderBy("b").rowsBetween(Window.unboundedPreceding, -1)
    bad_buckets = (buckets.withColumn("carry", F.max("last_ok").over(before))
                   .where(F.col("n_bad") > 0).select("run", "b", "carry"))
    # Only buckets holding a failure matter; within them, the latest success
    # at or before each failure names the gap the failure falls in.
    rows = p.join(F.broadcast(bad_buckets), ["run", "b"])
    upto = (Window.partitionBy("run", "b").orderBy(F.col("t_complete"), F.col("ok").desc())
            .rowsBetween(Window.unboundedPreceding, 0))
    rows = rows.withColumn("s_prev", F.coalesce(
        F.max(F.when(F.col("ok"), F.col("t_complete"))).over(upto), F.col("carry")))
    return _gaps(rows.where(~F.col("ok")), threshold, out)


def read_gaps_query(consume: DataFrame, threshold: float) -> Query:
    """Per run and consumer, the stretches of at least ``threshold`` seconds between two
    successive deliveries: how long each reader was left without messages (the read side
    of unavailability; decoded as {run: {consumer: [[from, to], ...]}})."""
    c = consume.where(~F.col("_bad")).select("run", "consumer", "t")
    prev = F.lag("t").over(Window.partitionBy("run", "consumer").orderBy("t"))
    gaps = (c.select("run", "consumer", prev.alias("start"), F.col("t").alias("end"))
            .where(F.col("end") - F.col("start") >= threshold)
            .select("run", F.col("consumer").alias("reader"), "start", "end"))

    def decode(rows):
        out: dict[int, dict[str, list]] = {}
        for row in rows:
            out.setdefault(row.run, {}).setdefault(row.reader, []).append([row.start, row.end])
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
    bad = [k for k in ("lost", "unexpected", "ordering_violations") if d[k]]
    if bad:
        return False, ", ".join(f"{k}={d[k]}" for k in bad)
    return True, "no lost, unexpected or out-of-order messages"
