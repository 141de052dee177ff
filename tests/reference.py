"""An independent, plain-Python reading of the checker's definitions.

Used only by the tests, to compare with the Spark checker on the same files.
It parses each JSONL line itself and works message by message.
"""
from __future__ import annotations

import bisect
import json
from collections import defaultdict
from pathlib import Path

RANK = {"fail": 1, "info": 2, "ok": 3}


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _str(v):
    # Spark's JSON reader takes any value of a string field as its JSON text (docs/history.md)
    return v is not None


PRODUCE_TYPES = {"msg_id": _str, "producer": _str, "seq": _int, "outcome": _str,
                 "t_invoke": _num, "t_complete": _num}
INVOKE = "invoke"  # written before the send (history version 2): no t_complete
CONSUME_TYPES = {"msg_id": _str, "consumer": _str, "t": _num, "redelivered": lambda v: isinstance(v, bool)}
OPTIONAL = {"source": _str, "offset": _int, "node": _str, "producer": _str, "seq": _int, "error": _str}
# Flags each kind of record may carry (booleans; any other value makes the line malformed).
FLAGS = {"produce": ("poison",), "consume": ("rejected", "dead_lettered", "gave_up", "assigned")}


def _read(run_dir: Path, kind: str):
    types = PRODUCE_TYPES if kind == "produce" else CONSUME_TYPES
    good, bad = [], 0
    for f in sorted((run_dir / "history").glob(f"{kind}*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                bad += 1
                continue
            need = types
            if kind == "produce" and isinstance(rec, dict) and rec.get("outcome") == INVOKE:
                need = {k: v for k, v in types.items() if k != "t_complete"}
            ok = isinstance(rec, dict) and all(
                rec.get(k) is not None and check(rec[k]) for k, check in need.items())
            ok = ok and all(rec.get(k) is None or check(rec[k]) for k, check in types.items() if k not in need)
            ok = ok and all(rec.get(k) is None or check(rec[k]) for k, check in OPTIONAL.items()
                            if k not in types)
            ok = ok and all(rec.get(k) is None or isinstance(rec[k], bool) for k in FLAGS[kind])
            if ok:  # string fields holding another JSON value: its text, as Spark reads it
                for k in ("msg_id", "producer", "consumer", "outcome", "source", "node", "error"):
                    if rec.get(k) is not None and not isinstance(rec[k], str):
                        rec[k] = json.dumps(rec[k], separators=(",", ":"))
            if ok and kind == "produce":
                ok = rec["outcome"] in RANK or rec["outcome"] == INVOKE
            if ok:
                good.append(rec)
            else:
                bad += 1
    return good, bad


def check(run_dir, ordering="none", threshold=1.0) -> dict:
    run_dir = Path(run_dir)
    records, bad_p = _read(run_dir, "produce")
    consume, bad_c = _read(run_dir, "consume")
    invoked = {r["msg_id"] for r in records if r["outcome"] == INVOKE}
    produce = [r for r in records if r["outcome"] != INVOKE]  # the completions

    best, producers, writer, ok_t = _outcomes(records, produce, invoked)
    poison = {r["msg_id"] for r in records if r.get("poison") is True}
    rejections = sum(1 for r in consume if r.get("rejected") is True)
    all_lines = consume  # a reader's gaps count every line it received, rejected ones too
    consume = [r for r in consume if r.get("rejected") is not True]  # handed back: no delivery
    dead = {r["msg_id"] for r in consume if r.get("dead_lettered") is True}
    gave_up = {r["msg_id"] for r in consume if r.get("gave_up") is True}
    dlv: dict[str, int] = defaultdict(int)
    for r in consume:
        dlv[r["msg_id"]] += 1

    ids = set(best) | set(dlv)
    kinds = {
        "lost": sorted(m for m in best if best[m] == 3 and dlv[m] == 0),
        "unexpected": sorted(m for m in dlv if m not in best),
        "duplicated": sorted(m for m in ids if dlv[m] > 1),
        "recovered": sorted(m for m in best if best[m] in (1, 2) and dlv[m] > 0),
        "recovered_fail": sorted(m for m in best if best[m] == 1 and dlv[m] > 0),
        "id_conflicts": sorted(m for m in producers if len(producers[m]) > 1),
    }
    out = {k: len(v) for k, v in kinds.items()}
    out.update(poison=len(poison), lost_poison=sum(1 for m in kinds["lost"] if m in poison),
               lost_other=sum(1 for m in kinds["lost"] if m not in poison), dead_lettered=len(dead),
               gave_up=len(gave_up), rejections=rejections)
    out.update(_lost_detail(kinds["lost"], produce, ok_t, dlv))
    out["samples"] = {k: v[:20] for k, v in kinds.items()}
    out.update(
        attempted=len(best),
        ok=sum(1 for v in best.values() if v == 3),
        info=sum(1 for v in best.values() if v == 2),
        fail=sum(1 for v in best.values() if v == 1),
        produce_records=len(produce),
        delivered=sum(1 for m in ids if dlv[m] > 0),
        deliveries=len(consume),
        duplicate_deliveries=sum(n - 1 for n in dlv.values() if n > 1),
        malformed_lines=bad_p + bad_c,
    )
    viol = _ordering(consume, writer, ordering)
    out["ordering_violations"] = len(viol)
    out["samples"]["ordering"] = [m for _, m in sorted(viol)[:20]]
    out["unavailable"] = _unavailable(produce, threshold)
    by_producer = {p: _unavailable([r for r in produce if r["producer"] == p], threshold)
                   for p in sorted({r["producer"] for r in produce})}
    out["unavailable_by_producer"] = {p: iv for p, iv in by_producer.items() if iv}
    out["read_gaps"] = _read_gaps(all_lines, threshold)
    out.update(log_figures(produce, consume))
    out.update(txn_figures(records, consume))
    out.update(cycle_figures(records, consume))
    replica = [json.loads(line) for f in sorted((run_dir / "history").glob("replica*.jsonl"))
               for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    out.update(replica_figures(produce, replica))
    return out


def replica_figures(produce, replica) -> dict:
    """lost_on_node: per node and partition, the acknowledged writes at or below the node's
    highest offset there that its log does not hold at their position."""
    if not replica:
        return {"replica_records": None, "lost_on_node": None}
    hi: dict[tuple, int] = {}
    have = set()
    for r in replica:
        key = (r["node"], r["source"])
        hi[key] = max(hi.get(key, r["offset"]), r["offset"])
        have.add((r["node"], r["source"], r["offset"], r["msg_id"]))
    writes = [r for r in produce if r["outcome"] == "ok" and r.get("source") is not None
              and r.get("offset") is not None]
    lost = sum(1 for (node, src), end in hi.items() for w in writes
               if w["source"] == src and w["offset"] <= end and (node, src, w["offset"], w["msg_id"]) not in have)
    return {"replica_records": len(replica), "lost_on_node": lost}


def txn_figures(records, consume) -> dict:
    """checkers.txn's figures, transaction by transaction: ``records`` every produce line
    (invokes too), ``consume`` the deliveries."""
    txn_of, best, aborted, t_commit = {}, {}, set(), {}
    for r in records:
        if r.get("txn") is None:
            continue
        txn_of[r["msg_id"]] = r["txn"]
        if r["outcome"] != INVOKE:
            best[r["msg_id"]] = max(best.get(r["msg_id"], 0), RANK[r["outcome"]])
            if r.get("aborted") is True:
                aborted.add(r["msg_id"])
            if r.get("t_commit") is not None:
                t_commit[r["msg_id"]] = max(t_commit.get(r["msg_id"], r["t_commit"]), r["t_commit"])
    if not txn_of:
        return {k: None for k in ("transactions_committed", "transactions_aborted", "transactions_unknown",
                                  "aborted_reads", "uncommitted_reads", "torn_transactions", "lost_transactions")}
    first: dict[str, float] = {}
    for r in consume:
        first[r["msg_id"]] = min(first.get(r["msg_id"], r["t"]), r["t"])
    members: dict[str, list] = defaultdict(list)
    for m, t in txn_of.items():
        members[t].append(m)
    out = dict.fromkeys(("transactions_committed", "transactions_aborted", "transactions_unknown",
                         "torn_transactions", "lost_transactions"), 0)
    for ms in members.values():
        ranks = [best.get(m, RANK["info"]) for m in ms]
        seen = sum(1 for m in ms if m in first)
        if min(ranks) == RANK["ok"]:
            out["transactions_committed"] += 1
            out["torn_transactions"] += 0 < seen < len(ms)
            out["lost_transactions"] += seen == 0
        elif max(ranks) == RANK["fail"]:
            out["transactions_aborted"] += 1
        else:
            out["transactions_unknown"] += 1
    out["aborted_reads"] = sum(1 for m in txn_of if best.get(m) == RANK["fail"] and m in aborted and m in first)
    out["uncommitted_reads"] = sum(1 for m in txn_of if m in first and m in t_commit and first[m] < t_commit[m])
    return out


def log_figures(produce, consume) -> dict:
    """checkers.logs's figures, message by message and reader by reader: ``produce`` the
    completions, ``consume`` the deliveries (rejected lines left out)."""
    writes = [r for r in produce if r["outcome"] == "ok" and r.get("source") is not None
              and r.get("offset") is not None]
    reads = [r for r in consume if r.get("source") is not None and r.get("offset") is not None]
    at: dict[tuple, set] = defaultdict(set)
    where: dict[str, set] = defaultdict(set)
    for r in writes + reads:
        at[(r["source"], r["offset"])].add(r["msg_id"])
        where[r["msg_id"]].add((r["source"], r["offset"]))
    delivered = {r["msg_id"] for r in reads}  # a log's reads: "never read" is never read at a position
    span: dict[str, list] = {}
    for r in reads:
        lo, hi = span.get(r["source"], (r["offset"], r["offset"]))
        span[r["source"]] = (min(lo, r["offset"]), max(hi, r["offset"]))
    written: dict[str, tuple] = {}  # a message's write position: its highest offset
    for r in writes:
        if r["msg_id"] not in written or r["offset"] > written[r["msg_id"]][1]:
            written[r["msg_id"]] = (r["source"], r["offset"])
    split = {"lost_prefix": [], "lost_middle": [], "lost_postfix": []}
    for m, (src, off) in written.items():
        if m in delivered:
            continue
        lo, hi = span.get(src, (None, None))
        part = ("lost_postfix" if hi is None or off >= hi else "lost_prefix" if off < lo else "lost_middle")
        split[part].append(m)
    out = {"write_offsets": len(written), "read_offsets": len(reads),
           "inconsistent_offsets": sum(1 for ids in at.values() if len(ids) > 1),
           "duplicate_offsets": sum(1 for pos in where.values() if len(pos) > 1),
           **{k: len(v) for k, v in split.items()}}
    out["lost_writes"] = out["lost_prefix"] + out["lost_middle"]
    out["unseen"] = out["lost_postfix"]
    if not written:
        out.update({k: None for k in ("lost_writes", "unseen", "lost_prefix", "lost_middle", "lost_postfix")})
    out.update(_polls(reads, at), nonmonotonic_sends=_sends([r for r in writes if r.get("from_msg") is None]))
    return out


def _polls(reads, at) -> dict:
    """Each reader's successive reads of one source by time: back (assigned or subscribed),
    or over a position some write or read holds."""
    known: dict[str, list] = defaultdict(list)
    for src, off in sorted(at):
        known[src].append(off)
    lanes: dict[tuple, list] = defaultdict(list)
    for r in reads:
        lanes[(r["consumer"], r["source"])].append(r)
    out = {"nonmonotonic_polls": 0, "nonmonotonic_polls_subscribe": 0, "poll_skips": 0, "poll_skips_subscribe": 0}
    for (_, src), lane in lanes.items():
        lane.sort(key=lambda r: (r["t"], r["offset"]))
        for a, b in zip(lane, lane[1:]):
            if b["offset"] <= a["offset"]:
                out["nonmonotonic_polls" if b.get("assigned") is not False else "nonmonotonic_polls_subscribe"] += 1
            between = bisect.bisect_left(known[src], b["offset"]) - bisect.bisect_right(known[src], a["offset"])
            if b["offset"] > a["offset"] and between > 0:
                out["poll_skips" if b.get("assigned") is not False else "poll_skips_subscribe"] += 1
    return out


def _sends(writes) -> int:
    lanes: dict[tuple, list] = defaultdict(list)
    for r in writes:
        lanes[(r["producer"], r["source"])].append(r)
    n = 0
    for lane in lanes.values():
        lane.sort(key=lambda r: r["seq"])
        n += sum(1 for a, b in zip(lane, lane[1:]) if b["offset"] < a["offset"])
    return n


def _outcomes(records, produce, invoked):
    """Per message: its best outcome, its producers, its writer (its first record, invoke or
    completion) and when it was last confirmed."""
    best: dict[str, int] = {}
    producers: dict[str, set] = defaultdict(set)
    writer: dict[str, tuple] = {}
    ok_t: dict[str, float] = {}
    for r in produce:
        if r["outcome"] == "ok":
            ok_t[r["msg_id"]] = max(ok_t.get(r["msg_id"], r["t_complete"]), r["t_complete"])
        best[r["msg_id"]] = max(best.get(r["msg_id"], 0), RANK[r["outcome"]])
    for r in records:
        writer.setdefault(r["msg_id"], (r["producer"], r["seq"]))
        producers[r["msg_id"]].add(r["producer"])
    for m in invoked:  # sent, and the run never learnt what became of it: unknown
        best.setdefault(m, RANK["info"])
    return best, producers, writer, ok_t


def _lost_detail(lost, produce, ok_t, dlv) -> dict:
    """When the lost messages were confirmed, who wrote them (their confirmed records'
    greatest node / producer name), and how many delivered messages were confirmed no
    later than the last lost one."""
    out = {}
    lost_t = [ok_t[m] for m in lost]
    out["lost_window"] = [min(lost_t), max(lost_t)] if lost_t else None
    ok_by: dict[str, list] = defaultdict(list)
    for r in produce:
        if r["outcome"] == "ok":
            ok_by[r["msg_id"]].append(r)
    side: dict[str, dict] = {"lost_by_node": defaultdict(int), "lost_by_producer": defaultdict(int)}
    for m in lost:
        side["lost_by_node"][max(r.get("node") or "?" for r in ok_by[m])] += 1
        side["lost_by_producer"][max(r["producer"] for r in ok_by[m])] += 1
    out.update({k: dict(sorted(v.items())) for k, v in side.items()})
    out["kept_before_lost_last"] = (sum(1 for m, t in ok_t.items() if dlv[m] > 0 and t <= max(lost_t))
                                    if lost_t else None)
    return out


def _read_gaps(consume, threshold):
    """Per consumer, successive deliveries at least `threshold` apart."""
    by_consumer = defaultdict(list)
    for r in consume:
        by_consumer[r["consumer"]].append(r["t"])
    out = {}
    for c, ts in by_consumer.items():
        ts.sort()
        gaps = [[a, z] for a, z in zip(ts, ts[1:]) if z - a >= threshold]
        if gaps:
            out[c] = gaps
    return out


def _ordering(consume, writer, rule):
    if rule == "none":
        return []
    groups = defaultdict(list)
    for r in consume:
        prod, seq = r.get("producer"), r.get("seq")
        if prod is None or seq is None:
            if r["msg_id"] not in writer:
                continue
            prod, seq = writer[r["msg_id"]]
        if rule != "strict" and r["redelivered"]:
            continue
        if rule == "monotonic":
            lane = r.get("source") if r.get("offset") is not None else None
            key = (prod, r["consumer"], lane)
        else:  # positioned reads in offset order, apart from reads the broker gave no offset
            key = (prod, r.get("source") or "", r.get("offset") is None)
        off = r.get("offset")
        groups[key].append(((off is None, off or 0, r["t"], seq), seq, r["t"], r["msg_id"]))
    viol = []
    for rows in groups.values():
        rows.sort(key=lambda x: x[0])
        high = None
        for _, seq, t, mid in rows:
            if high is not None and seq < high:
                viol.append((t, mid))
            high = seq if high is None else max(high, seq)
    return viol


def _unavailable(produce, threshold):
    oks = sorted(r["t_complete"] for r in produce if r["outcome"] == "ok")
    gaps = {}
    for r in produce:
        if r["outcome"] == "ok":
            continue
        i = bisect.bisect_right(oks, r["t_complete"])
        prev = oks[i - 1] if i else None
        a, z = gaps.get(prev, (r["t_invoke"], r["t_complete"]))
        gaps[prev] = (min(a, r["t_invoke"]), max(z, r["t_complete"]))
    ivs = []
    for prev, (a, z) in gaps.items():
        start = a if prev is None else max(prev, a)
        if z - start >= threshold:
            ivs.append([start, z])
    merged = []
    for a, z in sorted(ivs):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], z)
        else:
            merged.append([a, z])
    return [[round(a, 6), round(z, 6)] for a, z in merged]


def cycle_figures(records, consume) -> dict:
    """checkers.cycles's figures, from the definitions: T1 precedes T2 in a partition when
    any committed write of T1 has a lower offset than one of T2 (every pair, not successive
    writes); T1 -wr-> T2 when committed T2 read, at a position, T1's committed write there;
    components by Kosaraju's two passes. ``records`` every produce line, ``consume`` the
    deliveries."""
    if not any(r.get("txn") is not None for r in records):
        return dict.fromkeys(("cycles_g0", "cycles_g1c", "cycles_g1c_wr", "processed_twice", "unprocessed"))
    writes = [r for r in records if r["outcome"] == "ok" and r.get("txn") is not None
              and r.get("source") is not None and r.get("offset") is not None]
    committed = {r["txn"] for r in writes}
    by_src: dict[str, list] = defaultdict(list)
    at = {}
    for r in writes:
        by_src[r["source"]].append((r["offset"], r["txn"]))
        at[(r["source"], r["offset"], r["msg_id"])] = r["txn"]
    edges = set()
    for lane in by_src.values():
        lane.sort()
        for i, (_, t1) in enumerate(lane):
            for _, t2 in lane[i + 1:]:
                if t1 != t2:
                    edges.add((t1, t2, "ww"))
    for r in consume:
        w = at.get((r.get("source"), r.get("offset"), r["msg_id"]))
        if r.get("txn") in committed and w is not None and w != r["txn"]:
            edges.add((w, r["txn"], "wr"))

    def comps(kinds):
        es = [(a, b) for a, b, k in edges if k in kinds]
        return _kosaraju(es)

    out = {}
    lab = comps({"ww"})
    out["cycles_g0"] = len({c for c, n in _sizes(lab).items() if n > 1})
    lab = comps({"ww", "wr"})
    out["cycles_g1c"] = len({lab[a] for a, b, k in edges if k == "wr" and lab[a] == lab[b]})
    lab = comps({"wr"})
    out["cycles_g1c_wr"] = len({c for c, n in _sizes(lab).items() if n > 1})
    outs: dict[str, set] = defaultdict(set)
    inputs = set()
    processors = any(r.get("from_msg") is not None for r in records)
    for r in records:
        if r["outcome"] == "ok" and r.get("txn") is not None:
            if r.get("from_msg") is None:
                inputs.add(r["msg_id"])
            else:
                outs[r["from_msg"]].add(r["txn"])
    out["processed_twice"] = sum(1 for ts in outs.values() if len(ts) > 1) if processors else None
    out["unprocessed"] = sum(1 for m in inputs if not outs.get(m)) if processors else None
    return out


def _sizes(lab: dict) -> dict:
    n: dict = defaultdict(int)
    for c in lab.values():
        n[c] += 1
    return n


def _kosaraju(es) -> dict:
    succ, pred = defaultdict(list), defaultdict(list)
    nodes = set()
    for a, b in es:
        succ[a].append(b)
        pred[b].append(a)
        nodes |= {a, b}
    order, seen = [], set()
    for s in sorted(nodes):
        if s in seen:
            continue
        seen.add(s)
        stack = [(s, iter(succ[s]))]
        while stack:
            v, it = stack[-1]
            nxt = next((w for w in it if w not in seen), None)
            if nxt is None:
                order.append(v)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(succ[nxt])))
    lab = {}
    for s in reversed(order):
        if s in lab:
            continue
        lab[s] = s
        todo = [s]
        while todo:
            v = todo.pop()
            for w in pred[v]:
                if w not in lab:
                    lab[w] = s
                    todo.append(w)
    return lab
