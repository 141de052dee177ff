"""Transaction checks: what a read_committed reader saw of each producer transaction.

A transactional history (harness/brokers/kafka/txn.py; docs/history.md) marks every record
of a message with its transaction (``txn``); a completion gives the transaction's outcome
(ok committed, fail aborted with ``aborted: true``, info unknown) and when the commit or
abort was asked for (``t_commit``). Per run:

  transactions_committed / _aborted / _unknown
                      transactions by outcome (a transaction's: its messages share it)
  aborted_reads       messages of an aborted transaction that were delivered (Adya's G1a:
                      a read_committed reader must never see them)
  uncommitted_reads   messages delivered before their transaction's commit was even asked
                      for (a read of uncommitted data)
  torn_transactions   committed transactions some of whose messages were delivered and
                      some never (atomicity broken after the drain read everything)
  lost_transactions   committed transactions none of whose messages was ever delivered

A run without transactional records has these as None (not applicable), never zero.
Dependency cycles between transactions and exactly-once processing (consume-transform-
produce) are checkers/cycles.py's.
"""
from __future__ import annotations

from pyspark.sql import DataFrame

from checkers.analysis import ABORTED, RANK, SAMPLES, Query, _int, _sample, sql

FIGURES = ("transactions_committed", "transactions_aborted", "transactions_unknown", "aborted_reads",
           "uncommitted_reads", "torn_transactions", "lost_transactions")
SAMPLED = ("aborted_reads", "uncommitted_reads", "torn_transactions", "lost_transactions")


def transactions_query(m: DataFrame) -> Query:
    """From the per-message rows (checkers.analysis.per_message: each message's transaction
    hash ``th``, its commit time ``tcm``, its first delivery ``td``, its flags), grouped by
    transaction: no shuffle of the history beyond identity's own. A transaction is named by
    one of its messages (the smallest id) in the samples."""
    best = f"coalesce(best, CASE WHEN inv > 0 THEN {RANK['info']} END, {RANK['info']})"
    fail, ok = RANK["fail"], RANK["ok"]
    aborted_read = f"{best} = {fail} AND (fl & {ABORTED}) != 0 AND dlv > 0"
    early = "dlv > 0 AND td < tcm"
    txns = sql(f"SELECT run, th, min({best}) AS lo, max({best}) AS hi, count(*) AS n, sum({_int('dlv > 0')}) AS d, "
               f"sum({_int(aborted_read)}) AS ar, sum({_int(early)}) AS ur, min(msg_id) AS first, "
               f"{_sample(aborted_read, 'msg_id', 'msg_id')} AS ar_ids, {_sample(early, 'msg_id', 'td')} AS ur_ids "
               f"FROM {{m}} WHERE th IS NOT NULL GROUP BY run, th", m=m)
    committed = f"lo = {ok}"
    torn, lost = f"{committed} AND d > 0 AND d < n", f"{committed} AND d = 0"
    text = (f"SELECT run, sum({_int(committed)}) AS c, sum({_int(f'hi = {fail}')}) AS a, "
            f"sum({_int(f'NOT {committed} AND hi != {fail}')}) AS u, sum(ar) AS ar, sum(ur) AS ur, "
            f"sum({_int(torn)}) AS torn, sum({_int(lost)}) AS lost, "
            f"{_sample('ar > 0', 'ar_ids', 'first')} AS ar_ids, {_sample('ur > 0', 'ur_ids', 'first')} AS ur_ids, "
            f"{_sample(torn, 'first', 'first')} AS torn_ids, {_sample(lost, 'first', 'first')} AS lost_ids "
            f"FROM {{t}} GROUP BY run")

    def flat(lists) -> list[str]:
        return sorted(x for xs in (lists or []) for x in (xs or []))[:SAMPLES]

    def decode(rows):
        return {r.run: {"transactions_committed": r.c, "transactions_aborted": r.a, "transactions_unknown": r.u,
                        "aborted_reads": r.ar, "uncommitted_reads": r.ur, "torn_transactions": r.torn,
                        "lost_transactions": r.lost,
                        "txn_samples": {"aborted_reads": flat(r.ar_ids), "uncommitted_reads": flat(r.ur_ids),
                                        "torn_transactions": list(r.torn_ids or []),
                                        "lost_transactions": list(r.lost_ids or [])}} for r in rows}
    return sql(text, t=txns), decode


def combine(part: dict | None, run_ids) -> dict[int, dict]:
    """Each run's transaction figures: None where the run wrote no transaction."""
    def empty() -> dict:
        return {**{k: None for k in FIGURES}, "txn_samples": {k: [] for k in SAMPLED}}
    return {rid: (part or {}).get(rid) or empty() for rid in run_ids}
