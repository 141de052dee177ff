"""Measurements a few catalogue rows need beyond the checker's (scenario `probes:`).

    masters     (R12)  where N mirrored queues' masters sit: before the faults, after
                       them, and after `rabbitmq-queues rebalance all`
    leaders     (K11)  partition leaders per broker: before, after, and after a
                       preferred-replica election (AdminClient elect_leaders)
    throughput  (R13)  confirm-publish rate into queues with different mirror policies,
                       one after another, before the main load; ratios to a baseline

Each probe has three hooks called by the run loop (setup, before_faults, after_heal)
and leaves its figures in `measurements`, which the prediction may name.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness.util import wait_until

MASTERS_PREFIX = "mqchaos-m"


def spread(counts: dict[str, int], nodes: list[str]) -> dict[str, int]:
    return {n: int(counts.get(n, 0)) for n in nodes}


def balanced(counts: dict[str, int]) -> bool:
    """No node leads more than one more than any other."""
    v = list(counts.values())
    return bool(v) and max(v) - min(v) <= 1


def hosts(counts: dict[str, int]) -> int:
    return sum(1 for c in counts.values() if c)


def spread_measures(prefix: str, stage: str, counts: dict[str, int]) -> dict[str, Any]:
    return {f"{prefix}_{stage}": counts, f"{prefix}_nodes_{stage}": hosts(counts),
            f"{prefix}_balanced_{stage}": balanced(counts),
            f"{prefix}_on_one_node_{stage}": hosts(counts) == 1}


def measurement_names(probes) -> set[str]:
    names: set[str] = set()
    for prefix, p, stages in (("masters", probes.masters, ("before", "after", "after_rebalance")),
                              ("leaders", probes.leaders, ("before", "after", "after_election"))):
        if p is not None:
            for st in stages:
                names |= set(spread_measures(prefix, st, {}))
    if probes.masters is not None:
        names.add("masters_on_one_node")
    if probes.throughput is not None:
        t = probes.throughput
        base = t.baseline or next(iter(t.policies))
        names |= {f"throughput.{k}" for k in t.policies}
        names |= {f"throughput_ratio.{k}_vs_{base}" for k in t.policies if k != base}
    return names


class Probes:
    def __init__(self, run):
        self.run, self.sc, self.cluster = run, run.sc, run.cluster
        self.p = run.sc.probes
        self.measurements: dict[str, Any] = {}

    # -- hooks -------------------------------------------------------------------------
    def setup(self) -> None:
        if self.p.masters:
            self._declare_masters()
        if self.p.throughput:
            self._throughput()

    def before_faults(self) -> None:
        if self.p.masters:
            self.measurements.update(spread_measures("masters", "before", self._masters()))
        if self.p.leaders:
            self.measurements.update(spread_measures("leaders", "before", self._leaders()))

    def after_heal(self) -> None:
        if self.p.masters:
            after = self._masters()
            self.measurements.update(spread_measures("masters", "after", after))
            self.measurements["masters_on_one_node"] = hosts(after) == 1
            if self.p.masters.rebalance:
                self.cluster.exec("rabbit1", ["rabbitmq-queues", "rebalance", "all"], timeout=120)
                self.measurements.update(spread_measures("masters", "after_rebalance", self._masters()))
        if self.p.leaders:
            if self.p.leaders.settle:
                self.run.stop_all.wait(self.p.leaders.settle)  # the controller's own rebalance has this long
            self.measurements.update(spread_measures("leaders", "after", self._leaders()))
            if self.p.leaders.elect_preferred:
                self._elect_preferred()
                self.measurements.update(spread_measures("leaders", "after_election", self._leaders()))

    # -- R12 -----------------------------------------------------------------------------
    def _declare_masters(self) -> None:
        import pika

        from harness.clients.rabbitmq import params
        from harness.workload import rabbit_endpoints
        m = self.p.masters
        self.cluster.set_policy("mqchaos-masters", f"^{MASTERS_PREFIX}", m.policy, priority=1)
        eps = rabbit_endpoints(self.cluster)
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
        from harness.db.rabbitmq import short_node
        qs = self._queues()
        return spread(Counter(short_node(q.get("node")) for q in qs), self.cluster.nodes())

    # -- K11 -----------------------------------------------------------------------------
    def _leaders(self) -> dict[str, int]:
        parts = self.cluster.partitions(self.sc.topic.name)
        return spread(Counter(p["leader"] for p in parts if p["leader"]), self.cluster.brokers())

    def _elect_preferred(self) -> None:
        from confluent_kafka import ElectionType, TopicPartition
        topic = self.sc.topic.name
        tps = [TopicPartition(topic, p["partition"]) for p in self.cluster.partitions(topic)]
        try:
            self.cluster.admin().elect_leaders(ElectionType.PREFERRED, tps).result(timeout=30)
        except Exception as e:  # noqa: BLE001 - "already the preferred leader" is an error there
            self.measurements["election_error"] = str(e)[:300]
        wait_until(lambda: all(p["leader"] == p["preferred"] or p["leader"] is None
                               for p in self.cluster.partitions(topic)), 60, "preferred leaders elected")

    # -- R13 -----------------------------------------------------------------------------
    def _throughput(self) -> None:
        import pika

        from harness.clients.rabbitmq import RabbitPublisher, params
        from harness.history import JsonlWriter
        from harness.workload import rabbit_endpoints
        t = self.p.throughput
        out = Path(self.run.dir) / "probes" / "throughput"
        out.mkdir(parents=True, exist_ok=True)
        eps = rabbit_endpoints(self.cluster)
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
        base = t.baseline or next(iter(t.policies))
        self.measurements["throughput"] = rates
        self.measurements["throughput_ratio"] = {f"{k}_vs_{base}": round(v / rates[base], 3) if rates[base] else None
                                                 for k, v in rates.items() if k != base}
