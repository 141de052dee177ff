"""The broker-neutral parts of a scenario, as typed models.

Each broker plug-in subclasses ``BaseScenario`` with its own ``broker`` literal, its
settings model (``cluster:``), the thing its clients use (``queue:`` / ``topic:``), its
workload options and its probes; ``harness.scenario`` joins the plug-ins' models into one
discriminated union. Unknown or mistyped fields are errors that name the field.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import yaml

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from harness.results import Ordering


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Crash(Strict):
    at: float = Field(ge=0, description="seconds after the load starts")
    consumer: str = Field(pattern=r"^c[0-9]+$")


class BaseWorkload(Strict):
    producers: int = Field(2, ge=1, le=64)
    consumers: int = Field(2, ge=0, le=64)
    rate: float = Field(200, gt=0, description="messages per second per producer")
    max_messages: int = Field(1_000_000, ge=1, description="per producer: every load is bounded")
    message_size: int = Field(0, ge=0)
    crashes: list[Crash] = Field(default_factory=list, description="consumer crashes mid-delivery")
    # Messages published (with confirms, as fast as the window allows) before the load starts,
    # so the queue is large when the faults come (R6). They are in the history like any other.
    prefill: int = Field(0, ge=0, le=2_000_000)

    def outcome_timeout(self) -> float:
        """The longest a publish can wait for its outcome (a producer's last word)."""
        return 10.0

    def timeouts(self) -> dict[str, float]:
        """The clients' timeouts in force: client-side unavailability cannot be shorter."""
        return {"outcome_timeout_s": self.outcome_timeout()}


class Timing(Strict):
    warmup: float = Field(3, ge=0, description="seconds of load before the first fault")
    duration: float = Field(30, gt=0, le=3600, description="seconds of load while faults run")
    recovery: float = Field(10, ge=0, description="seconds of load after the heal")
    drain_timeout: float = Field(120, gt=0)
    drain_idle: float = Field(3, gt=0)
    heal_timeout: float = Field(180, gt=0)


# the items of docs/sources/SEED-CLAIMS.md (vendored from ../shared, read 2026-11-25; harness.claims
# parses it, and tests/test_atlas.py holds that it has this many)
SEED_CLAIMS = 76


class BaseScenario(Strict):
    """What every scenario has. A plug-in's subclass narrows ``broker`` to its name."""
    # the plug-in's field for its queue / topic (named in errors about a misplaced one)
    target_key: ClassVar[str] = ""
    # consumers run during the load (crashes, reads under faults), or only in the drain
    live_consumers: ClassVar[bool] = True

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    id: str | None = None
    description: str = ""
    broker: str
    # The broker's version (one of the plug-in's generations); YAML reads 4.0 as a number,
    # so numbers are taken too and checked by harness.scenario (which also applies --version
    # and the environment: after loading, the version the run uses, as text)
    version: str | int | float | None = None
    workload: BaseWorkload = Field(default_factory=BaseWorkload)
    timing: Timing = Field(default_factory=Timing)
    # the schedule as written (recorded in run.json); ``steps`` is what the nemesis runs
    nemesis: list[dict[str, Any]] | dict[str, Any] = Field(default_factory=list)  # nemesis/schedule.py
    ordering: Ordering = "none"
    expect: dict[str, Any] = Field(default_factory=dict)
    # What the claim assumes of the run (the same language as expect:): a run where one of
    # these did not hold, or was not measured, is about something else, so it is undecided.
    require: dict[str, Any] = Field(default_factory=dict)
    # Quantities the source makes no claim about, measured and shown in the row beside the
    # verdict (no prediction: they decide nothing)
    measure: list[str] = Field(default_factory=list)
    # The seed claims this row asserts, by their number in docs/sources/SEED-CLAIMS.md (issue 37:
    # docs/seeds.md's claim table is generated from these and the committed batches)
    claims: list[int] = Field(default_factory=list)
    # A row the source does not describe, built to be read against another (issue 52): the id
    # of that row. A control asserts no seed claim.
    control_of: str | None = Field(None, pattern=r"^[A-Z][0-9]+[a-z0-9]*$")
    seed: int = 0

    @model_validator(mode="after")
    def _claims_are_seed_items(self):
        bad = [c for c in self.claims if not 1 <= c <= SEED_CLAIMS]
        if bad:
            raise ValueError(f"claims: {bad} are no item of docs/sources/SEED-CLAIMS.md (1 to {SEED_CLAIMS})")
        if self.control_of and self.claims:
            raise ValueError(f"claims: a control (control_of: {self.control_of}) asserts no seed claim")
        return self
    # where the version came from: cli / scenario / env / default (harness.scenario sets it)
    _version_source: str = PrivateAttr("default")
    # the parsed schedule (nemesis.schedule.Step, sorted by ``at``), set by harness.scenario
    # when it loads the scenario: parsed once, where its errors name the step and field
    _steps: tuple | None = PrivateAttr(None)

    @property
    def version_source(self) -> str:
        return self._version_source

    @property
    def steps(self) -> tuple:
        """The nemesis schedule as the scenario loader parsed it (what the run loop runs)."""
        if self._steps is None:  # a model built by hand: its schedule was never checked
            raise RuntimeError(f"scenario {self.name}: not loaded through harness.scenario, its schedule unparsed")
        return self._steps

    def __eq__(self, other: object) -> bool:
        """Two scenarios are the same whatever picked their version (--version or the file)."""
        if not isinstance(other, BaseScenario):
            return NotImplemented
        return type(self) is type(other) and self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models are

    @model_validator(mode="after")
    def _crashes_name_consumers(self):
        if self.workload.crashes and not self.live_consumers:
            raise ValueError(f"workload.crashes: {self.broker} is read after the heal; "
                             "there is no consumer to crash during the load")
        names = {f"c{i}" for i in range(self.workload.consumers)}
        for i, c in enumerate(self.workload.crashes):
            if c.consumer not in names:
                raise ValueError(f"workload.crashes.{i}.consumer: no consumer {c.consumer} (have {sorted(names)})")
        return self

    # ---- what the plug-in's subclass answers ------------------------------------------
    def subject(self) -> str:
        """What a bare role target (``leader``, ``queue_master``...) refers to."""
        raise NotImplementedError

    def measurement_names(self) -> set[str]:
        """The quantities the broker's observation and probes measure for this scenario."""
        return set()

    def version_problems(self) -> list[str]:
        """What this scenario asks that its version refuses outright (a configuration key
        that stops the broker booting): errors at load time, as ``field: problem``."""
        return []

    def not_applicable(self) -> str | None:
        """Why the claim does not exist in this version (the feature it is about was
        removed), or None. Such a run brings no cluster up and is undecided (exit 2) with
        this reason (harness.verdicts.NOT_APPLICABLE)."""
        return None

    def prefill_names(self) -> set[str]:
        return {"prefill.seconds", "prefill.rate"} if self.workload.prefill else set()


# ---- reading scenario files ------------------------------------------------------------------
class Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. YAML 1.1 reads `on:`/`off:` (the
    nemesis cycle's fields) and `yes`/`no` as booleans."""


Yaml12Loader.yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
                                        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))


def read_yaml(path: str | Path) -> Any:
    """The YAML data of a scenario (or schedule) file, read as YAML 1.2; OSError and
    yaml.YAMLError as they come (harness.scenario.read names the file in them)."""
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=Yaml12Loader)  # noqa: S506 - a safe loader
