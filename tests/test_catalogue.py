"""The catalogue's pure parts: measurements read from samples, logs and histories, the
prediction's judging, and the summary / JUnit outputs. Synthetic inputs with known figures."""
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import batch as catalogue
from harness import expect, measures, probes
from harness import rows as R
from harness.brokers.kafka import observe as kafka_observe
from harness.brokers.rabbitmq import observe as rabbit_observe
from harness.scenario import parse


def _kafka(t, leader, isr, controller="kafka1"):
    return {"t": t, "leader": leader, "isr": isr, "controller": controller, "nodes": {}}


def test_kafka_measures_from_samples():
    s = [_kafka(0, "kafka1", ["kafka1", "kafka2", "kafka3"]),
         _kafka(1, "kafka1", ["kafka1", "kafka2", "kafka3"]),
         {"t": 2, "error": "ZooKeeper unanswered"},           # a failed sample is skipped
         _kafka(3, "kafka1", ["kafka1"]),                     # shrunk 2 s after the fault at t=1
         _kafka(5, None, ["kafka1"], "kafka2"),               # leaderless, new controller
         _kafka(6, "kafka2", ["kafka2"], "kafka2"),
         _kafka(9, "kafka2", ["kafka2", "kafka3"], "kafka2")]
    m = kafka_observe.partition_measures(s, fault_start=1.0)
    assert m["isr_min"] == 1
    assert m["isr_below_2_s"] == 6.0          # t=3..9: the samples at 3, 5, 6 stand until the next
    assert m["leaderless_s"] == 1.0
    assert m["leaders_seen"] == ["kafka1", "kafka2"] and m["leader_changes"] == 1
    assert m["new_leader_elected"] and m["new_controller_elected"] and m["controller_changes"] == 1
    assert m["isr_shrink_s"] == 2.0
    assert m["isr_rejoined"] is False          # back to two of three, never to the full three
    assert m["first_controller_at_end"] is False   # kafka1 replaced by kafka2 and not back
    # ... but kafka1 is not in the ISR at the end: not yet an ordinary broker (issue 52)
    assert m["first_controller_ordinary_at_end"] is False
    assert m["new_leaders_on_controller"] is True  # kafka2 led after kafka1, kafka2 the controller
    # kafka1 led with the full ISR, then alone (t=3); kafka2's ISR of one after it is not kafka1's
    assert m["first_leader_isr_min"] == 1
    assert kafka_observe.partition_measures(s[:2] + s[4:], fault_start=1.0)["first_leader_isr_min"] == 3
    s2 = s + [_kafka(10, "kafka3", ["kafka3"], "kafka2")]
    assert kafka_observe.partition_measures(s2, fault_start=1.0)["new_leaders_on_controller"] is False
    s.append(_kafka(11, "kafka2", ["kafka1", "kafka2", "kafka3"], "kafka2"))
    assert kafka_observe.partition_measures(s, fault_start=1.0)["isr_rejoined"] is True
    assert kafka_observe.partition_measures(s, fault_start=1.0)["first_controller_ordinary_at_end"] is True
    s.append(_kafka(12, "kafka2", ["kafka1", "kafka2", "kafka3"], "kafka1"))
    assert kafka_observe.partition_measures(s, fault_start=1.0)["first_controller_at_end"] is True
    # the controller back on kafka1: in the ISR, but not an ordinary broker
    assert kafka_observe.partition_measures(s, fault_start=1.0)["first_controller_ordinary_at_end"] is False
    s.pop()
    s.pop()
    assert m["isr_timeline"][0] == [0, "isr=kafka1,kafka2,kafka3 leader=kafka1 controller=kafka1"]
    assert "split_brain_s" not in m  # no sample has the brokers' own views
    assert len(m["isr_timeline"]) == 5        # changes only


def test_kafka_measures_without_change():
    s = [_kafka(t, "kafka3", ["kafka1", "kafka2", "kafka3"]) for t in range(5)]
    m = kafka_observe.partition_measures(s, fault_start=0.0)
    assert m["isr_min"] == 3 and m["isr_shrink_s"] is None and not m["new_leader_elected"]
    assert m["isr_rejoined"] is None          # nothing left the ISR: nothing to rejoin
    assert m["first_controller_at_end"] is True
    assert m["new_leaders_on_controller"] is None  # no leader replaced
    assert kafka_observe.partition_measures([{"t": 0, "error": "x"}], 0.0) == {}


def test_rabbit_measures_from_samples():
    q = lambda t, master, sync: {"t": t, "nodes": {}, "master": master, "mirrors": ["rabbit2", "rabbit3"],
                                 "synchronised": sync}
    s = [q(0, "rabbit1", ["rabbit2", "rabbit3"]), q(2, "rabbit1", ["rabbit2"]), q(4, None, []),
         q(5, "rabbit2", ["rabbit3"]), q(8, "rabbit2", ["rabbit2", "rabbit3"]), q(9, "rabbit2", ["rabbit2", "rabbit3"])]
    m = rabbit_observe.queue_measures(s)
    assert m["masters_seen"] == ["rabbit1", "rabbit2"] and m["master_changes"] == 1 and m["new_master_elected"]
    assert m["unsynchronised_s"] == 2 + 3     # t=2..4 and 5..8; no master at t=4 is not "unsynchronised"
    assert m["mirrors_added"] == [] and m["mirrors_added_count"] == 0  # rabbit2 was a mirror already


def test_rabbit_mirror_replaced():
    """ha-mode exactly 2: rabbit2's mirror dies, RabbitMQ places one on rabbit3 (seed 000)."""
    q = lambda t, mirrors: {"t": t, "nodes": {}, "master": "rabbit1", "mirrors": mirrors, "synchronised": []}
    m = rabbit_observe.queue_measures([q(0, ["rabbit2"]), q(1, []), q(3, ["rabbit3"]), q(9, ["rabbit2", "rabbit3"])])
    assert m["mirrors_added"] == ["rabbit3"] and m["mirrors_added_count"] == 1
    assert m["master_changes"] == 0


LOGS = {
    "rabbit1": "2026-11-22 12:23:18 [warning] <0.562.0> Cluster minority/secondary status detected - awaiting recovery\n",
    "rabbit2": "[error] Mnesia(rabbit@rabbit2): ** ERROR ** mnesia_event got {inconsistent_database, "
               "running_partitioned_network, rabbit@rabbit1}\n"
               "[info] Autoheal decision\n  * Partitions: [[rabbit@rabbit1],[rabbit@rabbit2,rabbit@rabbit3]]\n"
               "  * Winner:     rabbit@rabbit2\n  * Losers:     [rabbit@rabbit1]\n",
    "rabbit3": "[info] all quiet\n",
}


def test_rabbit_forced_closes_are_the_closing_nodes_in_the_window():
    """R9p (seed 000): the nodes that closed a publisher's connection themselves, from the
    in-flight messages' recorded reason, inside the window only; a confirm timeout or a
    connection the network broke is not a close by the broker."""
    forced = "channel closed: ConnectionClosedByBroker: (320) \"CONNECTION_FORCED - broker forced connection closure\""
    produce = [{"node": "rabbit3", "t_invoke": 9.0, "t_complete": 12.0, "error": forced},
               {"node": "rabbit3", "t_invoke": 9.1, "t_complete": 12.0, "error": forced},
               {"node": "rabbit1", "t_invoke": 1.0, "t_complete": 2.0, "error": forced},      # before
               {"node": "rabbit2", "t_invoke": 9.0, "t_complete": 19.0, "error": "confirm timeout"},
               {"node": "rabbit2", "t_invoke": 9.0, "t_complete": 13.0,
                "error": "connection closed: StreamLostError: ('Transport indicated EOF',)"},
               {"node": "rabbit1", "t_invoke": 30.0, "t_complete": 31.0, "error": forced}]    # after
    assert rabbit_observe.forced_close_nodes(produce, 5.0, 25.0) == ["rabbit3"]
    assert rabbit_observe.forced_close_nodes(produce, 0.0, 40.0) == ["rabbit1", "rabbit3"]
    assert rabbit_observe.forced_close_nodes(produce, None, 25.0) == []
    m = rabbit_observe.measure([{"t": 5.0, "master": "rabbit1"}, {"t": 25.0, "master": "rabbit1"}], {}, [],
                               produce, 5.0)
    assert m["forced_close_nodes"] == ["rabbit3"]
    ok = [{"outcome": "ok", "t_invoke": 6.0, "t_complete": 6.1}, {"outcome": "ok", "t_invoke": 7.0, "t_complete": 19.5},
          {"outcome": "info", "t_invoke": 8.0, "t_complete": 18.0}, {"outcome": "ok", "t_invoke": 1.0, "t_complete": 30.0}]
    # the late confirm of a write invoked in the window counts; a write invoked before it does not
    assert rabbit_observe.measure([{"t": 5.0}, {"t": 25.0}], {}, [], ok, 5.0)["confirm_latency_max_s"] == 12.5
    assert rabbit_observe.measure([{"t": 5.0}], {}, [], ok, None)["confirm_latency_max_s"] is None


def test_rabbit_log_measures():
    m = rabbit_observe.log_measures(LOGS)
    assert m == {"paused_nodes": ["rabbit1"], "paused_count": 1, "partition_detected": True,
                 "autoheal_losers": ["rabbit1"], "autoheal_loser_count": 1}
    quiet = rabbit_observe.log_measures({"rabbit1": "ok", "rabbit2": ""})
    assert quiet["paused_count"] == 0 and not quiet["partition_detected"] and quiet["autoheal_losers"] == []


def test_kafka_log_truncations():
    logs = {"kafka1": "[Log partition=mqchaos-0, dir=/data] Truncating to offset 120 (kafka.log.UnifiedLog)\n"
                      "[Log partition=other-0, dir=/data] Truncating to offset 3\n",
            "zk1": "[Log partition=mqchaos-0, dir=/data] Truncating to offset 1\n"}
    assert kafka_observe.log_measures(logs, "mqchaos")["log_truncations"] == 1


def _blocked_reference(events, start, end):
    pts = sorted({start, end} | {t for t in events if start <= t <= end})
    return max((b - a for a, b in zip(pts, pts[1:])), default=0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), max_size=60), st.lists(st.floats(0, 100, allow_nan=False), max_size=60),
       st.floats(0, 50), st.floats(0, 50))
def test_blocked_s_is_the_longest_silent_stretch(oks, dlv, start, length):
    end = start + length
    produce = [{"outcome": "ok", "t_complete": t} for t in oks] + [{"outcome": "info", "t_complete": 1.0}]
    consume = [{"t": t} for t in dlv]
    got = measures.blocked_s(produce, consume, start, end)
    assert got == pytest.approx(round(_blocked_reference(oks + dlv, start, end), 3), abs=1e-3)


def test_delivery_nodes_against_the_leader_at_the_time():
    samples = [{"t": 0, "master": "rabbit1"}, {"t": 10, "master": "rabbit2"}]
    consume = [{"t": 1, "node": "rabbit2"}, {"t": 2, "node": "rabbit2"}, {"t": 11, "node": "rabbit2"},
               {"t": 12, "node": "rabbit3"}]
    m = rabbit_observe.delivery_nodes(consume, samples)
    assert m["deliveries_by_node"] == {"rabbit2": 3, "rabbit3": 1}
    assert m["follower_delivery_fraction"] == 0.75


def test_spread_measures():
    m = probes.spread_measures("masters", "after", {"rabbit1": 0, "rabbit2": 9, "rabbit3": 0})
    assert m["masters_nodes_after"] == 1 and m["masters_on_one_node_after"] and not m["masters_balanced_after"]
    assert probes.balanced({"a": 3, "b": 3, "c": 2}) and not probes.balanced({"a": 4, "b": 3, "c": 2})


@pytest.mark.parametrize("expected,actual,held", [
    (0, 0, True), (0, 3, False), (">0", 3, True), ("<0.5", 0.33, True), ("<=2", 3, False),
    (True, True, True), (False, True, False), (["rabbit3"], ["rabbit3"], True),
    (["rabbit3", "rabbit1"], ["rabbit1", "rabbit3"], True), (["rabbit3"], [], False), (">0", None, None),
    ("about ten", 3, None)])
def test_judge(expected, actual, held):
    assert expect.judge(expected, actual) is held


def test_verdict_with_nested_and_missing_measurements():
    sc = parse({"name": "x", "broker": "rabbitmq", "expect": {"lost": 0, "throughput_ratio": {"all_vs_none": "<0.35"}},
                "probes": {"throughput": {"policies": {"none": {}, "all": {"ha-mode": "all"}}}}})
    result = {"lost": 0, "valid": True, "unavailable": []}
    v = expect.verdict(sc, result, {"drain": {"complete": True},
                                    "measurements": {"throughput_ratio": {"all_vs_none": 0.5}}})
    assert v["held"] is False and "throughput_ratio.all_vs_none=0.5" in v["reason"]
    v = expect.verdict(sc, result, {"drain": {"complete": True}, "measurements": {}})
    assert v["held"] is None and "throughput_ratio.all_vs_none" in v["reason"]


def _row(name, prediction, harness_error=False, retried=False, **kw):
    r = {"scenario": name, "id": name.split("-")[0], "repeat": 0, "seconds": 12.5, "retried": retried,
         "harness_error": harness_error, "prediction": prediction, "reason": f"reason of {name}",
         "attempted": 100, "confirmed": 90, "lost": 3, "duplicated": 0, "ordering_violations": 0,
         "unavailable_s": 1.5, "measurement": {"isr_min": 1}, "expect": {"lost": ">0"}, "report": None,
         "earlier_attempts": []}
    r.update(kw)
    return r


def test_junit_tells_findings_from_harness_errors():
    rows = [_row("R1-a", True), _row("R2-b", False), _row("K3-c", None),
            _row("K7-d", None, harness_error=True, retried=True, earlier_attempts=[{"error": "cluster never healthy"}])]
    root = ET.fromstring(R.junit(rows))
    assert root.get("tests") == "4" and root.get("failures") == "1" and root.get("errors") == "1"
    assert root.get("skipped") == "1"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    fail = cases["R2-b"].find("failure")
    assert fail is not None and "lost=3" in fail.text and "predicted=lost=>0" in fail.text
    assert cases["K7-d"].find("error") is not None and cases["K7-d"].find("failure") is None
    assert cases["R1-a"].find("failure") is None and cases["R1-a"].find("error") is None


def test_summary_markdown_has_one_row_per_run(tmp_path):
    rows = [_row("R1-a", True), _row("R2-b", False, retried=True), _row("K7-d", None, harness_error=True)]
    md = R.markdown(rows, tmp_path / "catalogue" / "x", "title")
    body = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| id")]
    assert len(body) == 3
    assert "DID NOT HOLD (after a retry)" in body[1] and "harness error" in body[2] and "held" in body[0]


def test_order_and_selection(tmp_path):
    names = ["K10-x", "R12-y", "Q2-z", "R2-w", "K2-v", "R5b-u", "R5a-t"]
    for n in names:
        (tmp_path / f"{n}.yaml").write_text(f"name: {n}\nid: {n.split('-')[0].rstrip('ab')}\nbroker: "
                                            f"{'kafka' if n[0] == 'K' else 'rabbitmq'}\nexpect: {{lost: 0}}\n")
    (tmp_path / "R99-bad.yaml").write_text("name: R99-bad\nbroker: rabbitmq\nexpect: {isr_min: 1}\n")
    scs, bad = catalogue.select(sorted(tmp_path.glob("*.yaml")), None)
    assert [s.name for s in scs] == ["R2-w", "R5a-t", "R5b-u", "R12-y", "Q2-z", "K2-v", "K10-x"]
    assert len(bad) == 1 and "expect.isr_min" in bad[0][1]
    scs, bad = catalogue.select(sorted(tmp_path.glob("*.yaml")), ["R5", "K10"])
    assert [s.name for s in scs] == ["R5a-t", "R5b-u", "K10-x"] and bad == []  # R99-bad was not asked for
    _, bad = catalogue.select(sorted(tmp_path.glob("*.yaml")), ["R99"])
    assert len(bad) == 1 and bad[0][0].endswith("R99-bad.yaml")


def test_merge_takes_the_latest_row_per_scenario(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    catalogue.write_outputs([_row("R1-mirrored-kill-master", True), _row("R4-when-synced-master-wiped", None,
                                                                         harness_error=True)], [], a, "a")
    catalogue.write_outputs([_row("R4-when-synced-master-wiped", False), _row("R4z-a-file-since-removed", True)],
                            [], b, "b")
    out = catalogue.merge([a, b], results=tmp_path, kind="merged")
    import json
    rows = json.loads((out / "summary.json").read_text())
    assert [(r["scenario"], r["prediction"]) for r in rows] == [("R1-mirrored-kill-master", True),
                                                               ("R4-when-synced-master-wiped", False)]
    assert (tmp_path / "merged" / "latest" / "junit.xml").exists()


def test_the_brokers_own_view_of_unavailability():
    s = [_kafka(0, "kafka1", ["kafka1", "kafka2", "kafka3"]), _kafka(2, "kafka1", ["kafka1"]),
         _kafka(5, None, ["kafka1"]), _kafka(6, "kafka2", ["kafka2", "kafka3"]), _kafka(9, "kafka2", ["kafka2", "kafka3"])]
    m = kafka_observe.partition_measures(s, fault_start=1.0, min_isr=2)
    assert m["isr_below_min_s"] == 4.0 and m["leaderless_s"] == 1.0  # t=2..6; t=5..6
    q = [{"t": 0, "nodes": {}, "master": "rabbit1"}, {"t": 3, "nodes": {}, "master": None},
         {"t": 7, "nodes": {}, "master": "rabbit2"}, {"t": 8, "nodes": {}, "master": "rabbit2"}]
    assert rabbit_observe.queue_measures(q)["masterless_s"] == 4.0
    nodes = [{"t": 0, "nodes": {"a": "running", "b": "running"}}, {"t": 1, "nodes": {"a": "stopped", "b": "running"}},
             {"t": 4, "nodes": {"a": "frozen", "b": "running"}}, {"t": 6, "nodes": {"a": "running", "b": "running"}},
             {"t": 7, "error": "unanswered"}, {"t": 8, "nodes": {"a": "running", "b": "absent"}},
             {"t": 9, "nodes": {"a": "running", "b": "running"}}]
    assert measures.nodes_down_s(nodes) == {"a": 5.0, "b": 1.0}


@pytest.mark.parametrize("broker", ["rabbitmq", "kafka"])
def test_a_runs_measurements_from_its_files(tmp_path, broker):
    """observe.measure end to end on a run directory (what the run loop calls after a run)."""
    import json

    from harness import brokers, observe, store
    sc = parse({"name": "m", "broker": broker})
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "produce-p0.jsonl").write_text("".join(json.dumps(
        {"msg_id": f"p0-{i}", "producer": "p0", "seq": i, "outcome": "ok", "t_invoke": i, "t_complete": i + 0.1}) + "\n"
        for i in range(20)))
    (tmp_path / "history" / "consume-c0.jsonl").write_text("".join(json.dumps(
        {"msg_id": f"p0-{i}", "consumer": "c0", "t": 2.0, "redelivered": i == 2}) + "\n" for i in (1, 2)))
    nodes = brokers.get(broker).cluster().nodes()
    (tmp_path / store.OBSERVATIONS).write_text("".join(json.dumps(
        {"t": t, "nodes": {n: "running" if t < 5 or n != nodes[-1] else "stopped" for n in nodes},
         "leader": "kafka1", "isr": ["kafka1", "kafka2"], "controller": "kafka1", "master": "rabbit1",
         "members": nodes, "online": nodes}) + "\n" for t in range(10)))
    m = observe.measure(brokers.get(broker), tmp_path, sc, {"phases": {"faults": 3.0, "stop-producers": 15.0},
                                                         "consumer_crashes": {"c0": 1, "c1": 2}})
    assert "error" not in m
    if sc.live_consumers:  # Q4's requirements: a crash and a redelivery happened
        assert m.pop("redelivered_deliveries") == 1 and m.pop("consumer_crashes") == 3
        assert m.pop("consumer_cancels") == 0  # none recorded in this run.json
    assert "redelivered_deliveries" not in m
    if sc.live_consumers:  # no heal phase in this run.json: nothing is "after" it
        assert m.pop("read_after_heal") is None
    assert m["nodes_down_s"][nodes[-1]] == 4.0 and m["client_timeouts"] and m["blocked_s"] > 0
    assert m["nodes_down_count"] == 1  # the one node whose container stopped
    assert set(m) - {"nodes_down_s", "nodes_down_count", "client_timeouts", "blocked_s", "faults_at", "windows", "at_risk",
                     "at_risk_at_start", "whole_run", "after_heal", "view_from"} <= sc.measurement_names() | {
        "isr_timeline", "queue_timeline"}
    # the plug-in's figures again over the whole run (no heal phase: no after-heal window)
    assert m["windows"]["effect"] == [3.0, 15.0] and set(m["whole_run"]) <= sc.measurement_names()
    # confirmed by the window's end (t=15: p0-0..p0-14), not consumed before it opened (p0-1, p0-2)
    assert m["at_risk"] == 13


def test_split_brain_counts_the_seconds_two_brokers_each_named_itself_leader():
    def v(t, **leaders):  # each broker's own view: whom it names leader
        return {"t": t, "leader": "kafka2", "isr": ["kafka2"], "controller": "kafka3",
                "views": {n: {"leader": lead, "isr": []} for n, lead in leaders.items()}}
    s = [v(0, kafka1="kafka1", kafka2="kafka1", kafka3="kafka1"),
         v(2, kafka1="kafka1", kafka2="kafka2", kafka3="kafka2"),   # both name themselves: 2..5
         {"t": 4, "error": "ZooKeeper unanswered"},                 # no views: passed over
         v(5, kafka1="kafka1", kafka2="kafka2", kafka3="kafka1"),   # still both: 5..6
         v(6, kafka1="kafka2", kafka2="kafka2", kafka3="kafka2"),
         v(8, kafka2="kafka2", kafka3="kafka2")]
    m = kafka_observe.partition_measures(s, fault_start=1.0)
    # by hand: two self-named leaders from t=2 to t=6
    assert m["split_brain_s"] == 4.0 and m["split_brain_brokers"] == ["kafka1", "kafka2"]
    # a broker naming another (kafka3 naming kafka1) is no second leader
    assert kafka_observe.split_brain([v(0, kafka1="kafka1", kafka3="kafka1"), v(1)])["split_brain_s"] == 0


def test_catch_up_counts_from_the_last_restart_until_the_isr_is_full_again():
    def k(t, isr, **nodes):
        return {"t": t, "leader": "kafka1", "isr": isr, "controller": "kafka1",
                "nodes": {"kafka1": "running", "kafka2": "running", "kafka3": "running", **nodes}}
    full, one = ["kafka1", "kafka2", "kafka3"], ["kafka1"]
    s = [k(0, full), k(1, one, kafka2="stopped", kafka3="stopped"), k(5, one, kafka3="stopped"),  # kafka2 back
         k(7, one), k(8, ["kafka1", "kafka3"]), {"t": 9, "error": "x"},                        # kafka3 back at 7
         k(12, full), k(13, full)]
    # by hand: the last restart is kafka3's at t=7; the ISR is full again at t=12
    assert kafka_observe.catch_up_s(s) == 5.0
    assert kafka_observe.partition_measures(s, fault_start=1.0)["catch_up_s"] == 5.0
    assert kafka_observe.catch_up_s(s[:5]) is None   # restarted, never full again
    assert kafka_observe.catch_up_s([k(0, full), k(1, one)]) is None  # no restart


def test_only_picks_a_rows_variants_and_kraft_counterparts_by_id():
    from harness.batch.jobs import wanted
    assert wanted("K7b-kraft-leader-cut-from-controllers-acksall", "K7bk", ["K7"])  # issue 52: own ids
    assert wanted("K7-kraft-leader-cut-from-controllers-acks1", "K7k", ["K7"])
    assert wanted("K14e-txn-leader-isolated-unclean", "K14e", ["K14"])
    assert not wanted("K17-consumers-fetch-from-leaders", "K17", ["K1"])
    assert not wanted("R48n-no-balancer-control", "R48n", ["R4"])
