"""Issue 52: a prediction that cannot fail is refused when a scenario file is loaded
(harness.tautologies, harness.scenario.load), naming the field and why; the catalogue has none."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from harness import tautologies
from harness.scenario import ScenarioError, load, parse, parse_recorded, read

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
K4 = ROOT / "scenarios" / "K4-follower-cut-from-leader.yaml"


def _file(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _planted(name: str, expect: dict | None = None, drop: tuple[str, ...] = (), **top) -> dict:
    """A catalogue file's data with ``expect`` entries added (``drop``: removed) and top-level
    fields replaced."""
    data = copy.deepcopy(read(ROOT / "scenarios" / name))
    data["expect"] = {k: v for k, v in (data.get("expect") or {}).items() if k not in drop} | (expect or {})
    data.update(top)
    return data


def test_k4s_old_prediction_is_refused_naming_the_field_and_why(tmp_path):
    """K4 predicted isr_shrink_lag_s >= 10 with replica.lag.time.max.ms 10000: Kafka's leader
    drops a replica only once that lag has passed, so it held by construction."""
    data = _planted(K4.name, {"isr_shrink_lag_s": ">=10"}, measure=[])
    assert data["cluster"]["replica.lag.time.max.ms"] == 10000
    with pytest.raises(ScenarioError) as e:
        load(_file(tmp_path, data))
    text = str(e.value)
    assert "expect.isr_shrink_lag_s: '>=10' cannot fail" in text and "replica.lag.time.max.ms" in text
    # a bound above the lag is a prediction the broker can fail: not refused
    assert load(_file(tmp_path, _planted(K4.name, {"isr_shrink_lag_s": ">=11"}, measure=[]))).expect


def test_the_fixed_file_passes():
    sc = load(K4)  # judged on isr_shrink_s <= 17, the lag shown under measure:
    assert sc.expect["isr_shrink_s"] == "<=17" and "isr_shrink_lag_s" in sc.measure
    assert tautologies.problems(sc) == []


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_catalogue_file_passes(path):
    assert tautologies.problems(load(path)) == []


def test_a_stored_runs_recorded_scenario_stays_readable():
    """Only files are refused: parse / parse_recorded read an old run's tautology as it ran."""
    data = _planted(K4.name, {"isr_shrink_lag_s": ">=10"}, measure=[])
    assert parse_recorded(copy.deepcopy(data)).expect["isr_shrink_lag_s"] == ">=10"
    assert tautologies.problems(parse(data, "old run"))


# each row of the table, planted into the file it was found in, and a neighbour it must not refuse
REFUSED = [
    ("K13-acksall-latency-slow-follower.yaml", {"isr_shrink_s": ">=8"}, (), {}, "isr_shrink_s"),
    ("D1-quorum-poison-default-limit.yaml", {"dead_lettered": 0}, (), {}, "dead_lettered"),
    ("R9-pause-minority.yaml", {"nodes_down_count": ">0"}, (), {"nemesis": [
        {"at": 0, "fault": "kill", "targets": "rabbit3"}, {"at": 10, "fault": "start", "targets": "all"}]},
     "nodes_down_count"),
    ("K3-acks-all-minisr2.yaml", {"fail": ">0"}, (), {}, "fail"),
    ("R34-stop-all-last-master-first.yaml", {"unavailable_s": ">0"}, (), {}, "unavailable_s"),
    ("R32-two-node-pause-minority.yaml", {"unavailable_s": ">0"}, (), {}, "unavailable_s"),
    ("R45-nodes-policy-all-down-declared-locally.yaml", {"metadata_write_failed": ["rabbit2", "rabbit3"]}, (), {},
     "metadata_write_failed"),
    ("K9-kraft-controller-cut.yaml", {"new_controller_elected": True}, (), {}, "new_controller_elected"),
    ("R4-when-synced-master-wiped.yaml", {"lost": ">0"}, (), {}, "lost"),
    ("R7-partition-ignore-split-brain.yaml", {"lost": ">0"}, (), {}, "lost"),
    ("R22-transient-queue-node-restart.yaml", {"lost_share": 1}, (), {}, "lost_share"),
    ("K17-consumers-fetch-from-leaders.yaml", {"fetch_requests_to_leaders": ">0"}, (), {
        "require": {"fetch_messages_read": ">0"}}, "fetch_requests_to_leaders"),
    ("R9r-pause-minority-resumes.yaml", {"paused_count": 1}, (), {}, "paused_count"),
]


@pytest.mark.parametrize("name,expect,drop,top,field", REFUSED, ids=[f"{r[0][:4]}-{r[4]}" for r in REFUSED])
def test_each_known_tautology_is_refused(tmp_path, name, expect, drop, top, field):
    with pytest.raises(ScenarioError, match=rf"expect\.{field}: .* cannot fail: .*\(forced by "):
        load(_file(tmp_path, _planted(name, expect, drop, **top)))


ACCEPTED = [
    # the same figures where the setting, fault or sibling that forced them is absent
    ("K13-acksall-latency-slow-follower.yaml", {"isr_shrink_s": ">=8"}, (), {"nemesis": [
        {"at": 0, "fault": "kill", "targets": "random:1:followers except controller"},
        {"at": 30, "fault": "start", "targets": "all"}]}),  # a kill: the session expiry may come first
    ("D2-quorum-poison-dead-letter.yaml", {"dead_lettered": 0}, (), {}),  # a dead-letter queue is read
    ("R11c-pause-if-all-down-autoheal.yaml", {"nodes_down_count": ">0"}, (), {}),  # no fault stops a node
    ("K3-acks-all-minisr2.yaml", {"fail": ">0"}, (), {"workload": {
        "producers": 2, "rate": 200, "acks": "all", "retries": 0, "delivery_timeout_ms": 8000,
        "request_timeout_ms": 3000}}),  # the producer outlasts the ZooKeeper session
    ("R17-unmirrored-queue-node-lost.yaml", {"unavailable_s": ">0"}, (), {}),  # one node of three down
    ("K9-kraft-controller-cut.yaml", {"new_controller_elected": True}, ("controller_changes",), {}),
    ("R4b-all-mirrors-stopped-forget-offline.yaml", {"lost": ">0"}, (), {}),  # lost_share < 1 allows 0
    ("R22-transient-queue-node-restart.yaml", {"lost_share": 1}, (), {"workload": {  # a live reader
        "producers": 1, "consumers": 1, "rate": 100, "max_messages": 1000, "persistent": True}}),
]


@pytest.mark.parametrize("name,expect,drop,top", ACCEPTED, ids=[r[0][:4] for r in ACCEPTED])
def test_the_same_figure_that_can_fail_is_accepted(tmp_path, name, expect, drop, top):
    load(_file(tmp_path, _planted(name, expect, drop, **top)))


def test_the_table_says_what_forces_each_row_and_why():
    assert len(tautologies.TABLE) >= 10
    for row in tautologies.TABLE:
        assert row.figures and row.comparison and row.forced_by and row.why and callable(row.applies)


def test_the_schedule_is_read_for_nodes_down_together():
    """R34's stops leave every node down from 12 s to 25 s; R17 has one node down."""
    r34, r17 = load(ROOT / "scenarios/R34-stop-all-last-master-first.yaml"), load(
        ROOT / "scenarios/R17-unmirrored-queue-node-lost.yaml")
    assert tautologies.all_clients_down_s(r34) == 13.0 and tautologies.all_clients_down_s(r17) == 0.0
    r45 = load(ROOT / "scenarios/R45-nodes-policy-all-down-declared-locally.yaml")
    assert tautologies.down_at(r45, 5) == {"rabbit2", "rabbit3"} and tautologies.down_at(r45, 25) == set()
