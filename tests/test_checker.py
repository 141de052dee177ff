"""The Spark checker against planted anomalies and against the reference."""
import json
import random

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

import reference
from checkers import synth
from checkers.check import check_runs
from checkers.history import open_runs
from harness.cli import main as cli
from helpers import COMPARED, agree, exit_of

pytestmark = pytest.mark.spark

def run_checker(spark, dirs, ordering=None, threshold=1.0, parquet=True):
    runs, errors = open_runs([str(d) for d in dirs], prefer_parquet=parquet)
    assert not errors
    return check_runs(spark, runs, ordering=ordering, threshold=threshold)


def test_planted_anomalies_are_counted_exactly(spark, tmp_path):
    rng = random.Random(7)
    produce, consume, bad, planted = synth.build(rng, producers=3, per_producer=200, lost=9,
                                                 duplicated=5, unexpected=4, reordered=2, malformed=3)
    d = synth.write_run(tmp_path / "r", produce, consume, malformed_produce=bad, files=3)
    res = run_checker(spark, [d], ordering="monotonic")[str(d)]
    assert res["lost"] == 9 and set(res["samples"]["lost"]) == planted.lost
    assert res["duplicated"] == 5 and set(res["samples"]["duplicated"]) == planted.duplicated
    assert res["duplicate_deliveries"] == 5
    assert res["unexpected"] == 4 and set(res["samples"]["unexpected"]) == planted.unexpected
    assert set(res["samples"]["recovered"]) == planted.recovered
    assert res["malformed_lines"] == 3
    assert res["ordering_violations"] >= 2
    assert planted.reordered <= set(res["samples"]["ordering"])
    assert res["attempted"] == 600 and res["ok"] + res["fail"] + res["info"] == 600
    assert res["valid"] is False
    agree(res, reference.check(d, "monotonic"))


def test_clean_history_is_valid_under_every_rule(spark, tmp_path):
    produce, consume, _, _ = synth.build(random.Random(1), producers=2, per_producer=100, consumers=2)
    d = synth.write_run(tmp_path / "clean", produce, consume)
    for rule in ("none", "fifo", "monotonic", "strict"):
        res = run_checker(spark, [d], ordering=rule)[str(d)]
        assert res["valid"] is True, (rule, res["reason"])
        assert res["lost"] == res["unexpected"] == res["ordering_violations"] == 0


def test_many_runs_in_one_job_are_told_apart(spark, tmp_path):
    dirs = []
    for i in range(4):
        produce, consume, _, _ = synth.build(random.Random(i), per_producer=40, lost=i, unexpected=3 - i)
        dirs.append(synth.write_run(tmp_path / f"run {i}+ü" / "2026-11-22T10-00-00Z", produce, consume))
    res = run_checker(spark, dirs)
    for i, d in enumerate(dirs):
        assert res[str(d)]["lost"] == i and res[str(d)]["unexpected"] == 3 - i
        agree(res[str(d)], reference.check(d))


def test_unavailable_interval_of_an_outage(spark, tmp_path):
    produce, consume, _, _ = synth.build(random.Random(3), producers=2, per_producer=100,
                                         p_fail=0, p_info=0, outage=(3.0, 6.0))
    d = synth.write_run(tmp_path / "o", produce, consume)
    res = run_checker(spark, [d])[str(d)]
    assert len(res["unavailable"]) == 1
    a, z = res["unavailable"][0]
    assert 2.9 < a <= 3.0 and 5.9 < z <= 6.0
    assert res["unavailable_s"] == pytest.approx(z - a, abs=1e-3)
    agree(res, reference.check(d))
    # Below the threshold, nothing is reported.
    assert run_checker(spark, [d], threshold=10)[str(d)]["unavailable"] == []


def test_empty_consume_log_loses_every_confirmed_message(spark, tmp_path):
    produce, _, _, _ = synth.build(random.Random(4), per_producer=30)
    d = synth.write_run(tmp_path / "e", produce, [])
    res = run_checker(spark, [d], ordering="fifo")[str(d)]
    assert res["lost"] == res["ok"] > 0 and res["delivered"] == 0 and res["valid"] is False
    agree(res, reference.check(d, "fifo"))


def test_truncated_last_line_is_counted_not_fatal(spark, tmp_path):
    produce, consume, _, _ = synth.build(random.Random(5), per_producer=30)
    d = synth.write_run(tmp_path / "t", produce, consume, truncate_last=True)
    res = run_checker(spark, [d])[str(d)]
    assert res["malformed_lines"] == 2  # the last line of each kind's file
    agree(res, reference.check(d))


def test_unicode_and_ids_shared_across_producers(spark, tmp_path):
    produce = [
        {"msg_id": "сообщение-1", "producer": "生产者", "seq": 0, "outcome": "ok", "t_invoke": 0.0,
         "t_complete": 0.1, "node": "ラビット1", "error": None},
        {"msg_id": "dup-id", "producer": "a", "seq": 0, "outcome": "ok", "t_invoke": 0.0,
         "t_complete": 0.1, "node": "n", "error": None},
        {"msg_id": "dup-id", "producer": "b", "seq": 0, "outcome": "fail", "t_invoke": 0.0,
         "t_complete": 0.1, "node": "n", "error": "nack"},
    ]
    consume = [{"msg_id": "сообщение-1", "consumer": "消费者", "t": 1.0, "redelivered": False,
                "source": "очередь", "offset": None, "node": "n", "producer": "生产者", "seq": 0}]
    d = synth.write_run(tmp_path / "u", produce, consume)
    res = run_checker(spark, [d])[str(d)]
    assert res["id_conflicts"] == 1 and res["samples"]["id_conflicts"] == ["dup-id"]
    assert res["valid"] is None  # a history that breaks its contract is not judged
    assert res["lost"] == 1  # dup-id: confirmed by one attempt, never delivered
    agree(res, reference.check(d))


@pytest.mark.parametrize("rule,deliveries,expected", [
    # (seq, redelivered, consumer, t): a redelivered message going back is fine but under strict.
    ("fifo", [(0, False, "c", 1), (2, False, "c", 2), (1, True, "c", 3)], 0),
    ("strict", [(0, False, "c", 1), (2, False, "c", 2), (1, True, "c", 3)], 1),
    # Gaps are allowed; going back is not.
    ("monotonic", [(0, False, "c", 1), (5, False, "c", 2), (3, False, "c", 3), (4, False, "c", 4)], 2),
    # Monotonic is per consumer: interleaving across consumers is fine...
    ("monotonic", [(0, False, "c1", 1), (2, False, "c2", 2), (1, False, "c1", 3)], 0),
    # ...but FIFO on one queue is not.
    ("fifo", [(0, False, "c1", 1), (2, False, "c2", 2), (1, False, "c1", 3)], 1),
    # Equal seq (a duplicate) is not "going back".
    ("strict", [(0, False, "c", 1), (1, False, "c", 2), (1, True, "c", 3), (2, False, "c", 4)], 0),
    ("none", [(3, False, "c", 1), (1, False, "c", 2)], 0),
])
def test_ordering_rules(spark, tmp_path, rule, deliveries, expected):
    produce = [{"msg_id": f"m{i}", "producer": "p", "seq": i, "outcome": "ok", "t_invoke": i * 0.1,
                "t_complete": i * 0.1 + 0.01, "node": "n", "error": None} for i in range(6)]
    consume = [{"msg_id": f"m{s}", "consumer": c, "t": t, "redelivered": r, "source": "q",
                "offset": None, "node": "n", "producer": "p", "seq": s} for s, r, c, t in deliveries]
    d = synth.write_run(tmp_path / "o", produce, consume)
    res = run_checker(spark, [d], ordering=rule)[str(d)]
    assert res["ordering_violations"] == expected
    agree(res, reference.check(d, rule))


def test_kafka_ordering_follows_offsets_not_arrival(spark, tmp_path):
    produce = [{"msg_id": f"m{i}", "producer": "p", "seq": i, "outcome": "ok", "t_invoke": i,
                "t_complete": i + 0.5, "node": "k1", "error": None} for i in range(4)]
    # Arrival times are scrambled (two consumers, re-reads) but the log is in order...
    consume = [{"msg_id": f"m{i}", "consumer": "c", "t": 10 - i, "redelivered": False, "source": "t:0",
                "offset": i, "node": "k1"} for i in range(4)]  # no producer/seq: taken from the produce log
    d = synth.write_run(tmp_path / "k", produce, consume)
    assert run_checker(spark, [d], ordering="fifo")[str(d)]["ordering_violations"] == 0
    # ...whereas a retry that landed m1 after m2 in the log is a violation.
    consume[1]["offset"], consume[2]["offset"] = 2, 1
    d2 = synth.write_run(tmp_path / "k2", produce, consume)
    res = run_checker(spark, [d2], ordering="fifo")[str(d2)]
    assert res["ordering_violations"] == 1 and res["samples"]["ordering"] == ["m1"]
    agree(res, reference.check(d2, "fifo"))


def test_parquet_copy_gives_the_same_answer(spark, tmp_path):
    from checkers.history import convert

    produce, consume, bad, _ = synth.build(random.Random(9), per_producer=80, lost=3, duplicated=2,
                                           unexpected=1, malformed=2, outage=(2.0, 4.0))
    d = synth.write_run(tmp_path / "p", produce, consume, malformed_consume=bad)
    from_json = run_checker(spark, [d], parquet=False)[str(d)]
    meta = convert(spark, str(d))
    assert meta["malformed"] == {"produce": 0, "consume": 2}
    from_pq = run_checker(spark, [d])[str(d)]
    assert from_pq["source"] == "parquet" and from_json["source"] == "jsonl"
    for k in COMPARED:
        assert from_pq[k] == from_json[k], k


# Property: on any history, Spark and the reference agree exactly.
record_t = st.integers(0, 40).map(lambda x: x / 4)  # coarse times make ties


@st.composite
def histories(draw):
    n_prod = draw(st.integers(1, 3))
    produce, consume = [], []
    for p in range(n_prod):
        for seq in range(draw(st.integers(0, 12))):
            mid = draw(st.sampled_from([f"p{p}-{seq}", f"p{p}-{seq}", f"p{p}-{seq}", f"shared-{seq}"]))
            t0 = draw(record_t)
            rec = {"msg_id": mid, "producer": f"p{p}", "seq": seq, "t_invoke": t0, "node": "n"}
            # history version 2: an invoke before the send (alone if the run died), then the
            # completion; sometimes a late confirm after a timeout
            if draw(st.booleans()):
                produce.append(dict(rec, outcome="invoke"))
            outcome = draw(st.sampled_from(["ok", "ok", "ok", "fail", "info", "invoke", "late"]))
            t1 = t0 + draw(record_t)
            if outcome == "late":
                produce.append(dict(rec, outcome="info", t_complete=t1, error="confirm timeout"))
                produce.append(dict(rec, outcome="ok", t_complete=t1 + draw(record_t), error=None))
            elif outcome != "invoke":
                produce.append(dict(rec, outcome=outcome, t_complete=t1, error=None))
    ids = [r["msg_id"] for r in produce] + ["ghost-1", "ghost-2"]
    for _ in range(draw(st.integers(0, 30))):
        mid = draw(st.sampled_from(ids))
        writer = next((r for r in produce if r["msg_id"] == mid), None)
        kafka = draw(st.booleans())
        consume.append({"msg_id": mid, "consumer": draw(st.sampled_from(["c1", "c2"])),
                        "t": draw(record_t), "redelivered": draw(st.booleans()),
                        "source": draw(st.sampled_from(["q", "t:0", "t:1"])),
                        "offset": draw(st.integers(0, 20)) if kafka else None, "node": "n",
                        "producer": writer["producer"] if writer and draw(st.booleans()) else None,
                        "seq": writer["seq"] if writer else None})
    bad = draw(st.lists(st.sampled_from(['{"msg_id": "tr', "{}", "[", '{"msg_id": 1}']), max_size=2))
    return produce, consume, bad


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(hs=st.lists(histories(), min_size=1, max_size=3),
       rule=st.sampled_from(["none", "fifo", "monotonic", "strict"]),
       threshold=st.sampled_from([0.0, 1.0, 3.0]))
def test_spark_agrees_with_reference(spark, tmp_path_factory, hs, rule, threshold):
    base = tmp_path_factory.mktemp("prop")
    dirs = [synth.write_run(base / f"r{i}", p, c, malformed_produce=b[:1], malformed_consume=b[1:])
            for i, (p, c, b) in enumerate(hs)]
    res = run_checker(spark, dirs, ordering=rule, threshold=threshold)
    for d in dirs:
        agree(res[str(d)], reference.check(d, rule, threshold))


def test_cli_writes_check_json_and_exit_codes(spark, tmp_path):
    produce, consume, _, _ = synth.build(random.Random(2), per_producer=20)
    good = synth.write_run(tmp_path / "good", produce, consume, meta={"ordering": "fifo"})
    lossy = synth.write_run(tmp_path / "lossy", *synth.build(random.Random(2), per_producer=20, lost=2)[:2])
    runner = CliRunner()
    r = runner.invoke(cli, ["check", str(good)])
    assert r.exit_code == 0, r.output
    check = json.loads((good / "check.json").read_text())
    assert check["valid"] is True and check["ordering"] == "fifo"
    r = runner.invoke(cli, ["check", str(good), str(lossy)])
    assert exit_of(r) == 1 and "lossy" in r.output
    assert json.loads((lossy / "check.json").read_text())["lost"] == 2
    # A missing run or a run without a produce log: a clear error, exit 2.
    r = runner.invoke(cli, ["check", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such run directory" in r.output
    (tmp_path / "noproduce" / "history").mkdir(parents=True)
    r = runner.invoke(cli, ["check", str(tmp_path / "noproduce")])
    assert r.exit_code == 2 and "no history/produce" in r.output
    # A results tree is searched for runs.
    # One rule merges the runs (harness.verdicts): an anomaly found (lossy) outranks a run
    # that could not be checked (noproduce), which outranks valid runs.
    r = runner.invoke(cli, ["check", "--ordering", "none", str(tmp_path)])
    assert exit_of(r) == 1 and "no history/produce" in r.output
    assert "good" in r.output and "lossy" in r.output
    r = runner.invoke(cli, ["check", str(good), str(tmp_path / "noproduce")])
    assert r.exit_code == 2


def test_a_run_without_run_json_is_undecided_and_says_why(spark, tmp_path):
    """Issue 52: nothing says a run with no run.json completed (a truncated run.json is refused
    the same way): valid null, exit 2, the reason printed and in check.json."""
    from harness.verdicts import EXIT_UNKNOWN, NO_RECORD

    run = synth.write_run(tmp_path / "bare", *synth.build(random.Random(3), per_producer=20)[:2])
    (run / "run.json").unlink()
    r = CliRunner().invoke(cli, ["check", "--no-server", str(run)])
    assert exit_of(r) == EXIT_UNKNOWN and f"{run.resolve()}: undecided: {NO_RECORD}" in r.output, r.output
    check = json.loads((run / "check.json").read_text())
    assert check["valid"] is None and check["reason"] == f"undecided: {NO_RECORD}"


def test_a_check_server_writes_what_a_local_check_writes(spark, tmp_path, monkeypatch):
    """harness.check_service: `mqchaos check` answered by a server's warm session writes the
    same check.json, every figure, as a check in this process; the server counted it."""
    import threading

    from harness import check_service as cs

    run = synth.write_run(tmp_path / "r", *synth.build(random.Random(5), per_producer=30, lost=3)[:2],
                          meta={"ordering": "fifo"})
    runner = CliRunner()
    assert exit_of(runner.invoke(cli, ["check", "--no-server", str(run)])) == 1
    drop = ("checked_at", "check_seconds")
    local = {k: v for k, v in json.loads((run / "check.json").read_text()).items() if k not in drop}
    (run / "check.json").unlink()
    path = tmp_path / "s.sock"
    monkeypatch.setenv(cs.SOCKET_ENV, str(path))
    srv = cs.CheckServer(path, None, lambda: spark, idle_timeout=120)
    ready = threading.Event()
    t = threading.Thread(target=srv.serve, kwargs={"ready": ready.set}, daemon=True)
    t.start()
    try:
        assert ready.wait(30)
        r = runner.invoke(cli, ["check", str(run)])
        assert exit_of(r) == 1 and "checked 1 run(s)" in r.output, r.output
        assert cs.status()["checks"] == 1
    finally:
        cs.stop()
        t.join(30)
    served = {k: v for k, v in json.loads((run / "check.json").read_text()).items() if k not in drop}
    assert served == local and served["lost"] == 3


# -- the fast paths' exactness ------------------------------------------------------------------

def test_producer_hash_collision_falls_back_to_names(spark, tmp_path, monkeypatch):
    """id_conflicts compares producers by a 64-bit hash; after a collision the
    checker recomputes them by name: both give the reference's answer."""
    from checkers import analysis as A

    produce = [{"msg_id": f"m{i % 5}", "producer": f"p{i % 3}", "seq": i, "outcome": "ok",
                "t_invoke": i * 0.1, "t_complete": i * 0.1 + 0.05, "node": "n", "error": None}
               for i in range(12)]
    consume = [{"msg_id": "m1", "consumer": "c", "t": 5.0, "redelivered": False, "source": "q",
                "offset": None, "node": "n", "producer": "p1", "seq": 1}]
    d = synth.write_run(tmp_path / "c", produce, consume)
    ref = reference.check(d)
    assert ref["id_conflicts"] == 5
    agree(run_checker(spark, [d])[str(d)], ref)
    monkeypatch.setattr(A, "collisions_query", lambda p: (p.select("run").distinct(), lambda rows: {r.run for r in rows}))
    agree(run_checker(spark, [d])[str(d)], ref)


def test_samples_without_min_by_k(spark, tmp_path, monkeypatch):
    """Spark < 4.2 has no min_by(..., k): the first ids then come from a sorted list."""
    from checkers import analysis as A

    monkeypatch.setattr(A, "_MIN_BY_K", False)
    produce, consume, bad, _ = synth.build(random.Random(11), producers=3, per_producer=60, lost=25,
                                           duplicated=22, unexpected=21, reordered=3, malformed=1)
    d = synth.write_run(tmp_path / "s", produce, consume, malformed_produce=bad)
    agree(run_checker(spark, [d], ordering="strict")[str(d)], reference.check(d, "strict"))


@pytest.mark.parametrize("threshold", [0.25, 0.5, 1.0, 2.0])
def test_unavailable_at_bucket_edges(spark, tmp_path, threshold):
    """Successes and failures on bucket boundaries, ties between them, gaps of
    exactly the threshold: the bucketed query and the sorted one (and the
    reference) agree."""
    from checkers import analysis as A
    from checkers.history import load

    rng = random.Random(int(threshold * 100))
    produce = []
    for i in range(400):
        t = rng.choice([0.0, 0.25, 0.5, 1.0, 2.0]) * rng.randint(0, 40)
        outcome = "ok" if rng.random() < (0.1 if 20 < t < 30 else 0.6) else rng.choice(["fail", "info"])
        produce.append({"msg_id": f"m{i}", "producer": "p", "seq": i, "outcome": outcome,
                        "t_invoke": max(0.0, t - rng.choice([0, 0.25, 1.0])), "t_complete": t,
                        "node": "n", "error": None})
    d = synth.write_run(tmp_path / "u", produce, [])
    ref = reference.check(d, "none", threshold)
    assert ref["unavailable"], "the history should have intervals"
    assert run_checker(spark, [d], threshold=threshold)[str(d)]["unavailable"] == ref["unavailable"]
    runs, _ = open_runs([str(d)])
    by_run, by_producer = A.run_queries([A._unavailable_sorted(load(spark, runs, "produce"), threshold)])[0]
    assert by_run.get(0, []) == ref["unavailable"]
    assert by_producer.get(0, {}).get("p", []) == ref["unavailable"]  # one producer: the same intervals


def test_jsonl_and_parquet_runs_in_one_job(spark, tmp_path):
    from checkers.history import convert

    dirs = []
    for i in range(2):
        produce, consume, bad, _ = synth.build(random.Random(20 + i), per_producer=50, lost=i + 1,
                                               duplicated=2, unexpected=1, malformed=1)
        dirs.append(synth.write_run(tmp_path / f"r{i}", produce, consume, malformed_consume=bad))
    convert(spark, str(dirs[0]))
    res = run_checker(spark, dirs, ordering="monotonic")
    assert res[str(dirs[0])]["source"] == "parquet" and res[str(dirs[1])]["source"] == "jsonl"
    for d in dirs:
        agree(res[str(d)], reference.check(d, "monotonic"))


# -- the bucketed Parquet copy ----------------------------------------------------------------

@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(hs=st.lists(histories(), min_size=1, max_size=2),
       rule=st.sampled_from(["none", "fifo", "monotonic", "strict"]))
def test_bucketed_copy_agrees_with_reference(spark, tmp_path_factory, hs, rule):
    """`mqchaos convert` buckets both logs by msg_id (sorted), and the checker
    then matches them bucket by bucket without a shuffle; a message's writer
    is still its first record in the JSONL's order (kept in `_pos`)."""
    from checkers import analysis as A
    from checkers.history import convert

    base = tmp_path_factory.mktemp("bucketed")
    dirs = [synth.write_run(base / f"r{i}", p, c, malformed_produce=b[:1], malformed_consume=b[1:], files=2)
            for i, (p, c, b) in enumerate(hs)]
    for d in dirs:
        assert convert(spark, str(d))["buckets"] == 4
    runs, errors = open_runs([str(d) for d in dirs])
    assert not errors and all(r.buckets == 4 for r in runs)
    with pytest.MonkeyPatch.context() as mp:  # the large-input paths, on small histories
        mp.setattr(A, "LARGE_INPUT", 0)
        res = check_runs(spark, runs, ordering=rule)
    for d in dirs:
        assert res[str(d)]["source"] == "parquet"
        agree(res[str(d)], reference.check(d, rule))


def test_bucketed_copy_is_matched_without_a_shuffle(spark, tmp_path):
    from checkers import analysis as A
    from checkers.history import bucketed, convert, run_ids

    produce, consume, _, _ = synth.build(random.Random(5), per_producer=100, lost=2, duplicated=3, unexpected=1)
    d = synth.write_run(tmp_path / "b", produce, consume)
    convert(spark, str(d))
    runs, _ = open_runs([str(d)])
    with bucketed(spark, run_ids(spark, runs)) as tables:
        assert set(tables) == {0}
        df, _ = A.identity_query(None, None, tables)
        plan = df._jdf.queryExecution().executedPlan().toString()
    # The only exchanges are after the per-message rows are folded (by run, kind).
    below = plan[plan.index("SortMergeJoin"):]
    assert "Exchange" not in below and "Sort [" not in below, plan
    assert not spark.catalog.listTables()  # the tables are gone


def test_more_bucketed_runs_than_tables_take_the_shuffle(spark, tmp_path, monkeypatch):
    from checkers import history as H

    from checkers import analysis as A

    monkeypatch.setattr(H, "BUCKETED_RUNS_MAX", 1)
    monkeypatch.setattr(A, "LARGE_INPUT", 0)
    dirs = []
    for i in range(2):
        produce, consume, _, _ = synth.build(random.Random(30 + i), per_producer=40, lost=i, duplicated=1)
        dirs.append(synth.write_run(tmp_path / f"r{i}", produce, consume))
        H.convert(spark, str(dirs[-1]))
    res = run_checker(spark, dirs, ordering="monotonic")
    for d in dirs:
        agree(res[str(d)], reference.check(d, "monotonic"))


def test_ordering_group_hash_collision_falls_back_to_exact(spark, tmp_path, monkeypatch):
    """The ordering window is partitioned by a 64-bit hash of the group; when
    two groups share one (here: all of them), it is run again exactly."""
    from checkers import analysis as A

    produce, consume, _, _ = synth.build(random.Random(12), producers=3, per_producer=60, consumers=2,
                                         reordered=4)
    d = synth.write_run(tmp_path / "g", produce, consume)
    monkeypatch.setattr(A, "LARGE_INPUT", 0)
    ref = reference.check(d, "monotonic")
    assert ref["ordering_violations"] > 0
    agree(run_checker(spark, [d], ordering="monotonic")[str(d)], ref)
    calls = []
    real = A.ordering_query

    def spy(*a, **k):
        calls.append(k.get("exact", False))
        return real(*a, **k)
    monkeypatch.setattr(A, "group_hash", lambda *cols: "CAST(0 AS BIGINT)")
    monkeypatch.setattr(A, "ordering_query", spy)
    agree(run_checker(spark, [d], ordering="monotonic")[str(d)], ref)
    assert calls == [False, True]  # the job's hashed window, then the exact one


def test_write_ahead_history(spark, tmp_path):
    """History version 2: a message invoked before the run died is unknown (info), never
    unexpected, even when delivered; a confirm that came after the timeout upgrades info
    to ok, so such a message that is then lost counts as lost."""
    produce, consume, _, planted = synth.build(random.Random(13), producers=2, per_producer=80, lost=2,
                                               write_ahead=True, crashed=3, late=4, late_lost=2)
    assert len(planted.crashed) == 3 and len(planted.late) == 4
    d = synth.write_run(tmp_path / "wa", produce, consume)
    res = run_checker(spark, [d])[str(d)]
    agree(res, reference.check(d))
    assert res["unexpected"] == 0 and res["lost"] == 2 + 2
    assert planted.late & set(res["samples"]["lost"]) and len(set(res["samples"]["lost"]) & planted.late) == 2
    assert planted.crashed <= set(res["samples"]["recovered"])  # delivered, outcome unknown
    assert res["produce_records"] == sum(1 for r in produce if r["outcome"] != "invoke")
    assert res["malformed_lines"] == 0
    # the same history without its invoke records: the crashed messages look unexpected
    v1 = synth.write_run(tmp_path / "v1", [r for r in produce if r["outcome"] != "invoke"], consume)
    assert run_checker(spark, [v1])[str(v1)]["unexpected"] == 3


def test_one_producers_outage_is_not_hidden_by_another(spark, tmp_path):
    """p0 fails for 10 s while p1 keeps succeeding: pooled over producers there is no
    interval, per producer p0's is there; a reader left waiting 10 s is seen too."""
    produce, consume = [], []
    for i in range(40):
        t = i * 0.5
        for p in ("p0", "p1"):
            outcome = "fail" if p == "p0" and 5 <= t < 15 else "ok"
            produce.append({"msg_id": f"{p}-{i}", "producer": p, "seq": i, "outcome": outcome,
                            "t_invoke": t, "t_complete": t + 0.1, "node": "n", "error": None})
        if not 5 <= t < 15:
            consume.append({"msg_id": f"p1-{i}", "consumer": "c0", "t": t + 0.2, "redelivered": False,
                            "source": "q", "offset": None, "node": "n", "producer": "p1", "seq": i})
    d = synth.write_run(tmp_path / "r", produce, consume)
    res = run_checker(spark, [d])[str(d)]
    agree(res, reference.check(d))
    assert res["unavailable"] == [] and res["unavailable_s"] == 0
    assert list(res["unavailable_by_producer"]) == ["p0"] and res["unavailable_s_producer_max"] == 9.6
    assert res["read_gap_max_s"] >= 10.0 and list(res["read_gaps"]) == ["c0"]


def test_loss_by_writer_and_as_a_prefix(spark, tmp_path):
    """R2's shape (every write up to a moment lost, none after) against a scattered loss, and
    R7's (the lost messages' nodes): both against the reference."""
    produce, consume, _, _ = synth.build(random.Random(3), producers=3, per_producer=100, p_fail=0, p_info=0)
    t_cut = 4.0
    prefix = synth.write_run(tmp_path / "prefix", produce, [c for c in consume if c["t"] - 0.5 > t_cut])
    res = run_checker(spark, [prefix])[str(prefix)]
    assert res["lost"] == sum(1 for r in produce if r["t_complete"] <= t_cut) > 0
    assert res["kept_before_lost_last"] == 0
    assert res["lost_by_node"] == {"n1": 40, "n2": 40, "n3": 40}  # seq 0..39 of each, one per node
    agree(res, reference.check(prefix))
    one = synth.write_run(tmp_path / "one", produce, [c for c in consume if c["producer"] != "p1" or c["seq"] % 2])
    res = run_checker(spark, [one])[str(one)]
    assert res["lost_by_node"] == {"n2": 50} and res["lost_by_producer"] == {"p1": 50}
    assert res["kept_before_lost_last"] > 0  # the others' writes in between were delivered
    agree(res, reference.check(one))
