"""A scenario is data: YAML validated into typed objects at load time.

The model of a scenario is the broker plug-in's (``harness.spec.BaseScenario`` subclassed
with its settings, queue / topic, workload options and probes), chosen by ``broker:``.
Unknown or mistyped fields are errors that name the field
(`workload.rate: Input should be greater than 0`), raised before anything runs, and so are
a schedule the nemesis cannot parse, a fault that needs a capability the broker lacks, and
a prediction that names a quantity no run of that broker measures.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union

import yaml
from pydantic import Field, TypeAdapter, ValidationError

from harness import brokers, expect
from harness.spec import BaseScenario
from nemesis.faults import missing_capabilities
from nemesis.schedule import CLOSING, parse as parse_schedule
from nemesis.targets import expr_problems, targets_problems

Scenario = BaseScenario  # what callers hold: one plug-in's subclass of it


class ScenarioError(ValueError):
    pass


@cache
def _adapter() -> TypeAdapter:
    models = tuple(p.scenario_model for p in brokers.plugins())
    union = models[0] if len(models) == 1 else Annotated[Union[models], Field(discriminator="broker")]
    return TypeAdapter(union)


def _where(loc: tuple, broker: str) -> str:
    if loc and loc[0] == broker:  # the union's tag: the error is in that broker's model
        loc = loc[1:]
    return ".".join(str(x) for x in loc) or "(top level)"


def _misplaced(data: dict, broker: str) -> list[str]:
    """Another broker's queue / topic field, named as such (not just "extra input")."""
    own = brokers.get(broker).scenario_model.target_key
    return [f"  {p.scenario_model.target_key}: is for {p.name} scenarios; {broker} uses {own}:"
            for p in brokers.plugins()
            if p.name != broker and p.scenario_model.target_key != own and p.scenario_model.target_key in data]


def parse_recorded(params: Any, source: str = "run.json") -> Scenario:
    """The scenario a run recorded (run.json ``params``), also from before the broker
    plug-ins: that model held every broker's workload options and probes, and the other
    broker's queue / topic as null. Those are dropped; what is left must still validate."""
    if not isinstance(params, dict) or params.get("broker") not in brokers.KINDS:
        return parse(params, source)
    model = brokers.get(params["broker"]).scenario_model
    targets = {p.scenario_model.target_key for p in brokers.plugins()}
    data = {k: v for k, v in params.items() if v is not None or k not in targets}
    for key in ("workload", "probes"):
        fields = model.model_fields[key].annotation.model_fields
        if isinstance(data.get(key), dict):
            data[key] = {k: v for k, v in data[key].items() if k in fields and (key != "probes" or v is not None)}
    return parse(data, source)


def parse(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a mapping of fields, not {type(data).__name__}")
    broker = data.get("broker")
    if broker not in brokers.KINDS:
        what = "Field required" if broker is None else f"must be one of {', '.join(brokers.KINDS)}, not {broker!r}"
        raise ScenarioError(f"{source}: invalid scenario\n  broker: {what}")
    lines = _misplaced(data, broker)
    try:
        sc = _adapter().validate_python(data)
    except ValidationError as e:
        lines += [f"  {_where(err['loc'], broker)}: {err['msg'].removeprefix('Value error, ')}" for err in e.errors()]
    if lines:
        raise ScenarioError(f"{source}: invalid scenario\n" + "\n".join(lines)) from None
    try:  # the nemesis validates its own schedule, naming the step and field
        steps = parse_schedule(sc.nemesis)
    except ValueError as e:
        raise ScenarioError(f"{source}: invalid scenario\n  {e}") from None
    plugin = brokers.get(broker)
    caps, cluster = plugin.capabilities, plugin.cluster()
    lacking = [f"  nemesis: {st.fault} at {st.at:g}s needs {', '.join(missing)}, which {broker} nodes cannot do"
               for st in steps if (missing := missing_capabilities(st.fault, caps))]
    lacking += [f"  nemesis: {st.fault} at {st.at:g}s: targets: {problem}" for st in steps
                for problem in targets_problems(st.fault, st.targets, cluster.nodes(), cluster.roles)]
    lacking += [f"  nemesis: {st.fault} at {st.at:g}s: when.same: {problem}" for st in steps if st.when
                for expr in st.when["same"] for problem in expr_problems(expr, cluster.nodes(), cluster.roles)]
    faults = sum(1 for st in steps if st.fault not in CLOSING)
    lacking += [f"  {field}.{k}.{problem}" for field in ("expect", "require")
                for k, v in expect.expectations(sc, field).items() if expect.is_window(v)
                for problem in expect.window_problems(v, faults)]
    bad = expect.undecidable(sc)
    lacking += [f"  {k}: no {broker} run measures this (measured: {', '.join(sorted(expect.decidable(sc)))})"
                for k in bad]
    # A power cut needs the file system that forgets unsynced writes under the data directories.
    if any(st.fault == "power_loss" for st in steps):
        if sc.cluster.fs == "plain":
            lacking.append("  cluster.fs: plain, but the nemesis cuts the power (power_loss needs fs: lazy)")
        sc.cluster.fs = "lazy"
    if lacking:
        raise ScenarioError(f"{source}: invalid scenario\n" + "\n".join(lacking))
    return sc


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans: only true/false. YAML 1.1 reads `on:`/`off:` (the
    nemesis cycle's fields) and `yes`/`no` as booleans."""


_Loader.yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
                                   for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def load(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # noqa: S506 - a safe loader
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not valid YAML: {e}") from None
    return parse(data, str(path))
