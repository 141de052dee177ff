"""Synthetic histories with planted anomalies, written as a real run directory: the one
synthetic-run writer the tests, the benchmarks (bench/main_bench.py) and the class-data-sharing
archive's exercise (checkers/spark/cds.py) share, so what they check is written as a run writes it."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from harness import store


@dataclass
class Planted:
    lost: set = field(default_factory=set)
    duplicated: set = field(default_factory=set)
    unexpected: set = field(default_factory=set)
    recovered: set = field(default_factory=set)
    reordered: set = field(default_factory=set)
    malformed: int = 0
    crashed: set = field(default_factory=set)   # invoked, never completed (the run died)
    late: set = field(default_factory=set)      # timed out, then confirmed late


def build(rng: random.Random, *, producers=2, per_producer=50, consumers=1, p_fail=0.05, p_info=0.05,
          lost=0, duplicated=0, unexpected=0, reordered=0, malformed=0, outage=None,
          kafka=False, write_ahead=False, crashed=0, late=0, late_lost=0):
    """Return (produce records, consume records, raw malformed lines, Planted).

    The clean history delivers every confirmed message once, in order;
    anomalies are then planted on distinct messages so their counts are known.
    `outage=(a, z)`: every attempt completing in [a, z] fails.
    History version 2 (`write_ahead`): every attempt is preceded by its invoke record;
    `crashed` delivered messages keep only their invoke (the run died before their
    outcome was known); `late` confirmed messages were first written as timed out and
    confirmed later, `late_lost` of them are then lost.
    """
    # The steps draw from ``rng`` in this order; a seed gives the history it always gave.
    produce = _attempts(rng, producers, per_producer, p_fail, p_info, outage)
    planted = Planted()
    oks = [r for r in produce if r["outcome"] == "ok"]
    rng.shuffle(oks)
    lost_ids = {r["msg_id"] for r in oks[:lost]}
    late_recs = oks[lost:lost + late]
    planted.late = {r["msg_id"] for r in late_recs}
    lost_ids |= {r["msg_id"] for r in late_recs[:late_lost]}
    planted.lost = lost_ids
    # Some unconfirmed messages were written anyway.
    planted.recovered = {r["msg_id"] for r in [r for r in produce if r["outcome"] != "ok"][: max(1, len(produce) // 50)]}
    consume = _deliveries(produce, lost_ids, planted.recovered, consumers, kafka)
    _plant_deliveries(rng, consume, planted, duplicated, unexpected, reordered)
    if write_ahead:
        planted.crashed = {r["msg_id"] for r in oks[lost + late:lost + late + crashed]}
        produce = _written_ahead(produce, planted)
    raw = ['{"msg_id": "trunc', "not json at all", '{"msg_id": "x", "producer": "p0", "seq": "seven"}',
           '{"msg_id": "y", "producer": "p0", "seq": 1, "outcome": "maybe", "t_invoke": 1, "t_complete": 2}']
    planted.malformed = malformed
    return produce, consume, [raw[i % len(raw)] for i in range(malformed)], planted


def _attempts(rng, producers, per_producer, p_fail, p_info, outage) -> list[dict]:
    """Every producer's attempts, one completion each (history version 1)."""
    produce = []
    for p in range(producers):
        name = f"p{p}"
        for seq in range(per_producer):
            t_inv = round(seq * 0.1 + p * 0.01, 6)
            t_cmp = round(t_inv + 0.05, 6)
            x = rng.random()
            outcome = "fail" if x < p_fail else "info" if x < p_fail + p_info else "ok"
            if outage and outage[0] <= t_cmp <= outage[1]:
                outcome = rng.choice(["fail", "info"])
            produce.append({"msg_id": f"{name}-{seq}", "producer": name, "seq": seq, "outcome": outcome,
                            "t_invoke": t_inv, "t_complete": t_cmp, "node": f"n{p % 3 + 1}",
                            "error": None})
    return produce


def _deliveries(produce, lost_ids, recovered, consumers, kafka) -> list[dict]:
    """The clean deliveries: every confirmed message not lost, and the recovered ones, once."""
    consume, offsets = [], {}
    for r in sorted(produce, key=lambda r: r["t_complete"]):
        if (r["outcome"] == "ok" and r["msg_id"] not in lost_ids) or r["msg_id"] in recovered:
            c = int(r["producer"][1:]) % consumers
            src = f"t:{c}" if kafka else "q"
            off = offsets.get(src, 0)
            offsets[src] = off + 1
            consume.append({"msg_id": r["msg_id"], "consumer": f"c{c}", "t": round(r["t_complete"] + 0.5, 6),
                            "redelivered": False, "source": src, "offset": off if kafka else None,
                            "node": "n1", "producer": r["producer"], "seq": r["seq"]})
    return consume


def _plant_deliveries(rng, consume, planted, duplicated, unexpected, reordered) -> None:
    """Duplicates, deliveries of messages never sent and reorderings, planted in ``consume``."""
    delivered = [c for c in consume if c["msg_id"] not in planted.recovered]
    for c in rng.sample(delivered, min(duplicated, len(delivered))):
        planted.duplicated.add(c["msg_id"])
        consume.append(dict(c, t=round(c["t"] + 100.0, 6), redelivered=True,
                            offset=None if c["offset"] is None else c["offset"] + 10_000))
    for i in range(unexpected):
        mid = f"ghost-{i}"
        planted.unexpected.add(mid)
        consume.append({"msg_id": mid, "consumer": "c0", "t": 200.0 + i, "redelivered": False,
                        "source": "q", "offset": None, "node": "n1", "producer": None, "seq": None})
    # Reorder: a later message of a producer arrives before an earlier one.
    in_order = sorted((c for c in consume if not c["redelivered"] and c["msg_id"] not in planted.recovered
                       and c["offset"] is None), key=lambda c: c["t"])
    by_prod = {}
    for c in in_order:
        by_prod.setdefault((c["producer"], c["consumer"]), []).append(c)
    for lane in list(by_prod.values())[:reordered]:
        if len(lane) >= 3:
            a, b = lane[0], lane[1]
            a["t"], b["t"] = b["t"], a["t"]
            planted.reordered.add(a["msg_id"])


def _written_ahead(produce, planted) -> list[dict]:
    """History version 2: each attempt's invoke record before its completion; a crashed
    message keeps only its invoke, a late one a timeout and then its confirmation."""
    out = []
    for r in produce:
        out.append({"msg_id": r["msg_id"], "producer": r["producer"], "seq": r["seq"], "outcome": "invoke",
                    "t_invoke": r["t_invoke"], "node": r["node"]})
        if r["msg_id"] in planted.crashed:
            continue
        if r["msg_id"] in planted.late:
            out.append(dict(r, outcome="info", t_complete=round(r["t_invoke"] + 10.0, 6), error="confirm timeout"))
            out.append(dict(r, t_complete=round(r["t_invoke"] + 12.5, 6)))
            continue
        out.append(r)
    return out


LOG_PLANTS = ("inconsistent_offsets", "duplicate_offsets", "lost_prefix", "lost_middle", "lost_postfix",
              "poll_skips", "nonmonotonic_polls", "nonmonotonic_polls_subscribe", "nonmonotonic_sends")


def build_log(rng: random.Random, *, producers=2, per_producer=60, partitions=2, p_fail=0.0,
              **plant: int) -> tuple[list[dict], list[dict], dict[str, int]]:
    """A Kafka-like history with positions (history version 3): every acknowledged write is
    appended to partition ``seq % partitions`` of topic ``t`` at the next offset, and reader
    c0 (assigning the partitions) reads each partition in offset order. Then ``plant``
    (names in LOG_PLANTS -> how many) plants each log anomaly that many times, on distinct
    writes and positions; returns (produce, consume, planted counts). A plant may bring
    others with it (a never-read write makes its reader skip its position): the tests
    compare those with the independent reference, the planted kind with its count."""
    unknown = set(plant) - set(LOG_PLANTS)
    if unknown:
        raise ValueError(f"unknown plants {sorted(unknown)}")
    produce, ends = [], {}
    for seq in range(per_producer):
        for p in range(producers):
            t = round(seq * 0.1 + p * 0.01, 6)
            r = {"msg_id": f"p{p}-{seq}", "producer": f"p{p}", "seq": seq, "t_invoke": t, "t_complete": t + 0.05,
                 "node": None, "error": None, "outcome": "fail" if rng.random() < p_fail else "ok"}
            if r["outcome"] == "ok":
                src = f"t:{seq % partitions}"
                r.update(source=src, offset=ends.get(src, 0))
                ends[src] = r["offset"] + 1
            produce.append(r)
    _swap_sends(rng, produce, plant.get("nonmonotonic_sends", 0))
    # c0 reads each partition in offset order (its times by position, whatever the writes' order)
    consume = [{"msg_id": r["msg_id"], "consumer": "c0", "t": round(100 + r["offset"] * 0.05 + int(r["source"][2:]) * 1e-3, 6),
                "redelivered": False, "source": r["source"], "offset": r["offset"], "node": None,
                "producer": r["producer"], "seq": r["seq"]}
               for r in sorted((r for r in produce if "offset" in r), key=lambda r: (r["source"], r["offset"]))]
    _plant_reads(rng, consume, ends, plant)
    return produce, consume, {k: plant.get(k, 0) for k in LOG_PLANTS}


def _swap_sends(rng, produce, n) -> None:
    """n times, two successive writes of one producer to one partition trade offsets."""
    lanes: dict = {}
    for r in produce:
        if "offset" in r:
            lanes.setdefault((r["producer"], r["source"]), []).append(r)
    pairs = [(a, b) for lane in lanes.values() for a, b in zip(lane[::2], lane[1::2])]
    for a, b in rng.sample(pairs, n):
        a["offset"], b["offset"] = b["offset"], a["offset"]


def _plant_reads(rng, consume, ends, plant) -> None:
    """The read-side plants, each on reads of partition t:0 no other plant touches."""
    lane = sorted((c for c in consume if c["source"] == "t:0"), key=lambda c: c["offset"])
    n = {k: plant.get(k, 0) for k in LOG_PLANTS}
    drop = set(c["msg_id"] for c in lane[:n["lost_prefix"]])               # never read: below the first read
    drop |= set(c["msg_id"] for c in lane[len(lane) - n["lost_postfix"]:]) if n["lost_postfix"] else set()
    inner = lane[n["lost_prefix"] + 2:len(lane) - n["lost_postfix"] - 2]
    # interior reads, three apart so that no two plants touch neighbours
    spots = inner[::3]
    rng.shuffle(spots)
    take = (lambda k: [spots.pop() for _ in range(n[k])])
    drop |= {c["msg_id"] for c in take("lost_middle")}
    for i, c in enumerate(take("inconsistent_offsets")):
        c["msg_id"], c["producer"], c["seq"] = f"ghost-{i}", None, None  # another message at a written position
    for i, c in enumerate(take("poll_skips")):  # read by a reader of its own instead: c0 steps over it
        c["consumer"] = f"other{i}"
    for kind, assigned in (("nonmonotonic_polls", True), ("nonmonotonic_polls_subscribe", False)):
        for c in take(kind):  # read again right after: one step back (to the same position)
            consume.append(dict(c, t=round(c["t"] + 1e-5, 6), redelivered=True,
                                **({} if assigned else {"assigned": False})))
    last = max(c["t"] for c in consume)
    # appended again at the end of another partition (t:0's end is the postfix plants'), read there
    end = "t:1" if "t:1" in ends else "t:0"
    for i, c in enumerate(take("duplicate_offsets")):
        consume.append(dict(c, t=round(last + 1 + i, 6), source=end, offset=ends[end] + i, redelivered=False))
    consume[:] = [c for c in consume if c["msg_id"] not in drop]


TXN_PLANTS = ("aborted_reads", "uncommitted_reads", "torn_transactions", "lost_transactions")


def build_txn(rng: random.Random, *, producers=2, transactions=40, size=4, abort_every=4, unknown=0,
              **plant: int) -> tuple[list[dict], list[dict], dict[str, int]]:
    """A transactional history (harness/brokers/kafka/txn.py's records): each producer's
    transactions of ``size`` messages, every ``abort_every``-th aborted, ``unknown`` of the
    committed ones left with an unknown commit; a read_committed reader c0 reads every
    committed message once, after its commit. ``plant`` (TXN_PLANTS -> how many) then plants,
    on distinct transactions: reads of aborted messages, reads before the commit was asked
    for, committed transactions read in part, committed transactions never read."""
    unknown_plant = set(plant) - set(TXN_PLANTS)
    if unknown_plant:
        raise ValueError(f"unknown plants {sorted(unknown_plant)}")
    produce, consume, by_outcome = [], [], {"ok": [], "fail": [], "info": []}
    for p in range(producers):
        seq = 0
        for n in range(1, transactions + 1):
            txn, t0 = f"p{p}-t{n}", round(n * 1.0 + p * 0.1, 6)
            outcome = "fail" if abort_every and n % abort_every == 0 else "ok"
            ids = []
            for i in range(size):
                m = f"p{p}-{seq}"
                ids.append(m)
                produce.append({"msg_id": m, "producer": f"p{p}", "seq": seq, "outcome": "invoke",
                                "t_invoke": t0 + i * 0.01, "node": None, "txn": txn})
                seq += 1
            by_outcome[outcome].append((txn, ids, t0))
    rng.shuffle(by_outcome["ok"])
    for _ in range(unknown):
        by_outcome["info"].append(by_outcome["ok"].pop())
    done = {}
    for outcome, txns in by_outcome.items():
        for txn, ids, t0 in txns:
            for i, m in enumerate(ids):
                done[m] = {"msg_id": m, "producer": m.split("-")[0], "seq": int(m.split("-")[1]), "outcome": outcome,
                           "t_invoke": t0 + i * 0.01, "t_complete": t0 + 0.3, "node": None,
                           "error": None if outcome == "ok" else "aborted on purpose", "txn": txn,
                           "t_commit": t0 + 0.1, **({"aborted": True} if outcome == "fail" else {})}
                if outcome == "ok":
                    consume.append({"msg_id": m, "consumer": "c0", "t": t0 + 0.5 + i * 0.001, "redelivered": False,
                                    "source": "t:0", "offset": None, "node": None, "producer": m.split("-")[0],
                                    "seq": int(m.split("-")[1])})
    produce += done.values()
    _plant_txn(rng, consume, by_outcome, plant)
    return produce, consume, {k: plant.get(k, 0) for k in TXN_PLANTS}


def _plant_txn(rng, consume, by_outcome, plant) -> None:
    committed = list(by_outcome["ok"])
    rng.shuffle(committed)
    take = (lambda k: [committed.pop() for _ in range(plant.get(k, 0))])
    drop = set()
    for _, ids, _ in take("torn_transactions"):
        drop |= set(ids[1:])  # the first read, the rest never
    for _, ids, _ in take("lost_transactions"):
        drop |= set(ids)
    by_id = {c["msg_id"]: c for c in consume}
    for _, ids, t0 in take("uncommitted_reads"):
        by_id[ids[0]]["t"] = t0 + 0.05  # before its commit was asked for (t0 + 0.1)
    for txn, ids, t0 in rng.sample(by_outcome["fail"], plant.get("aborted_reads", 0)):
        consume.append({"msg_id": ids[0], "consumer": "c0", "t": t0 + 0.5, "redelivered": False, "source": "t:0",
                        "offset": None, "node": None, "producer": ids[0].split("-")[0], "seq": int(ids[0].split("-")[1])})
    consume[:] = [c for c in consume if c["msg_id"] not in drop]


def write_run(run_dir: Path, produce, consume, *, malformed_produce=(), malformed_consume=(),
              files=1, meta=None, truncate_last=False) -> Path:
    """Write records as history files (split over `files` files per kind)."""
    hist = Path(run_dir) / store.HISTORY
    hist.mkdir(parents=True, exist_ok=True)
    (Path(run_dir) / store.RUN_JSON).write_text(json.dumps(meta or {"scenario": "synthetic"}))
    for kind, recs, bad in (("produce", produce, malformed_produce), ("consume", consume, malformed_consume)):
        lines = [json.dumps(r, ensure_ascii=False) for r in recs] + list(bad)
        for i in range(files):
            part = lines[i::files]
            text = "".join(line + "\n" for line in part)
            if truncate_last and i == files - 1 and part:
                text = text[:-len(part[-1]) // 2 - 1]  # a crash mid-line: no newline either
            (hist / f"{kind}-{i}.jsonl").write_text(text, encoding="utf-8")
    return Path(run_dir)


CTP_PLANTS = ("cycles_g0", "cycles_g1c", "cycles_g1c_wr", "processed_twice", "unprocessed")
_STRIDE = 10  # offsets between one transaction's writes and the next's: room to plant


def build_ctp(rng: random.Random, *, producers=2, units=30, size=4, partitions=3, aborted=3,
              **plant: int) -> tuple[list[dict], list[dict], dict[str, int]]:
    """A consume-transform-produce history (harness/brokers/kafka/txn.py's records). One
    transaction at a time: in each unit, producer p's transaction writes ``size`` messages
    (message i to partition i % ``partitions``), then processor x0's transaction reads them
    (subscribed) and writes their outputs (``p.x-seq``, ``from_msg``) the same way; offsets
    step by _STRIDE, so the graph has no cycle. ``aborted`` further transactions (producer
    pa) are aborted and never read. A reader c0 reads every committed write, partition by
    partition, in offset order. ``plant`` (CTP_PLANTS -> how many), on units three apart:
      cycles_g0        a processor's transaction and the next producer's: their writes on
                       partition 1 swap offsets (a ww cycle of two)
      cycles_g1c       a processor's outputs moved just before its inputs' first write on
                       each partition (ww out -> in, wr in -> out); no G0
      cycles_g1c_wr    two successive processor transactions each read one output of the
                       other (also one G1c component)
      processed_twice  one output written again, committed, by the next unit's processor
                       (also a duplicate_offsets and a duplicated message)
      unprocessed      one input's output never written"""
    unknown_plant = set(plant) - set(CTP_PLANTS)
    if unknown_plant:
        raise ValueError(f"unknown plants {sorted(unknown_plant)}")
    nxt = {j: 0 for j in range(partitions)}
    txns: list[dict] = []  # {name, writes: [[msg, producer, seq, part, off, from]], reads: [(msg, part, off)], t}
    seqs = {f"p{p}": 0 for p in range(producers)}
    for u in range(units):
        for p in range(producers):
            t0 = float(len(txns))
            w = []
            for i in range(size):
                s = seqs[f"p{p}"]
                seqs[f"p{p}"] += 1
                w.append([f"p{p}-{s}", f"p{p}", s, i % partitions, None, None])
            txns.append({"name": f"p{p}-t{u}", "writes": w, "reads": [], "t": t0, "unit": (u, p), "kind": "p"})
            ins = w
            txns.append({"name": f"x0-t{u * producers + p}", "t": t0 + 1 - 0.5, "unit": (u, p), "kind": "x",
                         "reads": [m for m, *_ in ins],
                         "writes": [[f"p{p}.x-{s}", f"p{p}.x", s, i % partitions, None, m]
                                    for i, (m, _, s, *_r) in enumerate(ins)]})
    for t in txns:
        for wr in t["writes"]:
            wr[4] = nxt[wr[3]]
            nxt[wr[3]] += _STRIDE
    _plant_ctp(rng, txns, producers, plant)
    produce, consume = _ctp_records(txns, aborted, size)
    return produce, consume, {k: plant.get(k, 0) for k in CTP_PLANTS}


def _plant_ctp(rng, txns, producers, plant) -> None:
    by_unit = {(t["unit"], t["kind"]): t for t in txns}
    order = sorted({t["unit"] for t in txns})
    slots = list(range(1, len(order) - 2, 3))
    rng.shuffle(slots)
    take = (lambda k: [order[slots.pop()] for _ in range(plant.get(k, 0))])
    following = {order[i]: order[i + 1] for i in range(len(order) - 1)}
    for u in take("cycles_g0"):
        x, p = by_unit[(u, "x")], by_unit[(following[u], "p")]
        a = next(w for w in x["writes"] if w[3] == 1)
        b = next(w for w in p["writes"] if w[3] == 1)
        a[4], b[4] = b[4], a[4]
    for u in take("cycles_g1c"):
        x, p = by_unit[(u, "x")], by_unit[(u, "p")]
        first = {}
        for w in p["writes"]:
            first.setdefault(w[3], w[4])
        used: dict[int, int] = {}
        for w in x["writes"]:
            w[4] = first[w[3]] - _STRIDE + 1 + used.get(w[3], 0)
            used[w[3]] = used.get(w[3], 0) + 1
    for u in take("cycles_g1c_wr"):
        x1, x2 = by_unit[(u, "x")], by_unit[(following[u], "x")]
        x1["reads"].append(x2["writes"][0][0])
        x2["reads"].append(x1["writes"][0][0])
    for u in take("processed_twice"):
        x, x2 = by_unit[(u, "x")], by_unit[(following[u], "x")]
        again = list(x["writes"][0])
        j = again[3]
        again[4] = max(w[4] for w in x2["writes"] if w[3] == j) + 1
        x2["writes"].append(again)
    for u in take("unprocessed"):
        x = by_unit[(u, "x")]
        x["writes"].pop()


def _ctp_records(txns, aborted, size) -> tuple[list[dict], list[dict]]:
    produce, consume = [], []
    at: dict[str, tuple] = {}  # a message's (first) position, once every plant has moved what it moves
    for t in txns:
        for w in t["writes"]:
            at.setdefault(w[0], (w[3], w[4]))
    for t in txns:
        for m, prod, s, part, off, frm in t["writes"]:
            extra = {"from_msg": frm} if frm else {}
            produce.append({"msg_id": m, "producer": prod, "seq": s, "outcome": "invoke", "t_invoke": t["t"],
                            "node": None, "txn": t["name"], **extra})
            produce.append({"msg_id": m, "producer": prod, "seq": s, "outcome": "ok", "t_invoke": t["t"],
                            "t_complete": t["t"] + 0.2, "node": None, "error": None, "txn": t["name"],
                            "t_commit": t["t"] + 0.1, "source": f"t:{part}", "offset": off, **extra})
        for i, m in enumerate(t["reads"]):
            part, off = at[m]
            consume.append({"msg_id": m, "consumer": "x0", "t": t["t"] + 0.01 * i, "redelivered": False,
                            "source": f"t:{part}", "offset": off, "node": None, "producer": m.rsplit("-", 1)[0],
                            "seq": int(m.rsplit("-", 1)[1]), "assigned": False, "txn": t["name"]})
    for n in range(aborted):
        for i in range(size):
            m = f"pa-{n * size + i}"
            for outcome in ("invoke", "fail"):
                produce.append({"msg_id": m, "producer": "pa", "seq": n * size + i, "outcome": outcome,
                                "t_invoke": 0.5 + n, "node": None, "txn": f"pa-t{n}",
                                **({} if outcome == "invoke" else {"t_complete": 0.7 + n, "error": "aborted on purpose",
                                                                   "t_commit": 0.6 + n, "aborted": True})})
    end = float(len(txns)) + 10
    writes = sorted((r["source"], r["offset"], r["msg_id"]) for r in produce if r["outcome"] == "ok")
    for k, (src, off, m) in enumerate(writes):
        consume.append({"msg_id": m, "consumer": "c0", "t": round(end + k * 1e-3, 6), "redelivered": False,
                        "source": src, "offset": off, "node": None, "producer": m.rsplit("-", 1)[0],
                        "seq": int(m.rsplit("-", 1)[1])})
    return produce, consume


def replicas_of(produce, nodes=("kafka1", "kafka2", "kafka3"), *, lose=None, short=None) -> dict[str, list[dict]]:
    """Each node's log as the plug-in reads it from its files (history/replica-<node>.jsonl):
    every acknowledged positioned write, at its position. ``lose`` {node: k}: that node's log
    lacks k writes below its end (lost on that node: the first partition's k after its first); ``short``
    {node: k}: it lacks its k last writes of each partition (behind, not lost)."""
    writes = sorted((r for r in produce if r["outcome"] == "ok" and r.get("source") is not None
                     and r.get("offset") is not None), key=lambda r: (r["source"], r["offset"]))
    by_src: dict[str, list[dict]] = {}
    for r in writes:
        by_src.setdefault(r["source"], []).append(r)
    out = {}
    for node in nodes:
        recs = []
        for i, (src, rs) in enumerate(sorted(by_src.items())):
            keep = rs[:len(rs) - (short or {}).get(node, 0)]
            k = (lose or {}).get(node, 0) if i == 0 else 0
            keep = keep[:1] + keep[1 + k:]  # a gap after the first: the log's end stays above it
            recs += [{"msg_id": r["msg_id"], "node": node, "source": src, "offset": r["offset"],
                      "producer": r["producer"], "seq": r["seq"]} for r in keep]
        out[node] = recs
    return out


def write_replicas(run_dir: Path, replicas: dict[str, list[dict]]) -> None:
    hist = Path(run_dir) / store.HISTORY
    for node, recs in replicas.items():
        (hist / f"replica-{node}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
