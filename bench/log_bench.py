"""Benchmark of the log and transaction checks (issue 36) beside the identity check.

    python -m bench.log_bench --sizes 1e6,1e7                 measure; record in docs/batches/
    python -m bench.log_bench --record docs/batches/bench-logs-<ts>.json --into docs/benchmarks.md --name logs

A transactional Kafka-like history of n messages (8 producers, transactions of 5 over 4
partitions, every 4th aborted; a read_committed reader reading each partition in order)
with every log and transaction anomaly planted ``--plant`` times, on distinct transactions,
so each figure's exact value is known (``expected``). It is written as plain Parquet, laid
out as `mqchaos convert` lays a run's copy out (bench.checker_bench.lay_out), then checked
twice in one warm Spark session: with every check, and with the log and transaction
queries left out (today's identity, ordering and unavailability alone). The record (sizes,
seconds, found vs planted) is written under docs/batches/, the table from it.
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench import recorded
from bench.checker_bench import DATA, _ids, _prefixed, lay_out
from harness.util import entry_point

P, SIZE, PARTS, ABORT = 8, 5, 4, 4  # producers, messages per transaction, partitions, every 4th aborted
COLUMNS = ("lost", "unexpected", "duplicated", "inconsistent_offsets", "duplicate_offsets", "lost_writes", "unseen",
           "poll_skips", "nonmonotonic_polls", "nonmonotonic_sends", "aborted_reads", "uncommitted_reads",
           "torn_transactions", "lost_transactions")


def expected(k: int) -> dict[str, int]:
    """Each figure when every plant is made k times (see ``generate``)."""
    return {"lost": k + SIZE * k + k, "unexpected": k, "duplicated": 2 * k, "inconsistent_offsets": k,
            "duplicate_offsets": k, "lost_writes": k + SIZE * k + k, "unseen": 0, "poll_skips": k + SIZE * k,
            "nonmonotonic_polls": k, "nonmonotonic_sends": k, "aborted_reads": k, "uncommitted_reads": k,
            "torn_transactions": 2 * k, "lost_transactions": k}


def _positions(n: int):
    i = np.arange(n)
    prod, seq = i % P, i // P
    txn = prod * (n // P // SIZE + 1) + seq // SIZE
    aborted = (seq // SIZE) % ABORT == ABORT - 1
    part = seq % PARTS
    t_inv = i / 20_000.0
    last = np.minimum(i + (SIZE - 1 - seq % SIZE) * P, n - 1)  # the transaction's last message
    t_commit = t_inv[last] + 0.001
    offset = np.full(n, -1)
    for p in range(PARTS):
        idx = np.nonzero((part == p) & ~aborted)[0]
        offset[idx] = np.arange(len(idx))
    return i, prod, seq, txn, aborted, part, t_inv, t_commit, offset


def prod_of(n: int) -> np.ndarray:
    return np.arange(n) % P


def _committed_spots(rng, txn, aborted, seq, k: int) -> list[np.ndarray]:
    """Seven disjoint sets of k committed transactions, far apart (no two planted reads
    neighbours in a partition), each as the index of its first message."""
    # one producer's transactions (every 8th first message): two picked ones never
    # neighbour in a partition, the other seven producers' messages lie between
    firsts = np.nonzero((seq % SIZE == 0) & ~aborted & (prod_of(seq.size) == 0))[0]
    firsts = firsts[(len(firsts) // 10):(len(firsts) * 9 // 10)]  # interior
    pick = rng.choice(firsts, 7 * k, replace=False)  # torn, lost, ghost, back, dup, sends, early
    return [pick[j * k:(j + 1) * k] for j in range(7)]


def _produce_table(n, prod, seq, txn, ok, names, t_inv, t_complete, t_commit, offset) -> pa.Table:
    """The transactional producers' completions: committed ones at their positions, aborted
    ones marked, every message with its transaction and when its commit was asked for."""
    return pa.table({
        "msg_id": _ids(prod, seq), "producer": _prefixed("p", prod), "seq": pa.array(seq, pa.int64()),
        "outcome": pa.array(np.where(ok, "ok", "fail").astype(object), pa.string()),
        "t_invoke": t_inv, "t_complete": t_complete, "node": pa.nulls(n, pa.string()),
        "error": pa.array(np.where(ok, None, "aborted on purpose"), pa.string()),
        "source": pa.array(np.where(ok, names, None), pa.string()),
        "offset": pa.array(np.where(ok, offset, 0), pa.int64(), mask=~ok),
        "txn": pa.array(np.char.add("x", txn.astype(str)).astype(object), pa.string()),
        "t_commit": t_commit, "aborted": pa.array(np.where(ok, None, True), pa.bool_())})


def generate(n: int, k: int, seed: int = 7) -> Path:
    run = DATA / f"logs-v2-{n}-{k}"  # v2: the plants' spacing of issue 36's review
    plain = run / "history" / "plain"
    if (plain / "_done").exists():
        return run
    rng = np.random.default_rng(seed)
    i, prod, seq, txn, aborted, part, t_inv, t_commit, offset = _positions(n)
    torn, lost_t, incons, back, dup, sends, early = _committed_spots(rng, txn, aborted, seq, k)
    # nonmonotonic sends: a transaction's first message and its fifth (the producer's next in
    # that partition) trade offsets
    a, b = sends, sends + P * PARTS
    offset[a], offset[b] = offset[b].copy(), offset[a].copy()
    t_complete = t_commit + 0.002
    t_commit = t_commit.copy()
    t_commit[early] = 1e6  # uncommitted reads: the commit asked for long after the read
    ok = ~aborted
    names = np.char.add("t:", part.astype(str)).astype(object)
    produce = _produce_table(n, prod, seq, txn, ok, names, t_inv, t_complete, t_commit, offset)
    # c0 reads every committed message at its position, partition by partition in offset
    # order, each after its own commit (times strictly increasing along a partition)
    r = np.nonzero(ok)[0]
    r = r[~np.isin(r, np.concatenate([torn, (lost_t[:, None] + np.arange(SIZE) * P).ravel()]))]
    r = r[np.lexsort((offset[r], part[r]))]
    t_read = np.zeros(len(r))
    for p in range(PARTS):
        m = part[r] == p
        tc = np.where(t_commit[r][m] > 1e5, 0, t_commit[r][m])
        t_read[m] = np.maximum.accumulate(tc) + 0.01 + offset[r][m] * 1e-6
    t_of = dict(zip(r.tolist(), t_read.tolist()))
    last, end0 = float(t_read.max()) + 1, int(offset[part == 0].max()) + 1
    ab = rng.choice(np.nonzero(aborted & (seq % SIZE == 0))[0], k, replace=False)
    parts = [  # (indexes, times, offsets (-1: none), redelivered, consumer)
        (r, t_read, offset[r], False, "c0"),
        (back, np.array([t_of[x] for x in back]) + 1e-7, offset[back], True, "c0"),   # read again at once
        (dup, last + np.arange(k), end0 + np.arange(k), False, "c0"),                  # appended again at t:0's end
        (ab, last + k + np.arange(k), np.full(k, -1), False, "c1")]                    # aborted, read (no position)
    idx = np.concatenate([x[0] for x in parts])
    off = np.concatenate([x[2] for x in parts])
    src = np.concatenate([names[r], names[back],
                          np.full(k, "t:0", object), np.full(k, None, object)])
    msg = _ids(prod[idx], seq[idx]).to_numpy(zero_copy_only=False).astype(object)
    ghost = np.isin(idx, incons) & (np.arange(len(idx)) < len(r))  # another message at a committed one's position
    msg[ghost] = np.char.add("ghost-", idx[ghost].astype(str)).astype(object)
    consume = pa.table({
        "msg_id": pa.array(msg, pa.string()),
        "consumer": pa.array(np.concatenate([np.full(len(x[0]), x[4], object) for x in parts]), pa.string()),
        "t": np.concatenate([x[1] for x in parts]),
        "redelivered": np.concatenate([np.full(len(x[0]), x[3]) for x in parts]),
        "source": pa.array(src, pa.string()),
        "offset": pa.array(np.where(off < 0, 0, off), pa.int64(), mask=off < 0),
        "node": pa.nulls(len(idx), pa.string()),
        "producer": pa.array(np.where(ghost, None, np.char.add("p", prod[idx].astype(str)).astype(object)), pa.string()),
        "seq": pa.array(seq[idx], pa.int64(), mask=ghost)})
    for kind, tbl in (("produce", produce), ("consume", consume)):
        (plain / kind).mkdir(parents=True, exist_ok=True)
        pq.write_table(tbl, plain / kind / "part-0.parquet")
        (run / "history" / f"{kind}-0.jsonl").touch()  # the checker reads the copy
    (run / "run.json").write_text(json.dumps({"scenario": "bench-logs", "ordering": "none", "history_version": 3}))
    (plain / "_done").touch()
    return run


def check(run: Path, spark, with_logs: bool) -> tuple[float, dict]:
    return recorded.timed_check(run, spark, "nocycles" if with_logs else "identity")  # cycles: cycle_bench


def measure(sizes: list[int], k: int) -> dict:
    from checkers.spark import session

    spark = session(None, "mqchaos-bench-logs")
    rows = []
    for n in sizes:
        t0 = time.monotonic()
        run = generate(n, k)
        gen_s = round(time.monotonic() - t0, 1)
        copy = lay_out(run)
        # identity alone before and after (the smaller counts: the first pays for warming up)
        first_s, _ = check(run, spark, with_logs=False)
        all_s, res = check(run, spark, with_logs=True)
        base_s = min(first_s, check(run, spark, with_logs=False)[0])
        want = expected(k)
        found = {c: res[c] for c in COLUMNS}
        rows.append({"messages": n, "planted_each": k, "generate_s": gen_s, "copy_s": copy.get("copy_s"),
                     "identity_s": base_s, "with_log_and_txn_s": all_s, "found": found, "expected": want,
                     "exact": found == want})
        print(json.dumps(rows[-1]), flush=True)
    return {"bench": "log_bench", "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cpus": __import__("os").cpu_count(), "rows": rows}


def table(record: dict) -> list[str]:
    head = ["messages", "identity check s", "with log + transaction checks s", "added s",
            "every planted figure exact"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in record["rows"]:
        lines.append(f"| {r['messages']:,} | {r['identity_s']} | {r['with_log_and_txn_s']} | "
                     f"{round(r['with_log_and_txn_s'] - r['identity_s'], 1)} | "
                     f"{'yes' if r['exact'] else 'NO'} ({len(COLUMNS)} figures, {r['planted_each']} of each plant) |")
    return lines


def main(argv: list[str] | None = None) -> int:
    return recorded.main("python -m bench.log_bench", "bench-logs", measure, table, argv)


if __name__ == "__main__":
    with entry_point():
        raise SystemExit(main())
