"""Nemesis schedules as data: explicit steps, or generators expanded (seeded) into steps.

In a scenario (YAML), ``nemesis:`` is a list of steps, or a mapping with any of ``steps``,
``cycle`` and ``random`` (each a mapping, or a list of mappings), merged and sorted by ``at``::

    nemesis:
      steps:
        - {at: 10, fault: partition, targets: {isolate: "queue_master:q"}, duration: 30}
        - {at: 50, fault: kill, targets: rabbit3}
        - {at: 60, fault: start, targets: rabbit3}
      cycle: {fault: pause, targets: "leader:t", on: 5, off: 10, start: 5, count: 3}
      random: {faults: [kill, pause, {fault: partition, targets: halves}], seed: 7,
               start: 0, until: 60, on: [3, 8], off: [5, 10]}

``at`` is seconds after the schedule starts; ``duration`` (optional) heals the fault after that
long, otherwise it stays until a later ``start``/``unpause``/``heal`` step or the run's final heal.
Anything a fault needs beyond its targets goes in ``params`` (e.g. ``probability``, ``rate``).

A **choreography** (Jepsen's NATS 2.12 analysis: "pause-kill", "part-kill") is one step that
stands for several: ``{at: 10, fault: pause_kill, targets: {first: leader}, params: {crash:
power_loss, down: 10, after: 10}}`` freezes ``first`` (a minority), then ``gap`` seconds later
crashes ``count`` (default 1) other brokers (``kill`` or ``power_loss``), starts them again
``down`` seconds later (a new majority forms without what the frozen ones held), and thaws
``first`` ``after`` seconds after that; ``part_kill`` cuts ``first`` from everything instead of
freezing it (the cut lasts until the thaw's time). Each part is a step of its own (its own
fault, evidence and heal); the later parts name the nodes the earlier ones hit, bound when
those ran (``@label`` targets: see ``PACKAGES``), so a role that moves meanwhile (the frozen
leader replaced) cannot make the crash hit a frozen node. Any step may carry a ``label`` and
a later step name its nodes the same way (``targets: "@cut"``: the very follower an earlier
``corrupt`` step hit, killed after it).

``when`` makes a step wait for the state a claim needs, not a guessed delay: ``{same: [EXPR,
EXPR], within: S}`` applies the step once both target expressions name the same nodes (K8:
``{same: [isr, leader], within: 30}``, the ISR already shrunk to the leader), at ``at`` or
later; if that does not happen within ``S`` seconds the step fails, and a failed step leaves
the run undecided.
"""
from __future__ import annotations

import random
from typing import Any

from harness.spec import read_yaml
from nemesis.faults import CHOREOGRAPHIES, FAULTS
from nemesis.steps import BOUND, ScheduleError, Step, bound_ref, check_keys, is_bound, num  # noqa: F401 (the parser's API)

MAX_STEPS = 10_000  # generators are bounded by count/until; this is the backstop
PACKAGES = tuple(CHOREOGRAPHIES)  # one step standing for several: nemesis.families.choreography
PACKAGE_DRAWN = {name: ch.drawn for name, ch in CHOREOGRAPHIES.items() if ch.drawn}


def _fault(where: str, name: Any) -> str:
    if name not in FAULTS:
        raise ScheduleError(f"{where}: field 'fault' must be one of {list(FAULTS) + list(PACKAGES)}, not {name!r}")
    return name


def when(data: Any, where: str) -> dict:
    """A step's precondition: ``{same: [EXPR, EXPR], within: S}``."""
    where = f"{where}.when"
    check_keys(where, data, {"same", "within"}, {"same", "within"})
    same = data["same"]
    if not isinstance(same, list) or len(same) != 2 or not all(isinstance(x, str) for x in same):
        raise ScheduleError(f"{where}: field 'same' must be a list of two target expressions, not {same!r}")
    return {"same": list(same), "within": num(where, "within", data["within"], 0.001)}


def step(data: dict, where: str = "step") -> Step:
    check_keys(where, data, {"at", "fault", "targets", "duration", "params", "when", "label"}, {"at", "fault"})
    label = data.get("label")
    if label is not None and (not isinstance(label, str) or not label or BOUND in label):
        raise ScheduleError(f"{where}: field 'label' must be a name (no {BOUND!r}), not {label!r}")
    duration = data.get("duration")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise ScheduleError(f"{where}: field 'params' must be a mapping")
    return Step(at=num(where, "at", data["at"]), fault=_fault(where, data["fault"]),
                targets=data.get("targets"), params=dict(params),
                duration=None if duration is None else num(where, "duration", duration),
                when=None if data.get("when") is None else when(data["when"], where), label=label)


def _span(where: str, name: str, value: Any) -> tuple[float, float]:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ScheduleError(f"{where}: field {name!r} is a number or [min, max]")
        lo, hi = value
    else:
        lo = hi = value
    lo, hi = num(where, name, lo), num(where, name, hi)
    if hi < lo:
        raise ScheduleError(f"{where}: field {name!r} has max < min")
    return lo, hi


def cycle(data: dict, where: str = "cycle") -> list[Step]:
    """The same fault on for ``on`` seconds, off for ``off``, ``count`` times or until ``until``."""
    check_keys(where, data, {"fault", "targets", "on", "off", "start", "count", "until", "params"},
                {"fault", "on", "off"})
    if "count" not in data and "until" not in data:
        raise ScheduleError(f"{where}: needs field 'count' or 'until' (a cycle must end)")
    on, off = num(where, "on", data["on"], 0.001), num(where, "off", data["off"])
    t = num(where, "start", data.get("start", 0))
    count = int(num(where, "count", data.get("count", MAX_STEPS)))
    until = num(where, "until", data.get("until", float("inf")))
    fault = _fault(where, data["fault"])
    steps: list[Step] = []
    while len(steps) < min(count, MAX_STEPS) and t < until:
        steps.append(Step(at=t, fault=fault, targets=data.get("targets"), duration=on,
                          params=dict(data.get("params") or {})))
        t += on + off
    return steps


def _choice(where: str, item: Any) -> dict:
    if isinstance(item, str):
        return {"fault": _fault(where, item), "targets": None, "params": {}}
    check_keys(where, item, {"fault", "targets", "params"}, {"fault"})
    return {"fault": _fault(where, item["fault"]), "targets": item.get("targets"),
            "params": dict(item.get("params") or {})}


def random_faults(data: dict, where: str = "random") -> list[Step]:
    """Faults drawn from a set, one at a time, with seeded random on/off periods."""
    check_keys(where, data, {"faults", "seed", "start", "until", "count", "on", "off"},
                {"faults", "seed", "until", "on", "off"})
    if not isinstance(data["faults"], list) or not data["faults"]:
        raise ScheduleError(f"{where}: field 'faults' must be a non-empty list")
    choices = [_choice(f"{where}.faults[{i}]", f) for i, f in enumerate(data["faults"])]
    on, off = _span(where, "on", data["on"]), _span(where, "off", data["off"])
    rng = random.Random(int(data["seed"]))
    t, until = num(where, "start", data.get("start", 0)), num(where, "until", data["until"])
    count = int(num(where, "count", data.get("count", MAX_STEPS)))
    steps: list[Step] = []
    while t < until and len(steps) < min(count, MAX_STEPS):
        c = rng.choice(choices)
        dur = round(rng.uniform(*on), 3)
        steps.append(Step(at=round(t, 3), fault=c["fault"], targets=c["targets"], duration=dur,
                          params=c["params"]))
        t += dur + rng.uniform(*off)
    return steps


def _many(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def parse(data: Any) -> list[Step]:
    """Steps from a scenario's ``nemesis:`` value, sorted by ``at`` (stable)."""
    if data is None:
        return []
    if isinstance(data, list):
        data = {"steps": data}
    check_keys("nemesis", data, {"steps", "cycle", "random"})
    steps = []
    for i, s in enumerate(data.get("steps") or []):
        if isinstance(s, dict) and s.get("fault") in PACKAGES:
            steps += CHOREOGRAPHIES[s["fault"]].expand(s, f"nemesis.steps[{i}]", f"s{i}")
        else:
            steps.append(step(s, f"nemesis.steps[{i}]"))
    for i, c in enumerate(_many(data.get("cycle") or [])):
        steps += cycle(c, f"nemesis.cycle[{i}]")
    for i, r in enumerate(_many(data.get("random") or [])):
        steps += random_faults(r, f"nemesis.random[{i}]")
    if len(steps) > MAX_STEPS:
        raise ScheduleError(f"nemesis: {len(steps)} steps is more than {MAX_STEPS}")
    steps = sorted(steps, key=lambda s: s.at)
    _check_bound(steps)
    return steps


def _check_bound(steps: list[Step]) -> None:
    """Every ``@label`` target names a step that runs earlier (``@pick:N:@label`` too)."""
    seen: set[str] = set()
    for st in steps:
        if is_bound(st.targets):
            try:
                ref, _ = bound_ref(st.targets)
            except ValueError as e:
                raise ScheduleError(f"nemesis: {st.fault} at {st.at:g}s: targets {e}") from None
            if ref not in seen:
                raise ScheduleError(f"nemesis: {st.fault} at {st.at:g}s: targets {st.targets!r} name no earlier "
                                    f"step's label (labels so far: {sorted(seen) or 'none'})")
        if st.label:
            if st.label in seen:
                raise ScheduleError(f"nemesis: label {st.label!r} is used twice")
            seen.add(st.label)


def load(path: str) -> list[Step]:
    """Steps from a YAML file holding a schedule (or a scenario with a ``nemesis:`` key),
    read as scenario files are (YAML 1.2: a cycle's ``on:`` / ``off:`` are never booleans)."""
    data = read_yaml(path)
    if isinstance(data, dict) and "nemesis" in data:
        data = data["nemesis"]
    return parse(data)
