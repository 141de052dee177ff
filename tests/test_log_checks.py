"""The log checks (checkers/logs.py) against planted anomalies and the independent reference."""
import random

import pytest

import reference
from checkers import logs as L
from checkers import synth
from checkers.check import check_runs
from checkers.history import open_runs

pytestmark = pytest.mark.spark

# the figures of a history without replica logs (lost-on-node's are None: harness/brokers/kafka/tests/test_segments.py)
FIGURES = tuple(k for k in L.FIGURES if k not in L.NEED_REPLICAS)
# what each plant shows as (the split's parts are figures of their own)
FIGURE = {k: k for k in synth.LOG_PLANTS}


def checked(spark, d):
    runs, errors = open_runs([str(d)], prefer_parquet=False)
    assert not errors
    return check_runs(spark, runs)[str(d)]


def same_as_reference(res, d, figures=L.FIGURES):  # the None ones agree too
    ref = reference.check(d)
    for k in figures:
        assert res[k] == ref[k], (k, res[k], ref[k])
    return ref


def test_a_clean_log_has_no_log_anomaly(spark, tmp_path):
    produce, consume, _ = synth.build_log(random.Random(3), producers=3, per_producer=80, partitions=3)
    d = synth.write_run(tmp_path / "clean", produce, consume, meta={"history_version": 3})
    res = checked(spark, d)
    assert res["write_offsets"] == 240 and res["read_offsets"] == 240
    assert all(res[k] == 0 for k in FIGURES if k not in ("write_offsets", "read_offsets")), res
    assert all(res[k] is None for k in L.NEED_REPLICAS)
    assert res["valid"] is True and res["lost"] == 0
    same_as_reference(res, d)


@pytest.mark.parametrize("kind", synth.LOG_PLANTS)
def test_each_planted_kind_is_found_exactly(spark, tmp_path, kind):
    produce, consume, planted = synth.build_log(random.Random(11), per_producer=90, **{kind: 3})
    d = synth.write_run(tmp_path / kind, produce, consume)
    res = checked(spark, d)
    assert res[FIGURE[kind]] == 3, (kind, {k: res[k] for k in FIGURES})
    ref = same_as_reference(res, d)
    # what a plant brings with it is what the reference finds too, and nothing else is invented
    expected_with = {"inconsistent_offsets": {"lost_middle", "lost_writes"},
                     "lost_middle": {"lost_writes", "poll_skips"}, "lost_prefix": {"lost_writes"},
                     "lost_postfix": {"unseen"}}.get(kind, set())
    for k in FIGURES:
        if k not in ("write_offsets", "read_offsets", FIGURE[kind]) and k not in expected_with:
            assert res[k] == 0, (kind, k, res[k])
    assert ref[FIGURE[kind]] == 3
    if kind in ("lost_prefix", "lost_middle", "lost_postfix"):
        assert res["lost"] == 3 and res["lost_writes"] + res["unseen"] == 3
    sampled = {"lost_prefix": "lost_writes", "lost_middle": "lost_writes", "lost_postfix": "unseen",
               "nonmonotonic_polls_subscribe": None}.get(kind, kind)
    if sampled:
        assert len(res["log_samples"][sampled]) == 3, res["log_samples"]


def test_the_verdict_counts_what_no_reading_of_a_log_allows(spark, tmp_path):
    for kind, valid in (("inconsistent_offsets", False), ("poll_skips", False), ("nonmonotonic_polls", False),
                        ("nonmonotonic_polls_subscribe", True), ("nonmonotonic_sends", True)):
        produce, consume, _ = synth.build_log(random.Random(5), per_producer=60, **{kind: 2})
        res = checked(spark, synth.write_run(tmp_path / kind, produce, consume))
        assert res["valid"] is valid, (kind, res["reason"])
        if not valid:
            assert f"{kind}=2" in res["reason"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mixed_plants_agree_with_the_reference(spark, tmp_path, seed):
    rng = random.Random(seed)
    plant = {k: rng.randint(0, 3) for k in synth.LOG_PLANTS}
    produce, consume, _ = synth.build_log(rng, producers=3, per_producer=150, partitions=2, p_fail=0.05, **plant)
    d = synth.write_run(tmp_path / f"mixed{seed}", produce, consume)
    res = checked(spark, d)
    same_as_reference(res, d)
    assert res["nonmonotonic_sends"] == plant["nonmonotonic_sends"]
    assert res["duplicate_offsets"] == plant["duplicate_offsets"]


def test_without_write_positions_the_write_figures_are_unknown(spark, tmp_path):
    """A version 2 history (RabbitMQ's confirms carry no position): never-read writes cannot be
    placed, so lost_writes / unseen are None, not 0; the read-side checks still run."""
    produce, consume, _ = synth.build_log(random.Random(9), per_producer=40, nonmonotonic_polls=1)
    for r in produce:
        r.pop("source", None)
        r.pop("offset", None)
    res = checked(spark, synth.write_run(tmp_path / "v2", produce, consume))
    assert res["write_offsets"] == 0 and res["lost_writes"] is None and res["unseen"] is None
    assert res["lost_prefix"] is None and res["nonmonotonic_polls"] == 1


def test_a_queue_history_has_no_positions_and_no_log_figures(spark, tmp_path):
    produce, consume, _, _ = synth.build(random.Random(2), per_producer=40)
    res = checked(spark, synth.write_run(tmp_path / "queue", produce, consume))
    assert res["read_offsets"] == 0 and res["write_offsets"] == 0 and res["lost_writes"] is None
    assert res["inconsistent_offsets"] == res["poll_skips"] == res["nonmonotonic_polls"] == 0


def test_unknown_plants_are_refused():
    with pytest.raises(ValueError, match="unknown plants"):
        synth.build_log(random.Random(0), lost_everything=1)


# ---- transactions (checkers/txn.py) ------------------------------------------------------------

from checkers import txn as X  # noqa: E402


def test_clean_transactions(spark, tmp_path):
    produce, consume, _ = synth.build_txn(random.Random(4), transactions=20, unknown=2)
    d = synth.write_run(tmp_path / "txn", produce, consume)
    res = checked(spark, d)
    # 2 producers x 20, every 4th aborted, 2 committed ones left unknown
    assert (res["transactions_committed"], res["transactions_aborted"], res["transactions_unknown"]) == (28, 10, 2)
    assert all(res[k] == 0 for k in X.SAMPLED) and res["valid"] is True, res["reason"]
    same_as_reference(res, d, X.FIGURES)


@pytest.mark.parametrize("kind", synth.TXN_PLANTS)
def test_each_planted_transaction_anomaly_is_found_exactly(spark, tmp_path, kind):
    produce, consume, _ = synth.build_txn(random.Random(8), transactions=30, **{kind: 3})
    d = synth.write_run(tmp_path / kind, produce, consume)
    res = checked(spark, d)
    assert res[kind] == 3 and all(res[k] == 0 for k in X.SAMPLED if k != kind), {k: res[k] for k in X.FIGURES}
    assert len(res["txn_samples"][kind]) == 3
    assert res["valid"] is False  # a lost transaction's messages are lost; the rest no isolation allows
    same_as_reference(res, d, X.FIGURES)


def test_mixed_transaction_plants_agree_with_the_reference(spark, tmp_path):
    rng = random.Random(21)
    plant = {k: rng.randint(1, 3) for k in synth.TXN_PLANTS}
    produce, consume, _ = synth.build_txn(rng, producers=3, transactions=50, size=3, unknown=3, **plant)
    d = synth.write_run(tmp_path / "mixed", produce, consume)
    res = checked(spark, d)
    same_as_reference(res, d, X.FIGURES)
    assert {k: res[k] for k in synth.TXN_PLANTS} == plant


def test_a_run_without_transactions_has_none_of_their_figures(spark, tmp_path):
    produce, consume, _ = synth.build_log(random.Random(6), per_producer=30)
    res = checked(spark, synth.write_run(tmp_path / "plain", produce, consume))
    assert all(res[k] is None for k in X.FIGURES)


def test_the_benchmarks_history_at_ten_to_the_five_is_found_exactly(spark, tmp_path, monkeypatch):
    """bench/log_bench.py's history (every log and transaction anomaly planted on distinct
    transactions) at 10^5 messages: every figure exactly as planted, none invented."""
    from bench import checker_bench, log_bench

    monkeypatch.setattr(log_bench, "DATA", tmp_path)
    monkeypatch.setattr(checker_bench, "DATA", tmp_path)
    run = log_bench.generate(100_000, 15)
    log_bench.lay_out(run)
    _, res = log_bench.check(run, spark, with_logs=True)
    assert {c: res[c] for c in log_bench.COLUMNS} == log_bench.expected(15)


def test_the_planted_counts_hold_for_any_seed_by_the_reference():
    """build_log's plants, mixed, on 200 seeds: the reference finds each as planted (and the
    middle / skip figures as planted plus what the other plants bring: a ghost's write is
    never read, in the middle; a never-read middle write is a skip)."""
    for seed in range(200):
        rng = random.Random(seed)
        plant = {k: rng.randint(0, 3) for k in synth.LOG_PLANTS}
        produce, consume, _ = synth.build_log(rng, producers=3, per_producer=120, p_fail=0.05, **plant)
        got = reference.log_figures([r for r in produce if r["outcome"] != "invoke"], consume)
        exact = ("inconsistent_offsets", "duplicate_offsets", "lost_prefix", "lost_postfix", "nonmonotonic_polls",
                 "nonmonotonic_polls_subscribe", "nonmonotonic_sends")
        assert {k: got[k] for k in exact} == {k: plant[k] for k in exact}, seed
        assert got["lost_middle"] == plant["lost_middle"] + plant["inconsistent_offsets"], seed
        assert got["poll_skips"] == plant["poll_skips"] + plant["lost_middle"], seed
