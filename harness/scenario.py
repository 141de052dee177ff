"""A scenario is data: YAML validated into typed objects at load time.

The model of a scenario is the broker plug-in's (``harness.spec.BaseScenario`` subclassed
with its settings, queue / topic, workload options and probes), chosen by ``broker:``.
Unknown or mistyped fields are errors that name the field
(`workload.rate: Input should be greater than 0`), raised before anything runs, and so are
a schedule the nemesis cannot parse, a fault that needs a capability the broker lacks, and
a prediction that names a quantity no run of that broker measures.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union

import yaml
from pydantic import Field, TypeAdapter, ValidationError

from harness import brokers, expect, store, tautologies
from nemesis import grudge as grudges
from harness.spec import BaseScenario, read_yaml
from nemesis.faults import CLOSING, CUTS, FAULT_TYPES, missing_capabilities, ports_problems, targets_problems
from nemesis.schedule import is_bound, parse as parse_schedule
from nemesis.targets import expr_problems

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


def parse_recorded(params: Any, source: str = store.RUN_JSON) -> Scenario:
    """The scenario a run recorded (run.json ``params``), also from before the broker
    plug-ins: that model held every broker's workload options and probes, and the other
    broker's queue / topic as null. Those are dropped; what is left must still validate.
    Its version is the one it recorded (none: from before generations, the default one),
    whatever the environment says now."""
    if not isinstance(params, dict) or params.get("broker") not in brokers.KINDS:
        return parse(params, source, env={})
    model = brokers.get(params["broker"]).scenario_model
    targets = {p.scenario_model.target_key for p in brokers.plugins()}
    data = {k: v for k, v in params.items() if v is not None or k not in targets}
    for key in ("workload", "probes"):
        fields = model.model_fields[key].annotation.model_fields
        if isinstance(data.get(key), dict):
            data[key] = {k: v for k, v in data[key].items() if k in fields and (key != "probes" or v is not None)}
    if isinstance(data.get("cluster"), dict):  # the version the run recorded is the scenario's
        data["cluster"] = {k: v for k, v in data["cluster"].items() if k != "version"}
    return parse(data, source, env={})


def versions_option(values: tuple[str, ...] | list[str] | str | None) -> dict[str, str]:
    """--version values as {broker: version}: ``BROKER=V`` for one broker, a bare ``V`` for
    every broker that has such a version (a batch holds both brokers' scenarios). ValueError
    for a version no broker has, or two for one broker."""
    values = [values] if isinstance(values, str) else list(values or [])
    out: dict[str, str] = {}
    for value in values:
        kind, sep, version = value.partition("=")
        if sep and kind not in brokers.KINDS:
            raise ValueError(f"--version {value}: no broker {kind!r} (one of {', '.join(brokers.KINDS)})")
        kinds = [kind] if sep else [k for k in brokers.KINDS if value in brokers.get(k).generations]
        version = version if sep else value
        if not kinds:
            known = "; ".join(f"{k}: {', '.join(brokers.get(k).generations)}" for k in brokers.KINDS)
            raise ValueError(f"--version {value}: no broker has this version ({known})")
        for k in kinds:
            brokers.get(k).version(cli=version, env={})  # the same check as the scenario's
            if out.get(k, version) != version:
                raise ValueError(f"--version: two versions for {k} ({out[k]}, {version})")
            out[k] = version
    return out


def matrix_versions_option(values: tuple[str, ...] | list[str] | str | None) -> dict[str, list[str]]:
    """``mqchaos matrix --versions`` values as {broker: [versions, in the order given]}, for
    every broker: ``BROKER=V1,V2`` lists one broker's versions (a bare version after it in
    the same value is that broker's too), a bare ``V`` stands for every broker that has it
    (as ``--version`` does), ``all`` (``BROKER=all``) for every version; a broker named in
    none gets every version it has. Each version is checked as ``--version`` is (the one
    rule); ValueError naming the value, the version and the broker's known versions."""
    values = [values] if isinstance(values, str) else list(values or [])
    out: dict[str, list[str]] = {}

    def add(kind: str, version: str, value: str) -> None:
        plugin = brokers.get(kind)
        wanted = list(plugin.generations) if version == "all" else [version]
        for v in wanted:
            try:
                v, _ = plugin.version(cli=v, env={})  # the same check as --version's
            except ValueError as e:
                raise ValueError(f"--versions {value}: {str(e).removeprefix('--version: ')}") from None
            if v not in out.setdefault(kind, []):
                out[kind].append(v)

    for value in values:
        current = None  # the broker a bare version after BROKER=V belongs to
        for token in (t.strip() for t in value.split(",")):
            if not token:
                continue
            kind, sep, version = token.partition("=")
            if sep:
                if kind not in brokers.KINDS:
                    raise ValueError(f"--versions {value}: no broker {kind!r} (one of {', '.join(brokers.KINDS)})")
                current = kind
                add(kind, version, value)
            elif current is not None:
                add(current, token, value)
            else:
                kinds = [k for k in brokers.KINDS if token == "all" or token in brokers.get(k).generations]
                if not kinds:
                    known = "; ".join(f"{k}: {', '.join(brokers.get(k).generations)}" for k in brokers.KINDS)
                    raise ValueError(f"--versions {value}: no broker has version {token!r} ({known})")
                for k in kinds:
                    add(k, token, value)
    return {k: out.get(k) or list(brokers.get(k).generations) for k in brokers.KINDS}


def _static(expr: Any, nodes: list[str], brokers_: list[str]) -> list[str] | None:
    """The nodes a target expression names whatever the cluster's state (node names, all,
    brokers, lists of them); None when it depends on the run (roles, random)."""
    if isinstance(expr, list):
        parts = [_static(e, nodes, brokers_) for e in expr]
        return None if any(p is None for p in parts) else list(dict.fromkeys(n for p in parts for n in p))
    if expr in nodes:
        return [expr]
    return {"all": list(nodes), "brokers": list(brokers_)}.get(expr) if isinstance(expr, str) else None


def _static_grudge(kind: str, arg: Any, nodes: list[str], brokers_: list[str]) -> grudges.Grudge | None:
    """The grudge a partition spec builds when its targets are known before the run (the same
    builders the nemesis uses); None when it depends on the run. ValueError from a builder."""
    def names(expr: Any) -> list[str] | None:
        return _static(expr, nodes, brokers_)

    if kind == "grudge":
        return grudges.from_json({k: v if isinstance(v, list) else [v] for k, v in arg.items()})
    if kind in ("partial", "isolate_from"):
        a, b = (names(x) for x in arg)
        if a is None or b is None:
            return None
        if kind == "partial" and (len(a) != 1 or len(b) != 1):
            return None  # refused by the target checks already
        return grudges.partial(a[0], b[0]) if kind == "partial" else grudges.isolate_from(a, b)
    if kind == "isolate":
        group = names(arg)
        return None if group is None else grudges.complete([group, [n for n in nodes if n not in group]])
    if kind == "components":
        parts = [names(x) for x in arg]
        return None if any(p is None for p in parts) else grudges.complete(parts)
    if kind in ("halves", "bridge", "majorities_ring"):
        group = names(arg or "brokers")
        return None if group is None else grudges.BUILDERS[kind](group)
    return None


def cut_problems(targets: Any, nodes: list[str], brokers_: list[str]) -> list[str]:
    """A partition that separates no node from another (a grudge that drops nothing: a node
    cut from itself, one side empty, a single component), or one its builder refuses: the
    fault would record a cut that never happened. Decided only where the targets are known
    before the run; the same expression on both sides of a pair is always the same nodes."""
    spec = {targets: None} if isinstance(targets, str) else targets
    if not isinstance(spec, dict) or len(spec) != 1:
        return []  # its shape is targets_problems' to judge
    (kind, arg), = spec.items()
    # (a partial between two equal node names is targets_problems' already)
    if (kind in ("partial", "isolate_from") and isinstance(arg, list) and len(arg) == 2 and arg[0] == arg[1]
            and (kind == "isolate_from" or arg[0] not in nodes)):
        return [f"{kind}: both sides are {arg[0]!r}: the cut separates no node from another"]
    try:
        cut = _static_grudge(kind, arg, nodes, brokers_)
    except (ValueError, TypeError, AttributeError) as e:
        return [f"{kind}: {e}"]
    if cut is not None and not _cuts_anything(cut):
        return [f"{kind}: separates no node from another (the grudge drops nothing)"]
    return []


def _cuts_anything(cut: grudges.Grudge) -> bool:
    """Does the grudge drop any traffic (a node grudging only itself drops none)?"""
    return any(peer != node for node, peers in cut.items() for peer in peers)


def _topology_problems(steps: list, cluster: Any) -> list[str]:
    """The steps' targets, waits, ports and cuts judged against the version's nodes and roles."""
    nodes, roles, absent = cluster.nodes(), cluster.roles, cluster.absent_targets
    # a choreography's later parts name an earlier part's nodes (bound when it runs): that
    # part's own targets are the ones judged
    steps = [st for st in steps if not is_bound(st.targets)]
    out = [f"  nemesis: {st.fault} at {st.at:g}s: targets: {problem}" for st in steps
           for problem in targets_problems(st.fault, st.targets, nodes, roles, absent)]
    out += [f"  nemesis: {st.fault} at {st.at:g}s: when.same: {problem}" for st in steps if st.when
            for expr in st.when["same"] for problem in expr_problems(expr, nodes, roles, absent)]
    out += [f"  nemesis: {st.fault} at {st.at:g}s: {problem}" for st in steps
            for problem in ports_problems(st.fault, st.params, cluster.ports)]
    return out + [f"  nemesis: {st.fault} at {st.at:g}s: targets: {problem}" for st in steps
                  if st.fault in CUTS for problem in cut_problems(st.targets, nodes, cluster.brokers())]


def parse(data: Any, source: str = "scenario", version: str | dict[str, str] | None = None,
          env: dict[str, str] | None = None) -> Scenario:
    """``data`` validated into its broker's scenario model. ``version`` (--version; a mapping:
    by broker, ``versions_option``) and ``env`` (default: the process's) take part in
    choosing the broker's version (``Broker.version``: the one rule); afterwards
    ``sc.version`` is the version the run uses and ``sc.cluster.version`` the same."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a mapping of fields, not {type(data).__name__}")
    broker = data.get("broker")
    if broker not in brokers.KINDS:
        what = "Field required" if broker is None else f"must be one of {', '.join(brokers.KINDS)}, not {broker!r}"
        raise ScenarioError(f"{source}: invalid scenario\n  broker: {what}")
    lines = _misplaced(data, broker)
    if isinstance(data.get("cluster"), dict) and "version" in data["cluster"]:
        lines.append("  cluster.version: the version is the scenario's own field (version:), not the cluster's")
    try:
        sc = _adapter().validate_python(data)
    except ValidationError as e:
        lines += [f"  {_where(err['loc'], broker)}: {err['msg'].removeprefix('Value error, ')}" for err in e.errors()]
    if lines:
        raise ScenarioError(f"{source}: invalid scenario\n" + "\n".join(lines)) from None
    plugin = brokers.get(broker)
    cli = version.get(broker) if isinstance(version, dict) else version
    try:
        sc.version, sc._version_source = plugin.version(cli=cli, scenario=sc.version, env=env)
    except ValueError as e:
        raise ScenarioError(f"{source}: invalid scenario\n  {e}") from None
    sc.cluster.version = sc.version
    try:  # the nemesis validates its own schedule, naming the step and field: once, here
        steps = parse_schedule(sc.nemesis)
    except ValueError as e:
        raise ScenarioError(f"{source}: invalid scenario\n  {e}") from None
    sc._steps = tuple(steps)  # what the run loop runs
    lacking = _load_problems(sc, steps, plugin)
    if lacking:
        raise ScenarioError(f"{source}: invalid scenario\n" + "\n".join(lacking))
    return sc


def _load_problems(sc: Scenario, steps: list, plugin: Any) -> list[str]:
    """What the scenario and its parsed schedule ask that its broker and version cannot give,
    or a prediction no run can decide; brings the file system a fault needs onto the cluster."""
    broker = sc.broker
    # the version's topology (its nodes and roles may depend on it) judges the targets
    caps, cluster = plugin.capabilities_of(sc.version), plugin.cluster(version=sc.version)
    # a capability every version lacks is the broker's; one only this version lacks, the version's,
    # unless the claim itself is not this version's (a mirrored queue's power loss on 4.3)
    lacking = [f"  nemesis: {st.fault} at {st.at:g}s needs {', '.join(missing)}, which {broker}"
               f"{'' if broker_lacks else ' ' + str(sc.version)} nodes cannot do"
               for st in steps if (missing := missing_capabilities(st.fault, caps))
               and ((broker_lacks := bool(missing_capabilities(st.fault, plugin.capabilities)))
                    or not sc.not_applicable())]
    lacking += [f"  {problem}" for problem in sc.version_problems()]
    # A claim this version does not have (not applicable: no cluster comes up) may name the
    # nodes and traffic of the topology it is about; it is checked on a version that has it.
    lacking += _topology_problems([] if sc.not_applicable() else steps, cluster)
    faults = sum(1 for st in steps if st.fault not in CLOSING)
    lacking += [f"  {field}.{k}.{problem}" for field in ("expect", "require")
                for k, v in expect.expectations(sc, field).items() if expect.is_window(v)
                for problem in expect.window_problems(v, faults)]
    bad = expect.undecidable(sc)
    lacking += [f"  {k}: no {broker} run measures this (measured: {', '.join(sorted(expect.decidable(sc)))})"
                for k in bad]
    # A fault may need a file system under the data directories (power_loss: the one that
    # forgets unsynced writes): the scenario gets it, unless it asked for another.
    for kind in (t for t in FAULT_TYPES.values() if t.fs and any(st.fault == t.name for st in steps)):
        if sc.cluster.fs not in (None, kind.fs):
            lacking.append(f"  cluster.fs: {sc.cluster.fs}, but the nemesis {kind.does} ({kind.name} needs fs: {kind.fs})")
        sc.cluster.fs = kind.fs
    return lacking


def read(path: str | Path) -> Any:
    """The YAML data of the scenario file at ``path`` (YAML 1.2: ``harness.spec.read_yaml``,
    the nemesis's schedule files' reader too), not yet validated."""
    path = Path(path)
    try:
        return read_yaml(path)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(f"{path}: not valid YAML: {e}") from None


def load(path: str | Path, version: str | dict[str, str] | None = None) -> Scenario:
    """The scenario file at ``path``; ``version``: --version (see ``parse``). A prediction that
    cannot fail (harness.tautologies) is refused here, not in ``parse``: a stored run's recorded
    scenario (``parse_recorded``) stays readable as it was run."""
    sc = parse(read(path), str(path), version=version)
    if bad := tautologies.problems(sc):
        raise ScenarioError(f"{path}: invalid scenario\n" + "\n".join(f"  {b}" for b in bad))
    return sc
