"""What the cluster looked like during the run, and the measurements read from it.

An ``Observer`` samples the cluster once a second into observations.jsonl: every node's
container state, plus what the broker plug-in samples (its ``sample``: leader, ISR,
controller; queue master, mirrors). The samples, the broker logs and the history are
artefacts of the run; ``measure`` is a pure function of them (with the plug-in's
``measure`` and harness.measures), so a run can be re-measured offline.
"""
from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

from harness import store, windows
from harness.history import JsonlWriter, RunClock
from harness.measures import blocked_s, consumers_silent, nodes_down_s


class Observer(threading.Thread):
    """Samples the cluster every ``interval`` s until stopped. Never raises: a sample that
    fails (a node is down, the API is cut) is recorded with its error."""

    def __init__(self, broker, cluster, sc, run_dir: Path, clock: RunClock, interval: float = 1.0):
        super().__init__(daemon=True, name="observer")
        self.broker, self.cluster, self.sc, self.clock, self.interval = broker, cluster, sc, clock, interval
        self.writer = JsonlWriter(Path(run_dir) / store.OBSERVATIONS)
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                t = self.clock.now()
                try:
                    rec = {"nodes": self.node_states(), **self.broker.sample(self.cluster, self.sc)}
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
        """Every node's state, asked of the cluster in one call (Cluster.node_states: one
        docker inspect for a container cluster; a call per node per second would cost a
        core): running, frozen (paused), stopped, or absent."""
        seen = self.cluster.node_states()
        return {n: {"running": "running", "paused": "frozen"}.get(seen.get(n, ""), "stopped" if n in seen
                                                                  else "absent")
                for n in self.cluster.nodes()}


def measure(broker, run_dir: Path, sc, info: dict) -> dict[str, Any]:
    """Every measurement of a finished run, from its artefacts. The plug-in's figures are
    taken over the effect window (harness.windows: the fault's own, the harness's own hand
    left out) and again, under ``after_heal`` and ``whole_run``, over the others."""
    samples = store.read_jsonl(Path(run_dir) / store.OBSERVATIONS)
    phases = info.get("phases") or {}
    fault_start = phases.get("faults")
    records = store.read_jsonl(Path(run_dir) / store.NEMESIS_LOG)
    w = windows.of_run(phases, records, samples[-1]["t"] if samples else None, info.get("whole_waited_for"))
    produce = store.history_records(run_dir, "produce")
    # at-risk counts need every delivery; the other figures, only a live consumer's (a broker
    # read only after the heal delivers nothing during the load: blocked = no confirm)
    consumed = store.history_records(run_dir, "consume")
    consume = consumed if sc.live_consumers else []
    logs, t0 = store.read_logs(run_dir), info.get("t0_unix")

    def plugin(span, start):
        return dict(broker.measure(sc, windows.samples_in(samples, span), windows.logs_in(logs, t0, span),
                                   produce, consume, start))
    # the plug-in's "since the fault" is since the first fault acted (its t_start), not since
    # the schedule began: the harness's own delay applying it is not the broker's (issue 52)
    m = plugin(w.effect, first_applied(records, fault_start))
    in_effect = windows.samples_in(samples, w.effect)
    for name in windows.NAMED:
        span = getattr(w, name)
        if span is not None and w.effect is not None:
            m[name] = _plain(plugin(span, span[0]))
    m["windows"] = w.to_json()
    # whose view the recorded state is (the plug-in's ``view_from``), seconds per view
    m["view_from"] = dict(Counter(",".join(v) if isinstance(v, list) else str(v)
                                  for s in in_effect if "view_from" in s for v in [s["view_from"]]))
    if w.effect is not None:
        m["blocked_s"] = blocked_s(produce, consume, *w.effect)
    m["nodes_down_s"] = nodes_down_s(in_effect)
    # the nodes whose container was not running at some point (seed 003: "stop ではなくダウン")
    m["nodes_down_count"] = sum(1 for s in m["nodes_down_s"].values() if s > 0)
    # each fault's own times, for predictions about when something happened (expect's windows)
    faults = [f for f in records if f.get("id")]
    m["faults_at"] = {f["id"]: {"start": f.get("t_start"), "end": f.get("t_end")} for f in faults}
    m.update(windows.at_risk(produce, consumed, m["faults_at"], w.effect))
    if sc.live_consumers:
        m["read_after_heal"] = windows.read_after_heal(produce, consumed, phases.get("heal"))
    m.update(power_loss_figures(faults))
    # the sides of the first cut, for "the writes of one side were lost" (R7/R8)
    cut = next((f for f in faults if f.get("fault") == "partition" and (f.get("details") or {}).get("sides")), None)
    if cut:
        m["partition_sides"] = cut["details"]["sides"]
    if sc.live_consumers:  # Q4's claim needs a crash and a redelivery to have happened
        m["redelivered_deliveries"] = sum(1 for r in consume if r.get("redelivered") is True)
        m["consumer_crashes"] = sum((info.get("consumer_crashes") or {}).values())
        # cancel notifications the consumers received (x-cancel-on-ha-failover: seed 001)
        m["consumer_cancels"] = sum((info.get("consumer_cancels") or {}).values())
        heal = phases.get("heal")
        end = phases.get("stop-producers") or (samples[-1]["t"] if samples else None)
        if fault_start is not None and heal is not None and end is not None:
            m["consumers_silent"] = consumers_silent(consume, fault_start, heal, end)
    m["client_timeouts"] = sc.workload.timeouts()
    return m


def first_applied(records: list[dict], default: float | None) -> float | None:
    """When the first fault of nemesis.jsonl acted (run clock), else ``default``."""
    times = [r["t_start"] for r in records if r.get("id") and isinstance(r.get("t_start"), (int, float))]
    return min(times) if times else default


def power_loss_figures(faults: list[dict]) -> dict:
    """A power loss's evidence: the unsynced bytes its file systems forgot (R18: a crash the
    page cache survives proves nothing about fsync), and the writes they saw before the cut:
    0 bytes dropped after many writes is a broker that synced each write, not a fault
    without effect."""
    def total(key: str) -> list[int]:
        return [b for f in faults if f.get("fault") == "power_loss"
                for b in (((f.get("details") or {}).get("evidence") or {}).get(key) or {}).values()
                if isinstance(b, int)]
    out = {}
    if dropped := total("unsynced_bytes_dropped"):
        out["unsynced_bytes_dropped"] = sum(dropped)
    if seen := total("writes_seen"):
        out["power_loss_writes_seen"] = sum(seen)
    return out


def _plain(m: dict) -> dict:
    """A window's figures without the timelines (the effect window's are enough to read)."""
    return {k: v for k, v in m.items() if not k.endswith("_timeline")}
