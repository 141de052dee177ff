"""The checker proper: a pure function of the histories (as DataFrames).

Definitions (docs/history.md): identity is `msg_id`; a message's outcome is
the best of its attempts (ok > info > fail).
  lost            outcome ok, never delivered (lost_window: when those were confirmed)
  unexpected      delivered, never attempted
  duplicated      delivered more than once (duplicate_deliveries: the extra ones)
  recovered       outcome fail or info, delivered anyway (recovered_fail: fail only)
  ordering        per producer, a delivery whose seq is below the highest seen
                  before it under the rule (monotonic / fifo / strict)
  unavailable     between two successful writes, from the first failing attempt
                  to the last failure observed, if longer than the threshold
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window, functions as F

SAMPLES = 20
RANK = {"fail": 1, "info": 2, "ok": 3}
ORDERINGS = ("none", "fifo", "monotonic", "strict")
BUCKET_S = 10.0  # time buckets that keep the unavailability windows local

COUNT_FIELDS = ("attempted", "ok", "fail", "info", "produce_records", "delivered",
                "deliveries", "lost", "duplicated", "duplicate_deliveries", "unexpected",
                "recovered", "recovered_fail", "id_conflicts", "malformed_lines")
ANOMALY_KINDS = ("lost", "duplicated", "unexpected", "recovered", "recovered_fail", "id_conflicts")


def _count_if(cond):
    return F.sum(F.when(cond, 1).otherwise(0))


def _rank(col):
    return (F.when(col == "ok", RANK["ok"]).when(col == "info", RANK["info"])
            .when(col == "fail", RANK["fail"]))


def identity(produce: DataFrame, consume: DataFrame | None) -> dict[int, dict]:
    """Counts and sample ids per run, from one aggregation keyed by (run, msg_id)."""
    p = produce.select("run", "msg_id", "_bad", F.col("producer"),
                       _rank(F.col("outcome")).alias("rank"), F.col("t_complete").alias("tc"),
                       F.lit(0).alias("dlv"))
    parts = p
    if consume is not None:
        c = consume.select("run", "msg_id", "_bad", F.lit(None).cast("string").alias("producer"),
                           F.lit(None).cast("int").alias("rank"), F.lit(None).cast("double").alias("tc"),
                           F.lit(1).alias("dlv"))
        parts = p.unionByName(c)
    good = ~F.col("_bad")
    m = parts.groupBy("run", "msg_id").agg(
        _count_if(good & F.col("rank").isNotNull()).alias("attempts"),
        F.max(F.when(good, F.col("rank"))).alias("best"),
        _count_if(good & (F.col("dlv") == 1)).alias("dlv"),
        _count_if(F.col("_bad")).alias("bad"),
        F.min(F.when(good, F.col("producer"))).alias("pmin"),
        F.max(F.when(good, F.col("producer"))).alias("pmax"),
        F.max(F.when(good & (F.col("rank") == 3), F.col("tc"))).alias("ok_t"),
    )
    kinds = {
        "lost": (F.col("best") == 3) & (F.col("dlv") == 0),
        "unexpected": (F.col("attempts") == 0) & (F.col("dlv") > 0),
        "duplicated": F.col("dlv") > 1,
        "recovered": F.col("best").isin(1, 2) & (F.col("dlv") > 0),
        "recovered_fail": (F.col("best") == 1) & (F.col("dlv") > 0),
        "id_conflicts": F.col("pmin") != F.col("pmax"),
    }
    counts = m.groupBy("run").agg(
        _count_if(F.col("attempts") > 0).alias("attempted"),
        _count_if(F.col("best") == 3).alias("ok"),
        _count_if(F.col("best") == 2).alias("info"),
        _count_if(F.col("best") == 1).alias("fail"),
        F.sum("attempts").alias("produce_records"),
        _count_if(F.col("dlv") > 0).alias("delivered"),
        F.sum("dlv").alias("deliveries"),
        F.sum(F.when(F.col("dlv") > 1, F.col("dlv") - 1).otherwise(0)).alias("duplicate_deliveries"),
        F.sum("bad").alias("malformed_lines"),
        F.min(F.when(kinds["lost"], F.col("ok_t"))).alias("lost_first"),
        F.max(F.when(kinds["lost"], F.col("ok_t"))).alias("lost_last"),
        *[_count_if(cond).alias(k) for k, cond in kinds.items()],
    )
    out = {}
    for row in counts.collect():
        d = {k: int(row[k] or 0) for k in COUNT_FIELDS}
        # When the lost messages were confirmed: the window of the loss.
        d["lost_window"] = [row.lost_first, row.lost_last] if row.lost_first is not None else None
        d["samples"] = {k: [] for k in ANOMALY_KINDS}
        out[row.run] = d
    # Samples (the first SAMPLES ids per kind) cost a second pass: only for
    # runs that have anomalies, and only over their anomalous messages.
    if any(d[k] for d in out.values() for k in ANOMALY_KINDS):
        anomalous = kinds["lost"]
        for cond in kinds.values():
            anomalous = anomalous | cond
        flagged = m.where(anomalous).select("run", "msg_id", F.explode(F.array(*[
            F.when(cond, F.lit(k)) for k, cond in kinds.items()])).alias("kind")).where("kind is not null")
        w = Window.partitionBy("run", "kind").orderBy("msg_id")
        for row in flagged.withColumn("rn", F.row_number().over(w)).where(F.col("rn") <= SAMPLES).collect():
            out[row.run]["samples"][row.kind].append(row.msg_id)
        for d in out.values():
            for ids in d["samples"].values():
                ids.sort()
    return out


def _with_writer(consume: DataFrame, produce: DataFrame) -> DataFrame:
    """Deliveries with the producer/seq they carry, else those of the produce log.

    The harness's own consumers always carry them: the join with the produce
    log (a shuffle of every attempt) is only built when some delivery lacks them.
    """
    c = consume.where(~F.col("_bad"))
    has = c.where(F.col("producer").isNotNull() & F.col("seq").isNotNull())
    missing = c.where(F.col("producer").isNull() | F.col("seq").isNull()).drop("producer", "seq")
    if missing.select("msg_id").limit(1).count() == 0:
        return has
    writer = (produce.where(~F.col("_bad")).groupBy("run", "msg_id")
              .agg(F.first("producer").alias("producer"), F.first("seq").alias("seq")))
    filled = missing.join(writer, ["run", "msg_id"], "inner")
    return has.unionByName(filled.select(*has.columns))


def ordering(produce: DataFrame, consume: DataFrame, rule_by_run: dict[int, str]) -> dict[int, dict]:
    """Ordering violations per run, each run under its own rule."""
    out: dict[int, dict] = {}
    d = None
    for rule in ("fifo", "monotonic", "strict"):
        ids = [r for r, x in rule_by_run.items() if x == rule]
        if not ids:
            continue
        if d is None:
            d = _with_writer(consume, produce)
        rows = d.where(F.col("run").isin(ids))
        if rule != "strict":
            rows = rows.where(~F.col("redelivered"))
        if rule == "monotonic":
            # Per consumer; with Kafka offsets, per partition too (log order).
            rows = rows.withColumn("lane", F.when(F.col("offset").isNotNull(), F.col("source")))
            group = ["run", "producer", "consumer", "lane"]
        else:
            group = ["run", "producer", "source"]
        w = (Window.partitionBy(*group)
             .orderBy(F.col("offset").asc_nulls_last(), F.col("t"), F.col("seq"))
             .rowsBetween(Window.unboundedPreceding, -1))
        v = rows.withColumn("prev_max", F.max("seq").over(w)).where(F.col("seq") < F.col("prev_max"))
        wn = Window.partitionBy("run").orderBy("t", "msg_id")
        agg = (v.withColumn("rn", F.row_number().over(wn))
               .groupBy("run").agg(F.count(F.lit(1)).alias("n"),
                                   F.collect_list(F.when(F.col("rn") <= SAMPLES, F.col("msg_id"))).alias("ids")))
        for row in agg.collect():
            out[row.run] = {"ordering_violations": int(row.n), "samples": list(row.ids)}
    return out


def unavailable(produce: DataFrame, threshold: float) -> dict[int, list[list[float]]]:
    """Intervals with failed/unknown writes and no successful one, per run."""
    p = (produce.where(~F.col("_bad"))
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
    gaps = (rows.where(~F.col("ok")).groupBy("run", "s_prev")
            .agg(F.min("t_invoke").alias("a"), F.max("t_complete").alias("z"))
            .select("run", F.greatest(F.col("s_prev"), F.col("a")).alias("start"), F.col("z").alias("end"))
            .where(F.col("end") - F.col("start") >= threshold))
    out: dict[int, list[list[float]]] = {}
    for row in gaps.collect():
        out.setdefault(row.run, []).append([row.start, row.end])
    return {r: merge(iv) for r, iv in out.items()}


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
