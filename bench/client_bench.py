"""Yardstick: the harness's publishers against minimal client loops.

    make bench-clients      (BENCH_ARGS="--messages 20000")

The harness must never be what limits a finding: its publisher should reach
at least 80 % of a minimal confirm loop against the same queue / topic.
Writes bench/results/clients-<timestamp>.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pika
from confluent_kafka import Producer

from harness.brokers import get_cluster
from harness.brokers.kafka.clients import KafkaProducerWorker
from harness.brokers.rabbitmq.clients import RabbitPublisher
from harness.brokers.rabbitmq.workload import endpoints as rabbit_endpoints
from harness.history import JsonlWriter, RunClock
from harness.util import entry_point, setup_logging

ROOT = Path(__file__).resolve().parent


def rabbit_plain(ep, queue: str, n: int) -> float:
    """The canonical pika confirm loop: one persistent publish, wait for its confirm."""
    conn = pika.BlockingConnection(pika.ConnectionParameters(ep.host, ep.port))
    ch = conn.channel()
    ch.confirm_delivery()
    t0 = time.monotonic()
    for i in range(n):
        ch.basic_publish("", queue, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
    dt = time.monotonic() - t0
    conn.close()
    return n / dt


def _timed(make_worker, n: int) -> float:
    """msgs/s of a harness worker publishing n messages, history written as in a run."""
    with tempfile.TemporaryDirectory() as d:
        w = make_worker(JsonlWriter(Path(d) / "p.jsonl"), RunClock(), threading.Event())
        t0 = time.monotonic()
        w.start()
        w.join(600)
        dt = time.monotonic() - t0
        assert w.stats.ok == n, (w.stats.ok, w.stats.fail, w.stats.info, w.stats.last_error)
    return n / dt


def rabbit_harness(eps, queue: str, n: int, window: int) -> float:
    return _timed(lambda w, c, e: RabbitPublisher("bench", eps, queue, w, c, e, rate=None, max_messages=n,
                                                  window=window), n)


def kafka_plain(bootstrap: str, topic: str, n: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
    done = [0]

    def cb(err, msg):
        if err is None:
            done[0] += 1
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, f"m{i}".encode(), on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(60)
    dt = time.monotonic() - t0
    assert done[0] == n
    return n / dt


def kafka_harness(bootstrap: str, topic: str, n: int) -> float:
    return _timed(lambda w, c, e: KafkaProducerWorker("bench", bootstrap, topic, w, c, e, rate=None,
                                                      max_messages=n, acks="all"), n)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--brokers", default="rabbitmq,kafka")
    ap.add_argument("--keep-cluster", action="store_true")
    a = ap.parse_args()
    rows = []
    for kind in a.brokers.split(","):
        cluster = get_cluster(kind)
        cluster.up()
        try:
            if kind == "rabbitmq":
                eps = rabbit_endpoints(cluster)
                for qtype in ("classic", "quorum"):
                    q = f"bench-{qtype}"
                    conn = pika.BlockingConnection(pika.ConnectionParameters(eps[0].host, eps[0].port))
                    conn.channel().queue_declare(q, durable=True, arguments={"x-queue-type": qtype})
                    conn.close()
                    plain = rabbit_plain(eps[0], q, a.messages)
                    harness1 = rabbit_harness(eps[:1], q, a.messages, window=1)
                    harness = rabbit_harness(eps[:1], q, a.messages, window=100)
                    rows.append({"client": f"rabbitmq {qtype} queue", "plain_msgs_s": round(plain),
                                 "harness_window1_msgs_s": round(harness1),
                                 "harness_msgs_s": round(harness), "ratio": round(harness / plain, 2)})
            else:
                cluster.create_topic("bench", partitions=1, replication_factor=3)
                plain = kafka_plain(cluster.bootstrap_servers(), "bench", a.messages)
                harness = kafka_harness(cluster.bootstrap_servers(), "bench", a.messages)
                rows.append({"client": "kafka acks=all", "plain_msgs_s": round(plain),
                             "harness_msgs_s": round(harness), "ratio": round(harness / plain, 2)})
        finally:
            if not a.keep_cluster:
                cluster.down()
        print(json.dumps(rows[-1]), flush=True)
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    (out / f"clients-{stamp}.json").write_text(json.dumps(rows, indent=1))
    for r in rows:
        print(f"{r['client']:<26} plain {r['plain_msgs_s']:>7}/s  harness {r['harness_msgs_s']:>7}/s  "
              f"ratio {r['ratio']:.2f}  {'OK' if r['ratio'] >= 0.8 else 'BELOW 0.8'}")
    return 0 if all(r["ratio"] >= 0.8 for r in rows) else 1


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        raise SystemExit(main())
