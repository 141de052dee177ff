"""RabbitMQ probes: queue masters' spread (R12), throughput by mirror policy (R13), where
deliveries come from (Q5), blocking synchronisation by queue size and sync mode (R6), metadata
writes under a partition (R7q-R11q)."""
from __future__ import annotations

import threading
import time
import urllib.parse
from statistics import median
from collections import Counter
from pathlib import Path

import pika

from harness import store
from harness.brokers.rabbitmq import perftest
from harness.brokers.rabbitmq.clients import RabbitConsumer, RabbitPublisher, params
from harness.brokers.rabbitmq.cluster import short_node
from harness.brokers.rabbitmq.model import SYNC_MODES
from harness.brokers.rabbitmq.workload import endpoints, mirrors_wanted, queue_depth, queue_gone, upstream_queue
from harness.history import JsonlWriter
from harness.measures import blocked_s, falls, grows, mean_ci95
from harness.probes import Probes, hosts, spread, spread_measures
from harness.util import wait_until

MASTERS_PREFIX = "mqchaos-m"
METADATA_PREFIX = "mqchaos-meta-"


class RabbitProbes(Probes):
    def setup(self) -> None:
        if self.sc.probes.masters:
            self._declare_masters()
        if self.sc.probes.throughput:
            self._throughput()
        if self.sc.probes.links:
            self._read_links = self.ctx.count_links()
        if self.sc.probes.sync:
            self._sync()

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

    # -- R13 -----------------------------------------------------------------------------
    def _throughput(self) -> None:
        t = self.sc.probes.throughput
        out = Path(self.ctx.dir) / "probes" / "throughput"
        out.mkdir(parents=True, exist_ok=True)
        runs: dict[str, dict[str, list[float]]] = {m: {k: [] for k in t.policies} for m in t.methods}
        latencies: dict[str, list[dict]] = {k: [] for k in t.policies}
        for rep in range(t.repeat):  # interleaved: a drift of the machine spreads over every cell
            for method in t.methods:
                for name, policy in t.policies.items():
                    if self.ctx.stop.is_set():
                        return
                    stem = out / f"{method}-{name}-{rep}"
                    runs[method][name].append(self._one_rate(t, method, name, policy, stem))
                    if method == "confirms":
                        latencies[name].append(confirm_latency(
                            [r for i in range(t.publishers) for r in store.read_jsonl(f"{stem}-{i}.jsonl")]))
        self.measurements.update(throughput_measures(runs, t.bases(), t.methods[0]))
        self.measurements["throughput_runs"] = runs
        if "confirms" in t.methods:
            self.measurements.update(latency_measures(latencies))

    def _declare(self, queue: str, policy: dict, queue_type: str = "classic") -> None:
        """``queue`` (durable) under ``policy`` (its own, named after it), declared on rabbit1:
        its master (a quorum queue's leader) is there, and the probes' clients publish there."""
        if policy:
            self.cluster.set_policy(queue, f"^{queue}$", policy, priority=2)
        conn = pika.BlockingConnection(params(endpoints(self.cluster)[0]))
        try:
            conn.channel().queue_declare(queue, durable=True,
                                         arguments={"x-queue-type": queue_type} if queue_type != "classic" else None)
        finally:
            conn.close()

    def _one_rate(self, t, method: str, name: str, policy: dict, stem: Path) -> float:
        """msg/s into a fresh queue on rabbit1 under ``policy``, by ``method``."""
        eps = endpoints(self.cluster)
        queue = f"mqchaos-tput-{name}"
        self._declare(queue, policy, t.queue_type.get(name, "classic"))
        if policy.get("ha-mode"):
            # ha-mode exactly 1 is mirrored with no mirror (seed 001: not the same queue as an
            # unmirrored one)
            want = mirrors_wanted(policy, len(eps))
            wait_until(lambda q=queue: len(self.cluster.queue_mirrors(q)["synchronised"]) >= want, 60,
                       f"{queue} mirrored ({want} synchronised)")
        try:
            if method == "perftest":
                return perftest.measure(eps[0].host, eps[0].port, queue, t.seconds, stem.with_suffix(".txt"))["receiving"]
            if t.backlog.get(name):  # queued before the measurement, not counted in it
                self._fill(queue, t.backlog[name], Path(f"{stem}-backlog"), t.message_size, 600)
            return self._confirmed_rate(t, name, queue, eps, stem)
        finally:
            self.cluster.http("rabbit1", "DELETE", f"queues/%2F/{queue}")

    def _confirmed_rate(self, t, name: str, queue: str, eps, stem: Path) -> float:
        stop = threading.Event()
        via = [e for e in eps if e.node == t.via.get(name, eps[0].node)]
        pubs = [RabbitPublisher(f"{name}{i}", via, queue, JsonlWriter(Path(f"{stem}-{i}.jsonl")),
                                self.ctx.clock, stop, rate=t.rate.get(name), max_messages=5_000_000,
                                window=t.window, size=t.message_size, persistent=t.persistent.get(name, True))
                for i in range(t.publishers)]
        # consumers draining the queue at full speed while it is measured (seed 004's pressure)
        # x-cancel-on-ha-failover is a mirrored queue's: a quorum queue refuses the consume
        classic = t.queue_type.get(name, "classic") == "classic"
        cons = [RabbitConsumer(f"{name}-c{i}", eps[:1], queue, JsonlWriter(Path(f"{stem}-c{i}.jsonl")),
                               self.ctx.clock, stop, prefetch=100, cancel_on_failover=classic)
                for i in range(t.consumers.get(name, 0))]
        for w in cons:
            w.start()
        t0 = time.monotonic()
        for w in pubs:
            w.start()
        self.ctx.stop.wait(t.seconds)  # a timed measurement window, not a wait for a condition
        ok = sum(w.stats.ok for w in pubs)
        elapsed = time.monotonic() - t0
        stop.set()
        for w in [*pubs, *cons]:
            w.join(30)
        if cons and not sum(w.stats.delivered for w in cons):
            raise RuntimeError(f"{queue}: its consumers read nothing while it was measured")
        return round(ok / elapsed, 1)

    # -- R6 ------------------------------------------------------------------------------
    def _sync(self) -> None:
        p = self.sc.probes.sync
        out = Path(self.ctx.dir) / "probes" / "sync"
        out.mkdir(parents=True, exist_ok=True)
        runs: dict = {"fill_s": {}, "window_s": {}, **{mode: {} for mode in SYNC_MODES}}
        for size in p.sizes:
            queue = f"mqchaos-sync-{size}"
            self._sync_queue(queue, "automatic")
            runs["fill_s"][str(size)] = self._fill(queue, size, out / f"{size}-fill", p.message_size, p.sync_timeout * 3)
            for rep in range(p.repeat):
                if self.ctx.stop.is_set():
                    return
                auto = self._blocked(queue, None, out / f"{size}-{rep}-automatic")
                self._sync_queue(queue, "manual")
                manual = self._blocked(queue, auto["window_s"], out / f"{size}-{rep}-manual")
                for key, value in (("window_s", auto["window_s"]), ("automatic", auto["blocked_s"]),
                                   ("manual", manual["blocked_s"])):
                    runs[key].setdefault(str(size), []).append(value)
                # synchronised again by hand for the next repetition: outside any window
                self.cluster.rabbitmqctl("rabbit1", "sync_queue", queue, timeout=p.sync_timeout)
                self._sync_queue(queue, "automatic")
            self.cluster.http("rabbit1", "DELETE", f"queues/%2F/{queue}", timeout=120)
        self.measurements.update(sync_measures(runs, p.sizes))

    def _sync_queue(self, queue: str, mode: str) -> None:
        """The queue (declared on rabbit1 if new) under ha-mode all and ``mode``, every mirror
        synchronised."""
        self._declare(queue, {"ha-mode": "all", "ha-sync-mode": mode})
        wait_until(lambda: len(self.cluster.queue_mirrors(queue)["synchronised"]) == len(self.cluster.nodes()) - 1,
                   self.sc.probes.sync.sync_timeout, f"{queue}: every mirror synchronised ({mode})")

    def _fill(self, queue: str, size: int, stem: Path, message_size: int, timeout: float) -> float:
        """``size`` confirmed messages into ``queue`` through rabbit1, as fast as it takes them."""
        t0 = time.monotonic()
        w = RabbitPublisher("fill", endpoints(self.cluster)[:1], queue, JsonlWriter(stem.with_suffix(".jsonl")),
                            self.ctx.clock, self.ctx.stop, rate=None, max_messages=size, window=500,
                            confirm_timeout=30, size=message_size)
        w.start()
        w.join(timeout)  # bounded: a fill that stalls ends the probe, not the machine
        w.stop()
        w.join(30)
        if w.stats.ok < size:
            raise RuntimeError(f"{queue}: {w.stats.ok} of {size} messages confirmed by the fill")
        return round(time.monotonic() - t0, 1)

    def _blocked(self, queue: str, window: float | None, stem: Path) -> dict:
        """Restart the mirror's app while a publisher (confirms) and a slow consumer use the
        queue through rabbit1; the longest stretch with no confirm and no delivery in the
        window: from the stop until the mirror is synchronised (``window`` None) or for
        ``window`` seconds."""
        p = self.sc.probes.sync
        eps = endpoints(self.cluster)[:1]
        stop = threading.Event()
        pub = RabbitPublisher("p", eps, queue, JsonlWriter(Path(f"{stem}-produce.jsonl")), self.ctx.clock, stop,
                              rate=p.rate, max_messages=int(p.rate * (p.sync_timeout + 300)), window=50,
                              confirm_timeout=p.sync_timeout, size=p.message_size)
        con = RabbitConsumer("c", eps, queue, JsonlWriter(Path(f"{stem}-consume.jsonl")), self.ctx.clock, stop,
                             prefetch=10, delay=1 / p.rate, cancel_on_failover=True)
        for w in (pub, con):
            w.start()
        try:
            wait_until(lambda: pub.stats.ok > 10 and con.stats.delivered > 10, 60, f"{queue}: load flowing")
            start = self.ctx.clock.now()
            self.cluster.restart_app(p.node)
            if window is None:
                wait_until(lambda: p.node in self.cluster.synchronised_now(queue), p.sync_timeout,
                           f"{queue}: {p.node} synchronised", interval=0.2)
                end = self.ctx.clock.now()
            else:
                end = start + window
                self.ctx.stop.wait(max(0.0, end - self.ctx.clock.now()))  # a timed window, as long as the other
        finally:
            stop.set()
            for w in (pub, con):
                w.join(30)
        produce = store.read_jsonl(f"{stem}-produce.jsonl")
        consume = store.read_jsonl(f"{stem}-consume.jsonl")
        return {"window_s": round(end - start, 3), "blocked_s": blocked_s(produce, consume, start, end)}


def sync_measures(runs: dict, sizes: list[int]) -> dict:
    """Per size: the median blocked seconds of each mode, the mean difference (automatic
    minus manual, paired by repetition) with its 95 % interval, the windows; and whether that
    difference grows from the smallest size to the largest."""
    m: dict = {"sync_runs": runs, "sync_window_s": {}, "sync_blocked_median": {mode: {} for mode in SYNC_MODES},
               "sync_blocked_difference": {}}
    diffs = []
    for n in map(str, sizes):
        auto, manual = runs["automatic"].get(n, []), runs["manual"].get(n, [])
        m["sync_window_s"][n] = runs["window_s"].get(n, [])
        for mode, xs in (("automatic", auto), ("manual", manual)):
            m["sync_blocked_median"][mode][n] = round(median(xs), 3) if xs else None
        d = mean_ci95([a - b for a, b in zip(auto, manual)])
        m["sync_blocked_difference"][n] = d
        diffs.append(d)
    m["sync_blocking_grows"] = grows(diffs)
    return m


def throughput_measures(runs: dict[str, dict[str, list[float]]], bases: dict[str, str], first: str) -> dict:
    """Per method: median msg/s per policy, the median ratio of each policy in ``bases`` to
    its base (paired by repetition) and its range over the repetitions, and whether
    throughput falls along the policies' order; the first method's medians also under the
    plain names."""
    m: dict = {}
    for method, by_policy in runs.items():
        n = min(len(v) for v in by_policy.values())
        rates = {k: round(median(v), 1) for k, v in by_policy.items() if v}
        ratios = {f"{k}_vs_{b}": [by_policy[k][i] / by_policy[b][i] for i in range(n) if by_policy[b][i]]
                  for k, b in bases.items()}
        m[f"throughput_{method}"] = rates
        m[f"throughput_ratio_{method}"] = {k: round(median(r), 3) if r else None for k, r in ratios.items()}
        m[f"throughput_ratio_range_{method}"] = {k: [round(min(r), 3), round(max(r), 3)] if r else None
                                                 for k, r in ratios.items()}
        m.setdefault("throughput_falls", {})[method] = falls(list(by_policy.values()))
    m["throughput"] = m[f"throughput_{first}"]
    m["throughput_ratio"] = m[f"throughput_ratio_{first}"]
    return m


def confirm_latency(produce: list[dict]) -> dict:
    """The median and 99th percentile, in ms, of the confirmed publishes' waits (publish to
    confirm) of one measurement."""
    waits = sorted(r["t_complete"] - r["t_invoke"] for r in produce if r.get("outcome") == "ok"
                   and isinstance(r.get("t_invoke"), (int, float)) and isinstance(r.get("t_complete"), (int, float)))
    if not waits:
        return {"p50": None, "p99": None, "n": 0}
    pick = (lambda q: round(1000 * waits[min(len(waits) - 1, int(q * len(waits)))], 2))
    return {"p50": pick(0.5), "p99": pick(0.99), "n": len(waits)}


def latency_measures(latencies: dict[str, list[dict]]) -> dict:
    """Per policy, the median over the repetitions of each measurement's p50 and p99 (ms)."""
    out: dict = {"confirm_latency_runs": latencies}
    for q in ("p50", "p99"):
        out[f"confirm_latency_{q}_ms"] = {
            k: (round(median(xs), 2) if (xs := [r[q] for r in runs if r[q] is not None]) else None)
            for k, runs in latencies.items()}
    return out


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
