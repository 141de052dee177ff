"""Dependency cycles and exactly-once processing (checkers/cycles.py) against planted
anomalies and the independent reference (tests/reference.py's all-pairs order, Kosaraju)."""
import random

import pytest

import reference
from checkers import cycles as Y
from checkers import synth
from checkers.check import check_runs
from checkers.history import open_runs

FIGURES = Y.FIGURES
# what a plant brings with it besides its own figure
WITH = {"cycles_g1c_wr": {"cycles_g1c": 1, "uncommitted_reads": 1},
        "processed_twice": {"duplicate_offsets": 1}}
# "duplicated" (a message delivered more than once) is every input here: the processor and
# the reader c0 both read it


def checked(spark, d):
    runs, errors = open_runs([str(d)], prefer_parquet=False)
    assert not errors
    return check_runs(spark, runs)[str(d)]


def test_solve_counts_components_and_prints_a_cycle_through_each():
    edges = [("T1", "T2", "ww", "t:0 @1<@2"), ("T2", "T1", "ww", "t:1 @5<@6"),
             ("T3", "T4", "wr", "m at t:0 @3"), ("T4", "T3", "ww", "t:2 @1<@2"),
             ("T5", "T6", "wr", "a at t:1 @9"), ("T6", "T7", "wr", "b at t:2 @4"), ("T7", "T5", "wr", "c at t:0 @8"),
             ("T8", "T9", "ww", "t:0 @10<@11")]
    got = Y.solve(edges)
    assert (got["cycles_g0"], got["cycles_g1c"], got["cycles_g1c_wr"]) == (1, 2, 1)
    assert got["examples"]["cycles_g0"] == ["T1 -ww t:0 @1<@2-> T2 -ww t:1 @5<@6-> T1"]
    assert got["examples"]["cycles_g1c_wr"] == ["T5 -wr a at t:1 @9-> T6 -wr b at t:2 @4-> T7 -wr c at t:0 @8-> T5"]
    assert Y.solve([]) == {"cycles_g0": 0, "cycles_g1c": 0, "cycles_g1c_wr": 0,
                           "examples": {"cycles_g0": [], "cycles_g1c": [], "cycles_g1c_wr": []}}


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_the_plants_are_what_the_reference_finds(seed):
    """The generator's claims, by the reference alone (no Spark): each plant is found as
    many times as planted, on a history with no cycle of its own."""
    for kind in synth.CTP_PLANTS:
        produce, consume, planted = synth.build_ctp(random.Random(seed), **{kind: 3})
        ref = reference.cycle_figures(produce, consume)
        want = {k: 0 for k in FIGURES} | {kind: 3} | {k: 3 * v for k, v in WITH.get(kind, {}).items() if k in FIGURES}
        assert ref == want, (kind, ref)


@pytest.mark.spark
def test_a_clean_pipeline_has_no_cycle_and_processes_each_input_once(spark, tmp_path):
    produce, consume, _ = synth.build_ctp(random.Random(3))
    d = synth.write_run(tmp_path / "clean", produce, consume, meta={"history_version": 3})
    res = checked(spark, d)
    assert {k: res[k] for k in FIGURES} == {k: 0 for k in FIGURES}
    assert res["valid"] is True and res["lost"] == 0 and res["transactions_aborted"] == 3
    assert res["poll_skips"] == 0 and res["poll_skips_subscribe"] > 0  # x0 reads inputs only, subscribed


@pytest.mark.spark
@pytest.mark.parametrize("kind", synth.CTP_PLANTS)
def test_each_planted_kind_is_found_exactly(spark, tmp_path, kind):
    produce, consume, _ = synth.build_ctp(random.Random(11), **{kind: 3})
    d = synth.write_run(tmp_path / kind, produce, consume)
    res = checked(spark, d)
    ref = reference.check(d)
    with_ = WITH.get(kind, {})
    for k in FIGURES:
        assert res[k] == ref[k] == (3 if k == kind else 3 * with_.get(k, 0)), (kind, k, res[k], ref[k])
    for k in ("duplicate_offsets", "uncommitted_reads", "aborted_reads", "torn_transactions",
              "inconsistent_offsets", "lost", "poll_skips", "nonmonotonic_polls"):
        assert res[k] == ref[k] == 3 * with_.get(k, 0), (kind, k, res[k], ref[k])
    assert len(res["cycle_samples"][kind]) == 3
    if kind.startswith("cycles"):  # a printed cycle ends where it began
        first = res["cycle_samples"][kind][0].split()
        assert first[0] == first[-1]
    assert res["valid"] is (kind != "cycles_g1c_wr")  # the one no reading allows (checkers.analysis)


@pytest.mark.spark
def test_mixed_plants_agree_with_the_reference(spark, tmp_path):
    plants = {k: 2 for k in synth.CTP_PLANTS}
    produce, consume, _ = synth.build_ctp(random.Random(5), units=60, **plants)
    d = synth.write_run(tmp_path / "mixed", produce, consume, files=3)
    res, ref = checked(spark, d), reference.check(d)
    assert {k: res[k] for k in FIGURES} == {k: ref[k] for k in FIGURES}
    assert all(res[k] >= 2 for k in FIGURES)


@pytest.mark.spark
def test_transactions_without_a_processor_have_no_exactly_once_figures(spark, tmp_path):
    produce, consume, _ = synth.build_txn(random.Random(2))
    d = synth.write_run(tmp_path / "txn", produce, consume)
    res = checked(spark, d)
    assert res["processed_twice"] is None and res["unprocessed"] is None
    assert res["cycles_g0"] == 0 and res["cycles_g1c_wr"] == 0  # no positions: no edge
    q = synth.write_run(tmp_path / "queue", *synth.build_log(random.Random(1))[:2])
    assert all(checked(spark, q)[k] is None for k in FIGURES)


@pytest.mark.spark
def test_the_benchmarks_history_is_found_exactly(spark, tmp_path, monkeypatch):
    """bench/cycle_bench.py's history (build_ctp's at scale, built with numpy) at 10^5
    writes: every figure as planted, none invented; at 6,000 also the reference's."""
    import pyarrow.parquet as pq

    from bench import checker_bench, cycle_bench

    monkeypatch.setattr(cycle_bench, "DATA", tmp_path)
    monkeypatch.setattr(checker_bench, "DATA", tmp_path)
    run = cycle_bench.generate(100_000, 15)
    cycle_bench.lay_out(run)
    _, res = cycle_bench.check(run, spark, "all")
    assert {c: res[c] for c in cycle_bench.COLUMNS} == cycle_bench.expected(15)
    small = cycle_bench.generate(6_000, 5)
    produce = pq.read_table(small / "history" / "plain" / "produce").to_pylist()
    consume = pq.read_table(small / "history" / "plain" / "consume").to_pylist()
    assert reference.cycle_figures(produce, consume) == {k: cycle_bench.expected(5)[k] for k in FIGURES}
