"""Benchmark of the cycle search and exactly-once figures (checkers/cycles.py, issue 36).

    python -m bench.cycle_bench --sizes 1e6,1e7               measure; record in docs/batches/
    python -m bench.cycle_bench --record docs/batches/bench-cycles-<ts>.json --into docs/benchmarks.md --name cycles

checkers.synth.build_ctp's history, built with numpy at scale: in each unit a producer's
transaction writes SIZE messages (message i to partition i % PARTS), then a processor's
transaction reads them and writes their outputs; offsets step by STRIDE in schedule order,
so the graph has no cycle of its own. Every kind of checkers.synth.CTP_PLANTS is planted
``--plant`` times on units three apart, so each figure's exact value is known
(``expected``). ``messages`` counts the writes (inputs and outputs). Checked three times in
one warm Spark session: identity alone, everything but the cycle queries, everything.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import recorded
from bench.checker_bench import DATA, lay_out
from harness.util import entry_point

P, SIZE, PARTS, STRIDE = 4, 4, 3, 10  # producers, messages per transaction, partitions, offset step
COLUMNS = ("cycles_g0", "cycles_g1c", "cycles_g1c_wr", "processed_twice", "unprocessed", "duplicate_offsets",
           "uncommitted_reads", "inconsistent_offsets", "lost", "poll_skips", "nonmonotonic_polls",
           "aborted_reads", "torn_transactions", "lost_transactions")


def expected(k: int) -> dict[str, int]:
    """Each figure when every plant is made k times (checkers.synth.build_ctp's docstring:
    a wr cycle is also a G1c component and one read before its commit; a second output one
    message at two offsets)."""
    return {c: 0 for c in COLUMNS} | {"cycles_g0": k, "cycles_g1c": 2 * k, "cycles_g1c_wr": k,
                                      "processed_twice": k, "unprocessed": k, "duplicate_offsets": k,
                                      "uncommitted_reads": k}


def _str(prefix: str, values) -> pa.Array:
    return pc.binary_join_element_wise(pa.scalar(prefix), pa.array(values).cast(pa.string()), "")


def _join(*parts) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


@dataclass
class _Schedule:
    """The history before any plant: in each unit a producer's transaction writes SIZE
    messages, then its processor's transaction reads them and writes their outputs; one
    entry per write (its transaction, place in it, producer, sequence, partition, offset)."""
    units: int
    txn: np.ndarray     # txn j: even the producer's of unit j // 2, odd its processor's
    i: np.ndarray       # the write's place in its transaction
    is_x: np.ndarray    # written by a processor (an output)
    prod: np.ndarray
    useq: np.ndarray
    part: np.ndarray
    offset: np.ndarray  # STRIDE apart per partition, in schedule order: no cycle of its own
    t: np.ndarray       # transaction j runs at time j


def _schedule(n: int) -> _Schedule:
    units = n // (2 * SIZE)
    txns = 2 * units
    w = np.arange(txns * SIZE)            # one write each
    txn, i = w // SIZE, w % SIZE
    unit = txn // 2
    part = i % PARTS
    offset = np.empty(len(w), np.int64)
    for p in range(PARTS):
        idx = np.flatnonzero(part == p)
        offset[idx] = np.arange(len(idx)) * STRIDE
    return _Schedule(units=units, txn=txn, i=i, is_x=txn % 2 == 1, prod=unit % P, useq=(unit // P) * SIZE + i,
                     part=part, offset=offset, t=np.arange(txns, dtype=float))


@dataclass
class _Plants:
    """Where each kind of plant went (units three apart) and what it changed beside the
    schedule's offsets: the writes kept, one extra committed write per 'processed twice'."""
    g1c_wr: np.ndarray
    keep: np.ndarray
    extra: np.ndarray
    extra_off: np.ndarray
    extra_txn: np.ndarray


def _at(tx, ii):
    """The write index of transaction tx's message ii."""
    return tx * SIZE + ii


def _plant(s: _Schedule, k: int, rng) -> _Plants:
    """Every kind of plant made ``k`` times; ``s.offset`` changed in place."""
    offset = s.offset
    pick = rng.choice(np.arange(1, s.units - 2, 3), 5 * k, replace=False)
    g0, g1c, g1c_wr, twice, unproc = (pick[j * k:(j + 1) * k] for j in range(5))
    # G0: a processor's write on partition 1 and the next producer's trade offsets
    a, b = _at(2 * g0 + 1, 1), _at(2 * g0 + 2, 1)
    offset[a], offset[b] = offset[b].copy(), offset[a].copy()
    # G1c: a processor's outputs just before its inputs' first write on each partition
    for ii in range(SIZE):
        x = _at(2 * g1c + 1, ii)
        offset[x] = offset[_at(2 * g1c, ii % PARTS)] - STRIDE + 1 + ii // PARTS
    keep = np.ones(len(offset), bool)
    keep[_at(2 * unproc + 1, SIZE - 1)] = False  # an input's output never written
    # a second committed write of an output, by the next unit's processor, after its last on partition 0
    last0 = max(ii for ii in range(SIZE) if ii % PARTS == 0)
    extra = _at(2 * twice + 1, 0)
    return _Plants(g1c_wr=g1c_wr, keep=keep, extra=extra, extra_off=offset[_at(2 * twice + 3, last0)] + 1,
                   extra_txn=s.txn[extra] + 2)


def _produce(s: _Schedule, pl: _Plants) -> pa.Table:
    """The committed writes (the kept ones, then the extra ones) as produce records."""
    keep = pl.keep
    wi = np.concatenate([np.flatnonzero(keep), pl.extra])
    w_txn = np.concatenate([s.txn[keep], pl.extra_txn])
    w_off = np.concatenate([s.offset[keep], pl.extra_off])
    w_t = s.t[w_txn]
    ident_p = _str("p", s.prod[wi])
    x_out = s.is_x[wi]
    producer = pa.array(np.where(x_out, pc.binary_join_element_wise(ident_p, pa.scalar(".x"), "").to_numpy(
        zero_copy_only=False), ident_p.to_numpy(zero_copy_only=False)).astype(object), pa.string())
    msg = _join(producer, pa.scalar("-"), pa.array(s.useq[wi]).cast(pa.string()))
    inp = _join(ident_p, pa.scalar("-"), pa.array(s.useq[wi]).cast(pa.string()))
    names_t = np.where(s.is_x[wi], "x0-t", "p-t")
    txn_name = _join(pa.array(names_t.astype(object), pa.string()), pa.array(w_txn).cast(pa.string()))
    return pa.table({
        "msg_id": msg, "producer": producer, "seq": pa.array(s.useq[wi], pa.int64()),
        "outcome": pa.array(np.full(len(wi), "ok", object), pa.string()), "t_invoke": w_t, "t_complete": w_t + 0.2,
        "node": pa.nulls(len(wi), pa.string()), "error": pa.nulls(len(wi), pa.string()),
        "source": _str("t:", s.part[wi]), "offset": pa.array(w_off, pa.int64()), "txn": txn_name,
        "t_commit": w_t + 0.1,
        "from_msg": pa.array(np.where(x_out, inp.to_numpy(zero_copy_only=False), None).astype(object), pa.string())})


def generate(n: int, k: int, seed: int = 7) -> Path:
    """The history of ``n`` writes with every plant made ``k`` times, as the checker reads
    it (the Parquet copy, empty JSONL beside it); kept: a second call reads it again."""
    run = DATA / f"cycles-v1-{n}-{k}"
    plain = run / "history" / "plain"
    if (plain / "_done").exists():
        return run
    s = _schedule(n)
    plants = _plant(s, k, np.random.default_rng(seed))
    produce = _produce(s, plants)
    consume = _reads(produce, s.txn, s.is_x, s.i, s.t, plants.g1c_wr, np.sort(np.flatnonzero(~plants.keep)))
    for kind, tbl in (("produce", produce), ("consume", consume)):
        (plain / kind).mkdir(parents=True, exist_ok=True)
        pq.write_table(tbl, plain / kind / "part-0.parquet")
        (run / "history" / f"{kind}-0.jsonl").touch()  # the checker reads the copy
    (run / "run.json").write_text(json.dumps({"scenario": "bench-cycles", "ordering": "none", "history_version": 3}))
    (plain / "_done").touch()
    return run


def _reads(produce: pa.Table, txn, is_x, i, t, g1c_wr, dropped) -> pa.Table:
    """x0 reads each unit's inputs in its processor's transaction (subscribed), and in a wr
    plant one output of the neighbour processor each way; c0 reads every committed write,
    partition by partition, in offset order, after the last commit."""
    row = (lambda wix: wix - np.searchsorted(dropped, wix))  # a kept write's row in ``produce``
    xin = np.flatnonzero(~is_x)
    a_out, b_out = (2 * g1c_wr + 1) * SIZE, (2 * g1c_wr + 3) * SIZE  # each processor's first output
    r_x = np.concatenate([row(xin), row(b_out), row(a_out)])
    txn_x = np.concatenate([txn[xin] + 1, txn[a_out], txn[b_out]])
    t_x = np.concatenate([t[txn[xin] + 1] + 0.01 * i[xin], t[txn[a_out]] + 0.3, t[txn[b_out]] + 0.3])
    srcs = produce.column("source").to_numpy(zero_copy_only=False)
    offs = produce.column("offset").to_numpy()
    order = np.lexsort((offs, srcs.astype(str)))
    rows = np.concatenate([r_x, order])
    n_x, n = len(r_x), len(r_x) + len(order)
    taken = produce.take(pa.array(rows))
    end = float(t.max()) + 10
    x_side = np.arange(n) < n_x
    return pa.table({
        "msg_id": taken.column("msg_id"),
        "consumer": pa.array(np.where(x_side, "x0", "c0").astype(object), pa.string()),
        "t": np.concatenate([t_x, end + np.arange(len(order)) * 1e-3]),
        "redelivered": np.zeros(n, bool),
        "source": taken.column("source"), "offset": taken.column("offset"),
        "node": pa.nulls(n, pa.string()),
        "producer": taken.column("producer"), "seq": taken.column("seq"),
        "assigned": pa.array(np.where(x_side, False, None).astype(object), pa.bool_()),
        "txn": pa.concat_arrays([_str("x0-t", txn_x), pa.nulls(len(order), pa.string())])})


def check(run: Path, spark, mode: str) -> tuple[float, dict]:
    """``mode``: identity (no log, transaction or cycle query), nocycles, all."""
    return recorded.timed_check(run, spark, mode)


def measure(sizes: list[int], k: int) -> dict:
    from checkers.spark import session

    spark = session(None, "mqchaos-bench-cycles")
    rows = []
    for n in sizes:
        t0 = time.monotonic()
        run = generate(n, k)
        gen_s = round(time.monotonic() - t0, 1)
        copy = lay_out(run)
        first_s, _ = check(run, spark, "identity")  # pays for warming up
        base_s = min(first_s, check(run, spark, "identity")[0])
        no_s, _ = check(run, spark, "nocycles")
        all_s, res = check(run, spark, "all")
        want, found = expected(k), {c: res[c] for c in COLUMNS}
        rows.append({"messages": n, "planted_each": k, "generate_s": gen_s, "copy_s": copy.get("copy_s"),
                     "identity_s": base_s, "without_cycles_s": no_s, "with_cycles_s": all_s, "found": found,
                     "expected": want, "exact": found == want,
                     "transactions": int(res["transactions_committed"] or 0)})
        print(json.dumps(rows[-1]), flush=True)
    return {"bench": "cycle_bench", "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "driver_memory": os.environ.get("MQCHAOS_DRIVER_MEMORY", "4g"), "rows": rows}


def table(record: dict) -> list[str]:
    head = ["writes", "committed transactions", "identity check s", "with log + transaction checks s",
            "with the cycle search too s", "cycle search added s", "every planted figure exact"]
    lines = [f"Spark driver memory {record.get('driver_memory', '4g')}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in record["rows"]:
        lines.append(f"| {r['messages']:,} | {r['transactions']:,} | {r['identity_s']} | {r['without_cycles_s']} | "
                     f"{r['with_cycles_s']} | {round(r['with_cycles_s'] - r['without_cycles_s'], 1)} | "
                     f"{'yes' if r['exact'] else 'NO'} ({len(COLUMNS)} figures, {r['planted_each']} of each plant) |")
    return lines


def main(argv: list[str] | None = None) -> int:
    return recorded.main("python -m bench.cycle_bench", "bench-cycles", measure, table, argv)


if __name__ == "__main__":
    with entry_point():
        raise SystemExit(main())
