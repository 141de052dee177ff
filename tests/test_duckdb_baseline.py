"""The DuckDB baseline of bench/checker_bench.py (bench.duckdb_check) computes every figure
Spark's checker computes for a queue's history: synthetic runs with planted anomalies,
converted to their Parquet copy, checked by both, compared figure by figure."""
from __future__ import annotations

import json
import random

import pytest

from bench import duckdb_check as D
from checkers import synth

pytestmark = pytest.mark.spark


def _build(seed: int, **kw):
    produce, consume, bad, _ = synth.build(random.Random(seed), **kw)
    return produce, consume, bad


def _odd(seed: int):
    """A history with what synth does not plant: poison messages, dead-lettered and
    given-up deliveries, rejected lines (one the only line of its message), deliveries
    without their writer, a msg_id written by two producers, records without a node, and
    more reorderings than SAMPLES."""
    rng = random.Random(seed)
    produce, consume, bad = _build(seed, producers=4, per_producer=150, consumers=2, lost=25, duplicated=22,
                                   unexpected=21, reordered=4, malformed=2, outage=(3.0, 6.0))
    for i, r in enumerate(produce):
        if i % 17 == 0:
            r["poison"] = True
        if i % 7 == 0:
            r["node"] = None
    produce.append(dict(produce[5], producer="px", seq=999))  # the same msg_id, another producer
    lanes: dict = {}
    for c in sorted(consume, key=lambda c: c["t"]):
        if not c["redelivered"] and c["producer"] is not None:
            lanes.setdefault((c["producer"], c["consumer"]), []).append(c)
    pairs = [(a, b) for lane in lanes.values() for a, b in zip(lane[10::7], lane[11::7])]
    for a, b in rng.sample(pairs, 30):
        a["t"], b["t"] = b["t"], a["t"]
    extra = []
    for i, c in enumerate(consume):
        if i % 13 == 0:
            c["dead_lettered"] = True
        if i % 19 == 0:
            c["gave_up"] = True
        if i % 11 == 0:
            extra.append(dict(c, t=round(c["t"] - 0.2, 6), rejected=True, dead_lettered=True))
        if i % 23 == 5 and c["producer"] is not None:
            c["producer"], c["seq"] = None, None  # its writer is looked up in the produce log
    lost = next(r for r in produce if r["outcome"] == "ok" and r["msg_id"] not in {c["msg_id"] for c in consume})
    lost["poison"] = True
    extra.append({"msg_id": lost["msg_id"], "consumer": "c1", "t": 50.0, "redelivered": False, "source": "q",
                  "offset": None, "node": "n1", "producer": lost["producer"], "seq": lost["seq"], "rejected": True})
    return produce, consume + extra, bad


SCENARIOS = {
    # name: (records, run.json's ordering)
    "monotonic": (lambda: _build(1, producers=3, per_producer=200, consumers=2, lost=9, duplicated=7,
                                 unexpected=5, reordered=3, malformed=3, outage=(5.0, 9.0)), "monotonic"),
    "fifo": (lambda: _build(2, producers=3, per_producer=150, lost=30, duplicated=25, unexpected=22,
                            reordered=3, malformed=1, outage=(2.0, 4.5)), "fifo"),
    "strict-write-ahead": (lambda: _build(3, producers=2, per_producer=120, consumers=2, lost=4, duplicated=5,
                                          unexpected=2, reordered=2, write_ahead=True, crashed=3, late=4,
                                          late_lost=2, outage=(6.0, 8.0)), "strict"),
    "none-clean": (lambda: _build(4, producers=2, per_producer=100, p_fail=0.2, p_info=0.2), None),
    "odd-monotonic": (lambda: _odd(5), "monotonic"),
    "odd-strict": (lambda: _odd(6), "strict"),
    "odd-fifo": (lambda: _odd(7), "fifo"),
}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """The scenarios' run directories, each converted to its Parquet copy."""
    from checkers.history import convert

    base = tmp_path_factory.mktemp("duckdb-baseline")
    out = {}
    for name, (make, rule) in SCENARIOS.items():
        produce, consume, bad = make()
        meta = {"scenario": name, **({"ordering": rule} if rule else {})}
        d = synth.write_run(base / name, produce, consume, malformed_produce=bad[:1],
                            malformed_consume=bad[1:], files=2, meta=meta)
        convert(spark, str(d))
        out[name] = d
    return out


def _spark(spark, dirs, threshold):
    from checkers.check import check_runs
    from checkers.history import open_runs

    opened, errors = open_runs([str(d) for d in dirs])
    assert not errors and all(r.parquet_malformed is not None for r in opened)  # the copy is read
    return check_runs(spark, opened, threshold=threshold)


def _agree(spark_result: dict, duck: dict, what: str) -> None:
    assert set(duck) == set(D.FIGURES)
    want = D.figures(spark_result)
    diff = D.differences(want, D.figures(duck))
    assert not diff, f"{what}: " + "; ".join(diff[:20])


# 0.02: below MIN_BUCKET_S, the sorted query; the other thresholds on a few runs (the test's time)
@pytest.mark.parametrize("threshold", [1.0, 0.3, 0.02])
def test_every_figure_agrees_with_spark(spark, runs, threshold):
    chosen = runs if threshold == 1.0 else {k: runs[k] for k in ("monotonic", "strict-write-ahead", "odd-fifo")}
    results = _spark(spark, list(chosen.values()), threshold)
    for name, d in chosen.items():
        res = results[str(d)]
        duck = D.check(d, threshold=threshold)
        _agree(res, duck, f"{name} @ {threshold}")
        if threshold == 1.0:  # the planted anomalies are there to compare
            assert res["lost"] or name == "none-clean"
            if name != "none-clean":
                assert res["duplicated"] and res["unexpected"] and res["unavailable"]
                assert res["malformed_lines"] or name == "strict-write-ahead"
                assert res["ordering_violations"] and res["samples"]["ordering"]
            if name.startswith("odd"):
                for k in ("poison", "lost_poison", "dead_lettered", "gave_up", "rejections", "id_conflicts"):
                    assert res[k], (name, k)
                assert len(res["samples"]["ordering"]) == D.SAMPLES
                assert "?" in res["lost_by_node"]


def test_rule_overrides_and_read_gaps_switch(spark, runs):
    """Another rule than run.json's, as `--ordering` gives; read gaps left out as Spark does
    on millions of records (None)."""
    from checkers.check import check_runs
    from checkers.history import open_runs

    d = runs["odd-monotonic"]
    opened, _ = open_runs([str(d)])
    for rule in ("fifo",):
        res = check_runs(spark, opened, ordering=rule)[str(d)]
        _agree(res, D.check(d, ordering=rule), rule)
    off = D.check(d, read_gaps=False)
    assert off["read_gaps"] is None and off["read_gap_max_s"] is None


def test_the_bench_history(spark, tmp_path, monkeypatch):
    """The bench's own generator (a copy without `_pos`, laid out as lay_out does), checked
    as it is at 10^7 too: Spark's large-input paths (the bucketed copy matched bucket by
    bucket, the hashed ordering window, no read gaps), taken here from a few records."""
    from checkers import analysis as A
    from bench import checker_bench as B
    from checkers import schema as S
    from checkers.history import write_copy

    monkeypatch.setattr(B, "DATA", tmp_path)
    run = B.generate(30_000, seed=7)
    plain = run / "history" / "plain"
    frames = {k: spark.read.schema(S.KINDS[k][0]).parquet(str(plain / k)) for k in ("produce", "consume")}
    meta = write_copy(spark, frames, str(run / "history" / "parquet"), {"produce": 0, "consume": 0},
                      frames["produce"].count())
    (run / "history" / "parquet" / "_meta.json").write_text(json.dumps(meta))
    res = _spark(spark, [run], 1.0)[str(run)]
    duck = D.check(run)
    _agree(res, duck, "bench")
    assert duck["ordering"] == "monotonic" and duck["lost"] and duck["unavailable"]
    assert duck["read_gaps"] is not None
    monkeypatch.setattr(A, "LARGE_INPUT", 1)
    monkeypatch.setattr(D, "LARGE_INPUT", 1)
    large = _spark(spark, [run], 1.0)[str(run)]
    assert large["read_gaps"] is None
    _agree(large, D.check(run), "bench, large-input paths")


def test_constants_are_the_checkers():
    from checkers import analysis as A
    from harness.results import ORDERINGS

    assert (D.SAMPLES, D.LARGE_INPUT, D.MIN_BUCKET_S, D.BUCKET_S) == \
        (A.SAMPLES, A.LARGE_INPUT, A.MIN_BUCKET_S, A.BUCKET_S)
    assert D.ORDERINGS == ORDERINGS and D.ANOMALY_KINDS == A.ANOMALY_KINDS


def test_differences_names_what_differs():
    assert D.differences({"a": [1.0, 2.0], "b": None}, {"a": [1.0 + 1e-9, 2.0], "b": None}) == []
    assert D.differences({"a": 1}, {"a": 2}) == [".a: 1 != 2"]
    assert D.differences({"a": None}, {"a": 0}) and D.differences({"a": [1]}, {"a": [1, 2]})
    assert D.differences({"a": 1}, {"b": 1})


def test_the_bench_compares_every_figure():
    from bench.checker_bench import same_figures

    figs = {k: 0 for k in D.FIGURES} | {"samples": {"lost": ["a"]}, "unavailable": [[1.0, 2.5]]}
    row = {"spark": {"figures": figs}, "duckdb": {"figures": dict(figs, unavailable=[[1.0, 2.6]])}}
    assert same_figures(row) is False and row["figure_differences"] == [".unavailable[0][1]: 2.5 != 2.6"]
    row["duckdb"]["figures"] = dict(figs, samples={"lost": ["b"]})
    assert same_figures(row) is False and row["figure_differences"] == [".samples.lost[0]: 'a' != 'b'"]
    row["duckdb"]["figures"] = dict(figs)
    assert same_figures(row) is True
    assert same_figures({"spark": {"figures": figs}}) is None  # duckdb not run


@pytest.mark.parametrize("extra", [{"source": "t:0", "offset": 3}, {"txn": "p0-t1"}, "replica"])
def test_what_it_does_not_check_is_refused(tmp_path, extra):
    """Positions in a log, transactions, replica logs: figures the baseline does not compute."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rec = {"msg_id": "p0-0", "producer": "p0", "seq": 0, "outcome": "ok", "t_invoke": 0.0, "t_complete": 0.1}
    if extra == "replica":
        (tmp_path / "history").mkdir()
        (tmp_path / "history" / "replica-kafka1.jsonl").write_text("")
    else:
        rec.update(extra)
    for kind, rows in (("produce", [rec]), ("consume", [])):
        (tmp_path / "history" / "parquet" / kind).mkdir(parents=True)
        if rows:
            pq.write_table(pa.Table.from_pylist(rows), tmp_path / "history" / "parquet" / kind / "part-0.parquet")
    with pytest.raises(ValueError, match="queue histories only"):
        D.check(tmp_path)
    if extra == "replica":
        return
    rec = {k: v for k, v in rec.items() if k not in extra}  # without them, the same history is checked
    pq.write_table(pa.Table.from_pylist([rec]), tmp_path / "history" / "parquet" / "produce" / "part-0.parquet")
    got = D.check(tmp_path)
    assert (got["attempted"], got["lost"], got["read_gaps"]) == (1, 1, None)  # no consume history
    (tmp_path / "history" / "consume-0.jsonl").write_text("")
    assert D.check(tmp_path)["read_gaps"] == {}
