"""Seeded exploration (issue 38): fault schedules nobody wrote, drawn from a list of fault
kinds and choreographies against any scenario's queue / topic, each reproducible from its
seed, and shrunk to the shortest schedule that still shows what a run found.

    mqchaos explore BASE.yaml --faults kill,pause,partition,pause_kill --seed 7 --duration 60
    mqchaos explore --replay results/<scenario>/<run>     the same schedule again

A draw is a list of *groups*: one fault (on for a drawn time, then lifted) or one
choreography (its parts: nemesis.schedule.PACKAGES), each followed by a stable period in
which nothing is injected. The drawn scenario is the base with its ``nemesis:`` replaced
by the groups' explicit steps and its prediction dropped: a drawn schedule has no source,
so the checker's verdict decides (0 valid, 1 anomalies found, 2 undecided). When a run
finds anomalies, ``shrink`` tries shorter schedules (halves of the groups, then each group
alone), each a run of its own, and keeps the shortest that still finds some; every attempt
and its verdict is written to results/explore/<timestamp>/explore.json with the seed and
the groups, so the shortest schedule is a scenario anyone can run again.
"""
from __future__ import annotations

import copy
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness import store
from harness.verdicts import EXIT_INVALID, EXIT_WORDS
from harness.brokers.capabilities import CORRUPT, DataFiles
from nemesis.faults import CRASHES, LIFTED_BY
from nemesis.faults import DRAWN as FAULT_DRAWN
from nemesis.faults import FAULT_TYPES
from nemesis.families.choreography import choreography_span
from nemesis.schedule import PACKAGE_DRAWN, PACKAGES

# what each kind is drawn with (its targets, params): the fault registry's, the schedule's
DRAWN = {**FAULT_DRAWN, **PACKAGE_DRAWN}


@dataclass
class Draw:
    seed: int
    groups: list[list[dict]] = field(default_factory=list)  # each group: its explicit steps

    def steps(self, keep: list[int] | None = None) -> list[dict]:
        """The schedule of the groups kept (all by default), in time order."""
        chosen = [g for i, g in enumerate(self.groups) if keep is None or i in keep]
        return sorted((s for g in chosen for s in g), key=lambda s: s["at"])


def draw(faults: list[str], seed: int, duration: float, on: tuple[float, float] = (5, 15),
         stable: tuple[float, float] = (10, 20), start: float = 5.0, files: str | None = None) -> Draw:
    """Groups drawn one after another until ``duration``: which fault (``faults``), for how
    long it stays on, and the stable period after it, all from one seeded generator."""
    unknown = [f for f in faults if f not in DRAWN]
    if unknown:
        raise ValueError(f"explore: cannot draw {unknown} (drawable: {', '.join(DRAWN)})")
    rng = random.Random(seed)
    d, t = Draw(seed), start
    while t < duration:
        kind = rng.choice(faults)
        spec = DRAWN[kind]
        label = f"g{len(d.groups)}"
        if kind in PACKAGES:
            crashes = [c for c in CRASHES if c in faults] or [CRASHES[0]]
            params = dict(spec["params"], crash=rng.choice(crashes))
            group = [{"at": round(t, 3), "fault": kind, "targets": dict(spec["targets"]), "params": params}]
            held = choreography_span(params)
        else:
            held = round(rng.uniform(*on), 3)
            step = {"at": round(t, 3), "fault": kind, "targets": spec["targets"], "label": label}
            if spec.get("params"):
                step["params"] = dict(spec["params"])
            if CORRUPT in FAULT_TYPES[kind].needs:  # which data files: the broker's first kind
                if not files:
                    raise ValueError(f"explore: {kind} needs a broker with data files (a DataFiles component)")
                step["params"] = dict(step.get("params") or {}, files=files)
            group = [step]
            lift = LIFTED_BY.get(FAULT_TYPES[kind].undo_key or "")  # kill -> start; a cut: its duration
            if lift:
                group.append({"at": round(t + held, 3), "fault": lift, "targets": f"@{label}"})
            else:
                step["duration"] = held
        d.groups.append(group)
        t += held + rng.uniform(*stable)
    return d


def scenario_of(base: dict, steps: list[dict], seed: int, note: str) -> dict:
    """The base scenario with the drawn schedule and no prediction (the checker decides)."""
    sc = copy.deepcopy(base)
    sc["name"] = f"{base['name']}-explore-{seed}"
    sc["description"] = (f"Exploration (issue 38) of {base['name']}: {note}. No prediction: the checker's "
                         f"verdict decides. The base: " + str(base.get("description", "")).strip())
    sc["nemesis"] = steps
    for key in ("expect", "require", "measure"):
        sc.pop(key, None)
    last = max((s["at"] for s in steps), default=0.0)
    timing = dict(sc.get("timing") or {})
    timing["duration"] = max(float(timing.get("duration", 0) or 0), last + 20)
    sc["timing"] = timing
    return sc


Runner = Callable[[dict], tuple[int, str]]  # a scenario -> (exit code, run dir)


def shrink(d: Draw, base: dict, run: Runner, budget: int = 6) -> list[dict]:
    """Shorter schedules (halves of the groups, then each group alone) while one still
    finds anomalies (exit 1): the attempts, each with its groups and verdict, in order."""
    keep = list(range(len(d.groups)))
    attempts: list[dict] = []
    while len(keep) > 1 and len(attempts) < budget:
        half = len(keep) // 2
        candidates = [keep[:half], keep[half:]] + ([[i] for i in keep] if len(keep) <= 4 else [])
        found = None
        for cand in candidates:
            if len(attempts) >= budget:
                break
            code, where = run(scenario_of(base, d.steps(cand), d.seed, f"shrunk to groups {cand}"))
            attempts.append({"groups": cand, "exit": code, "run": where})
            if code == EXIT_INVALID:
                found = cand
                break
        if found is None:
            break
        keep = found
    return attempts


def fault_seconds(groups: list[list[dict]]) -> float:
    """How long the drawn schedule holds a fault on: each group from its first step to its
    lift (a cut's duration, a choreography's span)."""
    total = 0.0
    for g in groups:
        first = g[0]
        if first["fault"] in PACKAGES:
            total += choreography_span(first.get("params") or {})
        elif first.get("duration") is not None:
            total += float(first["duration"])
        elif len(g) > 1:
            total += float(g[-1]["at"]) - float(first["at"])
    return round(total, 3)


# a run's figures the record keeps (check.json), beside its version, history and check time
FIGURES = ("valid", "reason", "attempted", "ok", "info", "lost", "duplicated", "ordering_violations",
           "unavailable_s", "lost_on_node", "produce_records", "deliveries", "replica_records")


def run_figures(run_dir: str) -> dict[str, Any]:
    """What one explored run found (its check.json), the version it ran, its history's size,
    how long the check took (the run's phases: check to end) and any client that failed."""
    if not run_dir:
        return {}
    run_dir = str(Path(store.results_root()) / run_dir)  # a record names runs below the results root
    check = store.read_check(run_dir) or {}
    info = store.read_run(run_dir) or {}
    out: dict[str, Any] = {k: check[k] for k in FIGURES if k in check}
    out["version"] = (info.get("version") or {}).get("version")
    history = Path(run_dir) / store.HISTORY
    out["history_bytes"] = sum(f.stat().st_size for f in history.glob("*.jsonl")) if history.is_dir() else None
    phases = info.get("phases") or {}
    if "check" in phases and "end" in phases:
        out["check_s"] = round(float(phases["end"]) - float(phases["check"]), 1)
    if info.get("client_errors"):
        out["client_errors"] = info["client_errors"]
    events = info.get("client_events") or {}
    if events:  # producers replaced after their client library failed (harness/brokers/kafka/clients.py)
        out["clients_replaced"] = sum(len(v) for v in events.values())
    return out


def explore(base: dict, faults: list[str], seed: int, duration: float, run: Runner, out_dir: Path,
            shrink_budget: int = 6, figures: Callable[[str], dict] = run_figures) -> tuple[int, dict]:
    """One drawn schedule run against ``base``; shrunk if it found anomalies. The record
    (seed, groups, runs and what each found, the shortest reproducing schedule) is written
    to ``out_dir``."""
    d = draw(faults, seed, duration, files=_data_files(base.get("broker")))
    code, where = run(scenario_of(base, d.steps(), seed, f"seed {seed}, faults {','.join(faults)}"))
    record: dict[str, Any] = {"base": base["name"], "seed": seed, "faults": faults, "duration": duration,
                              "groups": d.groups, "fault_s": fault_seconds(d.groups), "run": where, "exit": code,
                              "shrink": []}
    if code == EXIT_INVALID:
        record["shrink"] = shrink(d, base, run, shrink_budget)
        reproduced = [a for a in record["shrink"] if a["exit"] == EXIT_INVALID]
        shortest = min(reproduced, key=lambda a: len(a["groups"]), default=None)
        record["shortest"] = {"groups": shortest["groups"] if shortest else list(range(len(d.groups))),
                              "steps": d.steps(shortest["groups"] if shortest else None)}
    record["checks"] = {r: figures(r) for r in [where, *(a["run"] for a in record["shrink"])] if r}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "explore.json").write_text(json.dumps(record, indent=1) + "\n")
    return code, record


def replay_scenario(run_dir: Path) -> dict:
    """A recorded run's scenario as it ran (run.json), to run again: the same schedule,
    the same seed."""
    info, err = store.read_json(Path(run_dir) / store.RUN_JSON)
    if err or not info or not isinstance(info.get("params"), dict):
        raise ValueError(f"{run_dir}: no recorded scenario to replay ({err or 'run.json has no params'})")
    return info["params"]


def _data_files(broker: str | None) -> str | None:
    """The broker's first data file kind (what a drawn ``corrupt`` corrupts)."""
    from harness import brokers
    try:
        files = brokers.get(broker).cluster().ability(DataFiles)
    except (KeyError, ValueError, TypeError):
        return None
    return next(iter(files.kinds()), None) if files else None


# ---- the published table (docs/journal.md: `mqchaos doc-table docs/batches --explore`) -----------
TABLE_HEAD = ["base @ version", "seed", "drawn from", "groups", "schedule s", "fault on s", "attempted",
              "acknowledged", "lost", "dup", "order viol.", "unavail. s", "history records", "check s",
              "clients replaced", "verdict", "shortest schedule that still finds it"]


def _version(record: dict, figures: dict) -> str:
    found = re.search(r"--version (?:\w+=)?([\w.\-]+)", str(record.get("what", "")))
    return figures.get("version") or (found.group(1) if found else "?")


def _groups_text(groups: list[list[dict]], keep: list[int]) -> str:
    def one(g: list[dict]) -> str:
        first = g[0]
        crash = (first.get("params") or {}).get("crash")
        return first["fault"] + (f" ({crash})" if crash else "") + f" at {float(first['at']):g} s"
    return "; ".join(one(groups[i]) for i in keep)


def _clients(figures: dict) -> str:
    """Producers replaced after a client-library failure, or the clients that crashed."""
    if figures.get("clients_replaced"):
        return str(figures["clients_replaced"])
    return "crashed: " + ", ".join(sorted(figures["client_errors"])) if figures.get("client_errors") else ""


SPELLED_OUT = 12  # an unshrunk schedule of more groups is named, not spelled out, in the table


def table_lines(records: list[dict]) -> list[str]:
    """One row per explored run: its draw, what it found, and the shortest schedule the
    shrink kept (with that run's finding), from the explore records."""
    lines = ["| " + " | ".join(TABLE_HEAD) + " |", "|" + "---|" * len(TABLE_HEAD)]
    for rec in sorted(records, key=lambda r: (r["base"], r["run"])):
        checks = rec.get("checks") or {}
        f = checks.get(rec["run"]) or {}
        records_n = sum(int(f.get(k) or 0) for k in ("produce_records", "deliveries", "replica_records")) or ""
        shortest = ""
        if rec.get("exit") == EXIT_INVALID and not rec.get("shrink") and len(rec["groups"]) > SPELLED_OUT:
            # never shrunk (--shrink-budget 0): the whole schedule, too long to spell out here
            shortest = f"not shrunk: the whole schedule ({len(rec['groups'])} groups, in the record)"
        elif rec.get("exit") == EXIT_INVALID and rec.get("shortest"):
            keep = rec["shortest"]["groups"]
            run = next((a["run"] for a in rec.get("shrink") or [] if a["groups"] == keep and a["exit"] == EXIT_INVALID),
                       rec["run"])
            shortest = f"{_groups_text(rec['groups'], keep)}: {(checks.get(run) or {}).get('reason', '')}"
        verdict = str(EXIT_WORDS.get(rec.get("exit"), "?"))
        if rec.get("exit") == EXIT_INVALID and f.get("reason"):
            verdict += f" ({f['reason']})"
        cells = [f"{rec['base']} @ {_version(rec, f)}", rec["seed"], ",".join(rec["faults"]), len(rec["groups"]),
                 f"{float(rec['duration']):g}", rec.get("fault_s", fault_seconds(rec["groups"])),
                 f.get("attempted", ""), f.get("ok", ""), f.get("lost", ""), f.get("duplicated", ""),
                 f.get("ordering_violations", ""), f.get("unavailable_s", ""), records_n, f.get("check_s", ""),
                 _clients(f), verdict, shortest]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines
