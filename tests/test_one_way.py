"""A one-way cut end to end without Docker (issue 34: seed 003 cuts "rabbit1 -> rabbit3", one
direction): the partition spec checked at load time and resolved at fault time, the record a
run keeps (grudge, sides, the direction dropped), the evidence counting only the dropped
direction, and R11 / R11b encoding the seed's own cuts and predictions."""
from __future__ import annotations

import random
import re
import shlex
from pathlib import Path

import pytest

from fakes import FakeRabbit
from harness import expect
from harness.history import RunClock
from harness.scenario import load
from nemesis import grudge as g
from nemesis import net
from nemesis.core import Nemesis
from nemesis.faults import targets_problems
from nemesis.targets import grudge_for

ROOT = Path(__file__).parent.parent
SEED = ROOT.parent / "shared" / "seeds" / "003_e994fbc985194f3a.txt"
THREE = ["rabbit1", "rabbit2", "rabbit3"]


def deliver(rules: dict[str, list[str]], packets: list[tuple[str, str]], addr) -> dict[str, dict[str, int]]:
    """A kernel in miniature: each packet (sender, receiver) passes the sender's MQCHAOS-OUT,
    then the receiver's MQCHAOS-IN, and stops at the first rule matching it; returns the
    packets each rule matched, per node."""
    hits = {node: dict.fromkeys(specs, 0) for node, specs in rules.items()}

    def first(node: str, chain: str, flag: str, peer: str) -> str | None:
        return next((s for s in rules.get(node, []) if shlex.split(s)[:3] == [chain, flag, f"{addr(peer)}/32"]), None)
    for sender, receiver in packets:
        rule = first(sender, net.CHAIN_OUT, "-d", receiver) or first(receiver, net.CHAIN_IN, "-s", sender)
        if rule:
            hits[sender if rule in rules.get(sender, []) else receiver][rule] += 1
    return hits


def listing(hits: dict[str, int]) -> str:
    """What ``iptables -L -v -x -n`` prints for these rules (packets first, comment last)."""
    return "\n".join(f"{n:>8} {n * 60:>8} DROP all -- * * 0.0.0.0/0 0.0.0.0/0 "
                     f"/* {shlex.split(spec)[shlex.split(spec).index('--comment') + 1]} */"
                     for spec, n in hits.items())


class CountingRabbit(FakeRabbit):
    """A fake cluster whose rule counters are those ``deliver`` computed."""
    counters: dict[str, dict[str, int]] = {}

    def exec(self, node, cmd, check=True, timeout=60):
        if cmd[-1] == net.LIST_COUNTERS:
            return 0, listing(self.counters.get(node, {}))
        return super().exec(node, cmd, check, timeout)


def test_the_spec_is_checked_before_a_run():
    nodes, roles = THREE, FakeRabbit.roles
    assert targets_problems("partition", {"one_way": ["rabbit1", "rabbit3"]}, nodes, roles) == []
    assert targets_problems("partition", {"one_way": ["queue_master", "others:queue_master"]}, nodes, roles) == []
    assert targets_problems("partition", {"one_way": ["rabbit1", "rabbit1"]}, nodes, roles) == [
        "one_way names 'rabbit1' on both ends: it would cut nothing"]
    assert targets_problems("partition", {"one_way": ["rabbit1"]}, nodes, roles) == [
        "one_way takes a list of two targets, not ['rabbit1']"]
    assert targets_problems("partition", {"one_way": ["rabbit1", "rabit3"]}, nodes, roles) == [
        "unknown target 'rabit3' (did you mean 'rabbit3'?)"]
    assert targets_problems("partition", {"one_wya": ["rabbit1", "rabbit3"]}, nodes, roles) == [
        "unknown partition spec 'one_wya' (did you mean 'one_way'?)"]


def test_the_spec_resolves_at_fault_time_and_a_raw_grudge_still_cuts_both_ways(tmp_path):
    c, rng = FakeRabbit(tmp_path), random.Random(0)
    assert grudge_for(c, {"one_way": ["rabbit1", "rabbit3"]}, rng) == {"rabbit3": frozenset({"rabbit1"})}
    # the fake's queue master is rabbit2: from it to every other broker
    assert g.to_json(grudge_for(c, {"one_way": ["queue_master:q", "others:queue_master:q"]}, rng)) == {
        "rabbit1": ["rabbit2"], "rabbit3": ["rabbit2"]}
    # {grudge: ...} kept its meaning (each named link both ways): one way is one_way's alone
    assert grudge_for(c, {"grudge": {"rabbit3": ["rabbit1"]}}, rng) == g.partial("rabbit1", "rabbit3")


def test_a_one_way_partition_records_its_direction_and_counts_only_it(tmp_path):
    c = CountingRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        f = nem.apply("partition", {"one_way": ["rabbit1", "rabbit3"]})
        d = f.details
        assert f.targets == ["rabbit1", "rabbit3"]
        assert d["grudge"] == {"rabbit3": ["rabbit1"]} and d["one_way"] == [["rabbit1", "rabbit3"]]
        assert d["links"] == [["rabbit1", "rabbit3"]]
        assert d["sides"] == [["rabbit1", "rabbit2"], ["rabbit2", "rabbit3"], THREE]
        tag = f"-m comment --comment mqchaos:{f.id} -j DROP"
        assert d["rules"] == {"rabbit1": [f"MQCHAOS-OUT -d 10.0.0.3/32 {tag}"],
                              "rabbit3": [f"MQCHAOS-IN -s 10.0.0.1/32 {tag}"]}
        # traffic every way during the cut: 7 packets rabbit1 -> rabbit3, 5 back, 9 over each other link
        packets = ([("rabbit1", "rabbit3")] * 7 + [("rabbit3", "rabbit1")] * 5
                   + [(a, b) for a in THREE for b in THREE if a != b and {a, b} != {"rabbit1", "rabbit3"}] * 9)
        c.counters = deliver(d["rules"], packets, c.address)
        nem.end(f)
    ev = f.details["evidence"]
    # the sender's OUTPUT dropped all 7; none reached rabbit3's INPUT; the 5 going back were never matched
    assert ev["dropped_packets"] == {"rabbit1": 7, "rabbit3": 0}
    assert f.details["effective"] is True


def test_the_receivers_rule_holds_the_cut_when_the_sender_lost_its_rules():
    """A sender restarted mid-cut comes back with no rules; the receiver still drops."""
    def addr(n):
        return f"10.0.0.{n[-1]}"
    rules = net.partition_rules(g.one_way("rabbit1", "rabbit3"), addr, "f1")
    hits = deliver({"rabbit3": rules["rabbit3"]}, [("rabbit1", "rabbit3")] * 4 + [("rabbit3", "rabbit1")] * 2, addr)
    assert hits == {"rabbit3": {rules["rabbit3"][0]: 4}}


# ---- R11 / R11b: the seed's two pause_if_all_down experiments ------------------------------
R11 = {"R11-pause-if-all-down.yaml": ["rabbit1", "rabbit3"],
       "R11b-pause-if-all-down-control.yaml": ["rabbit2", "rabbit3"]}


@pytest.mark.parametrize("name, cut", R11.items())
def test_r11_rows_cut_one_way_as_the_seed_did_and_predict_what_it_says(name, cut):
    sc = load(ROOT / "scenarios" / name)
    step, = sc.nemesis
    assert step["fault"] == "partition" and step["targets"] == {"one_way": cut}
    assert sc.cluster.partition_handling == "pause_if_all_down"
    assert sc.cluster.pause_if_all_down_nodes == ["rabbit1"]  # both experiments: the seed's one list
    assert sc.cluster.pause_if_all_down_recover == "ignore"
    # the seed: rabbit3 stops, after "Partial partition detected"; nothing about messages or resuming
    assert sc.expect == {"paused_nodes": ["rabbit3"], "partition_detected": True}
    assert set(expect.expectations(sc)) | set(expect.expectations(sc, "require")) <= expect.decidable(sc)
    assert f"{cut[0]} -> {cut[1]}" in sc.description


@pytest.mark.parametrize("name", R11)
def test_r11_rows_quote_the_seed_verbatim(name):
    if not SEED.exists():
        pytest.skip("../shared is not beside the repository")
    seed = re.sub(r"\s+", " ", SEED.read_text())
    text = load(ROOT / "scenarios" / name).description
    quotes = [q for q in re.findall(r'"([^"]*)"', text) if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", q)]
    assert quotes, "the description quotes the seed's own sentence"
    for q in quotes:
        for part in q.split("[...]"):
            assert re.sub(r"\s+", " ", part.strip()) in seed, part
