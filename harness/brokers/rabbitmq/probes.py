"""RabbitMQ probes: queue masters' spread (R12), where deliveries come from (Q5: links),
metadata writes under a partition (R7q-R11q: during the cut a client of each node declares a
queue of its own, answered or refused, kept or lost after the heal, where its master and
mirrors were right after; optionally under a policy of the probe's own, exclusive: R45,
R46); and, started from here, the probes with a load of their
own during the setup (harness.brokers.rabbitmq.load_probes): throughput by mirror policy
(R13), blocking synchronisation by queue size and sync mode (R6)."""
from __future__ import annotations

import threading
import time
import urllib.parse
from collections import Counter

import pika

from harness.brokers.rabbitmq.clients import params
from harness.brokers.rabbitmq.cluster import short_node
from harness.brokers.rabbitmq.load_probes import SyncProbe, ThroughputProbe
from harness.brokers.rabbitmq.workload import endpoints, queue_depth, queue_gone, upstream_queue
from harness.probes import Probes, hosts, spread, spread_measures
from harness.util import wait_until

MASTERS_PREFIX = "mqchaos-m"
METADATA_PREFIX = "mqchaos-meta-"


class RabbitProbes(Probes):
    def setup(self) -> None:
        if self.sc.probes.masters:
            self._declare_masters()
        if self.sc.probes.throughput:
            ThroughputProbe(self.ctx, self.measurements).run()
        if self.sc.probes.links:
            self._read_links = self.ctx.count_links()
        if self.sc.probes.sync:
            SyncProbe(self.ctx, self.measurements).run()

    def before_faults(self) -> None:
        if self.sc.cluster.ram_nodes:  # the setting took: the nodes say what they joined as
            try:
                view = self.cluster.nodes_view(self.sc.cluster.site(self.sc.cluster.ram_nodes[0])[0])
                self.measurements["ram_nodes"] = sorted(short_node(n["name"]) for n in view if n.get("type") == "ram")
            except Exception:  # noqa: BLE001 - unknown, never a guess
                self.measurements["ram_nodes"] = None
        if self.sc.probes.metadata:
            if self.sc.probes.metadata.policy:
                self.cluster.set_policy("mqchaos-meta", f"^{METADATA_PREFIX}", self.sc.probes.metadata.policy,
                                        priority=2)
            self._metadata_timer = threading.Timer(self.sc.probes.metadata.at, self._metadata_writes)
            self._metadata_timer.daemon = True
            self._metadata_timer.start()
        if self.sc.probes.masters:
            self.measurements.update(spread_measures("masters", "before", self._masters()))
        if self.sc.probes.links:
            self._links()

    def after_heal(self) -> None:
        # does the run's queue still exist (a transient queue does not survive its node)?
        try:
            self.measurements["queue_present"] = not queue_gone(self.cluster, self.sc.queue.name, self.sc.queue_sites())
        except Exception:  # noqa: BLE001 - not measured (a cluster that cannot say): never a guess
            self.measurements["queue_present"] = None
        if self.sc.queue.exchange:  # and the exchange the producers publish to
            try:
                sites = self.sc.queue_sites() or [self.cluster.nodes()]
                self.measurements["exchange_present"] = all(
                    self.cluster.api(f"exchanges/%2F/{urllib.parse.quote(self.sc.queue.exchange, safe='')}",
                                     among=site) is not None for site in sites)
            except Exception:  # noqa: BLE001 - not measured
                self.measurements["exchange_present"] = None
        if self.sc.probes.metadata:
            self._metadata_kept()
        if self.sc.link and self.sc.link.upstream_queue:
            self.measurements["upstream_queue_messages"] = queue_depth(
                self.cluster, upstream_queue(self.sc), [self.sc.link.sites()[0]])
        m = self.sc.probes.masters
        if not m:
            return
        after = self._masters()
        self.measurements.update(spread_measures("masters", "after", after))
        self.measurements["masters_on_one_node"] = hosts(after) == 1
        if m.rebalance:
            self.cluster.exec("rabbit1", ["rabbitmq-queues", "rebalance", "all"], timeout=120)
            self.measurements.update(spread_measures("masters", "after_rebalance", self._masters()))

    # -- R7q-R11q ------------------------------------------------------------------------
    def _metadata_writes(self) -> None:
        """Each node's client declares its own queue at once; a declare that gets no answer
        within the probe's timeout (Khepri waiting for a majority) is recorded as such."""
        p = self.sc.probes.metadata
        self._metadata: dict[str, dict] = {}

        def declare(ep) -> None:
            t0 = time.monotonic()
            try:
                conn = pika.BlockingConnection(params(ep))
                try:
                    conn.channel().queue_declare(f"{METADATA_PREFIX}{ep.node}", durable=True, exclusive=p.exclusive)
                    if p.exclusive:  # the connection held open: a policy has time to mirror it
                        self.ctx.stop.wait(p.hold)
                    out = {"ok": True, **self._declared_on(ep.node)}
                finally:
                    if conn.is_open:
                        conn.close()
            except Exception as exc:  # noqa: BLE001 - the refusal is what is measured
                out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            self._metadata[ep.node] = {**out, "s": round(time.monotonic() - t0, 2)}
        # daemons: a declare still blocked at the timeout stays so until the cluster goes down
        eps = endpoints(self.cluster)
        threads = [threading.Thread(target=declare, args=(ep,), daemon=True) for ep in eps]
        for t in threads:
            t.start()
        deadline = time.monotonic() + p.timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for ep in eps:
            self._metadata.setdefault(ep.node, {"ok": False, "error": f"no answer in {p.timeout:g} s",
                                                "s": p.timeout})

    def _declared_on(self, node: str) -> dict:
        """Where a probe queue's master and mirrors are right after its declare, as ``node``
        says (later a policy may move them); None each when unknown."""
        try:
            q = self.cluster.queue(f"{METADATA_PREFIX}{node}", node=node)
        except Exception:  # noqa: BLE001 - unknown, never a guess
            q = None
        if not q:
            return {"master": None, "mirrors": None}
        return {"master": short_node(q.get("node")), "mirrors": sorted(short_node(n) for n in q.get("slave_nodes") or [])}

    def _metadata_kept(self) -> None:
        timer = getattr(self, "_metadata_timer", None)
        if timer is None:
            return
        p = self.sc.probes.metadata
        timer.join(p.at + p.timeout + 10)  # it ends by itself: the writes are bounded by the timeout
        writes = dict(getattr(self, "_metadata", {}))
        existing = {q.get("name") for q in self.cluster.api("queues") or []}
        self.measurements.update(metadata_measures(writes, existing))
        self.measurements["metadata_writes"] = writes

    # -- Q5 ------------------------------------------------------------------------------
    def _links(self) -> None:
        received = self._read_links()
        delivered = sum(c.stats.delivered for c in self.ctx.consumers())  # in the same window
        q = self.cluster.api(f"queues/%2F/{self.sc.queue.name}") or {}
        consumers = [c for c in self.cluster.api("consumers") or []
                     if (c.get("queue") or {}).get("name") == self.sc.queue.name]
        leader = short_node(q.get("leader") or q.get("node"))
        members = {short_node(n) for n in (q.get("members") or [q.get("node"), *(q.get("slave_nodes") or [])]) if n}
        delivered_bytes = delivered * self.sc.workload.message_size
        self.measurements["link_bytes"] = received
        self.measurements["link_delivered_bytes"] = delivered_bytes
        self.measurements["delivery_network_share"] = delivery_network_share(
            received, leader, members, {short_node((c.get("channel_details") or {}).get("node")) for c in consumers},
            delivered_bytes)

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


def delivery_network_share(received: dict[str, dict[str, int]], leader: str | None, members: set,
                           consumer_nodes: set, delivered_bytes: int) -> float | None:
    """The share of the bytes delivered to the consumer that reached its node over the
    network: what the node received beyond what a replica receives, over the payload bytes
    delivered. On a follower, beyond the other follower's intake from the leader; on a node
    with no replica, everything the members sent it. About 0: its local replica served the
    deliveries; about 1 (a little more: framing): they came from another node."""
    if not leader or len(consumer_nodes) != 1 or not delivered_bytes:
        return None  # the set-up the figure needs (one consumer node, deliveries) did not happen
    node = next(iter(consumer_nodes))
    if node not in members:
        extra = sum(received.get(node, {}).get(m, 0) for m in members)
    else:
        twins = sorted(m for m in members if m not in (leader, node))
        if node == leader or not twins:
            return None
        extra = received.get(node, {}).get(leader, 0) - received.get(twins[0], {}).get(leader, 0)
    return round(extra / delivered_bytes, 3)


def metadata_measures(writes: dict[str, dict], existing: set) -> dict:
    """From each node's declare (``writes``: node -> {ok, error?, s}) and the queue names the
    cluster has after the heal: whose write was answered, whose was refused, and of the
    answered ones which were kept and which the cluster lost (an answered write gone)."""
    ok = sorted(n for n, w in writes.items() if w.get("ok"))
    kept = [n for n in ok if f"{METADATA_PREFIX}{n}" in existing]
    took = [w["s"] for w in writes.values() if isinstance(w.get("s"), (int, float))]
    return {"metadata_write_ok": ok, "metadata_write_failed": sorted(set(writes) - set(ok)),
            "metadata_write_s": {n: w.get("s") for n, w in sorted(writes.items())},
            # the slowest answer (or refusal): how long a write to another queue waited (R40)
            "metadata_write_max_s": max(took) if took else None,
            "metadata_kept": kept, "metadata_lost": sorted(set(ok) - set(kept)),
            "metadata_masters": {n: writes[n].get("master") for n in ok},
            "metadata_on_own_node": [n for n in ok if writes[n].get("master") == n],
            # answered declares whose queue had mirrors (None: not read)
            "metadata_mirrored": (sorted(n for n in ok if writes[n].get("mirrors"))
                                  if all(writes[n].get("mirrors") is not None for n in ok) else None)}
