"""Scenario files are data validated at load time; errors name the field."""
import os
import re
from pathlib import Path

import pytest

from harness import expect, judge
from harness.scenario import ScenarioError, load, parse

SCENARIOS = sorted((Path(__file__).parent.parent / "scenarios").glob("*.yaml"))
SCENARIOS_MD = Path(__file__).parent.parent / "docs" / "sources" / "SCENARIOS.md"  # ../shared's, vendored


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_scenario_file_is_valid(path):
    sc = load(path)
    assert sc.name and sc.id
    # Every prediction names a quantity a run of this broker measures, and states something.
    # ... or, a control (issue 52), the figures it is read by
    assert sc.expect or (sc.control_of and sc.measure), "a catalogue scenario states its prediction"
    known = set(expect.measured(_fake_result(), {"drain": {"complete": True}})) | expect.decidable(sc)
    assert set(expect.expectations(sc)) <= known, set(expect.expectations(sc)) - known
    for key, exp in expect.expectations(sc).items():  # each prediction is checkable
        assert (isinstance(exp, (bool, int, float, list)) or expect.COMPARISON.match(str(exp))
                or expect.is_window(exp) or expect.referenced(exp) in known), (key, exp)


# An id other than the file name's prefix, stated on the id's own line:
# ``id: K7k  # not the file name's K7: <why>`` (a KRaft counterpart beside its ZooKeeper row)
OTHER_ID = re.compile(r"^id: (?P<id>\S+)\s+# not the file name's (?P<prefix>[^:\s]+):", re.M)


def id_problems(files: dict[str, str]) -> list[str]:
    """Each file (name -> text) its own id: the file name up to its first '-', unless the id's
    line says otherwise (``OTHER_ID``), and no two files one id (issue 52: a tally's id names
    one file)."""
    out, seen = [], {}
    for name, text in sorted(files.items()):
        sid = parse_id(text)
        prefix = name.split("-", 1)[0]
        other = OTHER_ID.search(text)
        if other and (other["id"], other["prefix"]) != (sid, prefix):
            out.append(f"{name}: the comment names {other['prefix']}, the id is {sid}")
        elif not other and sid != prefix:
            out.append(f"{name}: id {sid}, not the file name's {prefix} (and no comment says why)")
        if sid in seen:
            out.append(f"{name}: id {sid} is {seen[sid]}'s too")
        seen.setdefault(sid, name)
    return out


def parse_id(text: str) -> str | None:
    m = re.search(r"^id: (\S+)", text, re.M)
    return m.group(1) if m else None


def test_every_scenario_file_has_its_own_id():
    assert id_problems({p.name: p.read_text() for p in SCENARIOS}) == []


def test_an_id_shared_or_unlike_its_file_name_is_found():
    files = {"K8b-x.yaml": "id: K8\n", "K8c-y.yaml": "id: K8\n", "K7-kraft-z.yaml": "id: K7k  # not the file name's K7: z\n",
             "K7-zk.yaml": "id: K7\n"}
    assert id_problems(files) == ["K8b-x.yaml: id K8, not the file name's K8b (and no comment says why)",
                                  "K8c-y.yaml: id K8, not the file name's K8c (and no comment says why)",
                                  "K8c-y.yaml: id K8 is K8b-x.yaml's too"]
    assert id_problems({"K7-kraft-z.yaml": "id: K7k  # not the file name's K7: z\n", "K7-zk.yaml": "id: K7k\n"}) == [
        "K7-zk.yaml: id K7k, not the file name's K7 (and no comment says why)", "K7-zk.yaml: id K7k is K7-kraft-z.yaml's too"]


def _rows() -> dict[str, str]:
    """SCENARIOS.md's rows: id -> the source's prediction (the last column)."""
    if not SCENARIOS_MD.exists():
        if os.environ.get("CI"):  # CI clones with ../shared beside: its absence is a failure
            pytest.fail(f"{SCENARIOS_MD} is missing")
        pytest.skip("../shared is not beside the repository")
    rows = {}
    for line in SCENARIOS_MD.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if line.startswith("| ") and cells and cells[0][:1] in "RQK" and cells[0][1:].isdigit():
            rows[cells[0]] = cells[-1]
    return rows


def test_the_catalogue_covers_every_row_of_scenarios_md():
    rows = _rows()
    assert len(rows) == 29
    # a row's variants are files of their own (K8a, K8b, K8c: SCENARIOS.md's K8)
    ids = {sid for p in SCENARIOS for sid in (load(p).id, load(p).id.rstrip("abcdefgh"))}
    assert set(rows) <= ids, sorted(set(rows) - ids)


def test_each_rows_loss_prediction_is_the_sources():
    """Where a row's source speaks of loss, one of the row's files predicts exactly that:
    "no loss" -> lost: 0; loss or lost messages -> lost > 0 (a row with both, such as R5 or
    K8, has a file for each). A prediction moved away from its source fails here."""
    by_row: dict[str, set] = {}
    for p in SCENARIOS:
        sc = load(p)
        wanted = expect.expectations(sc)
        # a loss named by where it happened is a loss predicted (R7: lost_nodes, issue 52)
        lost = ">0" if wanted.get("lost_nodes") or expect.judge(wanted.get("lost_share", 0), 0) is False \
            else wanted.get("lost")
        by_row.setdefault(sc.id.rstrip("abcdefgh"), set()).add(str(lost))
    checked = 0
    for rid, text in _rows().items():
        text = text.lower()
        says_none = "no loss" in text
        says_some = "loss" in text.replace("no loss", "") or " lost" in text
        if says_none:
            assert "0" in by_row[rid], (rid, text, by_row[rid])
        if says_some:
            assert ">0" in by_row[rid], (rid, text, by_row[rid])
        checked += says_none or says_some
    assert checked >= 15  # the rows whose claim is about loss


def test_an_expectation_nobody_measures_is_refused():
    with pytest.raises(ScenarioError, match="expect.isr_min: no rabbitmq run measures this"):
        parse({"name": "x", "broker": "rabbitmq", "expect": {"isr_min": 1}}, "s.yaml")
    with pytest.raises(ScenarioError, match="expect.throughput_ratio.all_vs_none"):
        parse({"name": "x", "broker": "rabbitmq", "expect": {"throughput_ratio": {"all_vs_none": "<1"}}})
    sc = parse({"name": "x", "broker": "rabbitmq", "expect": {"throughput_ratio": {"all_vs_none": "<1"}},
                "probes": {"throughput": {"policies": {"none": {}, "all": {"ha-mode": "all"}}}}})
    assert expect.expectations(sc) == {"throughput_ratio.all_vs_none": "<1"}


def _fake_result():
    from checkers.analysis import COUNT_FIELDS
    d = {k: 0 for k in COUNT_FIELDS}
    d.update(ordering_violations=0, unavailable=[], unavailable_s=0.0, valid=True)
    return d


@pytest.mark.parametrize("data,needle", [
    ({"name": "x", "broker": "rabbitmq", "workload": {"rate": "fast"}}, "workload.rate"),
    ({"name": "x", "broker": "rabbitmq", "workload": {"producer": 2}}, "workload.producer: Extra inputs"),
    ({"name": "x", "broker": "nats"}, "broker"),
    ({"broker": "kafka"}, "name: Field required"),
    ({"name": "x", "broker": "kafka", "queue": {"name": "q"}}, "queue: is for rabbitmq"),
    ({"name": "x", "broker": "rabbitmq", "queue": {"type": "mirrored"}}, "policy.ha-mode"),
    ({"name": "x", "broker": "rabbitmq", "timing": {"duration": 0}}, "timing.duration"),
    ({"name": "x y", "broker": "rabbitmq"}, "name"),
    ([1, 2], "a mapping"),
])
def test_errors_name_the_field(data, needle):
    with pytest.raises(ScenarioError) as e:
        parse(data, "s.yaml")
    assert needle in str(e.value)
    assert str(e.value).startswith("s.yaml")


def test_unreadable_and_bad_yaml(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load(bad)


def test_defaults_fill_the_broker_target():
    assert parse({"name": "r", "broker": "rabbitmq"}).queue.type == "quorum"
    sc = parse({"name": "k", "broker": "kafka", "workload": {"acks": 1}})
    assert sc.topic.replication_factor == 3 and sc.workload.acks == "1"


@pytest.mark.parametrize("expected,actual,held", [
    (0, 0, True), (0, 3, False), (">0", 3, True), (">0", 0, False), ("<0.6", 0.5, True),
    (">=5", 5.0, True), ("!=0", 0, False), (True, True, True), (False, True, False),
    ("<=2", None, None), ("about 3", 3, None),
])
def test_judge(expected, actual, held):
    assert expect.judge(expected, actual) is held


def test_refresh_rejudges_a_run_offline(tmp_path):
    import json

    sc = parse({"name": "r", "broker": "kafka", "expect": {"lost": ">0", "unavailable_s": "<5"}})
    (tmp_path / "history").mkdir()
    (tmp_path / "run.json").write_text(json.dumps({"params": sc.model_dump(mode="json"),
                                                   "drain": {"complete": True}, "status": "completed"}))
    result = _fake_result() | {"lost": 3, "unavailable_s": 7.5, "valid": False, "reason": "lost=3",
                               "ordering": "none", "samples": {}, "unavailable": [[1.0, 8.5]]}
    (tmp_path / "check.json").write_text(json.dumps(result))
    v = judge.rejudge(tmp_path)
    assert v["held"] is False and "unavailable_s=7.5" in v["reason"]
    assert json.loads((tmp_path / "check.json").read_text())["prediction"] == v
    text = (tmp_path / "report.md").read_text()
    assert "DID NOT HOLD" in text and "1.00 – 8.50" in text
    assert judge.rejudge(tmp_path / "nowhere") is None
    assert json.loads((tmp_path / "run.json").read_text())["exit_code"] == 1  # its row judged too


def test_a_fault_the_broker_cannot_do_is_refused():
    """restart_app (rabbitmqctl stop_app/start_app) is a capability of RabbitMQ's nodes only."""
    step = {"at": 5, "fault": "restart_app", "targets": "controller"}
    with pytest.raises(ScenarioError, match="nemesis: restart_app at 5s needs restart_app, which kafka nodes cannot do"):
        parse({"name": "k", "broker": "kafka", "nemesis": [step]}, "s.yaml")
    assert parse({"name": "r", "broker": "rabbitmq", "nemesis": [dict(step, targets="rabbit1")]}).nemesis


def test_each_broker_has_its_own_settings_and_workload():
    sc = parse({"name": "r", "broker": "rabbitmq", "cluster": {"partition_handling": "pause_minority",
                                                                "collect_statistics_interval": 500}})
    assert sc.cluster.partition_handling == "pause_minority"
    assert sc.cluster.extra == {"collect_statistics_interval": "500"}  # a raw rabbitmq.conf line
    sc = parse({"name": "k", "broker": "kafka", "cluster": {"min.insync.replicas": 2, "log.flush.interval.messages": 1}})
    assert sc.cluster.min_insync_replicas == 2 and sc.cluster.extra == {"log.flush.interval.messages": "1"}
    with pytest.raises(ScenarioError, match="cluster.partition_handling"):
        parse({"name": "r", "broker": "rabbitmq", "cluster": {"partition_handling": "pause_majority"}})
    with pytest.raises(ScenarioError, match="workload.acks: Extra inputs"):
        parse({"name": "r", "broker": "rabbitmq", "workload": {"acks": "all"}})
    with pytest.raises(ScenarioError, match="workload.crashes: kafka is read after the heal"):
        parse({"name": "k", "broker": "kafka", "workload": {"crashes": [{"at": 1, "consumer": "c0"}]}})
    # the scenario as run (run.json params) parses back to the same scenario
    again = parse(sc.model_dump(mode="json"))
    assert again == sc


def test_a_run_recorded_before_the_plugins_is_judged_again():
    """run.json of runs made before the broker plug-ins holds every broker's workload options,
    probes and the other broker's target as null: re-checking such a run still parses it."""
    from harness.scenario import parse_recorded

    old = {"name": "R9-pause-minority", "broker": "rabbitmq", "cluster": {"partition_handling": "pause_minority"},
           "queue": {"name": "q", "type": "mirrored", "policy": {"ha-mode": "all"}}, "topic": None,
           "workload": {"rate": 100, "window": 100, "acks": "all", "idempotence": False, "retries": 3,
                        "delivery_timeout_ms": 10000, "prefill": 0},
           "probes": {"masters": None, "leaders": None, "throughput": None}, "expect": {"lost": 0}}
    sc = parse_recorded(old)
    assert sc.queue.name == "q" and sc.workload.rate == 100 and sc.cluster.partition_handling == "pause_minority"
    with pytest.raises(ScenarioError):
        parse_recorded(dict(old, workload={"rate": -1}))


def test_a_prediction_on_a_history_the_checker_cannot_judge_is_undecided():
    """lost: 0 'holds' on an empty or broken history; the verdict must not say so."""
    sc = parse({"name": "r", "broker": "rabbitmq", "expect": {"lost": 0}})
    result = _fake_result() | {"valid": None, "reason": "nothing was attempted"}
    v = expect.verdict(sc, result, {"drain": {"complete": True}})
    assert v["held"] is None and "nothing was attempted" in v["reason"]
    from harness.verdicts import EXIT_UNKNOWN, run_exit_code
    assert run_exit_code(dict(result, prediction=v)) == EXIT_UNKNOWN


def test_a_cluster_that_could_not_be_brought_back_makes_the_run_undecided():
    from harness.verdicts import undecided
    info = {"status": "completed", "drain": {"complete": True}, "self_healed": False,
            "operator_recovery": {"reason": "rabbit1 exited by itself", "restarted": None,
                                  "failed": "rabbit1 exited by itself (exit 0: BOOT FAILED)"}}
    assert any("could not be brought back" in r and "BOOT FAILED" in r for r in undecided(info, []))
    info["operator_recovery"]["failed"] = None  # restarted, and whole again: decided
    assert undecided(info, []) == []


def test_power_loss_brings_its_file_system_and_refuses_a_plain_one():
    base = {"name": "p", "broker": "kafka", "nemesis": [{"at": 1, "fault": "power_loss", "targets": "brokers"}]}
    assert parse(base).cluster.fs == "lazy"
    assert parse({**base, "nemesis": []}).cluster.fs is None
    with pytest.raises(ScenarioError, match="cluster.fs: plain.*power_loss needs fs: lazy"):
        parse({**base, "cluster": {"fs": "plain"}})
    with pytest.raises(ScenarioError, match="fs_writeback_s"):
        parse({**base, "cluster": {"fs_writeback_s": -1}})


def test_a_node_that_never_came_back_is_a_finding_even_when_the_counts_are_undecided():
    """R14b: self_healed=false is the run's own evidence; the drain (and so lost) is not."""
    sc = parse({"name": "r", "broker": "rabbitmq", "expect": {"self_healed": True, "lost": 0}})
    result = _fake_result() | {"lost": 0, "undecided": ["the drain did not finish: messages may still be queued"]}
    v = expect.verdict(sc, result, {"drain": {"complete": False}, "measurements": {"self_healed": False}})
    assert v["held"] is False and "self_healed=False" in v["reason"] and "drain did not finish" in v["reason"]
    v = expect.verdict(sc, result, {"drain": {"complete": False}, "measurements": {"self_healed": True}})
    assert v["held"] is None  # nothing of its own decided: undecided as before
