"""A new broker plug-in's checklist (docs/plugins.md, "Adding a broker: the plug-in
checklist") is complete (issue 35): tests/fake_plugin.py, written from that checklist alone
(in-memory nodes, no Docker), survives a partition through the nemesis and the run loop; and
every checklist item has its part in the fake, every part of the protocols its item."""
from __future__ import annotations

import inspect
import re
import subprocess
from pathlib import Path

import pytest

import fake_plugin
from fake_plugin import NAME, NODES, PLUGIN
from harness import brokers, observe, scenario, store
from harness.brokers.capabilities import (CAPABILITIES, FAMILIES, MEMBERSHIP, NODE_CONTROL, RESTART_APP,
                                          CapabilityError, DataFiles, Membership, RestartApp, ability)
from harness.brokers.protocol import Broker, Cluster, NodeAccess
from harness.history import RunClock
from harness.runner import Run
from harness.verdicts import EXIT_UNKNOWN
from harness.windows import line_time

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "plugins.md"
SECTION = "## Adding a broker: the plug-in checklist"
ITEM = re.compile(r"^\d+\. \*\*(P\d+)\b", re.M)

BASE = """\
name: fake-partition
broker: fake
cluster: {leader: fake2}
queue: q
workload: {producers: 3, consumers: 2, rate: 40}
timing: {warmup: 1, duration: 2.5, recovery: 1, drain_idle: 0.3, drain_timeout: 10, heal_timeout: 10}
ordering: none
"""
SCENARIO = BASE + """\
nemesis:
  - {at: 0.2, fault: partition, targets: {isolate: leader}, duration: 1.2}
expect:
  lost: 0
  refused: ">0"
"""


# ---- the checklist, read from the document --------------------------------------------------
def checklist() -> dict[str, str]:
    """{item id: its text} of the checklist section."""
    text = DOC.read_text(encoding="utf-8")
    assert SECTION in text, f"docs/plugins.md has no section {SECTION!r}"
    body = text.split(SECTION, 1)[1]
    body = re.split(r"^#{1,3} ", body, maxsplit=1, flags=re.M)[0]
    starts = list(ITEM.finditer(body))
    return {m[1]: body[m.start():starts[i + 1].start() if i + 1 < len(starts) else len(body)]
            for i, m in enumerate(starts)}


def named(name: str, text: str) -> bool:
    """``name`` is written as code (in a `code span`, which may wrap a line) in ``text``."""
    return any(re.search(rf"\b{re.escape(name)}\b", span) for span in re.findall(r"`([^`]+)`", text))


def defines(owner: type, attr: str) -> bool:
    """The fake's class itself (not a base) defines or declares ``attr``."""
    return attr in vars(owner) or attr in vars(owner).get("__annotations__", {})


def _owner(ref: str):
    owner, attr = ref.split(".", 1)
    return (fake_plugin if owner == "module" else getattr(fake_plugin, owner)), attr


def _public(cls: type) -> set[str]:
    return {n for n in vars(cls) if not n.startswith("_")} | set(vars(cls).get("__annotations__", {}))


def test_every_checklist_item_has_its_part_in_the_fake_and_back():
    items = checklist()
    assert list(items) == [f"P{i}" for i in range(1, len(items) + 1)], "ids run P1, P2, ... in order"
    assert set(items) == set(fake_plugin.CHECKLIST), "an item without a part in the fake, or the reverse"
    for item, refs in fake_plugin.CHECKLIST.items():
        for ref in refs:
            owner, attr = _owner(ref)
            assert (hasattr(owner, attr) if owner is fake_plugin else defines(owner, attr)), f"{item}: {ref} missing"
            assert named(attr, items[item]), f"{item} does not name `{attr}` ({ref} implements it)"


def test_every_part_of_the_protocols_is_a_checklist_item():
    """An abstract method or attribute added to the protocols without an item fails here, and
    so does an optional method the checklist does not mention."""
    items = checklist()
    implemented = {ref.split(".", 1)[1] for refs in fake_plugin.CHECKLIST.values() for ref in refs}
    required = set(Broker.__abstractmethods__) | set(Cluster.__abstractmethods__) \
        | set(Broker.__annotations__) | set(Cluster.__annotations__) | set(NodeAccess.__annotations__)
    assert sorted(required - implemented) == [], "parts of the protocols no checklist item's fake part implements"
    text = "\n".join(items.values())
    mentioned = _public(Broker) | _public(Cluster) | _public(NodeAccess)
    assert sorted(n for n in mentioned if not named(n, text)) == [], "protocol names the checklist never mentions"


# ---- the fake, registered for a test ---------------------------------------------------------------
@pytest.fixture
def fake_broker(monkeypatch):
    """The fake registered as the checklist's P2 says (``PLUGINS``), for this test only."""
    for name, module in fake_plugin.PLUGINS.items():
        monkeypatch.setitem(brokers.PLUGINS, name, module)
    monkeypatch.setattr(brokers, "KINDS", tuple(brokers.PLUGINS))
    monkeypatch.delitem(brokers._loaded, NAME, raising=False)
    scenario._adapter.cache_clear()  # the union of the plug-ins' scenario models
    yield brokers.get(NAME)
    scenario._adapter.cache_clear()
    brokers._loaded.pop(NAME, None)


@pytest.fixture
def no_docker(monkeypatch):
    """Every process the test would start ({"started": [...]}, refused when it is docker), and
    any ``docker`` call the observer would make by itself ({"observer": [...]}: it must ask
    the cluster instead, Cluster.node_states)."""
    seen = {"started": [], "observer": []}
    real = subprocess.Popen

    class Guard(real):
        def __init__(self, args, *a, **kw):
            argv = [args] if isinstance(args, (str, bytes)) else list(args)
            seen["started"].append(argv)
            if Path(str(argv[0])).name == "docker" or "docker" in str(argv[0]).split():
                raise PermissionError(f"no Docker in this test: {argv}")
            super().__init__(args, *a, **kw)

    def docker(*args, check=True, timeout=120):
        seen["observer"].append(list(args))
        return subprocess.CompletedProcess(["docker", *args], 1, "", "no Docker in this test")

    monkeypatch.setattr(subprocess, "Popen", Guard)
    monkeypatch.setattr(observe, "docker", docker, raising=False)
    monkeypatch.delenv(RunClock.ENV, raising=False)  # the run exports its clock's origin
    return seen


def test_the_fake_is_a_plugin(fake_broker):
    assert fake_broker is PLUGIN and brokers.get(NAME).cluster_class().kind == NAME == PLUGIN.name
    assert NAME in brokers.KINDS and PLUGIN in brokers.plugins()
    assert not type(PLUGIN).__abstractmethods__ and not fake_plugin.FakeCluster.__abstractmethods__
    for name in ("declare", "producers", "consumers", "prefill", "drain", "probes"):
        assert list(inspect.signature(getattr(PLUGIN, name)).parameters)[0] == "ctx"


def test_the_loader_judges_a_fake_scenario_by_the_checklist(fake_broker, tmp_path):
    """What the loader asks of a plug-in before anything runs: its scenario and settings models
    (P5, P25), generations (P7), capabilities (P16), roles and absent targets (P16, P20), the
    measurements a prediction may name (P25)."""
    def load(extra: str):
        p = tmp_path / "s.yaml"
        p.write_text(BASE + extra)
        return scenario.load(p)

    sc = load("")
    assert type(sc) is fake_plugin.FakeScenario and sc.cluster.leader == "fake2"
    assert sc.version == "1.0" and sc.cluster.version == "1.0" and sc.subject() == "q"
    for extra, why in [("expect: {leaders_seen: [fake2], nonsense: 1}\n", "expect.nonsense: no fake run measures this"),
                       ("nemesis: [{at: 0, fault: power_loss, targets: fake1}]\n", "needs power_loss"),
                       ("nemesis: [{at: 0, fault: kill, targets: zk}]\n", "a fake cluster has no coordinators"),
                       ("nemesis: [{at: 0, fault: kill, targets: leaderr}]\n", "did you mean 'leader'"),
                       ("nemesis: [{at: 0, fault: partition, targets: fake1, params: {ports: nope}}]\n",
                        "no traffic 'nope' to cut in this cluster (there is: replication)"),
                       ("cluster: {leader: fake4}\n", "cluster.leader"),
                       ("version: '2.0'\n", "'2.0' is not a fake version")]:
        with pytest.raises(scenario.ScenarioError, match=re.escape(why)):
            load(extra)


def test_a_partition_through_the_nemesis_and_the_run_loop(fake_broker, no_docker, tmp_path):
    path = tmp_path / "fake-partition.yaml"
    path.write_text(SCENARIO)
    sc = scenario.load(path)
    run = Run(sc, results=tmp_path / "results", check=False)
    assert run.execute() == EXIT_UNKNOWN  # no check of its own: undecided
    cluster = run.cluster
    assert isinstance(cluster, fake_plugin.FakeCluster) and cluster.leader == "fake2"
    info = _the_record(run, sc)
    cut = _the_partition(run, cluster)
    _the_rules(cluster, cut)
    refused = _the_history(run, cut)
    _the_observation(run, info, refused, no_docker)


def _the_record(run, sc) -> dict:
    # run.json: completed, healed by itself, drained; every key declared
    info = store.read_run(run.dir)
    assert info["status"] == "completed", info.get("error")
    assert store.undeclared(info) == []
    assert info["broker"] == NAME and info["brokers"] == {NAME: "1.0"}
    assert info["self_healed"] is True and info["operator_events"] == []
    assert info["drain"]["complete"] is True and info["drain"]["left"] == 0
    assert "client_errors" not in info and info["consumer_crashes"] == {"c0": 0, "c1": 0}
    for phase in ("cluster-up", "setup", "warmup", "faults", "heal", "whole", "recovery", "drain",
                  "teardown", "cluster-down", "end"):
        assert phase in info["phases"], phase
    assert scenario.parse_recorded(info["params"]) == sc  # what run.json keeps loads again
    return info


def _the_partition(run, cluster) -> dict:
    # nemesis.jsonl: the partition, its plan, its lift and its evidence
    records = store.read_jsonl(run.dir / store.NEMESIS_LOG)
    (cut,) = [r for r in records if r.get("fault") == "partition"]
    d = cut["details"]
    assert d["spec"] == {"isolate": "leader"} and cut["targets"] == list(NODES)
    assert d["sides"] == [["fake2"], ["fake1", "fake3"]]
    assert d["addresses"] == {n: cluster.address(n) for n in NODES}
    assert sorted(d["links"]) == [["fake1", "fake2"], ["fake2", "fake3"]]
    assert set(d["rules"]) == set(NODES) and all(d["rules"].values())
    assert cut["t_start"] is not None and 1.0 <= cut["t_end"] - cut["t_start"] < 2.5  # lifted by its duration
    assert d["effective"] is True and sum(d["evidence"]["dropped_packets"].values()) > 0
    assert not (run.dir / store.NEMESIS_STATE).exists()  # nothing left to heal
    return cut


def _the_rules(cluster, cut) -> None:
    d = cut["details"]
    # the fake's nodes got exactly the grudge's rules, and the lift removed them
    scripts = [(i, node, cmd[2]) for i, (node, cmd) in enumerate(cluster.commands) if cmd[:2] == ["sh", "-c"]]
    peers = {"fake1": ["fake2"], "fake2": ["fake1", "fake3"], "fake3": ["fake2"]}
    for node, specs in d["rules"].items():
        assert sorted({re.search(r"-[sd] (\S+)/32", spec)[1] for spec in specs}) == \
            sorted(cluster.address(p) for p in peers[node])
        for spec in specs:
            added = [i for i, n, s in scripts if n == node and f"iptables -w 5 -A {spec}\n" in s + "\n"]
            removed = [i for i, n, s in scripts if n == node and f"iptables -w 5 -D {spec} 2>/dev/null || true" in s]
            assert len(added) == 1 and len(removed) == 1 and added[0] < removed[0], (node, spec)
        assert all(f"mqchaos:{cut['id']}" in spec for spec in specs)
    assert [n for n in NODES if cluster.net[n].rules or cluster.net[n].chains or cluster.net[n].jumps] == []
    assert cluster.unknown == []  # every command the nemesis sent, understood


def _the_history(run, cut) -> list:
    # the history: the planted records, refused while the grudge cut the leader off
    produce = store.history_records(run.dir, "produce")
    consume = store.history_records(run.dir, "consume")
    assert sorted(Path(f).name for f in store.history_files(run.dir, "produce")) == \
        ["produce-p0.jsonl", "produce-p1.jsonl", "produce-p2.jsonl"]
    assert sorted(Path(f).name for f in store.history_files(run.dir, "consume")) == \
        ["consume-c0.jsonl", "consume-c1.jsonl"]
    invoked = {r["msg_id"] for r in produce if r["outcome"] == "invoke"}
    done = {r["msg_id"]: r for r in produce if r["outcome"] != "invoke"}
    assert invoked == set(done) and invoked
    refused = [r for r in done.values() if r["outcome"] == "fail"]
    assert refused and all(r["node"] != "fake2" and "dropped by" in r["error"] for r in refused)
    assert all(cut["t_start"] - 0.1 <= r["t_invoke"] <= cut["t_end"] + 0.1 for r in refused)
    ok = {m for m, r in done.items() if r["outcome"] == "ok"}
    assert {r["msg_id"] for r in consume} == ok and len(consume) == len(ok)  # every confirmed one, once
    assert any(r["node"] == "fake2" and cut["t_start"] < r["t_complete"] < cut["t_end"]
               for r in done.values() if r["outcome"] == "ok")  # the leader's own side went on
    return refused


def _the_observation(run, info, refused, no_docker) -> None:
    # observation and measurement (P14, P15): the fake's figures in run.json
    samples = store.read_jsonl(run.dir / store.OBSERVATIONS)
    assert samples and all(s.get("leader") == "fake2" for s in samples)
    assert any(s["cut"] for s in samples)
    m = info["measurements"]
    assert m["refused"] == len(refused) and m["leaders_seen"] == ["fake2"]
    assert "error" not in m and m["self_healed"] is True
    log = (run.dir / "logs" / "fake2.log").read_text().splitlines()
    assert log and all(line_time(line) is not None for line in log)  # cut by window like docker's

    # no Docker: no process started at all; the observer asked the cluster for node states
    assert no_docker["started"] == [] and no_docker["observer"] == []
    assert all(set(s["nodes"].values()) == {"running"} for s in samples if "nodes" in s)
    assert not any((m.get("nodes_down_s") or {}).values())


def test_the_observer_reads_the_nodes_states_from_the_cluster(fake_broker, no_docker, tmp_path):
    cluster = PLUGIN.cluster()
    cluster.up(fake_plugin.FakeSettings())
    cluster.pause("fake3")
    obs = observe.Observer(PLUGIN, cluster, None, tmp_path, RunClock())
    assert obs.node_states() == {"fake1": "running", "fake2": "running", "fake3": "frozen"}


# ---- P28: an optional ability, asked by type ---------------------------------------------------
def test_the_fake_has_one_optional_ability_and_not_another(fake_broker):
    """Its capabilities derive from its components alone: restart-app, and no membership or
    data files; a declared capability without its component cannot exist."""
    cluster = PLUGIN.cluster()
    assert fake_plugin.FakeCluster.capabilities == NODE_CONTROL | {RESTART_APP}
    assert PLUGIN.capabilities_of() == NODE_CONTROL | {RESTART_APP}
    assert isinstance(cluster.ability(RestartApp), fake_plugin.FakeRestartApp)
    assert cluster.ability(RestartApp) is cluster.ability(RestartApp)  # built once, kept
    assert cluster.ability(Membership) is None and cluster.ability(DataFiles) is None
    with pytest.raises(CapabilityError, match="has no 'membership' ability"):
        ability(cluster, Membership)
    with pytest.raises(TypeError, match="capabilities derive from components"):
        type("Declared", (fake_plugin.FakeCluster,), {"capabilities": frozenset({MEMBERSHIP})})


def test_the_loader_refuses_what_the_fake_lacks_and_takes_what_it_has(fake_broker, tmp_path):
    def load(extra: str):
        p = tmp_path / "s.yaml"
        p.write_text(BASE + extra)
        return scenario.load(p)

    assert [s.fault for s in load("nemesis: [{at: 0, fault: restart_app, targets: leader}]\n").steps] == ["restart_app"]
    for fault, lacks in [("remove_member", "membership"), ("corrupt", "corrupt"), ("sync_queue", "sync"),
                         ("upgrade", "upgrade"), ("power_loss", "power_loss")]:
        with pytest.raises(scenario.ScenarioError, match=f"needs {lacks}"):
            load(f"nemesis: [{{at: 0, fault: {fault}, targets: fake1, params: {{version: '1.0', files: x}}}}]\n")


def test_a_restart_app_through_the_nemesis_and_the_run_loop(fake_broker, no_docker, tmp_path):
    """The run loop and the nemesis act on the ability the fake has: its component does the
    restart, the fault's record proves it, and the run decides by its prediction."""
    path = tmp_path / "fake-restart-app.yaml"
    path.write_text(BASE + "nemesis:\n  - {at: 0.2, fault: restart_app, targets: leader}\nexpect:\n  lost: 0\n")
    run = Run(scenario.load(path), results=tmp_path / "results", check=False)
    run.execute()
    assert run.cluster.ability(RestartApp).restarted == ["fake2"]
    (step,) = [r for r in store.read_jsonl(run.dir / store.NEMESIS_LOG) if r.get("fault") == "restart_app"]
    assert step["targets"] == ["fake2"] and step["details"]["effective"] is True
    assert "application restarted" in (run.dir / "logs" / "fake2.log").read_text()


def test_every_capability_a_cluster_class_reports_is_a_protocol_it_satisfies():
    classes = {fake_plugin.FakeCluster} | {p.cluster_class(v) for p in brokers.plugins() for v in p.generations}
    for cls in classes:
        assert NODE_CONTROL <= cls.capabilities <= CAPABILITIES, cls
        for name in cls.capabilities - NODE_CONTROL:
            proto = FAMILIES[name]
            assert any(issubclass(c, proto) for c in cls.components), (cls, name)
        for name, proto in FAMILIES.items():  # and the reverse: a component gives its capability
            assert (name in cls.capabilities) == any(issubclass(c, proto) for c in cls.components), (cls, name)
