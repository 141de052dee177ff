"""Synthetic histories with planted anomalies, written as a real run directory."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path


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
    produce, consume = [], []
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
    offsets = {}
    for r in sorted(produce, key=lambda r: r["t_complete"]):
        if (r["outcome"] == "ok" and r["msg_id"] not in lost_ids) or r["msg_id"] in planted.recovered:
            c = int(r["producer"][1:]) % consumers
            src = f"t:{c}" if kafka else "q"
            off = offsets.get(src, 0)
            offsets[src] = off + 1
            consume.append({"msg_id": r["msg_id"], "consumer": f"c{c}", "t": round(r["t_complete"] + 0.5, 6),
                            "redelivered": False, "source": src, "offset": off if kafka else None,
                            "node": "n1", "producer": r["producer"], "seq": r["seq"]})
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
    if write_ahead:
        crashed_recs = oks[lost + late:lost + late + crashed]
        planted.crashed = {r["msg_id"] for r in crashed_recs}
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
        produce = out
    raw = ['{"msg_id": "trunc', "not json at all", '{"msg_id": "x", "producer": "p0", "seq": "seven"}',
           '{"msg_id": "y", "producer": "p0", "seq": 1, "outcome": "maybe", "t_invoke": 1, "t_complete": 2}']
    planted.malformed = malformed
    return produce, consume, [raw[i % len(raw)] for i in range(malformed)], planted


def write_run(run_dir: Path, produce, consume, *, malformed_produce=(), malformed_consume=(),
              files=1, meta=None, truncate_last=False) -> Path:
    """Write records as history files (split over `files` files per kind)."""
    hist = Path(run_dir) / "history"
    hist.mkdir(parents=True, exist_ok=True)
    (Path(run_dir) / "run.json").write_text(json.dumps(meta or {"scenario": "synthetic"}))
    for kind, recs, bad in (("produce", produce, malformed_produce), ("consume", consume, malformed_consume)):
        lines = [json.dumps(r, ensure_ascii=False) for r in recs] + list(bad)
        for i in range(files):
            part = lines[i::files]
            text = "".join(line + "\n" for line in part)
            if truncate_last and i == files - 1 and part:
                text = text[:-len(part[-1]) // 2 - 1]  # a crash mid-line: no newline either
            (hist / f"{kind}-{i}.jsonl").write_text(text, encoding="utf-8")
    return Path(run_dir)


def write_results_run(results: Path, scenario: str, started_at: str, produce, consume, *,
                      broker: str = "rabbitmq", version: str = "3.10.8", status: str = "completed",
                      held="absent", ordering: str = "none", error: str | None = None,
                      history: bool = True, link_latest: bool = True, **write_kw) -> Path:
    """A run directory as the harness's run loop leaves it (harness/runner.py):
    results/<scenario>/<UTC timestamp>/ with run.json (scenario, broker, brokers,
    started_at, status, ordering), the history, check.json with `prediction.held`
    (held="absent": no prediction), and the `latest` links."""
    stamp = started_at.replace(":", "-").replace("+00-00", "") + ".000Z"
    run_dir = Path(results) / scenario / stamp
    brokers = ({"rabbitmq": version, "erlang": "25.2.3"} if broker == "rabbitmq"
               else {"kafka": f"kafka_2.13-{version}.jar"})
    meta = {"scenario": scenario, "id": scenario.split("-")[0], "broker": broker, "seed": 0,
            "ordering": ordering, "params": {"name": scenario}, "started_at": started_at,
            "status": status, "phases": {}, "brokers": brokers}
    if error:
        meta["error"] = error
    if history:
        write_run(run_dir, produce, consume, meta=meta, **write_kw)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "run.json").write_text(json.dumps(meta))
    if held != "absent":
        check = {"valid": None, "prediction": {"held": held, "reason": f"planted: {held}", "checks": []}}
        (run_dir / "check.json").write_text(json.dumps(check))
    if link_latest:
        for link, target in ((run_dir.parent / "latest", stamp),
                             (Path(results) / "latest", f"{scenario}/{stamp}")):
            if link.is_symlink():
                link.unlink()
            link.symlink_to(target)
    return run_dir
