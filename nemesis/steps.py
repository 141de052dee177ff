"""A schedule's step, as data (the unit the nemesis runs), its bound targets and the checks
a schedule's fields get; shared by the schedule's parser (nemesis.schedule) and the
choreographies that expand into steps (nemesis.families.choreography)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class ScheduleError(ValueError):
    """The schedule is malformed; the message names the offending field."""


@dataclass(frozen=True)
class Step:
    at: float
    fault: str
    targets: Any = None
    duration: float | None = None
    params: dict = field(default_factory=dict)
    when: dict | None = None  # {"same": [EXPR, EXPR], "within": S}: see the module's doc
    # a choreography's part: later parts name the nodes this one hit as ``@label``
    label: str | None = None

    def to_json(self) -> dict:
        out = {"at": self.at, "fault": self.fault, "targets": self.targets,
               "duration": self.duration, "params": dict(self.params)}
        if self.when:
            out["when"] = dict(self.when)
        if self.label:
            out["label"] = self.label
        return out


# A bound target (a choreography's later part): ``@L`` the nodes step L hit; ``@pick:N:@L``
# N brokers (seeded) that step L did not hit. Resolved by the scheduler when the step runs.
BOUND = "@"


def is_bound(targets: Any) -> bool:
    return isinstance(targets, str) and targets.startswith(BOUND)


def bound_ref(targets: str) -> tuple[str, int | None]:
    """A bound target's label, and for ``@pick:N:@label`` how many brokers outside what that
    step hit to draw (None: the nodes it hit). ValueError when it is neither."""
    ref = targets[len(BOUND):]
    if not ref.startswith("pick:"):
        return ref, None
    _, n, other = ref.split(":", 2)
    if not is_bound(other) or not n.isdigit() or int(n) < 1:
        raise ValueError(f"{targets!r}: a pick is @pick:N:@label, N >= 1")
    return bound_ref(other)[0], int(n)


def check_keys(where: str, data: dict, allowed: set[str], required: set[str] = frozenset()) -> None:
    if not isinstance(data, dict):
        raise ScheduleError(f"{where}: expected a mapping, got {data!r}")
    for key in data:
        if key not in allowed:
            raise ScheduleError(f"{where}: unknown field {key!r} (allowed: {sorted(allowed)})")
    for key in required:
        if key not in data:
            raise ScheduleError(f"{where}: missing field {key!r}")


def num(where: str, name: str, value: Any, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise ScheduleError(f"{where}: field {name!r} must be a number >= {minimum}, not {value!r}")
    return float(value)
