"""Time to a healthy cluster from cached images: RabbitMQ and Kafka + ZooKeeper, 3 runs each.

Each run starts from nothing (the previous cluster and its volumes removed, untimed), then
times ``up()`` until the cluster is healthy (RabbitMQ: three nodes running as one cluster;
Kafka: ZooKeeper quorum, three brokers registered, an RF-3 topic fully in sync).
Targets (issue "Real clusters"): <= 45 s RabbitMQ, <= 60 s Kafka.

    python -m bench.cluster_bench [--runs 3] [--kinds rabbitmq,kafka] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from harness.util import entry_point, setup_logging

TARGETS = {"rabbitmq": 45.0, "kafka": 60.0}


def bench(kind: str, runs: int) -> list[float]:
    from harness.brokers import get_cluster
    times = []
    for i in range(runs):
        cluster = get_cluster(kind)
        cluster.down()
        t0 = time.monotonic()
        cluster.up(fresh=False)
        dt = time.monotonic() - t0
        times.append(dt)
        print(f"{kind} run {i + 1}: healthy in {dt:.1f}s", flush=True)
        cluster.down()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kinds", default="rabbitmq,kafka")
    ap.add_argument("--out", default="results/bench/cluster_bench.json")
    args = ap.parse_args(argv)
    from harness.images import ensure_images
    kinds = [k for k in args.kinds.split(",") if k]
    ensure_images(kinds)
    report = {}
    for kind in kinds:
        times = bench(kind, args.runs)
        report[kind] = {"runs_s": [round(t, 1) for t in times], "median_s": round(statistics.median(times), 1),
                        "max_s": round(max(times), 1), "target_s": TARGETS[kind],
                        "within_target": max(times) <= TARGETS[kind]}
    print(f"{'kind':10s} {'median':>8s} {'max':>8s} {'target':>8s}  runs")
    for kind, r in report.items():
        print(f"{kind:10s} {r['median_s']:8.1f} {r['max_s']:8.1f} {r['target_s']:8.1f}  {r['runs_s']}"
              f"{'' if r['within_target'] else '  OVER TARGET'}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {out}")
    return 0 if all(r["within_target"] for r in report.values()) else 1


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        sys.exit(main())
