"""Fault choreographies (issue 38; Jepsen's NATS 2.12 analysis: "pause-kill", "part-kill"):
one step standing for several, expanded when the schedule is parsed (nemesis.schedule's doc
says what each part does). Registered beside the fault kinds (``CHOREOGRAPHIES``)."""
from __future__ import annotations

from nemesis.kinds import REGISTRY, Choreography
from nemesis.steps import BOUND, ScheduleError, Step, check_keys, num


# a choreography's times by default: the crash ``gap`` after the first part, ``down`` for
# how long it stays crashed, ``after`` how long the first stays away once it is back
CHOREOGRAPHY_TIMES = {"gap": 1.0, "down": 10.0, "after": 10.0}


def choreography_span(params: dict) -> float:
    """How long a choreography with ``params`` holds its first part (gap + down + after)."""
    return sum(float(params.get(k, v)) for k, v in CHOREOGRAPHY_TIMES.items())


def expand(data: dict, where: str, label: str) -> list[Step]:
    """A pause_kill / part_kill step as the steps it stands for (see the module's doc)."""
    check_keys(where, data, {"at", "fault", "targets", "params"}, {"at", "fault"})
    targets = data.get("targets") or {}
    check_keys(f"{where}.targets", targets, {"first", "count"})
    params = data.get("params") or {}
    check_keys(f"{where}.params", params, {"crash", "gap", "down", "after"})
    crashes = [n for n, t in REGISTRY.items() if t.crashes]
    crash = params.get("crash", crashes[0])
    if crash not in crashes:
        raise ScheduleError(f"{where}.params: field 'crash' must be one of {crashes}, not {crash!r}")
    at = num(where, "at", data["at"])
    gap = num(where, "gap", params.get("gap", CHOREOGRAPHY_TIMES["gap"]))
    down = num(where, "down", params.get("down", CHOREOGRAPHY_TIMES["down"]), 0.001)
    after = num(where, "after", params.get("after", CHOREOGRAPHY_TIMES["after"]))
    count = int(num(f"{where}.targets", "count", targets.get("count", 1), 1))
    first = targets.get("first", "random:1")
    if not isinstance(first, (str, list)):
        raise ScheduleError(f"{where}.targets: field 'first' must be a target expression, not {first!r}")
    held = gap + down + after
    if data["fault"] == "pause_kill":
        head = [Step(at, "pause", first, label=f"{label}.first"),
                Step(at + held, "unpause", f"{BOUND}{label}.first")]
    else:  # part_kill: the cut is lifted by its own duration
        head = [Step(at, "partition", {"isolate": first}, duration=held, label=f"{label}.first")]
    return head + [Step(at + gap, crash, f"{BOUND}pick:{count}:{BOUND}{label}.first", label=f"{label}.crash"),
                   Step(at + gap + down, "start", f"{BOUND}{label}.crash")]


# how ``mqchaos explore`` draws a choreography: its targets and params (its crash drawn too)
_DRAWN = {"targets": {"first": "random:1"}, "params": {"down": 8, "after": 8}}
CHOREOGRAPHIES = (
    Choreography("pause_kill", expand, _DRAWN, "freezes nodes, crashes others, starts them, thaws the first"),
    Choreography("part_kill", expand, _DRAWN, "cuts nodes off, crashes others, starts them, heals the cut"),
)
