"""A batch's pipeline (harness.batch, harness.checking): runs ordered so that the next
cluster can come up (at the background CPU weight) during the previous run's load, the next
run starting once the previous one is drained, one warm Spark session at the lowest
priority checking each run as soon as its history is closed. What must hold: beside a run's
faults there is no other run's load, drain, teardown or cluster down, and no cluster start
at the normal weight; the figures are those of one job over all runs; a check that fails
leaves only its own run undecided; the table keeps the order given."""
from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers import synth
from fakes import CheckedRun, FakeSpark, TimedRun
from harness import batch
from harness.checking import CheckQueue
from harness.runner import Run
from harness.scenario import load
from harness.verdicts import EXIT_VALID, EXIT_UNKNOWN

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


# ---- the order -------------------------------------------------------------------------------
@given(st.lists(st.sampled_from("abc"), max_size=30))
@settings(max_examples=300, deadline=None)
def test_interleave_is_a_permutation_with_fewest_same_kind_neighbours(kinds):
    jobs = list(enumerate(kinds))
    out = batch.interleave(jobs, kind=lambda j: j[1])
    assert sorted(out) == jobs
    for k in set(kinds):  # each kind's own order kept
        assert [j for j in out if j[1] == k] == [j for j in jobs if j[1] == k]
    same = sum(a[1] == b[1] for a, b in zip(out, out[1:]))
    most = max(Counter(kinds).values(), default=0)
    assert same == max(0, most - (len(kinds) - most) - 1)  # the fewest any order can have


def test_the_main_job_alternates_brokers():
    scs = [load(SCENARIOS / f) for f in ("R9-pause-minority.yaml", "Q1-quorum-leader-faults.yaml",
                                         "K7-leader-cut-from-zk-acks1.yaml", "K8b-leader-isolated-minisr2.yaml")]
    out = batch.interleave([(sc, 0) for sc in scs])
    assert [sc.name[:3].rstrip("-") for sc, _ in out] == ["R9", "K7", "Q1", "K8b"]


# ---- the pipeline, with runs that only record what they do ------------------------------------
def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("names", [
    ["R9-pause-minority", "Q1-quorum-leader-faults", "K7-leader-cut-from-zk-acks1", "K8b-leader-isolated-minisr2"],
    ["R9-pause-minority", "Q1-quorum-leader-faults", "R7-partition-ignore-split-brain"],  # one broker only
])
def test_only_background_work_runs_beside_faults_and_rows_keep_their_order(fake_batch, names):
    files = [SCENARIOS / f"{n}.yaml" for n in names]
    code = batch.run_batch(files=files, results=fake_batch, kind="t", sort=False, echo=lambda s: None)
    assert code == EXIT_VALID
    tl = TimedRun.timeline
    faults, loads, drains, downs = (tl.intervals(w) for w in ("faults", "load", "drain", "down"))
    ups, bg_ups = tl.intervals("up"), tl.intervals("up-background")
    checks, later = tl.intervals("check"), tl.intervals("later")
    assert len(loads) == len(ups) + len(bg_ups) == len(checks) == len(names) and len(later) == 2 * len(names)
    for f in faults:  # a run's faults share the machine with background work only
        for other in loads + drains + downs + ups:
            if other[2] != f[2]:
                assert not _overlap(f[:2], other[:2]), (f, other)
    brokers = {n: load(SCENARIOS / f"{n}.yaml").broker for n in names}
    drain_of = {who: (a, b) for a, b, who in drains}
    down_of = {who: (a, b) for a, b, who in downs}
    ordered = sorted(loads)
    for prev, nxt in zip(ordered, ordered[1:]):
        pn, nn = prev[2].split("#")[0], nxt[2].split("#")[0]
        assert nxt[0] >= drain_of[prev[2]][1]  # the next load once the previous run is drained
        if brokers[pn] != brokers[nn]:
            # its cluster came up in the background as the previous run's faults began, once
            # the run before that (the same compose project) was down
            up = next(u for u in bg_ups if u[2] == nxt[2])
            pf = next(f for f in faults if f[2] == prev[2])
            assert prev[0] <= up[0] < pf[1]
            assert all(d[1] <= up[0] for d in downs if d[2] != nxt[2] and d[0] < up[0])
            # and the previous run went down beside the next one's warm-up
            assert down_of[prev[2]][1] > nxt[0]
        else:  # one compose project: after it went down, at the normal weight
            up = next(u for u in ups if u[2] == nxt[2])
            assert up[0] >= down_of[prev[2]][1]
    out = json.loads((fake_batch / "t" / "latest" / "summary.json").read_text())
    assert [r["scenario"] for r in out] == names


def test_a_retried_run_abandons_the_prepared_cluster_and_a_failed_check_only_its_run(fake_batch):
    names = ["R9-pause-minority", "K7-leader-cut-from-zk-acks1", "Q1-quorum-leader-faults"]
    TimedRun.fail = {"K7-leader-cut-from-zk-acks1"}
    TimedRun.bad_check = {"R9-pause-minority"}
    files = [SCENARIOS / f"{n}.yaml" for n in names]
    code = batch.run_batch(files=files, results=fake_batch, kind="t", sort=False, echo=lambda s: None)
    assert code == EXIT_UNKNOWN  # R9's check failed: undecided, never held
    rows = {r["scenario"]: r for r in json.loads((fake_batch / "t" / "latest" / "summary.json").read_text())}
    assert rows["R9-pause-minority"]["exit"] == EXIT_UNKNOWN
    assert "check failed: RuntimeError: planted" in rows["R9-pause-minority"]["reason"]
    assert rows["K7-leader-cut-from-zk-acks1"]["retried"] and rows["K7-leader-cut-from-zk-acks1"]["exit"] == EXIT_VALID
    assert rows["Q1-quorum-leader-faults"]["exit"] == EXIT_VALID
    # Q1's cluster, prepared while K7's first attempt ended, went down unused: the retry ran
    # alone, and Q1 came up again after it
    abandoned = [who.split("#")[0] for _, w, _, who in TimedRun.timeline.events if w == "abandon"]
    assert abandoned == ["Q1-quorum-leader-faults"]
    statuses = Counter(r.info["status"] for r in TimedRun.made)
    assert statuses == {"completed": 3, "harness-error": 1, "abandoned": 1}
    faults, ups = TimedRun.timeline.intervals("faults"), TimedRun.timeline.intervals("up")
    assert not [(f, up) for f in faults for up in ups if _overlap(f[:2], up[:2])]


# ---- the checker ------------------------------------------------------------------------------
def test_a_check_that_stops_the_session_does_not_poison_the_next():
    made = []

    def factory():
        made.append(FakeSpark())
        return made[-1]

    def stop_and_fail(spark):
        spark.stopped = True
        raise RuntimeError("the JVM went away")

    got = {}
    ch = CheckQueue(spark_factory=factory)
    ch.submit(CheckedRun("a", lambda s: {"code": 0}), lambda c, e: got.update(a=(c, e)))
    ch.submit(CheckedRun("b", stop_and_fail), lambda c, e: got.update(b=(c, e)))
    ch.submit(CheckedRun("c", lambda s: {"code": 1}), lambda c, e: got.update(c=(c, e)))
    ch.close()
    assert got["a"] == (0, None) and got["c"] == (1, None)
    assert got["b"][0] == EXIT_UNKNOWN and "the JVM went away" in got["b"][1]
    assert len(made) == 2  # started again after b stopped it


def test_a_session_that_does_not_start_leaves_every_run_undecided_with_the_reason():
    def factory():
        raise OSError("no java")
    got = {}
    ch = CheckQueue(spark_factory=factory)
    ch.submit(CheckedRun("a", lambda s: {"code": 0}), lambda c, e: got.update(a=(c, e)))
    ch.close()
    assert got["a"][0] == EXIT_UNKNOWN and "no java" in got["a"][1]


@pytest.mark.spark
def test_one_run_at_a_time_gives_the_figures_of_one_job_over_all(spark, tmp_path):
    """What the batch's checker writes equals what the previous batch checker (one Spark
    job over every run, harness.batch.check_all until issue 20) computed."""
    from checkers.check import check_runs
    from checkers.history import open_runs
    from helpers import COMPARED

    runs = []
    for i, f in enumerate(["R9-pause-minority", "K7-leader-cut-from-zk-acks1", "Q3-quorum-monotonic-competing",
                           "Q4-quorum-sac-strict"]):
        sc = load(SCENARIOS / f"{f}.yaml")
        run = Run(sc, results=tmp_path, check=False)
        produce, consume, bad, _ = synth.build(random.Random(i), per_producer=60, lost=i, duplicated=1,
                                               unexpected=i % 2, reordered=2, malformed=i, write_ahead=True,
                                               kafka=sc.broker == "kafka", outage=(1.0, 2.5))
        synth.write_run(run.dir, produce, consume, malformed_produce=bad, meta=run.info)
        run.info["status"] = "completed"
        run.executed.set()
        runs.append(run)
    opened, errors = open_runs([str(r.dir) for r in runs])  # the old way, on the raw histories
    assert not errors
    at_once = check_runs(spark, opened)
    got = {}
    ch = CheckQueue(spark_factory=lambda: spark)
    for r in runs:
        ch.submit(r, lambda c, e, r=r: got.__setitem__(str(r.dir), (c, e)))
    ch.close()
    for r in runs:
        assert got[str(r.dir)][1] is None
        one = json.loads((r.dir / "check.json").read_text())
        for k in COMPARED:
            assert one[k] == json.loads(json.dumps(at_once[str(r.dir)][k])), (r.sc.name, k)
        assert one["ordering"] == r.sc.ordering
        assert "check_timing" in json.loads((r.dir / "run.json").read_text())
        assert one["source"] == "jsonl"  # checked from the record itself ...
        assert open_runs([str(r.dir)])[0][0].parquet_malformed is not None  # ... its copy kept after
        assert "publishes.png" in (r.dir / "report.md").read_text()  # pictures drawn by their process
