"""Synthetic histories with planted anomalies, written as a real run directory: the one
synthetic-run writer the tests, the benchmarks (bench/main_bench.py) and the class-data-sharing
archive's exercise (checkers/cds.py) share, so what they check is written as a run writes it."""
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
