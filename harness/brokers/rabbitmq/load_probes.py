"""RabbitMQ's probes that put a load of their own on the cluster during the setup, before the
run's own clients start, each into queues of its own through clients of its own:
throughput by mirror policy (R13, ``ThroughputProbe``) and blocking synchronisation by queue
size and sync mode (R6, ``SyncProbe``); and the pure functions that turn their runs into
measurements. ``harness.brokers.rabbitmq.probes.RabbitProbes`` starts them.

The throughput probe runs our clients or RabbitMQ PerfTest (perftest.py, its jars from Maven
Central on first use) and varies, beside the policy: ``persistent`` and ``via`` (the node
the publishers connect to: R13p, R13r), ``queue_type``, ``backlog`` (messages queued before
the measurement), ``consumers`` (draining it meanwhile), ``vs`` (the policy a ratio is taken
against: Q9) and ``rate`` (a publisher's own rate); every cell's confirm latency percentiles
(``confirm_latency``, ``latency_measures``: R47)."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from statistics import median
from typing import Any

import pika

from harness import store
from harness.brokers.capabilities import RestartApp, ability
from harness.brokers.rabbitmq import perftest
from harness.brokers.rabbitmq.clients import RabbitConsumer, RabbitPublisher, params
from harness.brokers.rabbitmq.model import SYNC_MODES
from harness.brokers.rabbitmq.workload import endpoints, mirrors_wanted
from harness.history import JsonlWriter
from harness.measures import blocked_s, falls, grows, mean_ci95
from harness.util import wait_until


class OwnLoad:
    """A probe with queues and clients of its own: what it shares is declaring a queue under
    a policy and filling it. Its figures go into the probes' ``measurements``."""

    def __init__(self, ctx: Any, measurements: dict[str, Any]):
        """``ctx``: the run's harness.context.RunContext."""
        self.ctx, self.sc, self.cluster = ctx, ctx.sc, ctx.cluster
        self.measurements = measurements

    def _out(self, name: str) -> Path:
        out = Path(self.ctx.dir) / "probes" / name
        out.mkdir(parents=True, exist_ok=True)
        return out

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


class ThroughputProbe(OwnLoad):
    """R13: msg/s into a fresh queue on rabbit1 under each policy, by each method (our
    clients with confirms, RabbitMQ PerfTest), repeated and interleaved; the confirms'
    latency percentiles (R47)."""

    def run(self) -> None:
        t = self.sc.probes.throughput
        out = self._out("throughput")
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


class SyncProbe(OwnLoad):
    """R6: how long a mirrored queue blocks its clients while a restarted mirror
    synchronises, by queue size and sync mode (automatic, then manual over as long a
    window), repeated."""

    def run(self) -> None:
        p = self.sc.probes.sync
        out = self._out("sync")
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
            ability(self.cluster, RestartApp).restart_app(p.node)
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
