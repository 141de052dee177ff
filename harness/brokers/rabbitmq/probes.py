"""RabbitMQ probes: queue masters' spread (R12) and throughput by mirror policy (R13)."""
from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pika

from harness.brokers.rabbitmq.clients import RabbitPublisher, params
from harness.brokers.rabbitmq.cluster import short_node
from harness.brokers.rabbitmq.workload import endpoints
from harness.history import JsonlWriter
from harness.probes import Probes, hosts, spread, spread_measures
from harness.util import wait_until

MASTERS_PREFIX = "mqchaos-m"


class RabbitProbes(Probes):
    def setup(self) -> None:
        if self.sc.probes.masters:
            self._declare_masters()
        if self.sc.probes.throughput:
            self._throughput()

    def before_faults(self) -> None:
        if self.sc.probes.masters:
            self.measurements.update(spread_measures("masters", "before", self._masters()))

    def after_heal(self) -> None:
        m = self.sc.probes.masters
        if not m:
            return
        after = self._masters()
        self.measurements.update(spread_measures("masters", "after", after))
        self.measurements["masters_on_one_node"] = hosts(after) == 1
        if m.rebalance:
            self.cluster.exec("rabbit1", ["rabbitmq-queues", "rebalance", "all"], timeout=120)
            self.measurements.update(spread_measures("masters", "after_rebalance", self._masters()))

    # -- R12 -----------------------------------------------------------------------------
    def _declare_masters(self) -> None:
        m = self.sc.probes.masters
        self.cluster.set_policy("mqchaos-masters", f"^{MASTERS_PREFIX}", m.policy, priority=1)
        eps = endpoints(self.cluster)
        for i in range(m.queues):
            conn = pika.BlockingConnection(params(eps[i % len(eps)]))
            try:
                conn.channel().queue_declare(f"{MASTERS_PREFIX}{i}", durable=True,
                                             arguments={"x-queue-master-locator": m.locator})
            finally:
                conn.close()
        if m.policy.get("ha-sync-mode") == "automatic":
            wait_until(lambda: all(len(q.get("synchronised_slave_nodes") or []) >= 1
                                   for q in self._queues()), 60, "probe queues mirrored")

    def _queues(self) -> list[dict]:
        return [q for q in self.cluster.api("queues") or [] if q["name"].startswith(MASTERS_PREFIX)]

    def _masters(self) -> dict[str, int]:
        return spread(Counter(short_node(q.get("node")) for q in self._queues()), self.cluster.nodes())

    # -- R13 -----------------------------------------------------------------------------
    def _throughput(self) -> None:
        t = self.sc.probes.throughput
        out = Path(self.run.dir) / "probes" / "throughput"
        out.mkdir(parents=True, exist_ok=True)
        eps = endpoints(self.cluster)
        rates = {}
        for name, policy in t.policies.items():
            queue = f"mqchaos-tput-{name}"
            if policy:
                self.cluster.set_policy(f"mqchaos-tput-{name}", f"^{queue}$", policy, priority=2)
            conn = pika.BlockingConnection(params(eps[0]))  # masters on rabbit1: clients publish there
            try:
                conn.channel().queue_declare(queue, durable=True)
            finally:
                conn.close()
            if policy.get("ha-mode"):
                wait_until(lambda q=queue: len(self.cluster.queue_mirrors(q)["synchronised"]) >= 1, 60,
                           f"{queue} mirrored")
            stop = threading.Event()
            pubs = [RabbitPublisher(f"{name}{i}", eps[:1], queue, JsonlWriter(out / f"{name}-{i}.jsonl"),
                                    self.run.clock, stop, rate=None, max_messages=5_000_000,
                                    window=t.window, size=t.message_size)
                    for i in range(t.publishers)]
            t0 = time.monotonic()
            for w in pubs:
                w.start()
            self.run.stop_all.wait(t.seconds)  # a timed measurement window, not a wait for a condition
            ok = sum(w.stats.ok for w in pubs)
            elapsed = time.monotonic() - t0
            stop.set()
            for w in pubs:
                w.join(30)
            rates[name] = round(ok / elapsed, 1)
            self.cluster.http("rabbit1", "DELETE", f"queues/%2F/{queue}")
        base = t.base()
        self.measurements["throughput"] = rates
        self.measurements["throughput_ratio"] = {f"{k}_vs_{base}": round(v / rates[base], 3) if rates[base] else None
                                                 for k, v in rates.items() if k != base}
