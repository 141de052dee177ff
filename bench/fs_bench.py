"""What the power-loss file system itself costs: confirmed-publish throughput of each broker
with its data directories on the plain volume and on nemesis/lazyfs.py (``fs: lazy``).

    make bench-fs      (BENCH_ARGS="--messages 20000 --runs 3")

Same clients as ``make bench-clients`` (the harness's own publishers, history written as in
a run). A power-loss row's throughput is the lazy column: what its findings were made at.
Writes bench/results/fs-<timestamp>.json and prints a table (median of the runs).
"""
from __future__ import annotations

import argparse
import json
import statistics
from datetime import datetime, timezone

import pika

from bench.client_bench import ROOT, kafka_harness, rabbit_harness
from harness import brokers
from harness.brokers.rabbitmq.workload import endpoints as rabbit_endpoints
from harness.util import entry_point, setup_logging


def _rabbit(cluster, n: int, runs: int) -> dict[str, list[float]]:
    eps = rabbit_endpoints(cluster)
    out: dict[str, list[float]] = {}
    for qtype in ("classic", "quorum"):
        q = f"bench-{qtype}"
        conn = pika.BlockingConnection(pika.ConnectionParameters(eps[0].host, eps[0].port))
        conn.channel().queue_declare(q, durable=True, arguments={"x-queue-type": qtype})
        conn.close()
        out[f"rabbitmq {qtype} queue, confirms"] = [rabbit_harness(eps[:1], q, n, window=100) for _ in range(runs)]
    return out


def _kafka(cluster, n: int, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for name, config in (("kafka acks=all", {}), ("kafka acks=all, flush.messages=1", {"flush.messages": "1"})):
        topic = "bench-flush" if config else "bench"
        cluster.create_topic(topic, partitions=1, replication_factor=3, config=config)
        out[name] = [kafka_harness(cluster.bootstrap_servers(), topic, n) for _ in range(runs)]
    return out


LOADS = {"rabbitmq": _rabbit, "kafka": _kafka}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--brokers", default="rabbitmq,kafka")
    a = ap.parse_args()
    table: dict[str, dict[str, list[float]]] = {}
    for kind in a.brokers.split(","):
        for fs in ("plain", "lazy"):
            cluster = brokers.get_cluster(kind)
            cluster.up(brokers.get(kind).settings({"fs": fs}))
            try:
                for load, rates in LOADS[kind](cluster, a.messages, a.runs).items():
                    table.setdefault(load, {})[fs] = [round(r) for r in rates]
                    print(f"{load:<36} fs={fs:<5} {[round(r) for r in rates]} msgs/s", flush=True)
            finally:
                cluster.down()
    rows = [{"load": load, **{f"{fs}_msgs_s": statistics.median(r) for fs, r in by.items()},
             "runs": by, "lazy_vs_plain": round(statistics.median(by["lazy"]) / statistics.median(by["plain"]), 2)}
            for load, by in table.items()]
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    (out / f"fs-{stamp}.json").write_text(json.dumps({"messages": a.messages, "rows": rows}, indent=1))
    print(f"\n{'load':<36} {'plain /s':>9} {'lazy /s':>9} {'lazy/plain':>10}")
    for r in rows:
        print(f"{r['load']:<36} {r['plain_msgs_s']:>9.0f} {r['lazy_msgs_s']:>9.0f} {r['lazy_vs_plain']:>10.2f}")
    return 0


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        raise SystemExit(main())
