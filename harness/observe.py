"""What the cluster looked like during the run, and the measurements read from it.

An `Observer` samples the cluster once a second into `observations.jsonl`
(RabbitMQ: each node's state and the queue's master/leader and mirrors; Kafka:
the partition's leader, ISR and the controller, from ZooKeeper). The samples,
the broker logs and the history are artefacts of the run; the functions below
are pure functions of them, so a run can be re-measured offline.
"""
from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

from harness.history import JsonlWriter, RunClock

# Measurements this module can give, per broker (a scenario's `expect:` may name them).
RABBIT_MEASUREMENTS = {"paused_nodes", "paused_count", "partition_detected", "autoheal_losers", "autoheal_loser_count",
                       "masters_seen", "master_changes", "new_master_elected", "unsynchronised_s",
                       "blocked_s", "deliveries_by_node", "follower_delivery_fraction", "self_healed"}
KAFKA_MEASUREMENTS = {"isr_min", "isr_below_2_s", "isr_shrink_s", "leaders_seen", "leader_changes",
                      "new_leader_elected", "controller_changes", "new_controller_elected", "leaderless_s",
                      "log_truncations", "blocked_s", "self_healed"}


class Observer(threading.Thread):
    """Samples the cluster every `interval` s until stopped. Never raises: a sample that
    fails (a node is down, the API is cut) is recorded with its error."""

    def __init__(self, cluster, sc, run_dir: Path, clock: RunClock, interval: float = 1.0):
        super().__init__(daemon=True, name="observer")
        self.cluster, self.sc, self.clock, self.interval = cluster, sc, clock, interval
        self.writer = JsonlWriter(Path(run_dir) / "observations.jsonl")
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                t = self.clock.now()
                try:
                    rec = self.sample()
                except Exception as e:  # noqa: BLE001 - an unanswered sample is data too
                    rec = {"error": f"{type(e).__name__}: {e}"[:300]}
                self.writer.write({"t": round(t, 3), **rec})
                self.halt.wait(self.interval)
        finally:
            self.writer.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(30)

    def node_states(self) -> dict[str, str]:
        """One `docker ps` for all nodes (a call per node per second would cost a core)."""
        from harness.db.base import docker
        proc = docker("ps", "-a", "--filter", f"label=com.docker.compose.project={self.cluster.project}",
                      "--format", "{{.Names}} {{.State}}", check=False, timeout=10)
        seen = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
        return {n: {"running": "running", "paused": "frozen"}.get(seen.get(n, ""), "stopped" if n in seen
                                                                  else "absent")
                for n in self.cluster.nodes()}

    def sample(self) -> dict:
        states = self.node_states()
        if self.sc.broker == "rabbitmq":
            return {"nodes": states, **self._rabbit_queue()}
        p = self.cluster.partitions(self.sc.topic.name)[0]
        return {"nodes": states, "leader": p["leader"], "isr": p["isr"], "epoch": p["leader_epoch"],
                "controller": self.cluster.controller()}

    def _rabbit_queue(self) -> dict:
        q = None
        for node in self.cluster.nodes():  # any node that answers, quickly
            try:
                q = self.cluster.api(f"queues/%2F/{self.sc.queue.name}", node=node, timeout=2)
                break
            except Exception:  # noqa: BLE001
                continue
        if not q:
            return {"master": None}
        from harness.db.rabbitmq import short_node
        if q.get("type") == "quorum":
            return {"master": short_node(q.get("leader")),
                    "members": sorted(short_node(n) for n in q.get("members") or []),
                    "online": sorted(short_node(n) for n in q.get("online") or [])}
        return {"master": short_node(q.get("node")),
                "mirrors": sorted(short_node(n) for n in q.get("slave_nodes") or []),
                "synchronised": sorted(short_node(n) for n in q.get("synchronised_slave_nodes") or [])}


# ---- pure measurements ---------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict]:
    out = []
    if not Path(path).exists():
        return out
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line: the sample is lost, nothing else
    return out


def _changes(values: Iterable) -> tuple[list, int]:
    """Distinct non-null values in order of appearance, and how many times it changed."""
    seen, changes, last = [], 0, None
    for v in values:
        if v is None:
            continue
        if last is not None and v != last:
            changes += 1
        if v not in seen:
            seen.append(v)
        last = v
    return seen, changes


def _duration(samples: list[dict], pred) -> float:
    """Seconds for which `pred(sample)` held, each sample standing until the next one."""
    total = 0.0
    for a, b in zip(samples, samples[1:]):
        if pred(a):
            total += b["t"] - a["t"]
    return round(total, 2)


def kafka_measures(samples: list[dict], fault_start: float | None) -> dict:
    ok = [s for s in samples if "isr" in s]
    if not ok:
        return {}
    leaders, lchanges = _changes(s["leader"] for s in ok)
    controllers, cchanges = _changes(s.get("controller") for s in ok)
    m = {"isr_min": min(len(s["isr"]) for s in ok),
         "isr_below_2_s": _duration(ok, lambda s: len(s["isr"]) < 2),
         "leaderless_s": _duration(ok, lambda s: s["leader"] is None),
         "leaders_seen": leaders, "leader_changes": lchanges, "new_leader_elected": lchanges > 0,
         "controller_changes": cchanges, "new_controller_elected": cchanges > 0,
         "isr_timeline": _timeline(ok, lambda s: f"isr={','.join(s['isr'])} leader={s['leader']} "
                                   f"controller={s.get('controller')}")}
    if fault_start is not None:
        full = len(ok[0]["isr"])
        shrunk = [s["t"] for s in ok if s["t"] >= fault_start and len(s["isr"]) < full]
        m["isr_shrink_s"] = round(shrunk[0] - fault_start, 2) if shrunk else None
    return m


def rabbit_measures(samples: list[dict]) -> dict:
    ok = [s for s in samples if "nodes" in s]
    if not ok:
        return {}
    masters, changes = _changes(s.get("master") for s in ok)
    m = {"masters_seen": masters, "master_changes": changes, "new_master_elected": changes > 0,
         "queue_timeline": _timeline(ok, lambda s: f"master={s.get('master')} "
                                     f"sync={','.join(s.get('synchronised', s.get('online', [])) or [])}")}
    if any("mirrors" in s for s in ok):
        m["unsynchronised_s"] = _duration(
            [s for s in ok if "mirrors" in s],
            lambda s: s.get("master") is not None and set(s["mirrors"]) - set(s["synchronised"]))
    return m


def _timeline(samples: list[dict], label) -> list[list]:
    """[t, label] at each change: what a reader needs to see why a message was (not) lost."""
    out, last = [], None
    for s in samples:
        lab = label(s)
        if lab != last:
            out.append([s["t"], lab])
            last = lab
    return out


# RabbitMQ's own words (rabbit_node_monitor / mnesia, 3.8-3.10) for what partition handling did.
_PAUSED = re.compile(r"minority/secondary status detected|pause until the \*entire\* cluster recovers|"
                     r"We are about to pause")
_PARTITIONED = re.compile(r"inconsistent_database, (running|starting)_partitioned_network|Partial partition detected")
_LOSERS = re.compile(r"Losers:\s*\[([^\]]*)\]")


def rabbit_log_measures(logs: dict[str, str]) -> dict:
    paused = sorted(n for n, text in logs.items() if _PAUSED.search(text))
    losers = sorted({x.strip().strip("'").split("@")[-1] for text in logs.values()
                     for group in _LOSERS.findall(text) for x in group.split(",") if x.strip()})
    return {"paused_nodes": paused, "paused_count": len(paused),
            "partition_detected": any(_PARTITIONED.search(t) for t in logs.values()),
            "autoheal_losers": losers, "autoheal_loser_count": len(losers)}


def kafka_log_measures(logs: dict[str, str], topic: str) -> dict:
    pat = re.compile(rf"Truncating partition {re.escape(topic)}-\d+|"
                     rf"\[Log partition={re.escape(topic)}-\d+[^\]]*\] Truncating to")
    return {"log_truncations": sum(len(pat.findall(t)) for n, t in logs.items() if n.startswith("kafka"))}


def read_logs(run_dir: Path) -> dict[str, str]:
    d = Path(run_dir) / "logs"
    return {p.stem: p.read_text(encoding="utf-8", errors="replace") for p in sorted(d.glob("*.log"))}


def blocked_s(produce: list[dict], consume: list[dict], start: float, end: float) -> float:
    """The longest stretch within [start, end] in which no write was confirmed and nothing
    was delivered: how long the queue was blocked (R6), whatever the clients were told."""
    events = sorted([r["t_complete"] for r in produce if r.get("outcome") == "ok"
                     and isinstance(r.get("t_complete"), (int, float))] +
                    [r["t"] for r in consume if isinstance(r.get("t"), (int, float))])
    inside = [t for t in events if start <= t <= end]
    edges = [start] + inside + [end]
    return round(max(b - a for a, b in zip(edges, edges[1:])), 3) if end > start else 0.0


def delivery_nodes(consume: list[dict], samples: list[dict]) -> dict:
    """Which node each delivery came through, and the share that came through a node that
    was not the queue's leader at the time (Q5: a consumer attached to a follower)."""
    by_node = Counter(r.get("node") or "?" for r in consume)
    timeline = [(s["t"], s.get("master")) for s in samples if s.get("master")]
    follower = known = 0
    i = 0
    for r in sorted(consume, key=lambda r: r.get("t") or 0):
        while i + 1 < len(timeline) and timeline[i + 1][0] <= (r.get("t") or 0):
            i += 1
        if not timeline or not r.get("node"):
            continue
        known += 1
        follower += r["node"] != timeline[i][1]
    return {"deliveries_by_node": dict(sorted(by_node.items())),
            "follower_delivery_fraction": round(follower / known, 4) if known else None}


def measure(run_dir: Path, sc, info: dict) -> dict[str, Any]:
    """Every measurement of this module for a finished run, from its artefacts."""
    run_dir = Path(run_dir)
    samples = read_jsonl(run_dir / "observations.jsonl")
    phases = info.get("phases") or {}
    fault_start = phases.get("faults")
    end = phases.get("stop-producers") or (samples[-1]["t"] if samples else None)
    logs = read_logs(run_dir)
    produce = [r for f in sorted((run_dir / "history").glob("produce*.jsonl")) for r in read_jsonl(f)]
    consume = [r for f in sorted((run_dir / "history").glob("consume*.jsonl")) for r in read_jsonl(f)]
    m: dict[str, Any] = {}
    if sc.broker == "kafka":
        m.update(kafka_measures(samples, fault_start))
        m.update(kafka_log_measures(logs, sc.topic.name))
        # Kafka is read after the heal: blocked = no acknowledged write
        consume = []
    else:
        m.update(rabbit_measures(samples))
        m.update(rabbit_log_measures(logs))
        m.update(delivery_nodes(consume, samples))
    if fault_start is not None and end is not None:
        m["blocked_s"] = blocked_s(produce, consume, fault_start, end)
    return m
