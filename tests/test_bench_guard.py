"""The performance guard (bench/guard.py): a figure beyond the noise band its baseline's own
repeated runs allow is a regression; a result of other sizes is not compared. The band is
checked against a hand computation, and a planted slowdown (a sleep's worth of seconds added
to a committed run) trips it while the committed runs themselves pass."""
from __future__ import annotations

import json

import pytest

from bench import guard


def test_band_is_three_times_the_relative_range_and_at_least_five_percent():
    assert guard.band([39.79, 38.83, 40.71, 38.97]) == pytest.approx(3 * (40.71 - 38.83) / 39.38)
    assert guard.band([10.0, 10.0, 10.0]) == guard.MIN_BAND


def test_judge_flags_only_what_is_above_the_band():
    values = [100.0, 104.0, 102.0]  # median 102, band 3 * 4 / 102 = 11.76 %: limit 114.0
    assert guard.judge(113.9, values)["regressed"] is False
    out = guard.judge(114.1, values)
    assert out["regressed"] is True and out["limit_s"] == pytest.approx(114.0) and out["ratio"] == pytest.approx(1.119, abs=1e-3)
    assert guard.judge(None, values)["regressed"] is None


def _run(tmp_path, name, attempts, check_s):
    (tmp_path / name).write_text(json.dumps([{"attempts": attempts, "spark": {"check_s": check_s}},
                                             {"attempts": 10, "spark": {"check_s": 0.1}}]))


def test_check_reads_the_baseline_files_and_the_sizes_must_match(tmp_path):
    for i, s in enumerate((40.0, 41.0, 39.0)):
        _run(tmp_path, f"checker-base{i}.json", 10_000_000, s)
    (tmp_path / "baseline.json").write_text(json.dumps({"checker": {
        "runs": [f"checker-base{i}.json" for i in range(3)], "figure": "spark.check_s",
        "match": {"attempts": 10_000_000}}}))
    _run(tmp_path, "checker-new.json", 10_000_000, 40.0 + 8.0)  # a planted 8 s sleep
    out = guard.check("checker", tmp_path / "checker-new.json", tmp_path / "baseline.json")
    assert out["regressed"] is True and "PERFORMANCE REGRESSION" in guard.banner(out)
    _run(tmp_path, "checker-small.json", 1_000_000, 400.0)  # other sizes: nothing compared
    assert guard.check("checker", tmp_path / "checker-small.json", tmp_path / "baseline.json")["regressed"] is None


def test_the_committed_baselines_pass_their_own_runs_and_a_planted_sleep_fails():
    spec = json.loads(guard.BASELINE.read_text())
    for bench, s in spec.items():
        values = guard.baseline_values(s)
        assert len(values) == len(s["runs"]) >= 3, bench  # every named run holds the figure
        assert all(guard.judge(v, values)["regressed"] is False for v in values)
        assert guard.judge(max(values) * 1.5, values)["regressed"] is True


def test_main_exits_by_the_verdict(tmp_path, monkeypatch):
    for i, s in enumerate((40.0, 41.0, 39.0)):
        _run(tmp_path, f"checker-base{i}.json", 10_000_000, s)
    (tmp_path / "baseline.json").write_text(json.dumps({"checker": {
        "runs": [f"checker-base{i}.json" for i in range(3)], "figure": "spark.check_s",
        "match": {"attempts": 10_000_000}}}))
    monkeypatch.setattr(guard, "BASELINE", tmp_path / "baseline.json")
    _run(tmp_path, "checker-ok.json", 10_000_000, 41.5)
    _run(tmp_path, "checker-slow.json", 10_000_000, 60.0)
    _run(tmp_path, "checker-other.json", 5, 1.0)
    assert guard.main(["checker", str(tmp_path / "checker-ok.json")]) == 0
    assert guard.main(["checker", str(tmp_path / "checker-slow.json")]) == 1
    assert guard.main(["checker", str(tmp_path / "checker-other.json")]) == 2


def test_a_slow_figure_from_a_busy_machine_is_not_concluded(tmp_path):
    for i, s in enumerate((40.0, 41.0, 39.0)):
        _run(tmp_path, f"checker-base{i}.json", 10_000_000, s)
    (tmp_path / "baseline.json").write_text(json.dumps({"checker": {
        "runs": [f"checker-base{i}.json" for i in range(3)], "figure": "spark.check_s",
        "match": {"attempts": 10_000_000}, "env": {"pyspark": None, "java": None, "cpus": 2}}}))
    for name, share, want in (("busy", 0.6, None), ("idle", 0.05, True)):
        (tmp_path / f"checker-{name}.json").write_text(json.dumps([
            {"attempts": 10_000_000, "spark": {"check_s": 58.0}, "env": {"busy_before": share, "cpus": 2}}]))
        out = guard.check("checker", tmp_path / f"checker-{name}.json", tmp_path / "baseline.json")
        assert out["regressed"] is want
    assert "the machine was busy as the bench began (other work took 60% of the CPU" in guard.banner(
        guard.check("checker", tmp_path / "checker-busy.json", tmp_path / "baseline.json"))
    # within the band, a busy machine changes nothing: the figure passed anyway
    (tmp_path / "checker-ok.json").write_text(json.dumps([
        {"attempts": 10_000_000, "spark": {"check_s": 40.0}, "env": {"busy_before": 0.9, "cpus": 2}}]))
    assert guard.check("checker", tmp_path / "checker-ok.json", tmp_path / "baseline.json")["regressed"] is False


def test_the_bench_measures_what_other_work_takes_of_the_cpu(monkeypatch):
    import io

    from bench import checker_bench

    # user nice system idle iowait irq softirq steal: 300 of 1000 jiffies not idle (30 %)
    snaps = iter(["cpu  100 0 100 1000 0 0 0 0 0 0\n", "cpu  300 0 200 1650 50 0 0 0 0 0\n"])
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: io.StringIO(next(snaps)))
    monkeypatch.setattr(checker_bench.time, "sleep", lambda s: None)
    assert checker_bench.cpu_busy(2.0) == 0.3


def test_a_result_is_compared_only_with_a_baseline_of_its_own_environment(tmp_path):
    env = {"pyspark": "4.3.0", "java": "openjdk 17", "cpus": 2}
    for i, s in enumerate((40.0, 41.0, 39.0)):
        _run(tmp_path, f"checker-base{i}.json", 10_000_000, s)
    spec = {"runs": [f"checker-base{i}.json" for i in range(3)], "figure": "spark.check_s",
            "match": {"attempts": 10_000_000}}
    (tmp_path / "checker-new.json").write_text(json.dumps([
        {"attempts": 10_000_000, "spark": {"check_s": 58.0}, "env": {**env, "busy_before": 0.0}}]))
    for baseline_env, want in ((None, None), ({**env, "pyspark": "4.0.1"}, None), (env, True)):
        (tmp_path / "baseline.json").write_text(json.dumps({"checker": {**spec, **({"env": baseline_env} if baseline_env else {})}}))
        out = guard.check("checker", tmp_path / "checker-new.json", tmp_path / "baseline.json")
        assert out["regressed"] is want, baseline_env
    (tmp_path / "baseline.json").write_text(json.dumps({"checker": spec}))
    text = guard.banner(guard.check("checker", tmp_path / "checker-new.json", tmp_path / "baseline.json"))
    assert "not compared: its environment" in text and "never recorded" in text
