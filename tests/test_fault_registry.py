"""One fault registry (nemesis.faults.FAULT_TYPES): every fault name is defined once, every
table of fault names derives from it, and the schedule is parsed once, by the scenario
loader, as YAML 1.2."""
from __future__ import annotations

import ast
import importlib
import threading
from pathlib import Path

import pytest

from harness.scenario import ScenarioError, parse
from helpers import product_sources
from nemesis import faults as F
from nemesis import kinds
from nemesis import scheduler
from nemesis.schedule import PACKAGES, ScheduleError, load
from nemesis.schedule import parse as parse_schedule

ROOT = Path(__file__).resolve().parent.parent
NAMES = set(F.FAULT_TYPES)


def test_every_fault_name_is_defined_once():
    assert all(name == kind.name for name, kind in F.FAULT_TYPES.items())
    declared = []
    for path in sorted((ROOT / "nemesis" / "families").glob("*.py")):
        module = importlib.import_module(f"nemesis.families.{path.stem}")
        tree = ast.parse(path.read_text())
        # as written: a name, or the module constant it is kept in (LOSS, which plan_partition reads)
        declared += [a.value if isinstance(a, ast.Constant) else getattr(module, a.id)
                     for a in (call.args[0] for call in ast.walk(tree) if isinstance(call, ast.Call)
                               and getattr(call.func, "id", None) == "FaultType")]
    assert sorted(declared) == sorted(NAMES) and len(declared) == len(set(declared))
    assert F.ORDER == tuple(F.FAULT_TYPES)  # the registry keeps the listed order
    with pytest.raises(ValueError, match="defined twice: \\['x'\\]"):
        kinds.register((F.FaultType("x"), F.FaultType("x")))
    with pytest.raises(ValueError, match="defined twice: \\['kill'\\]"):
        kinds.register((F.FAULT_TYPES["kill"],))  # a family may not redefine another's
    assert "x" not in F.FAULT_TYPES


def test_the_choreographies_are_in_the_registry():
    assert PACKAGES == tuple(kinds.CHOREOGRAPHIES) == ("pause_kill", "part_kill")
    assert not set(PACKAGES) & set(F.FAULT_TYPES)  # expanded when parsed: the nemesis never runs one
    steps = parse_schedule([{"at": 1, "fault": "pause_kill", "targets": {"first": "rabbit1"}}])
    assert [s.fault for s in steps] == ["pause", "kill", "start", "unpause"]


def test_the_tables_derive_from_the_registry():
    assert F.FAULTS == tuple(F.FAULT_TYPES)
    assert F.CLOSING == ("start", "unpause", "heal") and F.CUTS == ("partition", "loss")
    assert F.BY_PORT == ("partition",)
    for kind in F.FAULT_TYPES.values():
        # a step either is a fault (planned, executed) or ends earlier ones: never both
        assert (kind.plan is None and kind.execute is None) == bool(kind.closes), kind.name
        assert kind.undo_key in (None, *F.UNDO_ORDER) and kind.closes in (None, F.ALL, *F.UNDO_ORDER)
    # what the tables said before there was a registry (behaviour unchanged)
    assert {n: k.default_targets for n, k in F.FAULT_TYPES.items() if k.default_targets != "random:1"} == {
        "partition": "random_halves", "loss": "random_halves", "rolling_restart": "brokers",
        "start": "all", "unpause": "all", "upgrade": "brokers", "finalize": "all", "sync_queue": "all", "cancel_sync": "all",
        "restore_replicas": "all", "migrate_to_kraft": "all"}
    assert {n: sorted(k.needs) for n, k in F.FAULT_TYPES.items() if k.needs} == {
        "kill": ["kill", "start"], "stop": ["start", "stop"], "pause": ["pause"], "unpause": ["pause"],
        "wipe": ["start", "wipe"], "start": ["start"], "restart": ["start", "stop"],
        "rolling_restart": ["start", "stop"], "restart_app": ["restart_app"], "power_loss": ["power_loss", "start"],
        "corrupt": ["corrupt"], "remove_member": ["membership"], "add_member": ["membership"],
        "upgrade": ["start", "stop", "upgrade"], "finalize": ["features"],
        "remove_controller": ["quorum_membership"], "add_controller": ["quorum_membership"],
        "sync_queue": ["sync"], "cancel_sync": ["sync"], "move_replicas": ["placement"],
        "restore_replicas": ["placement"], "migrate_to_kraft": ["migration"]}
    assert F.OPERATIONS == ("remove_member", "add_member", "remove_controller", "add_controller", "upgrade", "sync_queue",
                            "cancel_sync", "move_replicas", "restore_replicas", "finalize", "migrate_to_kraft",
                            "move_producers")
    assert {n: k.undo_key for n, k in F.FAULT_TYPES.items() if k.plan is F.plan_nodes and k.undo_key} == {
        "kill": "start", "stop": "start", "pause": "unpause", "power_loss": "start"}
    assert [n for n, k in F.FAULT_TYPES.items() if k.fs] == ["power_loss"]
    assert F.missing_capabilities("restart_app", frozenset({"kill", "start"})) == ["restart_app"]
    assert F.missing_capabilities("partition", frozenset()) == []


def test_the_load_time_checks_ask_the_registry():
    nodes = ["rabbit1", "rabbit2", "rabbit3"]
    with pytest.raises(ScheduleError, match=f"must be one of {list(F.FAULTS) + list(PACKAGES)}".replace("[", "\\[")):
        parse_schedule([{"at": 0, "fault": "partiton"}])
    # a cut's targets are a partition spec, a node fault's a target expression
    assert F.targets_problems("loss", "halves", nodes, {}) == []
    assert F.targets_problems("kill", "halves", nodes, {}) == ["unknown target 'halves'"]
    assert F.targets_problems("kill", {"isolate": "rabbit1"}, nodes, {}) == [
        "targets must be a target or a list of them, not {'isolate': 'rabbit1'}"]
    assert F.ports_problems("loss", {"ports": "internal"}, {}) == ["params.ports: only a partition cuts by port, not loss"]


def _fault_name_tables(path: Path) -> list[str]:
    """Literal collections holding two fault names or more, and comparisons of a fault's
    name with a literal one: the tables the registry replaced."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            names = {i.value for i in items if isinstance(i, ast.Constant) and i.value in NAMES}
            if len(names) > 1:
                out.append(f"{path.name}:{node.lineno} {sorted(names)}")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            by_name = any(getattr(s, "attr", getattr(s, "id", None)) == "fault" for s in sides)
            literal = [s.value for s in sides if isinstance(s, ast.Constant) and s.value in NAMES]
            if by_name and literal:
                out.append(f"{path.name}:{node.lineno} compares with {literal}")
    return out


def test_no_module_keeps_its_own_table_of_fault_names():
    # harness/brokers is left out: its capability names (kill, start...) are another vocabulary;
    # so are the registry (faults.py's order) and kinds.py's undo keys (start, unpause), and the
    # families (nemesis/families/), which define the kinds
    files = [p for p in (*(ROOT / "nemesis").glob("*.py"), *(ROOT / "harness").glob("*.py"))
             if p.name not in ("faults.py", "kinds.py") or p.parent.name != "nemesis"]
    assert [hit for p in files for hit in _fault_name_tables(p)] == []


def test_the_schedule_is_parsed_once_by_the_loader(monkeypatch):
    sc = parse({"name": "s", "broker": "rabbitmq", "nemesis": {
        "steps": [{"at": 0, "fault": "kill", "targets": "rabbit1"}],
        "cycle": {"fault": "pause", "targets": "rabbit2", "on": 0.01, "off": 0, "count": 2}}})
    assert sc.steps == tuple(parse_schedule(sc.nemesis)) and len(sc.steps) == 3
    # the nemesis runs the stored steps as they are: no second parse
    monkeypatch.setattr(scheduler, "parse", lambda data: pytest.fail("the schedule was parsed again"))

    class Stub:  # what the scheduler asks of a nemesis
        cluster = rng = subject = clock = None

        def __init__(self):
            self.applied = []

        def apply(self, st, condition=None):
            self.applied.append(st)

        def active_faults(self):
            return []

    stub = Stub()
    scheduler.Scheduler(stub, threading.Event()).run(sc.steps)
    assert stub.applied == list(sc.steps)
    # only the scenario loader (and a hand-run schedule's own reader) parse schedules
    parsers = [p.relative_to(ROOT).as_posix() for p in (*product_sources(ROOT, ["harness"]), *ROOT.glob("nemesis/*.py"))
               if any(isinstance(n, ast.ImportFrom) and n.module == "nemesis.schedule"
                      and any(a.name == "parse" for a in n.names) for n in ast.walk(ast.parse(p.read_text())))]
    assert sorted(parsers) == ["harness/scenario.py", "nemesis/scheduler.py"]


def test_a_scenario_not_loaded_has_no_steps_to_run():
    from harness import brokers
    model = brokers.get("rabbitmq").scenario_model
    with pytest.raises(RuntimeError, match="not loaded through harness.scenario"):
        model(name="s", broker="rabbitmq", nemesis=[{"at": 0, "fault": "kill"}]).steps


def test_a_schedule_file_is_read_as_yaml_1_2(tmp_path):
    """YAML 1.1 reads a cycle's on:/off: as booleans (a mapping keyed True/False)."""
    path = tmp_path / "s.yaml"
    path.write_text("nemesis:\n  cycle: {fault: pause, targets: rabbit1, on: 5, off: 10, count: 2}\n")
    assert [(st.at, st.duration) for st in load(str(path))] == [(0.0, 5.0), (15.0, 5.0)]
    path.write_text("nemesis:\n  cycle: {fault: pause, targets: rabbit1, on: yes, off: 10, count: 2}\n")
    with pytest.raises(ScheduleError, match="field 'on' must be a number >= 0.001, not 'yes'"):
        load(str(path))


def test_a_fault_that_needs_a_file_system_brings_it():
    base = {"name": "p", "broker": "kafka", "nemesis": [{"at": 1, "fault": "power_loss", "targets": "brokers"}]}
    assert parse(base).cluster.fs == F.FAULT_TYPES["power_loss"].fs == "lazy"
    with pytest.raises(ScenarioError, match=r"cluster.fs: plain, but the nemesis cuts the power "
                                            r"\(power_loss needs fs: lazy\)"):
        parse({**base, "cluster": {"fs": "plain"}})
