"""Pure tests of the nemesis: grudges (with properties), schedules, target resolution, rule
sets, and the Nemesis's bookkeeping against a fake cluster. No Docker."""
from __future__ import annotations

import json
import random
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import FakeKafka, FakeRabbit
from harness.brokers.rabbitmq.cluster import RabbitCluster
from nemesis import grudge as g
from nemesis import net
from nemesis.schedule import ScheduleError, Step, cycle, parse, random_faults
from nemesis.targets import TargetError, grudge_for, resolve

node_lists = st.lists(st.sampled_from([f"n{i}" for i in range(1, 10)]), min_size=3, max_size=9,
                      unique=True)


def sees(grudge: g.Grudge, nodes: list[str], node: str) -> set[str]:
    """The nodes ``node`` can talk to (itself included): a link is up if neither end grudges."""
    return {m for m in nodes if m not in grudge.get(node, ()) and node not in grudge.get(m, ())}


def assert_well_formed(grudge: g.Grudge) -> None:
    for node, peers in grudge.items():
        assert node not in peers, f"{node} grudges itself"


# ---- properties --------------------------------------------------------------------------
@given(node_lists, st.data())
def test_isolate_cuts_one_node_from_all_others(nodes, data):
    victim = data.draw(st.sampled_from(nodes))
    gr = g.isolate(victim, nodes)
    assert_well_formed(gr)
    assert g.is_symmetric(gr)
    assert sees(gr, nodes, victim) == {victim}
    for other in nodes:
        if other != victim:
            assert sees(gr, nodes, other) == set(nodes) - {victim}


@given(node_lists)
def test_halves_is_a_clean_minority_majority_split(nodes):
    gr = g.halves(nodes)
    assert_well_formed(gr)
    assert g.is_symmetric(gr)
    views = {frozenset(sees(gr, nodes, n)) for n in nodes}
    assert len(views) == 2
    small, big = sorted(views, key=len)
    assert small | big == set(nodes) and not small & big
    assert len(big) - len(small) in (0, 1)
    assert len(small) < g.majority(len(nodes))  # the first half is never a majority
    if len(nodes) % 2:
        assert len(big) >= g.majority(len(nodes))  # and with an odd count the rest is one


@given(node_lists, st.integers(0, 2**31))
def test_random_halves_is_seeded_and_a_split(nodes, seed):
    gr = g.random_halves(nodes, seed)
    assert gr == g.random_halves(list(reversed(nodes)), seed)  # order of input does not matter
    assert g.is_symmetric(gr)
    assert_well_formed(gr)
    assert len({frozenset(sees(gr, nodes, n)) for n in nodes}) == 2


def test_random_halves_differs_across_seeds():
    nodes = [f"n{i}" for i in range(7)]
    assert len({json.dumps(g.to_json(g.random_halves(nodes, s))) for s in range(20)}) > 1


@given(node_lists)
def test_majorities_ring_every_node_sees_a_distinct_majority(nodes):
    gr = g.majorities_ring(nodes)
    assert_well_formed(gr)
    assert g.is_symmetric(gr)
    views = [frozenset(sees(gr, nodes, n)) for n in nodes]
    assert all(len(v) >= g.majority(len(nodes)) for v in views), views
    assert len(set(views)) == len(nodes), "two nodes see the same majority"
    assert g.links(gr), "a ring must cut something"


@given(node_lists)
def test_bridge_middle_sees_all_sides_do_not_see_each_other(nodes):
    gr = g.bridge(nodes)
    assert_well_formed(gr)
    assert g.is_symmetric(gr)
    mid = nodes[len(nodes) // 2]
    assert sees(gr, nodes, mid) == set(nodes)
    left, right = nodes[:len(nodes) // 2], nodes[len(nodes) // 2 + 1:]
    for a in left:
        assert sees(gr, nodes, a) == set(left) | {mid}
    for b in right:
        assert sees(gr, nodes, b) == set(right) | {mid}


@given(node_lists, st.data())
def test_partial_touches_only_that_link(nodes, data):
    a, b = data.draw(st.sampled_from(list(combinations(nodes, 2))))
    gr = g.partial(a, b)
    assert g.links(gr) == {frozenset((a, b))}
    assert g.is_symmetric(gr)
    for x, y in combinations(nodes, 2):
        up = y in sees(gr, nodes, x)
        assert up == ({x, y} != {a, b})


@given(node_lists, st.data())
def test_isolate_from_cuts_exactly_the_cross_links(nodes, data):
    k = data.draw(st.integers(1, len(nodes) - 1))
    shuffled = data.draw(st.permutations(nodes))
    group_a, group_b = shuffled[:k], shuffled[k:]
    extra = data.draw(st.sampled_from([[], ["zz"]]))  # a node in neither group keeps all links
    gr = g.isolate_from(group_a, group_b)
    assert g.is_symmetric(gr)
    assert_well_formed(gr)
    assert g.links(gr) == {frozenset((a, b)) for a in group_a for b in group_b}
    for x in extra:
        assert x not in gr


def test_isolate_from_leader_to_zookeeper():
    gr = g.isolate_from(["kafka2"], ["zk1", "zk2", "zk3"])
    assert gr["kafka2"] == {"zk1", "zk2", "zk3"}
    assert all(gr[z] == {"kafka2"} for z in ("zk1", "zk2", "zk3"))
    assert "kafka1" not in gr and "kafka3" not in gr  # still reaches the followers


def test_errors():
    with pytest.raises(ValueError):
        g.partial("a", "a")
    with pytest.raises(ValueError):
        g.isolate_from(["a"], ["a", "b"])
    with pytest.raises(ValueError):
        g.isolate("x", ["a", "b"])
    with pytest.raises(ValueError):
        g.complete([["a", "b"], ["b"]])
    with pytest.raises(ValueError):
        g.majorities_ring(["a", "b"])


def test_three_node_shapes_exactly():
    nodes = ["rabbit1", "rabbit2", "rabbit3"]
    assert g.to_json(g.halves(nodes)) == {"rabbit1": ["rabbit2", "rabbit3"],
                                         "rabbit2": ["rabbit1"], "rabbit3": ["rabbit1"]}
    assert g.to_json(g.bridge(nodes)) == {"rabbit1": ["rabbit3"], "rabbit2": [],
                                         "rabbit3": ["rabbit1"]}
    assert g.majorities_ring(nodes) == g.bridge(nodes)


def test_json_round_trip_and_union():
    gr = g.union(g.partial("a", "b"), g.partial("a", "c"))
    assert g.to_json(gr) == {"a": ["b", "c"], "b": ["a"], "c": ["a"]}
    assert g.from_json(g.to_json(gr)) == gr


# ---- one-way cuts (seed 003: "rabbit1 -> rabbit3") ---------------------------------------
THREE = ["rabbit1", "rabbit2", "rabbit3"]


def test_one_way_drops_only_what_the_sender_sends():
    gr = g.one_way("rabbit1", "rabbit3")
    # a grudge maps the receiver to the senders whose packets it drops
    assert gr == {"rabbit3": frozenset({"rabbit1"})}
    assert g.to_json(gr) == {"rabbit3": ["rabbit1"]}
    assert not g.is_symmetric(gr)
    assert g.directions(gr) == [["rabbit1", "rabbit3"]]
    assert g.one_way_links(gr) == [["rabbit1", "rabbit3"]]
    assert g.links(gr) == {frozenset({"rabbit1", "rabbit3"})}
    # neither end hears the other both ways, so the sides are a partial cut's: rabbit2 sees both
    assert g.sides(gr, THREE) == [["rabbit1", "rabbit2"], ["rabbit2", "rabbit3"], THREE]
    assert g.sides(gr, THREE) == g.sides(g.partial("rabbit1", "rabbit3"), THREE)
    # both directions of the link, and nothing else, make the two-way cut
    both = g.union(gr, g.one_way("rabbit3", "rabbit1"))
    assert both == g.partial("rabbit1", "rabbit3") == g.symmetric(gr)
    assert g.is_symmetric(both) and g.one_way_links(both) == []
    assert g.directions(both) == [["rabbit1", "rabbit3"], ["rabbit3", "rabbit1"]]


def test_one_way_between_groups():
    gr = g.one_way(["a", "b"], ["c"])
    assert g.to_json(gr) == {"c": ["a", "b"]}
    assert g.one_way_links(gr) == [["a", "c"], ["b", "c"]]
    assert g.symmetric(gr) == g.isolate_from(["a", "b"], ["c"])
    assert g.sides(gr, ["a", "b", "c"]) == [["c"], ["a", "b"]]
    for bad in [("a", "a"), (["a", "b"], ["b"]), ([], ["a"]), ("a", [])]:
        with pytest.raises(ValueError):
            g.one_way(*bad)


@given(node_lists, st.data())
def test_one_way_drops_exactly_one_direction_of_each_cross_link(nodes, data):
    k = data.draw(st.integers(1, len(nodes) - 1))
    shuffled = data.draw(st.permutations(nodes))
    senders, receivers = shuffled[:k], shuffled[k:]
    gr = g.one_way(senders, receivers)
    assert_well_formed(gr)
    assert not g.is_symmetric(gr)
    assert g.directions(gr) == sorted([a, b] for a in senders for b in receivers)
    assert g.links(gr) == g.links(g.isolate_from(senders, receivers))
    assert g.union(gr, g.one_way(receivers, senders)) == g.isolate_from(senders, receivers)


# ---- iptables rule sets (pure) -----------------------------------------------------------
ADDR = {"r1": "10.0.0.1", "r2": "10.0.0.2", "r3": "10.0.0.3", g.CLIENTS: "10.0.0.254"}


def test_partition_rules_are_tagged_and_exact():
    rules = net.partition_rules(g.partial("r1", "r3"), ADDR.__getitem__, "f7")
    assert set(rules) == {"r1", "r3"}
    assert rules["r1"] == [
        "MQCHAOS-IN -s 10.0.0.3/32 -m comment --comment mqchaos:f7 -j DROP",
        "MQCHAOS-OUT -d 10.0.0.3/32 -m comment --comment mqchaos:f7 -j DROP",
    ]
    assert all("10.0.0.2" not in r for rs in rules.values() for r in rs)


def test_a_port_cut_drops_only_those_ports_tcp_each_way():
    rules = net.partition_rules(g.partial("r1", "r3"), ADDR.__getitem__, "f8", ports=[9, 7, 9])
    tag = "-m comment --comment mqchaos:f8 -j DROP"
    # per port (sorted, once), a connection to it either way: its packets to and from it
    assert rules["r1"] == [f"{chain} {d} 10.0.0.3/32 -p tcp {flag} {port} {tag}" for port in (7, 9)
                           for flag in ("--dport", "--sport")
                           for chain, d in (("MQCHAOS-IN", "-s"), ("MQCHAOS-OUT", "-d"))]
    assert net.port_matches() == [[]]


def test_ports_are_the_brokers_named_traffic_and_only_for_partitions():
    from nemesis import faults
    ports = {"internal": (19092,), "control": (19093, 19094)}
    assert faults.port_numbers("partition", {"ports": ["control", "internal"]}, ports) == [19092, 19093, 19094]
    assert faults.port_numbers("partition", {}, ports) == []
    assert faults.ports_problems("partition", {"ports": "gossip"}, ports) == [
        "params.ports: no traffic 'gossip' to cut in this cluster (there is: internal, control)"]
    assert faults.ports_problems("partition", {"ports": []}, ports) == [
        "params.ports: a traffic name or a list of them, not []"]
    assert faults.ports_problems("kill", {"ports": "internal"}, ports) == [
        "params.ports: only a partition cuts by port, not kill"]
    with pytest.raises(TargetError, match="no traffic 'x'"):
        faults.port_numbers("partition", {"ports": "x"}, {})


def test_clients_rules_live_on_the_node_only():
    rules = net.partition_rules(g.isolate_from(["r2"], [g.CLIENTS]), ADDR.__getitem__, "f1")
    assert list(rules) == ["r2"]
    assert all("10.0.0.254/32" in r for r in rules["r2"])


def test_loss_rules_drop_once_per_direction():
    rules = net.loss_rules(g.partial("r1", "r2"), ADDR.__getitem__, "f2", 0.25)
    assert rules == {
        "r1": ["MQCHAOS-OUT -d 10.0.0.2/32 -m statistic --mode random --probability 0.25 "
               "-m comment --comment mqchaos:f2 -j DROP"],
        "r2": ["MQCHAOS-OUT -d 10.0.0.1/32 -m statistic --mode random --probability 0.25 "
               "-m comment --comment mqchaos:f2 -j DROP"],
    }
    with pytest.raises(ValueError):
        net.loss_rules(g.partial("r1", "r2"), ADDR.__getitem__, "f2", 0)


def test_one_way_rules_drop_that_direction_at_both_ends_and_nothing_back():
    tag = "-m comment --comment mqchaos:f9 -j DROP"
    rules = net.partition_rules(g.one_way("r1", "r3"), ADDR.__getitem__, "f9")
    # r1 -> r3 dropped as r1 sends it and as r3 receives it; r3 -> r1 has no rule at all
    assert rules == {"r1": [f"MQCHAOS-OUT -d 10.0.0.3/32 {tag}"],
                     "r3": [f"MQCHAOS-IN -s 10.0.0.1/32 {tag}"]}
    # the two directions together are exactly the two-way cut's rules
    both = net.partition_rules(g.union(g.one_way("r1", "r3"), g.one_way("r3", "r1")), ADDR.__getitem__, "f9")
    assert both == net.partition_rules(g.partial("r1", "r3"), ADDR.__getitem__, "f9")
    ported = net.partition_rules(g.one_way("r1", "r3"), ADDR.__getitem__, "f9", ports=[25672])
    assert ported == {"r1": [f"MQCHAOS-OUT -d 10.0.0.3/32 -p tcp {flag} 25672 {tag}" for flag in ("--dport", "--sport")],
                      "r3": [f"MQCHAOS-IN -s 10.0.0.1/32 -p tcp {flag} 25672 {tag}" for flag in ("--dport", "--sport")]}


def test_one_way_to_and_from_the_clients_lives_on_the_node():
    tag = "-m comment --comment mqchaos:f4 -j DROP"
    assert net.partition_rules(g.one_way([g.CLIENTS], ["r2"]), ADDR.__getitem__, "f4") == {
        "r2": [f"MQCHAOS-IN -s 10.0.0.254/32 {tag}"]}
    assert net.partition_rules(g.one_way(["r2"], [g.CLIENTS]), ADDR.__getitem__, "f4") == {
        "r2": [f"MQCHAOS-OUT -d 10.0.0.254/32 {tag}"]}


def test_one_way_loss_drops_only_on_the_sender():
    assert net.loss_rules(g.one_way("r1", "r2"), ADDR.__getitem__, "f2", 0.5) == {
        "r1": ["MQCHAOS-OUT -d 10.0.0.2/32 -m statistic --mode random --probability 0.5 "
               "-m comment --comment mqchaos:f2 -j DROP"]}


def test_scripts_add_and_remove_the_same_specs():
    specs = net.partition_rules(g.partial("r1", "r2"), ADDR.__getitem__, "f3")["r1"]
    add, rm = net.apply_script(specs), net.remove_script(specs)
    for spec in specs:
        assert f"-A {spec}" in add and f"-D {spec}" in rm
    assert "-X MQCHAOS-IN" in net.clear_script() and "while [ $i -lt 50 ]" in net.clear_script()


# ---- schedules ---------------------------------------------------------------------------
def test_parse_steps_sorted_and_typed():
    steps = parse([{"at": 20, "fault": "kill", "targets": "rabbit3"},
                   {"at": 5, "fault": "partition", "targets": {"isolate": "queue_master"},
                    "duration": 10}])
    assert [s.at for s in steps] == [5.0, 20.0]
    assert steps[0] == Step(5.0, "partition", {"isolate": "queue_master"}, 10.0, {})


@pytest.mark.parametrize("bad, field", [
    ([{"at": 1, "fault": "explode"}], "'fault'"),
    ([{"at": 1, "fault": "kill", "duraton": 3}], "'duraton'"),
    ([{"fault": "kill"}], "'at'"),
    ([{"at": -1, "fault": "kill"}], "'at'"),
    ({"cycle": {"fault": "pause", "on": 1, "off": 1}}, "'count' or 'until'"),
    ({"random": {"faults": [], "seed": 1, "until": 5, "on": 1, "off": 1}}, "'faults'"),
    ({"steps": [], "bogus": 1}, "'bogus'"),
])
def test_parse_errors_name_the_field(bad, field):
    with pytest.raises(ScheduleError, match=field):
        parse(bad)


def test_cycle_is_bounded_and_periodic():
    steps = cycle({"fault": "pause", "targets": "leader", "on": 5, "off": 10, "start": 2, "count": 3})
    assert [(s.at, s.duration) for s in steps] == [(2, 5), (17, 5), (32, 5)]
    assert len(cycle({"fault": "kill", "on": 1, "off": 1, "until": 10})) == 5


@given(st.integers(0, 10**6))
@settings(max_examples=30)
def test_random_schedule_is_seeded_bounded_and_non_overlapping(seed):
    spec = {"faults": ["kill", {"fault": "partition", "targets": "halves"}], "seed": seed,
            "until": 60, "on": [1, 5], "off": [2, 4]}
    a, b = random_faults(spec), random_faults(dict(spec))
    assert a == b
    assert all(s.at < 60 for s in a)
    for x, y in zip(a, a[1:]):
        assert x.at + x.duration <= y.at


# ---- target resolution against a fake cluster (tests/fakes.py) ----------------------------
def test_roles_resolve_at_call_time():
    c, rng = FakeKafka(), random.Random(1)
    assert resolve(c, "leader:t/0", rng) == ["kafka2"]
    assert resolve(c, "leader", rng, "t/0") == ["kafka2"]
    assert resolve(c, ["controller", "zk"], rng) == ["kafka3", "zk1", "zk2", "zk3"]
    assert resolve(c, "others:leader:t", rng) == ["kafka1", "kafka3"]
    assert resolve(c, "random:2", random.Random(3)) == resolve(c, "random:2", random.Random(3))
    with pytest.raises(TargetError):
        resolve(c, "queue_master:q", rng)
    with pytest.raises(TargetError):
        resolve(c, "nosuchnode", rng)


def test_except_removes_a_role_from_a_set():
    c, rng = FakeKafka(), random.Random(1)
    assert resolve(c, "followers except controller", rng, "t") == ["kafka1"]
    # random draws from the difference: never the controller, whatever the seed
    assert {resolve(c, "random:1:followers except controller", random.Random(s), "t")[0]
            for s in range(20)} == {"kafka1"}
    assert resolve(c, "brokers except zk", rng) == c.brokers()
    with pytest.raises(TargetError, match="names no node"):
        resolve(c, "controller except kafka3", rng)


def test_leader_cut_from_zookeeper_grudge():
    gr = grudge_for(FakeKafka(), {"isolate_from": ["leader:t", "zk"]}, random.Random(0))
    assert g.to_json(gr) == {"kafka2": ["zk1", "zk2", "zk3"], "zk1": ["kafka2"],
                             "zk2": ["kafka2"], "zk3": ["kafka2"]}
    iso = grudge_for(FakeKafka(), {"isolate": "leader:t"}, random.Random(0))
    assert iso["kafka2"] == frozenset(FakeKafka().nodes()) - {"kafka2"}
    with pytest.raises(TargetError):
        grudge_for(FakeKafka(), {"partial": ["zk", "kafka1"]}, random.Random(0))


# ---- the Nemesis's bookkeeping against a fake cluster (tests/fakes.py) ---------------------
def test_nemesis_records_and_heals(tmp_path):
    from harness.history import RunClock
    from nemesis.core import LOG_FILE, STATE_FILE, Nemesis
    c = FakeRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False,
                 subject="q") as nem:
        f = nem.apply("partition", {"isolate": "queue_master"})
        assert f.targets == ["rabbit1", "rabbit2", "rabbit3"]
        assert f.details["grudge"]["rabbit2"] == ["rabbit1", "rabbit3"]
        assert "partition" in nem.active()
        state = json.loads((tmp_path / STATE_FILE).read_text())
        assert state["active"][0]["undo"]["rules"] == f.details["rules"]
        k = nem.apply("kill", "rabbit3")
        nem.apply("start", "rabbit3")  # ends the kill
        assert k not in nem.active_faults() and c.state["rabbit3"] == "running"
        nem.end(f)
        assert not (tmp_path / STATE_FILE).exists()
        p = nem.apply("pause", "rabbit1")
    lines = [json.loads(x) for x in (tmp_path / LOG_FILE).read_text().splitlines()]
    assert [x["fault"] for x in lines] == ["kill", "partition", "pause"]
    for x in lines:
        assert set(x) >= {"fault", "targets", "t_start", "t_end", "details"}
        assert x["t_end"] >= x["t_start"]
    removed = [call[2] for call in c.calls if call[0] == "exec" and "-D MQCHAOS" in call[2]]
    assert removed and all("mqchaos:f1" in r for r in removed)
    assert c.state["rabbit1"] == "running" and p.t_end is not None


def test_run_lifts_faults_after_their_duration(tmp_path):
    from harness.history import RunClock
    from nemesis.core import Nemesis
    c = FakeRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False) as nem:
        nem.run([{"at": 0, "fault": "pause", "targets": "rabbit2", "duration": 0.3},
                 {"at": 0.1, "fault": "partition", "targets": {"bogus": 1}}])
        assert not nem.active_faults()
    recs = nem.records
    pause = next(r for r in recs if r["fault"] == "pause")
    assert 0.25 <= pause["t_end"] - pause["t_start"] < 2
    bad = next(r for r in recs if r["fault"] == "partition")
    assert "error" in bad["details"]


def test_sigterm_mid_fault_heals_then_exits(tmp_path):
    import os
    import signal

    from harness.history import RunClock
    from nemesis.core import STATE_FILE, Nemesis
    c = FakeRabbit(tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exc:
        with Nemesis(c, tmp_path, clock=RunClock(), settle=0) as nem:
            nem.apply("pause", "rabbit1")
            assert (tmp_path / STATE_FILE).exists()
            os.kill(os.getpid(), signal.SIGTERM)
            pytest.fail("SIGTERM did not interrupt")
    assert exc.value.code == 128 + signal.SIGTERM
    assert c.state["rabbit1"] == "running"
    assert nem.records[-1]["fault"] == "pause" and nem.records[-1]["t_end"] is not None
    assert signal.getsignal(signal.SIGTERM) == before
    assert not (tmp_path / STATE_FILE).exists()


def test_untargeted_steps_hit_one_seeded_broker(tmp_path):
    from harness.history import RunClock
    from nemesis.core import Nemesis
    picks = []
    for _ in range(2):
        c = FakeRabbit(tmp_path)
        with Nemesis(c, tmp_path, clock=RunClock(), settle=0, seed=5, handle_signals=False) as nem:
            f = nem.apply("kill")
            picks.append(f.targets)
            assert len(f.targets) == 1 and c.state[f.targets[0]] == "exited"
    assert picks[0] == picks[1]


def test_static_target_check_takes_lists_as_resolve_does():
    from nemesis.faults import targets_problems
    nodes, roles = ["rabbit1", "rabbit2", "rabbit3"], RabbitCluster.roles
    assert targets_problems("partition", {"components": [["rabbit1"], ["rabbit2", "rabbit3"]]}, nodes, roles) == []
    assert targets_problems("partition", {"isolate": ["rabbit1", "queue_master"]}, nodes, roles) == []
    assert targets_problems("kill", ["rabbit1", "queue_master"], nodes, roles) == []
    assert targets_problems("partition", {"isolate": ["rabbit1", "rabit2"]}, nodes, roles) == [
        "unknown target 'rabit2' (did you mean 'rabbit2'?)"]
    # a name this topology lacks though another has it: refused with why, wherever it stands
    absent = {"arbiter": "no arbiter in this topology", "arb1": "no arbiter in this topology"}
    assert targets_problems("partition", {"isolate_from": ["rabbit1", "random:1:arbiter"]}, nodes, roles,
                            absent) == ["'arbiter': no arbiter in this topology"]
    assert targets_problems("kill", "arb1 except rabbit1", nodes, roles, absent) == [
        "'arb1': no arbiter in this topology"]
    assert targets_problems("partition", {"grudge": {"arb1": ["rabbit1"]}}, nodes, roles, absent) == [
        "grudge names 'arb1', no arbiter in this topology"]


def test_no_effect_is_concluded_only_from_every_rule_bearing_node():
    from nemesis import faults as F

    class C:
        def __init__(self, up, counts):
            self.up, self.counts = up, counts

        def running(self, n):
            return n in self.up

        def exec(self, node, cmd, check=True, timeout=60):
            return 0, f"   {self.counts[node]}   99 DROP all -- * * 10.0.0.1 0.0.0.0/0 /* mqchaos:f1 */\n"
    rules = {"rabbit1": ["x"], "rabbit2": ["y"]}
    f = F.Fault("f1", "partition", ["rabbit1", "rabbit2"])
    F.count_dropped(C({"rabbit1", "rabbit2"}, {"rabbit1": 0, "rabbit2": 0}), f, rules)
    assert f.details["effective"] is False
    f = F.Fault("f1", "partition", ["rabbit1", "rabbit2"])
    F.count_dropped(C({"rabbit2"}, {"rabbit2": 0}), f, rules)  # rabbit1 down: its counters are gone
    assert f.details["effective"] is None and f.details["evidence"]["unread"] == ["rabbit1"]
    F.count_dropped(C({"rabbit1", "rabbit2"}, {"rabbit1": 7, "rabbit2": 0}), f, rules)
    assert f.details["effective"] is True and f.details["evidence"]["dropped_packets"] == {"rabbit1": 7, "rabbit2": 0}


def test_a_node_that_dies_by_itself_ends_the_heal_at_once(tmp_path):
    """A node that does not boot after the faults are lifted (RabbitMQ after a power loss,
    R14b) is not waited for until the heal timeout: the wait stops with what it died of."""
    import time
    from harness.brokers.protocol import NodeExitedError
    from harness.history import RunClock
    from nemesis.core import Nemesis
    c = FakeRabbit(tmp_path)
    nem = Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, heal_timeout=60)
    c.start = lambda n: c.state.__setitem__(n, "dead")  # every start fails to boot
    nem.apply("kill", "rabbit3")
    t0 = time.monotonic()
    with pytest.raises(NodeExitedError, match="rabbit3 failed by itself .*BOOT FAILED"):
        nem.heal(wait=True)
    assert time.monotonic() - t0 < 10
    nem.close()


def test_sides_of_a_cut():
    nodes = ["n1", "n2", "n3"]
    assert g.sides(g.isolate("n1", nodes), nodes) == [["n1"], ["n2", "n3"]]
    # a partial cut: the bridge node n2 reaches both, a side of its own
    assert g.sides(g.partial("n1", "n3"), nodes) == [["n1", "n2"], ["n2", "n3"], ["n1", "n2", "n3"]]
    assert g.sides({}, nodes) == [nodes]
    # one-way drops part the nodes too (neither side hears the other)
    assert g.sides({"n1": {"n2", "n3"}}, nodes) == [["n1"], ["n2", "n3"]]


class ElectingRabbit(FakeRabbit):
    """The queue has no master for the first ``empty`` role reads (an election in flight)."""

    def __init__(self, tmp_path, empty):
        super().__init__(tmp_path)
        self.empty, self.reads = empty, 0

    def role(self, name, arg):
        self.reads += 1
        return [] if self.reads <= self.empty else ["rabbit2"]


def test_a_fault_waits_for_a_role_being_elected_and_records_the_wait(tmp_path):
    from harness.history import RunClock
    from nemesis import core
    from nemesis.targets import NoNodeNow
    c = ElectingRabbit(tmp_path, empty=2)
    with core.Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q",
                      seed=3) as nem:
        f = nem.apply("partition", {"isolate": "queue_master"})
        assert f.details["grudge"]["rabbit2"] == ["rabbit1", "rabbit3"]
        assert 0.4 <= f.details["target_wait_s"] < 5 and c.reads == 3
        nem.end(f)
        # the random draw after a wait is the one the seed gives without a wait
        r = nem.apply("kill", "random:1")
        nem.apply("start", r.targets)
    with core.Nemesis(FakeRabbit(tmp_path), tmp_path, clock=RunClock(), settle=0, handle_signals=False,
                      subject="q", seed=3) as nem2:
        g = nem2.apply("partition", {"isolate": "queue_master"})
        assert "target_wait_s" not in g.details
        nem2.end(g)
        assert nem2.apply("kill", "random:1").targets == r.targets
    # a role that stays empty: a clear error once the bound is spent
    old, core.TARGET_WAIT_S = core.TARGET_WAIT_S, 0.5
    try:
        with core.Nemesis(ElectingRabbit(tmp_path, empty=10**6), tmp_path, clock=RunClock(), settle=0,
                          handle_signals=False, subject="q") as nem3:
            with pytest.raises(NoNodeNow, match="names no node right now .*waited 0.5 s"):
                nem3.apply("partition", {"isolate": "queue_master"})
    finally:
        core.TARGET_WAIT_S = old
