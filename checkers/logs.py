"""Log checks: where each message sits in the log, not only whether it arrived.

For a broker that is a log (a Kafka partition, a RabbitMQ stream) every acknowledged write
and every read has a position, ``source`` (topic:partition, or the stream) and ``offset``
(docs/history.md, version 3: produce completions carry them when the broker says where the
write went). Jepsen's Kafka checker (jepsen.tests.kafka) reads these anomalies off the
positions; here they are Spark SQL over the same histories, in the same job as identity:

  inconsistent_offsets  one position, two messages (per source and offset: the writes'
                        and the reads' messages differ)
  duplicate_offsets     one message at more than one position (a retried write appended
                        twice; apart from a message delivered twice from one position)
  lost_writes           acknowledged, never read, and below the highest offset any
                        consumer read from its source: the log moved on without it
  unseen                acknowledged, never read, at or above that offset (or its source
                        never read): not read yet, which a longer drain might change
  lost_prefix / lost_middle / lost_postfix
                        where the never-read acknowledged writes sit: below the lowest
                        offset read from their source, between, above the highest
  poll_skips            a reader's next read on a source jumps over a position some
                        write or read is known to hold, for readers that assign their
                        partitions; ``poll_skips_subscribe``: the same for subscribed readers
                        (a rebalance gave the skipped part to another member: no anomaly)
  nonmonotonic_polls    a reader's next read on a source is at or below its previous one,
                        for readers that assign their partitions (the harness's readers);
                        ``nonmonotonic_polls_subscribe``: the same for subscribed readers,
                        where a rebalance allows it (not an anomaly)
  nonmonotonic_sends    a producer's later write (by seq) to a source acknowledged at a
                        lower offset than its earlier one (reordered retries; a processor's
                        outputs, written in the order their inputs were read, left out)

  lost_on_node          per replica (history/replica-<node>.jsonl: each node's log read from
                        its segment files after the drain), acknowledged writes at or below
                        the highest offset that node holds in their partition, which it does
                        not hold at their position: each replica checked alone, as Jepsen's
                        NATS analysis did to show split-brain; ``replica_records`` counts what
                        the files held. None without replica logs (the readers fail over
                        across nodes: a node's own log is read from its files, not through
                        a consumer)

A reader's reads are taken in the order it wrote them: by ``t``, then by their place in its
history file (``_pos``: checkers.history), never by offset, so a batch read 0, 1, 3, 2 at one
``t`` shows its skip and its step back. A read without an offset (the broker did not say where
it read) still reads its message: the message is not lost and not a never-read write; it holds
no position (no rank, no bound, not in ``read_offsets``), and the reader's step across it is
not judged a skip (it may have read the very position stepped over), while a step back across
it is (the positions on either side show one whatever it held).

Where the history has no write positions (RabbitMQ confirms carry none), ``lost_writes``,
``unseen`` and the split are None: unknown, never zero. A message's identity in a position
comparison is its 64-bit hash (xxhash64 of msg_id: fixed-width aggregation buffers, as in
checkers.analysis); two ids of one run sharing a hash at one position is a chance of about
n^2 / 2^64.
"""
from __future__ import annotations

from pyspark.sql import DataFrame

from checkers.analysis import REJECTED, SAMPLES, Query, _int, _sample, sql

_BAD = "`_bad`"
# an acknowledged write whose position the broker gave (history version 3)
WRITE = f"NOT {_BAD} AND outcome = 'ok' AND source IS NOT NULL AND `offset` IS NOT NULL"
# a delivery (not one handed back); with its position where the broker gives one
READ = f"NOT {_BAD} AND NOT {REJECTED}"
# a reader's order: when it read, then where it wrote the line (offset: a copy without `_pos`)
READER_ORDER = "t, `_pos`, `offset`"
POSITIONED = "source IS NOT NULL AND `offset` IS NOT NULL"
ASSIGNED = "coalesce(assigned, true)"  # the harness's readers assign; a reader says if it subscribed

FIGURES = ("write_offsets", "read_offsets", "inconsistent_offsets", "duplicate_offsets", "lost_writes", "unseen",
           "lost_prefix", "lost_middle", "lost_postfix", "poll_skips", "poll_skips_subscribe", "nonmonotonic_polls",
           "nonmonotonic_polls_subscribe", "nonmonotonic_sends", "replica_records", "lost_on_node")
# figures unknown (None) when the run's history holds no write positions
NEED_WRITES = ("lost_writes", "unseen", "lost_prefix", "lost_middle", "lost_postfix")
SAMPLED = ("inconsistent_offsets", "duplicate_offsets", "lost_writes", "unseen", "poll_skips",
           "nonmonotonic_polls", "nonmonotonic_sends", "lost_on_node")
NEED_REPLICAS = ("replica_records", "lost_on_node")  # None for a run without replica logs


def _positions(produce: DataFrame, consume: DataFrame) -> DataFrame:
    """One row per acknowledged positioned write (w = 0) and per delivery (w = 1). A delivery
    without a position counts too: "never read" below is never read at all, by identity (a
    read the broker gave no offset for is no lost write); the position checks filter on
    POSITIONED."""
    return sql(f"SELECT run, msg_id, source, `offset`, 0 AS w FROM {{produce}} WHERE {WRITE} "
               f"UNION ALL SELECT run, msg_id, source, `offset`, 1 AS w FROM {{consume}} WHERE {READ}",
               produce=produce, consume=consume)


def _per_offset(pos: DataFrame) -> DataFrame:
    """(run, source, offset) -> the hashes of the messages written or read there."""
    return sql(f"SELECT run, source, `offset`, min(xxhash64(msg_id)) AS hmin, max(xxhash64(msg_id)) AS hmax "
               f"FROM {{pos}} WHERE {POSITIONED} GROUP BY run, source, `offset`", pos=pos)


def inconsistent_query(per_offset: DataFrame) -> Query:
    at = _sample("true", "concat(source, '@', CAST(`offset` AS STRING))", "struct(source, `offset`)")
    df = sql(f"SELECT run, count(*) AS n, {at} AS ids FROM {{o}} WHERE hmin != hmax GROUP BY run", o=per_offset)
    return df, lambda rows: {r.run: {"inconsistent_offsets": r.n, "samples": {"inconsistent_offsets": list(r.ids or [])}}
                             for r in rows}


def messages_query(pos: DataFrame) -> Query:
    """Per message: its positions (one or several) and whether it was ever delivered; then,
    per run, the duplicates and the never-read writes by where they sit in their source."""
    per_msg = sql(
        f"SELECT run, msg_id, min(CASE WHEN {POSITIONED} THEN xxhash64(source, `offset`) END) AS pmin, "
        f"max(CASE WHEN {POSITIONED} THEN xxhash64(source, `offset`) END) AS pmax, "
        f"sum(w) AS dlv, max(CASE WHEN w = 0 THEN struct(`offset`, source) END) AS wpos, sum(1 - w) AS writes, "
        f"sum(CASE WHEN w = 1 AND {POSITIONED} THEN 1 ELSE 0 END) AS reads "
        f"FROM {{pos}} GROUP BY run, msg_id", pos=pos)
    # a message's write position: its highest offset's, source and offset from the same write
    per_msg = sql("SELECT *, wpos.`offset` AS woff, wpos.source AS wsrc FROM {m}", m=per_msg)
    bounds = sql(f"SELECT run, source, min(`offset`) AS rmin, max(`offset`) AS rmax FROM {{pos}} "
                 f"WHERE w = 1 AND {POSITIONED} GROUP BY run, source", pos=pos)
    unread = "(woff IS NOT NULL AND dlv = 0)"
    where = {"lost_prefix": "woff < rmin", "lost_middle": "woff >= rmin AND woff < rmax",
             "lost_postfix": "(rmax IS NULL OR woff >= rmax)"}
    sums = {"write_offsets": "CASE WHEN writes > 0 THEN 1 ELSE 0 END", "read_offsets": "reads",
            "duplicate_offsets": _int("pmin != pmax"),
            **{k: _int(f"{unread} AND {c}") for k, c in where.items()}}
    dup = _sample("pmin != pmax", "msg_id", "msg_id")
    lw = _sample(f"{unread} AND woff < rmax", "msg_id", "struct(wsrc, woff)")
    us = _sample(f"{unread} AND NOT woff < coalesce(rmax, woff)", "msg_id", "struct(wsrc, woff)")
    text = ("SELECT m.run, " + ", ".join(f"sum(CAST({e} AS BIGINT)) AS {k}" for k, e in sums.items())
            + f", {dup} AS dup, {lw} AS lw, {us} AS us"
            + " FROM {m} m LEFT JOIN {b} b ON m.run = b.run AND m.wsrc = b.source GROUP BY m.run")

    def decode(rows):
        out = {}
        for r in rows:
            d = {k: r[k] for k in sums}
            d["lost_writes"] = d["lost_prefix"] + d["lost_middle"]
            d["unseen"] = d["lost_postfix"]
            d["samples"] = {"duplicate_offsets": list(r.dup or []), "lost_writes": list(r.lw or []), "unseen": list(r.us or [])}
            out[r.run] = d
        return out
    return sql(text, m=per_msg, b=bounds), decode


def polls_query(pos: DataFrame, consume: DataFrame, per_offset: DataFrame) -> Query:
    """Each reader's successive reads on one source, in the order it read them (READER_ORDER):
    a step back (nonmonotonic: at or below its previous positioned read) or a step over a
    known position (skip: the positions' ranks, over every position a write or a read is known
    to hold, differ by more than one; not judged next to a read without an offset)."""
    ranks = sql("SELECT run, source, `offset`, row_number() OVER (PARTITION BY run, source ORDER BY `offset`) AS k "
                "FROM {o}", o=per_offset)
    reads = sql(f"SELECT run, consumer, source, `offset`, t, `_pos`, {ASSIGNED} AS assigned FROM {{c}} "
                f"WHERE {READ} AND source IS NOT NULL", c=consume)
    # k is null for a read without an offset: lag(k) then leaves the next step unjudged
    lane = f"PARTITION BY run, consumer, source ORDER BY {READER_ORDER}"
    steps = sql(f"SELECT *, last(`offset`, true) OVER ({lane} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) "
                f"AS prev, lag(k) OVER ({lane}) AS pk FROM "
                "(SELECT r.*, k FROM {r} r LEFT JOIN {k} USING (run, source, `offset`))", r=reads, k=ranks)
    label = "concat(consumer, ' ', source, ' ', CAST(prev AS STRING), '->', CAST(`offset` AS STRING))"
    back, skip = "prev IS NOT NULL AND `offset` <= prev", "pk IS NOT NULL AND k - pk > 1"
    text = (f"SELECT run, sum({_int(f'{back} AND assigned')}) AS nm, sum({_int(f'{back} AND NOT assigned')}) AS nms, "
            f"sum({_int(f'{skip} AND assigned')}) AS sk, sum({_int(f'{skip} AND NOT assigned')}) AS sks, "
            f"{_sample(f'{back} AND assigned', label, 't')} AS nm_ids, "
            f"{_sample(f'{skip} AND assigned', label, 't')} AS sk_ids FROM {{s}} GROUP BY run")
    return sql(text, s=steps), lambda rows: {
        r.run: {"nonmonotonic_polls": r.nm, "nonmonotonic_polls_subscribe": r.nms, "poll_skips": r.sk,
                "poll_skips_subscribe": r.sks,
                "samples": {"nonmonotonic_polls": list(r.nm_ids or []), "poll_skips": list(r.sk_ids or [])}} for r in rows}


def sends_query(produce: DataFrame) -> Query:
    """Each producer's acknowledged writes to one source by seq: a later one at a lower offset.
    A processor's outputs are left out: their producer names an identity (the input's
    producer), not a client sending in seq order."""
    steps = sql(f"SELECT run, producer, source, seq, `offset`, lag(`offset`) OVER (PARTITION BY run, producer, "
                f"source ORDER BY seq) AS prev FROM {{p}} WHERE {WRITE} AND from_msg IS NULL", p=produce)
    bad = "prev IS NOT NULL AND `offset` < prev"
    label = ("concat(producer, ' ', source, ' seq ', CAST(seq AS STRING), ': ', CAST(prev AS STRING), '->', "
             "CAST(`offset` AS STRING))")
    text = (f"SELECT run, sum({_int(bad)}) AS n, {_sample(bad, label, 'seq')} AS ids "
            f"FROM {{s}} GROUP BY run")
    return sql(text, s=steps), lambda rows: {
        r.run: {"nonmonotonic_sends": r.n, "samples": {"nonmonotonic_sends": list(r.ids or [])}} for r in rows}


def replicas_query(produce: DataFrame, replica: DataFrame) -> Query:
    """Each node's log against the acknowledged writes its log end has passed."""
    rep = sql("SELECT run, node, source, `offset`, msg_id FROM {r} WHERE NOT `_bad`", r=replica)
    ends = sql("SELECT run, node, source, max(`offset`) AS hi, count(*) AS n FROM {r} GROUP BY run, node, source", r=rep)
    writes = sql(f"SELECT run, source, `offset`, msg_id FROM {{p}} WHERE {WRITE}", p=produce)
    missing = sql("SELECT w.run, e.node, w.source, w.`offset`, w.msg_id FROM {w} w JOIN {e} e "
                  "ON w.run = e.run AND w.source = e.source AND w.`offset` <= e.hi "
                  "LEFT ANTI JOIN {r} r ON r.run = w.run AND r.node = e.node AND r.source = w.source "
                  "AND r.`offset` = w.`offset` AND r.msg_id = w.msg_id", w=writes, e=ends, r=rep)
    label = "concat(node, ' ', msg_id, ' at ', source, ' @', CAST(`offset` AS STRING))"
    text = (f"SELECT run, sum(n) AS rn, CAST(0 AS BIGINT) AS lon, CAST(NULL AS ARRAY<STRING>) AS lon_ids FROM {{e}} "
            f"GROUP BY run UNION ALL SELECT run, 0, count(*), {_sample('true', label, 'struct(node, source, `offset`)')} "
            f"FROM {{x}} GROUP BY run")

    def decode(rows):
        out: dict[int, dict] = {}
        for r in rows:
            d = out.setdefault(r.run, {"replica_records": 0, "lost_on_node": 0, "samples": {"lost_on_node": []}})
            d["replica_records"] += r.rn
            d["lost_on_node"] += r.lon
            d["samples"]["lost_on_node"] += list(r.lon_ids or [])
        return out
    return sql(text, e=ends, x=missing), decode


def queries(produce: DataFrame, consume: DataFrame | None, replica: DataFrame | None = None) -> list[Query] | None:
    """The log checks' queries (to run in checkers.analysis.run_queries' one job), None
    without a consume log."""
    if consume is None:
        return None
    pos = _positions(produce, consume)
    per_offset = _per_offset(pos)
    return [inconsistent_query(per_offset), messages_query(pos), polls_query(pos, consume, per_offset),
            sends_query(produce), *([replicas_query(produce, replica)] if replica is not None else [])]


def combine(parts: list[dict | None], run_ids) -> dict[int, dict]:
    """Each run's log figures from the queries' decoded parts (a run absent from a part has
    zero of it); the write-position figures None where the run has no write position."""
    out = {}
    for rid in run_ids:
        d = {k: 0 for k in FIGURES}
        samples = {k: [] for k in SAMPLED}
        for part in parts:
            got = (part or {}).get(rid)
            if got:
                samples.update(got.get("samples", {}))
                d.update({k: v for k, v in got.items() if k != "samples"})
        if not any((part or {}).get(rid, {}).get("replica_records") for part in parts):
            d.update({k: None for k in NEED_REPLICAS})
        if not d["write_offsets"]:
            d.update({k: None for k in NEED_WRITES})
            samples.update({"lost_writes": [], "unseen": []})
        d["log_samples"] = {k: v[:SAMPLES] for k, v in samples.items()}
        out[rid] = d
    return out
