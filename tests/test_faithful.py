"""What lets a row's verdict turn on the source's claim (issue 15): a step that waits for the
state its fault needs (``when``), requirements that make a run about something else
undecided (``require``), the Kafka leader's placement relative to the controller, and the
figures the re-encoded rows judge by. Synthetic inputs with known answers; fake clusters."""
from __future__ import annotations

import itertools
import time
import threading

import pytest

from fakes import FakeRabbit
from harness import expect
from harness.brokers.kafka import observe as kafka_observe
from harness.brokers.kafka import placement
from harness.history import RunClock
from harness.scenario import ScenarioError, parse
from harness.verdicts import EXIT_UNKNOWN, run_exit_code, undecided
from nemesis.core import Nemesis
from nemesis.schedule import ScheduleError
from nemesis.schedule import parse as parse_schedule


# ---- when: the state a fault needs, observed before it acts -------------------------------
def test_when_is_parsed_and_its_errors_name_the_field():
    st, = parse_schedule([{"at": 1, "fault": "partition", "targets": {"isolate": "leader"},
                           "when": {"same": ["isr", "leader"], "within": 30}}])
    assert st.when == {"same": ["isr", "leader"], "within": 30.0}
    assert st.to_json()["when"] == st.when
    for bad, field in [({"same": ["isr"], "within": 3}, "'same'"), ({"same": ["isr", "leader"]}, "'within'"),
                       ({"same": ["isr", "leader"], "within": 0}, "'within'"),
                       ({"same": ["isr", "leader"], "within": 3, "until": 4}, "'until'")]:
        with pytest.raises(ScheduleError, match=f"steps\\[0\\].when.*{field}"):
            parse_schedule([{"at": 0, "fault": "kill", "when": bad}])


def test_a_scenario_whose_when_names_an_unknown_role_is_refused():
    with pytest.raises(ScenarioError, match="when.same: unknown target 'isrr'"):
        parse({"name": "k", "broker": "kafka", "nemesis": [
            {"at": 0, "fault": "kill", "targets": "leader", "when": {"same": ["isrr", "leader"], "within": 5}}]})


class ShrinkingRabbit(FakeRabbit):
    """queue_mirrors names rabbit1 and rabbit3 until ``shrink`` is set, then rabbit2 alone (the
    queue master): "the ISR is the leader alone" after a while."""

    def __init__(self, tmp_path):
        super().__init__(tmp_path)
        self.shrunk = threading.Event()

    def role(self, name, arg):
        if name == "queue_mirrors" and not self.shrunk.is_set():
            return ["rabbit1", "rabbit3"]
        return ["rabbit2"]


def test_a_step_waits_for_its_condition_and_records_it(tmp_path):
    c = ShrinkingRabbit(tmp_path)
    threading.Timer(0.6, c.shrunk.set).start()
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        nem.run([{"at": 0, "fault": "pause", "targets": "rabbit1", "duration": 0.2},
                 {"at": 0.1, "fault": "kill", "targets": "queue_master",
                  "when": {"same": ["queue_mirrors", "queue_master"], "within": 5}}])
    kill = next(r for r in nem.records if r["fault"] == "kill")
    pause = next(r for r in nem.records if r["fault"] == "pause")
    assert kill["details"]["when"]["nodes"] == ["rabbit2"]
    assert 0.4 <= kill["details"]["when"]["waited_s"] < 3 and kill["t_start"] >= 0.5
    assert pause["t_end"] - pause["t_start"] < 0.6  # a waiting step does not hold the others' lifts
    assert undecided({"status": "completed"}, nem.records) == []


def test_a_condition_that_never_holds_fails_its_step_and_the_run_is_undecided(tmp_path):
    c = ShrinkingRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        nem.run([{"at": 0, "fault": "kill", "targets": "queue_master",
                  "when": {"same": ["queue_mirrors", "queue_master"], "within": 0.4}}])
    rec, = nem.records
    assert ("kill", "rabbit2") not in c.calls  # the fault never acted
    assert "never held" in rec["details"]["error"] and rec["details"]["when"]["seen"] == [
        ["rabbit1", "rabbit3"], ["rabbit2"]]
    reasons = undecided({"status": "completed"}, nem.records)
    assert len(reasons) == 1 and "never held" in reasons[0]


# ---- require: the set-up the claim needs ---------------------------------------------------
def _kafka(require, expect_=None):
    return parse({"name": "k", "broker": "kafka", "expect": expect_ or {"lost": 0}, "require": require})


def test_a_run_whose_set_up_was_not_the_claims_is_undecided_not_held():
    sc = _kafka({"leader_is_controller": True})
    result = {"lost": 0, "ok": 10, "valid": True, "unavailable": []}
    held = expect.verdict(sc, result, {"drain": {"complete": True}, "measurements": {"leader_is_controller": True}})
    assert held["held"] is True and held["requirements"][0]["held"] is True
    other = expect.verdict(sc, result, {"drain": {"complete": True}, "measurements": {"leader_is_controller": False}})
    assert other["held"] is None and "leader_is_controller=False (required True)" in other["reason"]
    assert run_exit_code(dict(result, prediction=other)) == EXIT_UNKNOWN
    unmeasured = expect.verdict(sc, result, {"drain": {"complete": True}, "measurements": {}})
    assert unmeasured["held"] is None
    # a prediction that fails on a run about something else is no finding either
    lost = expect.verdict(sc, dict(result, lost=3), {"drain": {"complete": True},
                                                    "measurements": {"leader_is_controller": False}})
    assert lost["held"] is None


def test_a_requirement_nobody_measures_is_refused_by_name():
    with pytest.raises(ScenarioError, match="require.leader_is_contoller: no kafka run measures this"):
        _kafka({"leader_is_contoller": True})


def test_lost_share_is_lost_over_confirmed():
    m = expect.measured({"lost": 1753, "ok": 1753, "valid": False}, {})
    assert m["lost_share"] == 1
    assert expect.measured({"lost": 1, "ok": 3}, {})["lost_share"] == 0.3333
    assert "lost_share" not in expect.measured({"lost": 0, "ok": 0}, {})


# ---- the Kafka leader's place -------------------------------------------------------------
BROKERS = ["kafka1", "kafka2", "kafka3"]


@pytest.mark.parametrize("controller, rf", list(itertools.product(BROKERS, [1, 2, 3])))
def test_placement_puts_the_preferred_leader_where_asked(controller, rf):
    on = placement(BROKERS, controller, "controller", rf)
    off = placement(BROKERS, controller, "not_controller", rf)
    for replicas in (on, off):
        assert len(replicas) == rf == len(set(replicas)) and set(replicas) <= set(BROKERS)
    assert on[0] == controller
    assert off[0] != controller
    assert (controller in off) == (rf >= 2)  # the controller a follower whenever there is room
    last = placement(BROKERS, controller, "not_controller_last", rf)
    assert len(last) == rf == len(set(last)) and last[0] != controller
    assert (last[-1] == controller) == (rf >= 2) and (controller in last) == (rf >= 2)


def test_placement_without_a_controller_says_so():
    with pytest.raises(RuntimeError, match="no controller"):
        placement(BROKERS, None, "controller", 3)


def test_leader_is_controller_is_read_when_the_faults_begin():
    s = lambda t, leader, controller: {"t": t, "leader": leader, "isr": BROKERS, "controller": controller}
    samples = [s(0, "kafka1", "kafka2"), s(1, "kafka1", "kafka1"), s(2, "kafka2", "kafka3")]
    assert kafka_observe.partition_measures(samples, 1.5)["leader_is_controller"] is True
    assert kafka_observe.partition_measures(samples, 0.5)["leader_is_controller"] is False
    assert kafka_observe.partition_measures([s(0, None, "kafka1")], 0)["leader_is_controller"] is None
    assert "leader_is_controller" not in kafka_observe.partition_measures(samples, None)


def test_every_pinned_kafka_row_requires_its_placement():
    """A row that places its leader says which placement its claim needs, so a controller
    that moved before the fault leaves the run undecided rather than judged."""
    from pathlib import Path
    from harness.scenario import load
    pinned = [sc for sc in map(load, sorted(Path("scenarios").glob("K*.yaml"))) if sc.topic.leader != "any"]
    assert len(pinned) >= 9
    for sc in pinned:
        # on the controller: it is, or (a row whose KRaft runs have the controllers apart, issue
        # 52) it reaches the controller however the other brokers are cut
        placed = sc.require.get("leader_is_controller", sc.require.get("leader_reaches_controller"))
        assert placed is (sc.topic.leader == "controller"), sc.name


# ---- how a verdict was decided, in the tables ----------------------------------------------
def test_decided_by_names_the_deciding_checks_and_the_set_up(tmp_path):
    from harness import rows as R
    sc = _kafka({"leader_is_controller": True}, {"lost": 0, "isr_min": 1})
    info = {"drain": {"complete": True}, "measurements": {"leader_is_controller": True, "isr_min": 3}}
    base = {"lost": 0, "ok": 10, "valid": True, "unavailable": []}
    failed = expect.verdict(sc, base, info)
    assert R.decided_by(failed) == "isr_min=3 vs 1 (set-up: leader_is_controller=True)"
    held = expect.verdict(sc, base, dict(info, measurements={"leader_is_controller": True, "isr_min": 1}))
    assert R.decided_by(held) == "lost=0 vs 0; isr_min=1 vs 1 (set-up: leader_is_controller=True)"
    other = expect.verdict(sc, base, dict(info, measurements={"leader_is_controller": False, "isr_min": 1}))
    assert R.decided_by(other).startswith("could not decide: the set-up the claim needs did not happen")
    row = {"scenario": "k", "id": "K5", "prediction": False, "decided_by": "a | b", "harness_error": False,
           "retried": False}
    table = R.markdown([row], tmp_path / "x" / "summary.md", "t")
    assert "how decided" in table and "a / b" in table


def test_doc_tables_are_spliced_between_their_markers_only():
    from harness import rows as R
    doc = "intro\n<!-- table:cat -->\nold | row\n<!-- /table:cat -->\nafter\n"
    row = {"scenario": "K5a-x", "id": "K5", "attempted": 3, "prediction": True, "decided_by": "lost=0 vs 0",
           "harness_error": False, "retried": False, "report": "/r/K5a-x/t/report.md"}
    out = R.splice(doc, "cat", R.table_lines([row]), "results/catalogue/t/summary.json")
    assert out.startswith("intro\n<!-- table:cat -->\n<!-- generated by") and out.endswith("<!-- /table:cat -->\nafter\n")
    assert "old | row" not in out and "| K5 | K5a-x | 3 |" in out and "](" not in out  # no links in documents
    assert R.splice(out, "cat", R.table_lines([row]), "results/catalogue/t/summary.json") == out  # idempotent
    with pytest.raises(ValueError, match="table:other"):
        R.splice(doc, "other", [], "x")


def test_consumers_silent_are_those_that_stopped_receiving_after_the_heal():
    from harness.measures import consumers_silent
    rec = lambda c, t: {"consumer": c, "t": t, "msg_id": f"{c}-{t}"}
    consume = [rec("c0", 1), rec("c1", 2), rec("c2", 12),   # c2 starts only after the faults
               rec("c0", 25), rec("c1", 9), {"consumer": "c3", "t": None}, {"t": 30}]
    assert consumers_silent(consume, before=5, after=20, until=40) == ["c1"]
    assert consumers_silent(consume, before=5, after=30, until=40) == ["c0", "c1"]
    assert consumers_silent([], 5, 20, 40) == []


def test_a_step_still_waiting_when_the_schedule_ends_is_recorded_as_failed(tmp_path):
    c = ShrinkingRabbit(tmp_path)
    with Nemesis(c, tmp_path, clock=RunClock(), settle=0, handle_signals=False, subject="q") as nem:
        nem.run([{"at": 0, "fault": "kill", "targets": "queue_master",
                  "when": {"same": ["queue_mirrors", "queue_master"], "within": 60}}], duration=0.5)
    rec, = nem.records
    assert "the schedule ended before its condition held" in rec["details"]["error"]
    assert ("kill", "rabbit2") not in c.calls and undecided({"status": "completed"}, nem.records)


# ---- when things happened, and on whose side ----------------------------------------------
def _rabbit(expect_, nemesis):
    return parse({"name": "r", "broker": "rabbitmq", "queue": {"type": "quorum"}, "expect": expect_,
                  "nemesis": nemesis})


KILLS = [{"at": 0, "fault": "kill", "targets": "rabbit3"}, {"at": 2, "fault": "start", "targets": "rabbit3"},
         {"at": 20, "fault": "kill", "targets": "rabbit2"}]
FAULTS_AT = {"f1": {"start": 30.0, "end": 33.0}, "f2": {"start": 50.0, "end": 80.0}}


@pytest.mark.parametrize("window, held", [
    ([26.5, 43.9], True),    # R2's run: the loss ends between rabbit3's return and the master's kill
    ([26.5, 31.0], False),   # ends before rabbit3 was back
    ([26.5, 52.0], False),   # goes on after the master's kill
    (None, None),            # no loss: no window, nothing to decide by it
])
def test_a_window_is_judged_against_the_faults_own_times(window, held):
    sc = _rabbit({"lost_window": {"ends_after": "f1.end", "ends_before": "f2.start"}}, KILLS)
    v = expect.verdict(sc, {"lost": 5, "ok": 9, "valid": False, "lost_window": window, "unavailable": []},
                       {"drain": {"complete": True}, "measurements": {"faults_at": FAULTS_AT}})
    assert v["held"] is held, v


def test_unavailable_window_spans_every_interval():
    m = expect.measured({"unavailable": [[58.1, 60.0], [61.0, 82.5]]}, {"measurements": {"faults_at": FAULTS_AT}})
    assert m["unavailable_window"] == [58.1, 82.5] and m["faults_at.f2.end"] == 80.0
    sc = _rabbit({"unavailable_window": {"starts_after": "f2.start", "ends_after": "f2.end"}}, KILLS)
    assert expect.verdict(sc, {"unavailable": [[58.1, 82.5]], "lost": 0, "ok": 3, "valid": True},
                          {"measurements": {"faults_at": FAULTS_AT}})["held"] is True
    assert expect.verdict(sc, {"unavailable": [[40.0, 82.5]], "lost": 0, "ok": 3, "valid": True},
                          {"measurements": {"faults_at": FAULTS_AT}})["held"] is False


@pytest.mark.parametrize("bound, problem", [
    ("f3.end", "ends_before: f3.end names fault 3, but the schedule applies 2"),
    ("f1.middle", "ends_before: 'f1.middle' is neither seconds nor fN.start / fN.end"),
])
def test_a_window_naming_a_fault_the_schedule_lacks_is_refused(bound, problem):
    with pytest.raises(ScenarioError, match=f"expect.lost_window.{problem}"):
        _rabbit({"lost_window": {"ends_before": bound}}, KILLS)


def test_lost_nodes_name_the_side_whose_writes_were_lost():
    m = expect.measured({"lost_by_node": {"rabbit1": 1444, "rabbit2": 0}, "lost": 1444, "ok": 9975}, {})
    assert m["lost_nodes"] == ["rabbit1"] and m["lost_by_node.rabbit1"] == 1444
    sc = _rabbit({"lost_nodes": ["rabbit1"]}, [])
    assert expect.verdict(sc, {"lost_by_node": {"rabbit1": 3, "rabbit3": 1}, "lost": 4, "ok": 9},
                          {"drain": {"complete": True}})["held"] is False


def test_two_masters_at_once_are_counted_from_every_nodes_view():
    from harness.brokers.rabbitmq.observe import queue_measures
    samples = [{"t": 0, "nodes": {}, "master": "rabbit1", "views": {"rabbit1": "rabbit1", "rabbit2": "rabbit1"}},
               {"t": 1, "nodes": {}, "master": "rabbit1", "views": {"rabbit1": "rabbit1", "rabbit2": None}},
               {"t": 2, "nodes": {}, "master": "rabbit1", "views": {"rabbit1": "rabbit1", "rabbit3": "rabbit3"}},
               {"t": 3, "nodes": {}, "master": None}]
    assert queue_measures(samples)["masters_at_once_max"] == 2
    assert queue_measures(samples[:2])["masters_at_once_max"] == 1


def test_ack_latency_follows_the_slow_member_until_the_isr_shrinks():
    # a follower frozen at t=10; the ISR shrinks at t=22 (sampled), grows back at t=45
    samples = [{"t": t, "isr": ["k1", "k2", "k3"] if t < 22 or t >= 45 else ["k1", "k2"]} for t in range(0, 60)]
    produce = [{"outcome": "ok", "t_invoke": t / 10, "t_complete": (max(t / 10, 21.5) if 100 <= t < 215 else t / 10)
                + 0.01} for t in range(0, 600)]
    m = kafka_observe.latency_measures(samples, produce, 10.0, 12.0)
    assert m["ack_latency_max_s"] == 11.51  # the write sent as it froze waited for the shrink
    assert m["ack_latency_after_isr_shrink_max_s"] == 0.01
    assert kafka_observe.latency_measures(samples, produce, None, None) == {}


# ---- R13: the source's method, repeated ---------------------------------------------------
@pytest.mark.parametrize("runs, expected", [
    ([[100, 110, 105, 90, 95], [50, 55, 52, 60, 40], [30, 33, 31, 59, 20]], True),  # falls in each repetition
    ([[100, 110, 105], [50, 55, 52], [30, 33, 31]], None),       # so, but 3 repetitions: p = 1/8
    ([[100, 110, 105, 90, 95], [50, 55, 52, 60, 40], [30, 56, 31, 20, 20]], None),  # the 2nd did not fall
    ([[100, 110, 105], [50, 55, 52], [60, 61, 59]], False),      # 'all' beats 'exactly 2'
    ([[100], [], [30]], None),
])
def test_falls_within_every_repetition_of_enough(runs, expected):
    from harness.measures import falls
    assert falls(runs) is expected


def test_throughput_measures_per_method_with_the_ratio_range():
    from harness.brokers.rabbitmq.load_probes import throughput_measures
    runs = {"confirms": {"none": [1000, 1200, 900, 1000, 1100], "all": [400, 300, 350, 350, 350]},
            "perftest": {"none": [15000, 14000], "all": [3000, 3500]}}
    m = throughput_measures(runs, {"all": "none"}, "confirms")
    assert m["throughput"] == m["throughput_confirms"] == {"none": 1000.0, "all": 350.0}
    assert m["throughput_ratio_perftest"] == {"all_vs_none": 0.225}   # median of 0.2 and 0.25
    assert m["throughput_ratio_range_confirms"] == {"all_vs_none": [0.25, 0.4]}
    assert m["throughput_falls"] == {"confirms": True, "perftest": None}  # two repetitions decide nothing
    # each policy against its own base (seed 004: a backlog's cost within one queue type)
    two = {"confirms": {"m": [1000, 800], "m_backlog": [500, 200], "q": [600, 600], "q_backlog": [540, 300]}}
    m = throughput_measures(two, {"m_backlog": "m", "q_backlog": "q", "q": "m"}, "confirms")
    # by hand: m_backlog/m = 0.5, 0.25 (median 0.375); q_backlog/q = 0.9, 0.5 (0.7); q/m = 0.6, 0.75
    assert m["throughput_ratio"] == {"m_backlog_vs_m": 0.375, "q_backlog_vs_q": 0.7, "q_vs_m": 0.675}
    assert m["throughput_ratio_range_confirms"]["q_backlog_vs_q"] == [0.5, 0.9]


def test_confirm_latency_percentiles_by_nearest_rank():
    from harness.brokers.rabbitmq.load_probes import confirm_latency, latency_measures

    recs = [{"outcome": "ok", "t_invoke": 10.0, "t_complete": 10.0 + ms / 1000} for ms in range(100, 0, -1)]
    recs += [{"outcome": "fail", "t_invoke": 1.0, "t_complete": 9.0}, {"outcome": "ok", "t_invoke": 1.0}]
    # by hand: waits 1..100 ms; rank int(0.5 * 100) = 50 -> 51 ms, int(0.99 * 100) = 99 -> 100 ms
    got = confirm_latency(recs)
    assert got == {"p50": 51.0, "p99": 100.0, "n": 100}
    assert confirm_latency([]) == {"p50": None, "p99": None, "n": 0}
    m = latency_measures({"a": [got, {"p50": 3.0, "p99": 7.0, "n": 5}, {"p50": 5.0, "p99": 9.0, "n": 5}],
                          "b": [{"p50": None, "p99": None, "n": 0}]})
    assert m["confirm_latency_p50_ms"] == {"a": 5.0, "b": None} and m["confirm_latency_p99_ms"]["a"] == 9.0


def test_a_synchronisation_lasts_from_its_start_to_complete_on_the_masters_log():
    from harness.brokers.rabbitmq.observe import sync_durations

    q = "Mirrored queue '{}' in vhost '/': Synchronising: "
    log = "\n".join(f"2026-11-26T07:25:{s}Z 2026-11-26 07:25:{s}+00:00 [info] <0.1208.0> " + q.format(name) + what
                    for s, name, what in (
                        ("10.000000", "mqchaos", "0 messages to synchronise"),      # nothing to do: no figure
                        ("10.100000", "mqchaos", "complete"),
                        ("17.476699", "mqchaos", "62502 messages to synchronise"),
                        ("17.476901", "mqchaos", "batch size: 4096"),
                        ("18.662938", "other", "complete"),                          # another queue's
                        ("19.849883", "mqchaos", "45056 messages"),
                        ("20.693215", "mqchaos", "complete")))
    # by hand: 20.693215 - 17.476699 = 3.216516 s
    assert sync_durations({"rabbit1": log, "rabbit2": "nothing"}, "mqchaos") == [3.217]
    assert sync_durations({"rabbit1": log}, "other") == []


def test_perftest_rates_are_read_from_its_closing_lines():
    from harness.brokers.rabbitmq import perftest
    out = ("id: test-1, time 10.000 s, sent: 62292 msg/s, received: 57940 msg/s\n"
           "test stopped (Reached time limit)\n"
           "id: test-1, sending rate avg: 45126 msg/s\nid: test-1, receiving rate avg: 44682 msg/s\n")
    assert perftest.rates(out) == {"sending": 45126.0, "receiving": 44682.0}
    with pytest.raises(perftest.PerfTestError, match="no receiving rate: boom"):
        perftest.rates("boom\n")


# ---- Q5: what the network says about where deliveries come from --------------------------
def test_counting_rules_count_and_let_packets_go_on():
    from nemesis import net
    rules = net.count_rules(["rabbit1", "rabbit2", "rabbit3"], {"rabbit1": "10.0.0.1", "rabbit2": "10.0.0.2",
                                                                 "rabbit3": "10.0.0.3"}.get)
    assert rules["rabbit2"] == ["MQCHAOS-IN -s 10.0.0.1/32 -m comment --comment mqchaos:bytes:rabbit1",
                                "MQCHAOS-IN -s 10.0.0.3/32 -m comment --comment mqchaos:bytes:rabbit3"]
    assert all("-j" not in spec for specs in rules.values() for spec in specs)  # no target: a drop after still drops
    listing = ("Chain MQCHAOS-IN (1 references)\n"
               "    pkts      bytes target     prot opt in     out     source               destination\n"
               "    1200  5123456            all  --  *      *       10.0.0.1             0.0.0.0/0"
               "            /* mqchaos:bytes:rabbit1 */\n"
               "      10     2000            all  --  *      *       10.0.0.3             0.0.0.0/0"
               "            /* mqchaos:bytes:rabbit3 */\n"
               "       5      300 DROP       all  --  *      *       10.0.0.1             0.0.0.0/0"
               "            /* mqchaos:f1 */\n")
    assert net.parse_bytes(listing) == {"rabbit1": 5123456, "rabbit3": 2000}


@pytest.mark.parametrize("to_consumer, share", [(7_905_098, 0.042), (14_200_000, 1.0)])
def test_delivery_network_share_on_a_follower(to_consumer, share):
    """Q5's run (2026-11-24): the consumer's follower got from the leader 0.27 MB more than the
    other follower, for 6.5 MB delivered: local delivery; proxied, the whole 6.5 MB more."""
    from harness.brokers.rabbitmq.probes import delivery_network_share
    received = {"rabbit1": {"rabbit2": 1_276_876, "rabbit3": 892_623},
                "rabbit2": {"rabbit1": to_consumer, "rabbit3": 60_113},
                "rabbit3": {"rabbit1": 7_631_442, "rabbit2": 58_570}}
    members = {"rabbit1", "rabbit2", "rabbit3"}
    got = delivery_network_share(received, "rabbit1", members, {"rabbit2"}, 1600 * 4096)
    assert got == pytest.approx(share, abs=0.01)
    assert delivery_network_share(received, "rabbit1", members, {"rabbit1"}, 1600 * 4096) is None  # on the leader
    assert delivery_network_share(received, "rabbit1", members, {"rabbit2", "rabbit3"}, 1600 * 4096) is None
    assert delivery_network_share(received, "rabbit1", members, {"rabbit2"}, 0) is None


def test_delivery_network_share_outside_the_members_counts_everything_they_send():
    from harness.brokers.rabbitmq.probes import delivery_network_share
    received = {"rabbit3": {"rabbit1": 6_000_000, "rabbit2": 700_000}}
    assert delivery_network_share(received, "rabbit1", {"rabbit1", "rabbit2"}, {"rabbit3"}, 6_553_600) == 1.022



# ---- R6: blocking synchronisation, a difference between modes that grows with size --------
def test_mean_ci95_against_a_hand_computed_interval():
    from harness.measures import mean_ci95
    # mean 2, sd 1, n 3: half-width 4.303 * 1 / sqrt(3) = 2.484
    assert mean_ci95([1.0, 2.0, 3.0]) == {"mean": 2.0, "ci95": [-0.484, 4.484]}
    assert mean_ci95([5.0]) is None and mean_ci95([1.0] * 11) is None


@pytest.mark.parametrize("first, last, expected", [
    ([-0.2, 0.3], [8.0, 12.0], True),     # at 10^6 above zero and above 10^5
    ([-0.2, 0.3], [0.1, 9.0], None),      # above zero, but overlapping the small size's
    ([-0.2, 0.3], [-3.0, 0.0], False),    # automatic no worse than manual at the largest size
    ([5.0, 6.0], [1.0, 4.0], False),      # shrinks
])
def test_grows_by_the_first_and_last_intervals(first, last, expected):
    from harness.measures import grows
    assert grows([{"mean": 0, "ci95": first}, None, {"mean": 0, "ci95": last}]) is expected
    assert grows([None, {"mean": 0, "ci95": last}]) is None


def test_sync_measures_pair_the_modes_by_repetition():
    from harness.brokers.rabbitmq.load_probes import sync_measures
    runs = {"fill_s": {}, "window_s": {"1000": [3, 3, 4], "9000": [30, 31, 29]},
            "automatic": {"1000": [0.7, 0.6, 0.8], "9000": [9.0, 10.0, 11.0]},
            "manual": {"1000": [0.6, 0.6, 0.6], "9000": [0.5, 0.6, 0.7]}}
    m = sync_measures(runs, [1000, 9000])
    assert m["sync_blocked_median"] == {"automatic": {"1000": 0.7, "9000": 10.0}, "manual": {"1000": 0.6, "9000": 0.6}}
    assert m["sync_blocked_difference"]["9000"]["mean"] == 9.4
    assert m["sync_blocking_grows"] is True
    sc = parse({"name": "r", "broker": "rabbitmq", "probes": {"sync": {"sizes": [1000, 9000]}},
                "expect": {"sync_blocking_grows": True, "sync_blocked_difference": {"9000": {"mean": ">1"}}}})
    v = expect.verdict(sc, {"lost": 0, "ok": 1}, {"drain": {"complete": True}, "measurements": m})
    assert v["held"] is True, v


@pytest.mark.parametrize("sizes", [[1000], [9000, 1000], [500, 9000]])
def test_sync_sizes_must_increase_within_bounds(sizes):
    with pytest.raises(ScenarioError, match="sizes"):
        parse({"name": "r", "broker": "rabbitmq", "probes": {"sync": {"sizes": sizes}}})


@pytest.mark.parametrize("lost_by_node, expected", [
    ({"rabbit2": 1217, "rabbit3": 1769}, True),   # R8 on 2026-11-24: the majority's writes
    ({"rabbit1": 5}, True),
    ({"rabbit1": 5, "rabbit3": 1}, False),        # both sides lost writes
    ({}, None),                                   # no loss: nothing to decide by it
])
def test_lost_on_one_side_of_the_cut(lost_by_node, expected):
    info = {"drain": {"complete": True}, "measurements": {"partition_sides": [["rabbit1"], ["rabbit2", "rabbit3"]]}}
    m = expect.measured({"lost_by_node": lost_by_node, "lost": sum(lost_by_node.values()), "ok": 9000}, info)
    assert m.get("lost_on_one_side") is expected


def test_recoverable_mirrors_are_read_from_the_printed_term():
    from harness.brokers.rabbitmq.cluster import parse_recoverable
    # as rabbitmqctl eval printed it on 3.10.8 (a graceful stop of both mirrors empties the list)
    out = ('[{{resource,<<"/">>,queue,<<"mqchaos">>},[rabbit@rabbit2,rabbit@rabbit3]},\n'
           ' {{resource,<<"v1">>,queue,<<"other">>},[]}]\n')
    assert parse_recoverable(out) == {"mqchaos": ["rabbit2", "rabbit3"], "v1/other": []}
    assert parse_recoverable("[]\n") == {}


class ReadingRabbit(FakeRabbit):
    """Takes 0.3 s to read what a kill will act on, as rabbitmqctl eval does."""
    def seen_before(self, fault, node, params):
        time.sleep(0.3)
        self.calls.append(("read", node))
        return {"recoverable_mirrors": {"q": ["rabbit2"]}} if fault == "kill" else None


def test_what_a_fault_acts_on_is_read_before_its_start_is_stamped(tmp_path):
    c = ReadingRabbit(tmp_path)
    clock = RunClock()
    with Nemesis(c, tmp_path, clock=clock, settle=0, handle_signals=False) as nem:
        nem.run([{"at": 0, "fault": "kill", "targets": "rabbit1"}, {"at": 0.5, "fault": "start", "targets": "rabbit1"}])
    kill = next(r for r in nem.records if r["fault"] == "kill")
    assert kill["details"]["seen"] == {"rabbit1": {"recoverable_mirrors": {"q": ["rabbit2"]}}}
    assert kill["t_start"] >= 0.3  # the read is not inside the fault's window
    assert c.calls.index(("read", "rabbit1")) < c.calls.index(("kill", "rabbit1"))
