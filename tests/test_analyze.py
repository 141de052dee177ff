"""`mqchaos analyze` against a synthetic results tree with planted figures.

The expected aggregates are computed here in plain Python from the reference
reading of the histories (tests/reference.py, which parses every line itself)
and from the planted counts, never from the Spark checker. Percentiles: linear
interpolation between closest ranks, as docs/nightly.md defines them.
"""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import helpers
import reference
from checkers import synth
from checkers.trend import broker_version, find_runs
from checkers.history import convert
from harness.cli import main as cli
from harness.trend_report import analyze

ROOT = Path(__file__).resolve().parent.parent

# (scenario, broker, version, started_at, lost, duplicated, outage, prediction held)
PLAN = [
    ("R9-pause-minority", "rabbitmq", "3.10.8", "2026-11-20T01:00:00+00:00", 0, 1, None, True),
    ("R9-pause-minority", "rabbitmq", "3.10.8", "2026-11-20T02:00:00+00:00", 0, 0, (3.0, 5.5), True),
    ("R9-pause-minority", "rabbitmq", "3.10.8", "2026-11-21T01:00:00+00:00", 2, 0, (1.0, 2.6), False),
    ("R9-pause-minority", "rabbitmq", "3.12.1", "2026-11-22T01:00:00+00:00", 0, 3, (2.0, 6.0), True),
    ("R9-pause-minority", "rabbitmq", "3.12.1", "2026-11-22T03:00:00+00:00", 0, 0, None, "absent"),
    ("K7-leader-cut", "kafka", "3.9.1", "2026-11-20T04:00:00+00:00", 5, 0, None, True),
    ("K7-leader-cut", "kafka", "3.9.1", "2026-11-21T04:00:00+00:00", 7, 2, (4.0, 5.2), True),
    ("K7-leader-cut", "kafka", "3.9.1", "2026-11-22T04:00:00+00:00", 0, 0, None, False),
    ("K7-leader-cut", "kafka", "3.7.0", "2026-11-21T05:00:00+00:00", 11, 0, (0.5, 4.5), None),
    ("K7-leader-cut", "kafka", "3.7.0", "2026-11-22T05:00:00+00:00", 3, 1, None, True),
    ("Q1-quorum", "rabbitmq", "3.12.1", "2026-11-20T06:00:00+00:00", 0, 0, (2.0, 3.5), True),
    ("Q1-quorum", "rabbitmq", "3.12.1", "2026-11-21T06:00:00+00:00", 1, 0, None, None),
    ("Q1-quorum", "rabbitmq", "3.12.1", "2026-11-22T06:00:00+00:00", 0, 4, (1.0, 7.0), True),
    # Nothing confirmed at all (every write failed): no rate, not a division by zero.
    ("R6-nothing-confirmed", "rabbitmq", "3.10.8", "2026-11-21T07:00:00+00:00", 0, 0, (0.0, 99.0), False),
]
CONVERTED = {"K7-leader-cut"}  # these runs' histories are read from their Parquet copy


def pct(xs: list[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (rank p*(n-1))."""
    if not xs:
        return None
    xs = sorted(xs)
    r = p * (len(xs) - 1)
    lo = math.floor(r)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (r - lo) * (xs[hi] - xs[lo])


def test_percentile_definition():
    assert pct([10.0], 0.99) == 10.0
    assert pct([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert pct([0.0, 10.0], 0.99) == pytest.approx(9.9)


@pytest.fixture(scope="module")
def tree(tmp_path_factory, spark):
    """The results tree: planted runs, plus the bad ones. Returns (root, expected per-run rows)."""
    root = tmp_path_factory.mktemp("results")
    expected = []  # (scenario, version, date, category, figures or None, prediction)
    for i, (sc, broker, ver, at, lost, dup, outage, held) in enumerate(PLAN):
        rng = random.Random(100 + i)
        produce, consume, _, planted = synth.build(
            rng, producers=2, per_producer=80, consumers=2, lost=lost, duplicated=dup,
            outage=outage, kafka=broker == "kafka")
        d = helpers.write_results_run(root, sc, at, produce, consume, broker=broker, version=ver, held=held)
        assert len(planted.lost) == lost and len(planted.duplicated) == dup
        if sc in CONVERTED:
            convert(spark, str(d))
        ref = reference.check(d)
        assert ref["lost"] == lost and ref["duplicated"] == dup  # the plant, as the reference reads it
        expected.append({"scenario": sc, "version": ver, "date": at[:10], "category": "checked",
                         "lost": ref["lost"], "duplicated": ref["duplicated"], "ok": ref["ok"],
                         "malformed": ref["malformed_lines"],
                         "unavailable_s": round(sum(z - a for a, z in ref["unavailable"]), 3),
                         "prediction": {True: "held", False: "not_held", None: "undecided",
                                        "absent": "none"}[held], "dir": d})
    # A run that crashed mid-line (truncated last line of each file): counted, still checked.
    produce, consume, _, _ = synth.build(random.Random(7), producers=2, per_producer=80, lost=2)
    d = helpers.write_results_run(root, "Q1-quorum", "2026-11-22T09:00:00+00:00", produce, consume,
                                version="3.12.1", held=True, truncate_last=True)
    ref = reference.check(d)
    assert ref["malformed_lines"] == 2
    expected.append({"scenario": "Q1-quorum", "version": "3.12.1", "date": "2026-11-22",
                     "category": "checked", "lost": ref["lost"], "duplicated": ref["duplicated"],
                     "ok": ref["ok"], "malformed": 2,
                     "unavailable_s": round(sum(z - a for a, z in ref["unavailable"]), 3),
                     "prediction": "held", "dir": d})
    # A harness error (cluster never healthy): no history; counted apart, never judged.
    d = helpers.write_results_run(root, "R9-pause-minority", "2026-11-22T05:00:00+00:00", [], [],
                                version="3.12.1", status="harness-error", history=False,
                                error="TimeoutError: cluster never became healthy")
    expected.append({"scenario": "R9-pause-minority", "version": "3.12.1", "date": "2026-11-22",
                     "category": "harness_error", "dir": d})
    # Interrupted (Ctrl-C): its partial history is not judged.
    produce, consume, _, _ = synth.build(random.Random(8), per_producer=20, lost=3)
    d = helpers.write_results_run(root, "Q1-quorum", "2026-11-22T10:00:00+00:00", produce, consume,
                                version="3.12.1", status="interrupted")
    expected.append({"scenario": "Q1-quorum", "version": "3.12.1", "date": "2026-11-22",
                     "category": "incomplete", "dir": d})
    # Completed, but the produce file is missing: an error in the summary, not a crash.
    produce, consume, _, _ = synth.build(random.Random(9), per_producer=20)
    d = helpers.write_results_run(root, "K7-leader-cut", "2026-11-22T11:00:00+00:00", produce, consume,
                                broker="kafka", version="3.9.1", link_latest=False)
    for f in (d / "history").glob("produce*.jsonl"):
        f.unlink()
    expected.append({"scenario": "K7-leader-cut", "version": "3.9.1", "date": "2026-11-22",
                     "category": "unreadable", "dir": d})
    # Not runs: a suite summary and an earlier analysis are skipped, not errors.
    (root / "suites" / "2026-11-22T00-00-00Z").mkdir(parents=True)
    (root / "suites" / "2026-11-22T00-00-00Z" / "summary.json").write_text("{}")
    return root, expected


def expected_groups(expected: list[dict], key) -> dict:
    groups = defaultdict(list)
    for e in expected:
        groups[key(e)].append(e)
    out = {}
    for k, es in groups.items():
        ch = [e for e in es if e["category"] == "checked"]
        ok, lost, dup = (sum(e[f] for e in ch) for f in ("ok", "lost", "duplicated"))
        un = [e["unavailable_s"] for e in ch]
        out[k] = {
            "runs": len(ch), "runs_with_loss": sum(1 for e in ch if e["lost"] > 0),
            "confirmed": ok, "lost": lost, "duplicated": dup,
            "lost_per_million": lost / ok * 1e6 if ok else None,
            "duplicated_per_million": dup / ok * 1e6 if ok else None,
            "unavailable_p50": pct(un, 0.5), "unavailable_p99": pct(un, 0.99),
            "unavailable_max": max(un) if un else None,
            "malformed_lines": sum(e["malformed"] for e in ch),
            **{v: sum(1 for e in ch if e["prediction"] == v)
               for v in ("held", "not_held", "undecided")},
            "no_prediction": sum(1 for e in ch if e["prediction"] == "none"),
            "harness_errors": sum(1 for e in es if e["category"] == "harness_error"),
            "incomplete": sum(1 for e in es if e["category"] == "incomplete"),
            "unreadable": sum(1 for e in es if e["category"] == "unreadable"),
        }
    return out


def assert_group(got: dict, want: dict, where):
    for k, v in want.items():
        if isinstance(v, float):
            assert got[k] == pytest.approx(v, rel=1e-9, abs=1e-9), (where, k, got[k], v)
        else:
            assert got[k] == v, (where, k, got[k], v)


@pytest.fixture(scope="module")
def analysis(tree, spark, tmp_path_factory):
    root, _ = tree
    out = tmp_path_factory.mktemp("analysis") / "a"
    # The whole tree, once more through a `latest` link and a glob: each run counted once.
    summary = analyze(spark, [str(root), str(root / "R9-pause-minority" / "latest"),
                              str(root / "*" / "2026-11-2*"), str(root / "no-such-dir")], out)
    return out, summary


pytestmark = pytest.mark.spark


def test_find_runs_counts_each_run_once(tree):
    root, expected = tree
    runs, errors = find_runs([str(root), str(root / "latest"), str(root / "K7-leader-cut" / "*")])
    assert sorted(map(str, runs)) == sorted(os.path.realpath(e["dir"]) for e in expected)
    assert errors == []
    runs, errors = find_runs(["file://" + str(root / "Q1-quorum"), "file:" + str(root / "Q1-quorum" / "latest")])
    assert len(runs) == 5 and errors == []
    runs, errors = find_runs([str(root / "suites"), "s3a://bucket/results"])
    assert runs == [] and len(errors) == 2 and "only local paths" in errors[1][1]


def test_broker_version():
    assert broker_version({"broker": "kafka", "brokers": {"kafka": "kafka_2.13-3.9.1.jar"}}) == "3.9.1"
    assert broker_version({"broker": "rabbitmq", "brokers": {"rabbitmq": "3.10.8", "erlang": "25"}}) == "3.10.8"
    assert broker_version({"broker": "kafka", "brokers": {"error": "no cluster"}}) == "unknown"
    assert broker_version({}) == "unknown"


def test_per_version_figures_match_an_independent_computation(tree, analysis):
    _, expected = tree
    out, summary = analysis
    want = expected_groups(expected, lambda e: (e["scenario"], e["version"]))
    got = {(r["scenario"], r["broker_version"]): r for r in summary["by_version"]}
    assert set(got) == set(want)
    for k in want:
        assert_group(got[k], want[k], k)
    # Planted figures, stated outright.
    k7 = got[("K7-leader-cut", "3.9.1")]
    assert k7["runs"] == 3 and k7["runs_with_loss"] == 2 and k7["lost"] == 12 and k7["unreadable"] == 1
    assert got[("K7-leader-cut", "3.7.0")]["lost"] == 14 and got[("K7-leader-cut", "3.7.0")]["undecided"] == 1
    r9 = got[("R9-pause-minority", "3.10.8")]
    assert (r9["runs"], r9["runs_with_loss"], r9["lost"], r9["duplicated"]) == (3, 1, 2, 1)
    assert (r9["held"], r9["not_held"]) == (2, 1)
    r9n = got[("R9-pause-minority", "3.12.1")]
    assert (r9n["runs"], r9n["harness_errors"], r9n["no_prediction"], r9n["duplicated"]) == (2, 1, 1, 3)
    q1 = got[("Q1-quorum", "3.12.1")]
    assert (q1["runs"], q1["incomplete"], q1["malformed_lines"]) == (4, 1, 2)
    assert q1["unavailable_max"] > 5.5  # the 6 s outage of the third Q1 run
    nothing = got[("R6-nothing-confirmed", "3.10.8")]
    assert (nothing["runs"], nothing["confirmed"], nothing["lost_per_million"]) == (1, 0, None)
    assert nothing["unavailable_max"] > 5
    # The run counts across the table: 15 checked (14 planted + the truncated one).
    assert summary["runs_found"] == 18 and summary["runs_checked"] == 15
    assert (summary["harness_errors"], summary["incomplete"], summary["unreadable"]) == (1, 1, 1)


def test_trend_by_day_matches(tree, analysis):
    _, expected = tree
    _, summary = analysis
    want = expected_groups(expected, lambda e: (e["scenario"], e["date"]))
    got = {(r["scenario"], r["run_date"]): r for r in summary["by_day"]}
    assert set(got) == set(want)
    for k in want:
        assert_group(got[k], want[k], k)
    assert got[("K7-leader-cut", "2026-11-21")]["versions"] == "3.7.0, 3.9.1"
    assert got[("K7-leader-cut", "2026-11-21")]["lost"] == 18


def test_per_run_table_and_bad_input(tree, analysis):
    _, expected = tree
    out, summary = analysis
    t = pq.read_table(out / "runs.parquet").to_pylist()
    assert len(t) == 18
    by_dir = {r["run_dir"]: r for r in t}
    for e in expected:
        r = by_dir[os.path.realpath(e["dir"])]
        assert r["category"] == e["category"]
        if e["category"] == "checked":
            assert (r["lost"], r["duplicated"], r["ok"], r["malformed_lines"]) == \
                (e["lost"], e["duplicated"], e["ok"], e["malformed"])
            assert r["unavailable_s"] == pytest.approx(e["unavailable_s"], abs=1e-3)
            assert r["source"] == ("parquet" if e["scenario"] in CONVERTED else "jsonl")
    truncated = [r for r in t if r["malformed_lines"]]
    assert len(truncated) == 1 and truncated[0]["malformed_lines"] == 2
    errors = {e["path"]: e["error"] for e in summary["errors"]}
    bad = next(os.path.realpath(e["dir"]) for e in expected if e["category"] == "unreadable")
    assert "no history/produce" in errors[bad]
    assert any(p.endswith("no-such-dir") for p in errors)
    assert len(summary["harness_error_runs"]) == 1 and "never became healthy" in summary["harness_error_runs"][0]["error"]
    md = (out / "summary.md").read_text()
    assert "## Errors (not analyzed)" in md and bad in md
    assert "| K7-leader-cut | 3.9.1 | 3 | 2 |" in md
    page = (out / "summary.html").read_text()
    assert page.count("data:image/png;base64,") == 2
    for png in ("loss_rate.png", "unavailable.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pq.read_table(out / "by_version.parquet").num_rows == len(summary["by_version"]) == 6


def test_uri_listed_by_spark_gives_the_same_table(tree, analysis, spark, tmp_path):
    """A URI is listed and read by Spark (checkers.spark.listing: what hdfs:// or s3a://
    go through). Forced on file: URIs here: the same runs, categories and
    figures as the local route, `latest` links not counted twice; a URI whose
    file system Spark lacks is an error for that argument, not a crash."""
    from checkers.spark import listing

    root, expected = tree
    _, local = analysis
    out = tmp_path / "uri"
    summary = analyze(spark, ["file://" + str(root), "file:" + str(root / "Q1-quorum" / "latest"),
                              "s3a://mqchaos-no-such-bucket/results"], out, list_with_spark=True)
    assert summary["runs_found"] == len(expected)
    for mine, theirs in zip(summary["by_version"] + summary["by_day"], local["by_version"] + local["by_day"]):
        assert mine == theirs, {k: (v, theirs.get(k)) for k, v in mine.items() if theirs.get(k) != v}
    assert len(summary["by_version"]) == len(local["by_version"]) and len(summary["by_day"]) == len(local["by_day"])
    t = {r["run_dir"]: r for r in pq.read_table(out / "runs.parquet").to_pylist()}
    for e in expected:
        r = t["file:" + os.path.realpath(e["dir"])]
        assert r["category"] == e["category"]
        if e["category"] == "checked":
            assert (r["lost"], r["duplicated"], r["ok"], r["malformed_lines"]) == \
                (e["lost"], e["duplicated"], e["ok"], e["malformed"])
            assert r["source"] == ("parquet" if e["scenario"] in CONVERTED else "jsonl")
    errors = {e["path"]: e["error"] for e in summary["errors"]}
    assert "Spark could not list it" in errors["s3a://mqchaos-no-such-bucket/results"]
    assert any("no history/produce" in e for e in errors.values())
    assert listing.is_uri("hdfs://nn:8020/results") and not listing.is_uri("results/R1")


def test_cli(tree, tmp_path):
    root, _ = tree
    out = tmp_path / "cli"
    r = CliRunner().invoke(cli, ["summarize", str(root / "Q1-quorum"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "| Q1-quorum | 3.12.1 | 4 |" in r.output
    s = json.loads((out / "summary.json").read_text())
    assert (s["runs_found"], s["runs_checked"], s["incomplete"]) == (5, 4, 1)
    r = CliRunner().invoke(cli, ["summarize", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2


def test_spark_submit_on_a_standalone_cluster(tree, analysis, tmp_path):
    """The same job through spark-submit, on a master + worker started from the
    pyspark install (127.0.0.1 only): same figures as in local mode."""
    from checkers.spark.standalone import Standalone, spark_home

    root, _ = tree
    _, local = analysis
    out = tmp_path / "standalone"
    py = sys.executable
    env = dict(os.environ, PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py, SPARK_LOCAL_IP="127.0.0.1")
    with Standalone(port=0, webui_port=0, cores=2, memory="2g") as url:
        proc = subprocess.run(
            [os.path.join(spark_home(), "bin", "spark-submit"), "--master", url,
             "--driver-memory", "1g", "--conf", "spark.executor.memory=1g",
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
             str(ROOT / "harness" / "trend_report.py"), str(root), "--out", str(out)],
            env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["master"] == url
    assert s["by_version"] == [r for r in local["by_version"]]
    assert s["by_day"] == local["by_day"]
