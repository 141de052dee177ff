"""A run's pictures, on one shared time axis with the faults shaded (Jepsen's latency and rate
plots): what each publish was told and how long it took, the rates of the load and of the
drain, and the broker's state as bands. Pure functions of the run's files; PNGs beside the
report."""
from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

from harness import store
from harness.windows import OPERATOR_KINDS

matplotlib.use("Agg")

COLOURS = {"ok": "tab:green", "fail": "tab:red", "info": "tab:orange"}
MAX_POINTS = 40_000  # ok publishes drawn at most (a seeded sample); fail / info always all


def _faults(ax, faults: list[dict], end: float, label: bool = True) -> None:
    """The faults shaded grey; the harness's own operator events (harness.windows) hatched
    orange apart from them: never read as the broker's behaviour."""
    for f in faults:
        a, z = f.get("t_start"), f.get("t_end") or end
        if not isinstance(a, (int, float)):
            continue
        op = f.get("fault") in OPERATOR_KINDS
        if op:
            ax.axvspan(a, max(z, a + 0.5), facecolor="none", edgecolor="darkorange", hatch="//", alpha=0.6, lw=0.8)
        else:
            ax.axvspan(a, z, color="grey", alpha=0.18, lw=0)
        if label:
            text = f" operator: {f.get('action') or 'recover'}" if op else f" {f.get('fault')}"
            ax.text(a, 0.90 if op else 0.98, text, transform=ax.get_xaxis_transform(), fontsize=7,
                    va="top", color="darkorange" if op else "dimgrey")


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def publishes(run_dir: Path, produce: list[dict], consume: list[dict], check: dict, faults: list[dict],
              end: float) -> Path | None:
    """Every completion: time by latency, coloured by outcome; the lost messages' window and
    sample ids where they were confirmed; duplicated / recovered samples and ordering
    violations where they were delivered."""
    done = [r for r in produce if r.get("outcome") in COLOURS and isinstance(r.get("t_complete"), (int, float))
            and isinstance(r.get("t_invoke"), (int, float))]
    if not done:
        return None
    fig, (ax, dx) = plt.subplots(2, 1, figsize=(11, 5.2), dpi=90, sharex=True, height_ratios=[3, 1])
    rng = random.Random(0)
    for outcome, colour in COLOURS.items():
        pts = [r for r in done if r["outcome"] == outcome]
        if outcome == "ok" and len(pts) > MAX_POINTS:
            pts = rng.sample(pts, MAX_POINTS)
        ax.scatter([r["t_invoke"] for r in pts], [max(r["t_complete"] - r["t_invoke"], 1e-4) for r in pts],
                   s=2 if outcome == "ok" else 6, color=colour, label=f"{outcome} ({sum(1 for r in done if r['outcome'] == outcome)})",
                   alpha=0.5 if outcome == "ok" else 0.9, lw=0)
    samples = check.get("samples") or {}
    by_id = {r["msg_id"]: r for r in done if r["outcome"] == "ok"}
    lost = [by_id[m] for m in samples.get("lost", []) if m in by_id]
    if check.get("lost_window"):
        a, z = check["lost_window"]
        ax.axvspan(a, max(z, a + 0.2), color="red", alpha=0.12, lw=0)
    if lost:
        ax.scatter([r["t_complete"] for r in lost], [max(r["t_complete"] - r["t_invoke"], 1e-4) for r in lost],
                   marker="x", s=40, color="black", label=f"lost (confirmed here; {check.get('lost', 0)} in all)")
    ax.set_yscale("log")
    ax.set_ylabel("latency (s)")
    ax.legend(loc="upper right", fontsize=7, markerscale=2)
    ax.set_title("every publish: when it was sent, how long until the broker's word "
                 "(red band: the lost messages' confirmations)", fontsize=9)
    _faults(ax, faults, end)
    delivered = Counter(int(r["t"]) for r in consume if isinstance(r.get("t"), (int, float)))
    xs = sorted(delivered)
    dx.bar(xs, [delivered[x] for x in xs], width=1.0, align="edge", color="tab:blue", label="delivered / s")
    times: dict[str, list[float]] = {}
    for r in consume:
        if isinstance(r.get("t"), (int, float)):
            times.setdefault(r["msg_id"], []).append(r["t"])
    top = max(delivered.values(), default=1)
    for kind, colour, mark in (("duplicated", "purple", "d"), ("recovered", "tab:cyan", "o"),
                               ("ordering", "red", "|")):
        ts = [t for m in samples.get(kind, []) for t in times.get(m, [])]
        if ts:
            dx.scatter(ts, [top * 0.9] * len(ts), marker=mark, color=colour, s=25, label=f"{kind} (samples)")
    dx.set_ylabel("deliveries / s")
    dx.set_xlabel("seconds since the run started (grey: faults active)")
    dx.legend(loc="upper right", fontsize=7)
    _faults(dx, faults, end, label=False)
    dx.set_xlim(0, end)
    return _save(fig, run_dir / "publishes.png")


def rates(run_dir: Path, produce: list[dict], consume: list[dict], faults: list[dict], phases: dict,
          end: float) -> Path | None:
    """Outcomes and deliveries per second under load; the drain on its own panel, so its
    burst does not crush the load's scale."""
    drain_at = phases.get("drain")
    per = {o: Counter() for o in COLOURS}
    for r in produce:
        if r.get("outcome") in per and isinstance(r.get("t_complete"), (int, float)):
            per[r["outcome"]][int(r["t_complete"])] += 1
    dlv = Counter(int(r["t"]) for r in consume if isinstance(r.get("t"), (int, float)))
    if not any(per.values()) and not dlv:
        return None
    split = int(drain_at) if isinstance(drain_at, (int, float)) else int(end) + 1
    fig, (ax, dx) = plt.subplots(1, 2, figsize=(11, 3.4), dpi=90, width_ratios=[4, 1])
    xs = list(range(0, split))
    for o, colour in COLOURS.items():
        ax.plot(xs, [per[o][x] for x in xs], color=colour, lw=1, label=f"{o} / s")
    ax.plot(xs, [dlv[x] for x in xs], color="tab:blue", lw=1, alpha=0.7, label="delivered / s")
    _faults(ax, faults, split)
    first = min([x for c in per.values() for x in c] + list(dlv), default=0)
    ax.set_xlim(max(first - 2, 0), max(split, first + 1))
    ax.set_xlabel("seconds (load; grey: faults active)")
    ax.set_ylabel("per second")
    ax.legend(loc="upper right", fontsize=7)
    ax.set_title("rates under load", fontsize=9)
    dxs = [x for x in sorted(dlv) if x >= split]
    dx.bar(dxs, [dlv[x] for x in dxs], width=1.0, align="edge", color="tab:blue")
    dx.set_title("drain: delivered / s", fontsize=9)
    dx.set_xlabel("seconds")
    return _save(fig, run_dir / "rates.png")


def broker_state(run_dir: Path, samples: list[dict], faults: list[dict], end: float) -> Path | None:
    """One band per node: leading (leader / queue master), in sync (ISR / synchronised
    mirrors / online members), running, or not running (stopped, frozen, absent)."""
    ok = [s for s in samples if isinstance(s.get("nodes"), dict)]
    if len(ok) < 2:
        return None
    nodes = sorted({n for s in ok for n in s["nodes"]})
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(nodes) + 1.4), dpi=90)
    colour = {"leads": "tab:purple", "in sync": "tab:green", "running": "lightgrey", "down": "black"}
    for i, n in enumerate(nodes):
        # one call per state, each sample's span in it (a call per sample made the picture
        # most of a small run's `mqchaos check`)
        spans: dict[str, list[tuple[float, float]]] = {}
        for a, b in zip(ok, ok[1:]):
            leader = a.get("leader", a.get("master"))
            in_sync = a.get("isr") or a.get("synchronised") or a.get("online") or []
            state = ("down" if a["nodes"].get(n) != "running" else "leads" if leader == n
                     else "in sync" if n in in_sync else "running")
            spans.setdefault(state, []).append((a["t"], b["t"] - a["t"]))
        for state, xs in spans.items():
            ax.broken_barh(xs, (i - 0.4, 0.8), color=colour[state], lw=0)
        stale = [a["t"] for a in ok if _own_leader(a, n) not in (None, a.get("leader", a.get("master")))]
        if stale:  # its own view is not the cluster's: stale, or the other side of a cut
            ax.scatter(stale, [i - 0.45] * len(stale), marker="x", s=8, color="darkorange")
        if any(s.get("controller") == n for s in ok):
            ts = [s["t"] for s in ok if s.get("controller") == n]
            ax.scatter(ts, [i + 0.45] * len(ts), marker="v", s=8, color="tab:red")
    ax.set_yticks(range(len(nodes)), nodes, fontsize=8)
    _faults(ax, faults, end)
    ax.set_xlim(0, end)
    ax.set_xlabel("seconds since the run started (grey: faults active)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colour.values()]
    labels = ["leads (leader / master)", "in sync", "running", "not running (stopped, frozen)"]
    if any(s.get("views") for s in ok):
        handles.append(plt.Line2D([], [], marker="x", color="darkorange", lw=0))
        labels.append("its own view names another leader")
    if any("controller" in s for s in ok):
        handles.append(plt.Line2D([], [], marker="v", color="tab:red", lw=0))
        labels.append("controller")
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    ax.set_title("the broker's state as the majority's nodes see it (each sample's view_from), sampled each "
                 "second; hatched orange: the harness's own hand", fontsize=9)
    return _save(fig, run_dir / "broker-state.png")


def _own_leader(sample: dict, node: str) -> str | None:
    """The leader ``node`` itself names in ``sample`` (RabbitMQ: views map to a node name;
    Kafka: to {leader, isr}), None when it gave no view."""
    v = (sample.get("views") or {}).get(node)
    return v.get("leader") if isinstance(v, dict) else v


def draw_all(run_dir: Path, check: dict, info: dict) -> list[Path]:
    """Every picture the run's files allow (a missing file leaves its picture out)."""
    run_dir = Path(run_dir)
    # the raw lines: a damaged one (an id that is not a string, a time that is not a number)
    # is left out of the pictures, as the checker counts it malformed
    produce = [r for r in store.history_records(run_dir, "produce")
               if isinstance(r.get("msg_id"), str) and isinstance(r.get("outcome"), str)]
    consume = [r for r in store.history_records(run_dir, "consume") if isinstance(r.get("msg_id"), str)]
    faults = store.read_jsonl(run_dir / store.NEMESIS_LOG)
    samples = [x for x in store.read_jsonl(run_dir / store.OBSERVATIONS) if isinstance(x.get("t"), (int, float))]
    times = ([r["t_complete"] for r in produce if isinstance(r.get("t_complete"), (int, float))]
             + [r["t"] for r in consume if isinstance(r.get("t"), (int, float))]
             + [s["t"] for s in samples])
    end = max(times, default=1.0) + 1
    out = [publishes(run_dir, produce, consume, check, faults, end),
           rates(run_dir, produce, consume, faults, info.get("phases") or {}, end),
           broker_state(run_dir, samples, faults, end)]
    return [p for p in out if p is not None]
