"""`mqchaos check`: check runs in one Spark job, write check.json into each."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from datetime import datetime, timezone

from checkers import analysis as A
from checkers import logs as L
from checkers import cycles as Y
from checkers import txn as X
from checkers.history import HistoryError, Run, bucketed, convert, load, open_runs, records_estimate, run_ids
from checkers.spark import fit_partitions, session
from harness import store
from harness.results import COUNT_FIELDS, ORDERINGS, CheckResult
from harness.verdicts import EXIT_UNKNOWN, exit_code, merge, undecided


def _rule(run: Run, override: str | None) -> str:
    rule = override or run.meta.get("ordering") or "none"
    if rule not in ORDERINGS:
        raise HistoryError(f"run.json: ordering must be one of {', '.join(ORDERINGS)}, not {rule!r}")
    return rule


def check_runs(spark, runs: list[Run], *, ordering: str | None = None,
               threshold: float = 1.0) -> dict[str, CheckResult]:
    """The checker as a function: {run dir: result}. Writes nothing."""
    if not runs:
        return {}
    ids = run_ids(spark, runs)
    rules = {rid: _rule(run, ordering) for rid, run in ids.items()}
    records = records_estimate(runs)
    fit_partitions(spark, records)
    # The bucketed copies and the hashed ordering window save seconds on
    # millions of records, and cost a little (catalogue tables, one more
    # aggregation) where a fresh JVM's warm-up is all there is to save.
    large = records >= A.LARGE_INPUT
    produce = load(spark, runs, "produce")
    consume = load(spark, runs, "consume")
    replica = load(spark, runs, "replica")  # None: no run has its replicas' logs
    # read and parsed once, not once per query (a fifth of a 100k check); cache() marks the
    # DataFrame itself
    cached = [] if large else [df.cache() for df in (produce, consume) if df is not None]
    try:
        return _check(spark, runs, ids, rules, large, produce, consume, threshold, replica)
    finally:
        for df in cached:
            df.unpersist()


def present(produce, consume) -> tuple[bool, bool]:
    """Whether any record has a position in a log (the log checks' input: checkers.logs) and
    whether any was sent in a transaction (checkers.txn), in one small job: a queue's history
    has neither, and its check skips both (their figures are then the zeros and unknowns the
    queries would give on nothing; the per-message rows carry no transaction columns)."""
    text = f"SELECT max(CASE WHEN {L.POSITIONED} THEN 1 ELSE 0 END) AS pos, " \
           "max(CASE WHEN txn IS NOT NULL THEN 1 ELSE 0 END) AS txn FROM {produce}"
    if consume is not None:
        text += f" UNION ALL SELECT max(CASE WHEN {L.POSITIONED} THEN 1 ELSE 0 END), 0 FROM {{consume}}"
    rows = A.sql(text, produce=produce, consume=consume).collect() if consume is not None else \
        A.sql(text, produce=produce).collect()
    return any(r.pos for r in rows), any(r.txn for r in rows)


def _queries(m, produce, consume, rules: dict, large: bool, threshold: float, logs: bool, txn: bool,
             replica=None) -> tuple:
    # One Spark job: identity, the producer-hash check, unavailability and ordering
    # (on the deliveries that carry their writer), whose stages share the cores.
    log_queries = (L.queries(produce, consume, replica) if logs else None) or []
    cycle_queries = Y.queries(produce, consume) if txn else []
    ident, collide, unav, reads, order, txns, *parts = A.run_queries([
        A.identity_query(None, None, m=m),
        A.collisions_query(produce),
        A.unavailable_query(produce, threshold),
        # a sort of the consume log per reader: not on millions of records (docs/history.md)
        A.read_gaps_query(consume, threshold) if consume is not None and not large else None,
        A.ordering_query(produce, consume, rules, {}, exact=not large) if consume is not None else None,
        X.transactions_query(m) if txn else None,
        *cycle_queries, *log_queries])
    cycle_parts, log_parts = parts[:len(cycle_queries)], parts[len(cycle_queries):]
    # Then, for runs with loss, a small job over the per-message rows.
    lossy = {rid: d["lost_window"][1] for rid, d in ident.items() if d.get("lost") and d.get("lost_window")}
    detail = (A.loss_detail(m, produce, lossy, sum(ident[r]["lost"] for r in lossy)) if lossy else {})
    return ident, collide, unav, reads, order, detail, log_parts, txns, cycle_parts


def _check(spark, runs: list[Run], ids: dict, rules: dict, large: bool, produce, consume,
           threshold: float, replica=None) -> dict[str, CheckResult]:
    logs, txn = present(produce, consume)
    with bucketed(spark, ids if large else {}) as tables:
        rest = len(tables) < len(ids)
        m = A.per_message(produce if rest else None, consume if rest else None, tables, txn=txn)
        if not large:  # kept for the loss's detail, if there is loss
            m = m.cache()
        try:
            ident, collide, (unav, unav_p), reads, order, detail, log_parts, txns, cycle_parts = _queries(
                m, produce, consume, rules, large, threshold, logs, txn, replica)
        finally:
            if not large:
                m.unpersist()
    computed = reads is not None  # not on millions of records
    order = order or {}
    if order.pop(A.COLLISION, False):  # two ordering groups shared a hash
        order = A.ordering(produce, consume, rules, {}, exact=True)
    # id_conflicts compares producers by hash: exact unless two names of a
    # run share one (then recomputed by name).
    if collide:
        for rid, (n, sample) in A.exact_id_conflicts(produce, collide).items():
            if rid in ident:
                ident[rid]["id_conflicts"] = n
                ident[rid]["samples"]["id_conflicts"] = sample
    # Runs with deliveries that do not carry their writer (other tools'
    # histories; identity counted them): their ordering again, with the
    # writers looked up in the produce log.
    lookup = {rid: n for rid, d in ident.items()
              if (n := d.pop("no_writer", 0)) and rules.get(rid, "none") != "none"}
    if lookup and consume is not None:
        order = {r: o for r, o in order.items() if r not in lookup}
        order.update(A.ordering(produce, consume, {r: rules[r] for r in lookup}, lookup, exact=not large))
    unknown = set(ident) | set(order) | set(unav)
    unknown -= set(ids)
    if unknown:
        raise HistoryError("Spark read history files it cannot attribute to a run directory "
                           f"(unusual characters in a path?): {len(unknown)} run ids")
    logs = L.combine(log_parts, ids)
    for rid, figures in X.combine(txns, ids).items():
        logs[rid].update(figures)
    for rid, figures in Y.combine(cycle_parts, set(txns or {}), ids).items():
        logs[rid].update(figures)
    return {run.dir: _result(ident.get(rid), run, rules[rid], order.get(rid), unav.get(rid, []), unav_p.get(rid, {}),
                             reads.get(rid, {}) if computed else None, detail.get(rid), threshold, logs[rid])
            for rid, run in ids.items()}


def _result(ident: dict | None, run: Run, rule: str, order: dict | None, unav: list, unav_p: dict,
            reads: dict | None, detail: dict | None, threshold: float, logs: dict) -> CheckResult:
    """One run's CheckResult from the queries' parts (``reads`` None: not computed)."""
    d = ident or {k: 0 for k in COUNT_FIELDS} | {"samples": {k: [] for k in A.ANOMALY_KINDS}, "lost_window": None}
    d["malformed_lines"] += sum((run.parquet_malformed or {}).values())
    d.update(detail or {"lost_by_node": {}, "lost_by_producer": {}, "kept_before_lost_last": None})
    o = order or {"ordering_violations": 0, "samples": []}
    d["ordering"] = rule
    d["ordering_violations"] = o["ordering_violations"]
    d["samples"]["ordering"] = o["samples"]
    d["unavailable"] = unav
    d["unavailable_s"] = round(sum(z - a for a, z in d["unavailable"]), 3)
    d["unavailable_threshold_s"] = threshold
    # each producer's own outages (the pooled intervals above hide one producer's
    # outage behind another's successes) and each reader's longest wait
    d["unavailable_by_producer"] = unav_p
    d["unavailable_s_producer_max"] = round(max(
        (sum(z - a for a, z in iv) for iv in d["unavailable_by_producer"].values()), default=0.0), 3)
    d["read_gaps"] = reads
    d["read_gap_max_s"] = (round(max((z - a for iv in reads.values() for a, z in iv), default=0.0), 3)
                           if reads is not None else None)
    d.update(logs)  # where each message sits in the log (checkers.logs)
    d["valid"], d["reason"] = A.verdict(d)
    # A history cut short, or made under a fault that did not happen, decides nothing.
    faults = store.read_jsonl(Path(run.dir) / store.NEMESIS_LOG) if "://" not in run.dir else []
    d["undecided"] = undecided(run.meta if run.recorded else None, faults)
    if d["undecided"]:
        d["valid"], d["reason"] = None, "undecided: " + "; ".join(d["undecided"])
    d["run_dir"] = run.dir
    d["source"] = "parquet" if run.parquet_malformed is not None else "jsonl"
    return d


def _table(rows: list[tuple]) -> str:
    head = ("run", "attempted", "ok", "fail", "info", "lost", "dup", "unexp", "recov",
            "order", "unavail_s", "malformed", "valid")
    cells = [head] + [tuple(str(x) for x in r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))) for r in cells)


def batch_exit_code(results: list[dict], errors: int) -> int:
    """Every run's validity merged (harness.verdicts); a run that could not be read counts
    as unknown."""
    return exit_code(merge([r["valid"] for r in results] + [None] * errors))


def main(paths: list[str], *, ordering: str | None = None, master: str | None = None,
         threshold: float = 1.0, prefer_parquet: bool = True, out=None, err=None,
         results_out: dict | None = None, spark=None) -> int:
    """Check the runs, write check.json into each, print a table; exit code by validity.
    ``results_out`` receives {run dir: result}; ``spark``: a running session to use (a check
    server's), else one is started. Printed to ``out`` and ``err`` (default stdout, stderr)."""
    out, err = out or sys.stdout, err or sys.stderr
    runs, errors = open_runs(paths, prefer_parquet=prefer_parquet)
    for p, e in errors:
        print(f"error: {p}: {e}", file=err)
    if not runs:
        return EXIT_UNKNOWN
    t0 = time.monotonic()
    spark = spark or session(master, "mqchaos-check", small=records_estimate(runs) < A.LARGE_INPUT)
    try:
        results = check_runs(spark, runs, ordering=ordering, threshold=threshold)
    except HistoryError as e:
        print(f"error: {e}", file=err)
        return EXIT_UNKNOWN
    elapsed = round(time.monotonic() - t0, 2)
    if results_out is not None:
        results_out.update(results)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = []
    for run_dir, d in results.items():
        d["checked_at"], d["check_seconds"] = now, elapsed
        store.write_check(run_dir, d)
        valid = {True: "yes", False: "NO", None: "unknown"}[d["valid"]]
        rows.append((run_dir, d["attempted"], d["ok"], d["fail"], d["info"], d["lost"], d["duplicated"],
                     d["unexpected"], d["recovered"], d["ordering_violations"], d["unavailable_s"],
                     d["malformed_lines"], valid))
    print(_table(rows), file=out)
    for run_dir, d in results.items():  # "unknown" in the table: why
        if d["valid"] is None:
            print(f"{run_dir}: {d['reason']}", file=out)
    print(f"checked {len(results)} run(s) in {elapsed} s; check.json written in each", file=out)
    return batch_exit_code(list(results.values()), len(errors))


def convert_main(paths: list[str], master: str | None = None) -> int:
    spark = session(master, "mqchaos-convert")
    code = 0
    for p in paths:
        try:
            meta = convert(spark, p)
            print(f"{p}: parquet written (malformed lines skipped: {meta['malformed']})")
        except HistoryError as e:
            print(f"error: {e}", file=sys.stderr)
            code = EXIT_UNKNOWN
    return code
