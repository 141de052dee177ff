"""The windows a run's measurements are taken over (issue 34), pure functions of run.json's
phases and nemesis.jsonl.

A figure that decides a verdict is about the fault: it is taken over the fault's own window,
from the first fault's start to the end of its effect, which is when the cluster was whole
again by itself after the faults were lifted, or the first operator event, whichever came
first. What the harness itself did to the cluster (an operator's restart, a stale partition's
repair, an election it asked for: nemesis.jsonl records with ``fault: operator``) is never
the broker's answer to the fault: no window but ``operator`` holds it. Events after the
effect are still measured, under ``after_heal``, and over the whole run, under ``whole_run``.

    faults ──────────── lift (heal) ──── whole ───────────────── producers stop
    |<-- fault -------->|
    |<-- effect (the decision window) ->|<-- after_heal -------->|
                                       (or up to the first operator event; after_heal
                                        starts once the last one ended)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable

# nemesis.jsonl's "fault" for the harness's own actions; runs before issue 34 wrote "recover"
# for a stale partition's repair (the only operator action they recorded).
OPERATOR = "operator"
OPERATOR_KINDS = (OPERATOR, "recover")
# The windows a prediction may name: ``after_heal: {paused_count: 0}``. The default (a bare
# name) is the effect window.
NAMED = ("after_heal", "whole_run")

Span = tuple[float, float]


@dataclass(frozen=True)
class Windows:
    fault: Span | None        # the first fault applied .. the faults lifted
    effect: Span | None       # the decision window (module docstring)
    after_heal: Span | None   # the effect's end (or the last operator event's) .. the load's end
    operator: tuple[Span, ...]
    whole_run: Span | None
    # what "whole" waited for, in the plug-in's words (run.json ``whole_waited_for``; None:
    # not said, a run before issue 52 or a plug-in that does not say)
    whole: str | None = None

    def to_json(self) -> dict:
        r = (lambda s: [round(s[0], 3), round(s[1], 3)] if s else None)
        return {"fault": r(self.fault), "effect": r(self.effect), "after_heal": r(self.after_heal),
                "operator": [r(s) for s in self.operator], "whole_run": r(self.whole_run),
                "decides": "effect", **({"whole": self.whole} if self.whole else {})}


def operator_events(records: Iterable[dict]) -> list[dict]:
    return [r for r in records if r.get("fault") in OPERATOR_KINDS and isinstance(r.get("t_start"), (int, float))]


def of_run(phases: dict, records: Iterable[dict], last_t: float | None = None,
           waited_for: str | None = None) -> Windows:
    """The run's windows from its phases (run.json) and its nemesis records; ``waited_for``:
    what the "whole" phase waited for (run.json ``whole_waited_for``), said beside the windows."""
    start, lift = phases.get("faults"), phases.get("heal")
    end = phases.get("stop-producers") or phases.get("teardown") or last_t
    if start is None or end is None:
        return Windows(None, None, None, (), (0.0, end) if end is not None else None, waited_for)
    lift = lift if lift is not None else end
    ops = sorted((r["t_start"], r.get("t_end") if isinstance(r.get("t_end"), (int, float)) else end)
                 for r in operator_events(records) if r["t_start"] >= start)
    whole = phases.get("whole")
    # "whole" after an operator recovery is the operator's doing: the first event ends it
    ends = [t for t in (whole, ops[0][0] if ops else None) if t is not None]
    effect_end = min(ends) if ends else (phases.get("recovery") or end)
    effect_end = max(min(effect_end, end), start)
    # after the heal: once whole, and once the harness's hand was off the cluster
    after_start = min(max([effect_end] + [e for _, e in ops] + ([whole] if whole is not None else [])), end)
    return Windows(fault=(start, max(lift, start)), effect=(start, effect_end),
                   after_heal=(after_start, end) if end > after_start else None,
                   operator=tuple(ops), whole_run=(0.0, end), whole=waited_for)


def samples_in(samples: list[dict], span: Span | None) -> list[dict]:
    """The samples taken in ``span``, led by the last one taken before it: the state when the
    window opened (a leader change is a change from that state)."""
    if span is None:
        return list(samples)
    a, b = span
    before = [s for s in samples if s.get("t", 0) < a]
    return before[-1:] + [s for s in samples if a <= s.get("t", 0) <= b]


# `docker logs --timestamps` puts an RFC 3339 UTC time (nanoseconds) before every line.
_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?Z ")


def line_time(line: str) -> float | None:
    """A log line's docker timestamp as Unix seconds (None: no timestamp)."""
    m = _STAMP.match(line)
    if not m:
        return None
    whole = datetime.fromisoformat(m.group(1) + "+00:00").timestamp()
    return whole + (float("0." + m.group(2)) if m.group(2) else 0.0)


def log_in(text: str, t0_unix: float | None, span: Span | None) -> str:
    """The lines of a node's log written in ``span`` (run clock; ``t0_unix`` its origin on
    the wall clock). A line without a timestamp goes with the line before it. Without a
    clock origin or a window, the whole log."""
    if span is None or t0_unix is None:
        return text
    a, b = span[0] + t0_unix, span[1] + t0_unix
    keep, out = False, []
    for line in text.splitlines(keepends=True):
        t = line_time(line)
        if t is not None:
            keep = a <= t <= b
        if keep:
            out.append(line)
    return "".join(out)


def logs_in(logs: dict[str, str], t0_unix: float | None, span: Span | None) -> dict[str, str]:
    return {n: log_in(t, t0_unix, span) for n, t in logs.items()}


def read_after_heal(produce: list[dict], consume: list[dict], heal: float | None) -> int | None:
    """Messages confirmed before the heal began and first read only after it (seed 003, a
    cluster replaced through federation: what the old cluster still held when it went, read
    only because the harness brought it back). By message identity; None without a heal."""
    if heal is None:
        return None
    first: dict[str, float] = {}
    for r in consume:
        m, t = r.get("msg_id"), r.get("t")
        if m and isinstance(t, (int, float)):
            first[m] = min(first.get(m, t), t)
    return sum(1 for r in produce if r.get("outcome") == "ok" and isinstance(r.get("t_complete"), (int, float))
               and r["t_complete"] <= heal and first.get(r.get("msg_id"), -1.0) > heal)


def at_risk(produce: list[dict], consume: list[dict], faults_at: dict[str, dict], effect: Span | None) -> dict:
    """What the faults could have lost (issue 34: ``lost: 0`` of an empty queue proves
    nothing). ``at_risk_at_start``: per fault, the messages confirmed before it began and
    not consumed by then; ``at_risk_at_fault``: the largest of those, what the guard on
    ``lost: 0`` requires (issue 52: the exposure when a fault struck, which a run still
    publishing does not inflate); ``at_risk``: the messages confirmed before the effect window
    closed whose first delivery (if any) came after the first fault began, shown only: any
    run still publishing has some. By message identity."""
    confirmed: dict[str, float] = {}
    for r in produce:
        if r.get("outcome") == "ok" and isinstance(r.get("t_complete"), (int, float)):
            mid = r.get("msg_id")
            confirmed[mid] = min(confirmed.get(mid, r["t_complete"]), r["t_complete"])
    first: dict[str, float] = {}
    for r in consume:
        if isinstance(r.get("t"), (int, float)) and not r.get("rejected"):
            mid = r.get("msg_id")
            first[mid] = min(first.get(mid, r["t"]), r["t"])

    def pending(t: float, confirmed_by: float) -> int:
        return sum(1 for mid, tc in confirmed.items() if tc <= confirmed_by and first.get(mid, float("inf")) >= t)
    out: dict = {"at_risk_at_start": {fid: pending(f["start"], f["start"]) for fid, f in faults_at.items()
                                      if isinstance(f.get("start"), (int, float))}}
    if out["at_risk_at_start"]:
        out["at_risk_at_fault"] = max(out["at_risk_at_start"].values())
    if effect is not None:
        out["at_risk"] = pending(effect[0], effect[1])
    return out
