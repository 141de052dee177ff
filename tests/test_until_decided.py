"""When a row is decided (harness.decided) and ``mqchaos batch --until-decided``
(harness.batch.until), without Docker: the batch's runs are fakes (tests/fakes.py's
``StoredRun``, the pipeline's ``RunHandle``) whose verdicts are planted per scenario, version
and repeat, and whose wall time is a planted clock's.

What must hold: each kind of prediction decides by its own rule (a never-claim at its first
counterexample or after the minimum of clean runs, a happens-claim at its first occurrence, a
race or rate by its interval, disagreeing runs mixed); only decided runs of the row's present
digest and version count; the batch stops a never-row at its first counterexample and a clean
one at the minimum, keeps a mixed row going to its cap, runs undecided rows first, then mixed
ones, fewest decided runs first; the budget stops starting runs; a Ctrl-C leaves the batch
resumable with the interrupted run uncounted, and resuming finishes the rows."""
from __future__ import annotations

import json
from math import sqrt
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from fakes import StoredRun
from harness import decided, identity, store
from harness.batch import pipeline, until
from harness.checking import CheckQueue
from harness.cli import main
from harness.decided import Kind, State, decision, of_tally
from harness.scenario import load
from harness.verdicts import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, RunStatus
from helpers import exit_of

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
NEVER = "R9q-pause-minority-quorum"          # expect: lost: 0, unexpected: 0
NEVER2 = "Q1-quorum-leader-faults"           # expect: lost: 0, unexpected: 0 (and more zeros)
RATE = "R11b-pause-if-all-down-control"      # expect: paused_nodes: [rabbit3], partition_detected: true
VERSION = "3.10"


def wilson95(k: int, n: int) -> tuple[float, float]:
    """Wilson's interval written out again (the score interval's closed form), not
    harness.measures.wilson: the tests' own expectation."""
    z = 1.959963984540054
    p = k / n
    mid, half = p + z * z / (2 * n), z * sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n)


# ---- the rule ------------------------------------------------------------------------------------

@pytest.mark.parametrize("expected, kind", [
    (0, Kind.NEVER), ("==0", Kind.NEVER), ("<= 0", Kind.NEVER), (0.0, Kind.NEVER),
    (">0", Kind.HAPPENS), ("!= 0", Kind.HAPPENS),
    ("<=2.5", Kind.RATE), ("<1", Kind.RATE), (">=1", Kind.RATE), (">= 2", Kind.RATE), (1, Kind.RATE),
    (True, Kind.RATE), (False, Kind.RATE), (["rabbit3"], Kind.RATE), ({"ends_after": "f1.end"}, Kind.RATE),
    ("> throughput_ratio.mirrored_backlog_vs_mirrored", Kind.RATE),
])
def test_each_prediction_s_kind(expected, kind):
    assert decided.kind_of(expected) == kind


def test_a_row_s_kind_is_the_one_its_predictions_share():
    assert decided.row_kind({"lost": 0, "unexpected": "==0"}) == Kind.NEVER
    assert decided.row_kind({"lost": ">0", "lost_by_node": {"rabbit1": ">0"}}) == Kind.HAPPENS  # nested: a figure
    assert decided.row_kind({"lost": 0, "paused_count": 1}) == Kind.RATE        # kinds differ: by its interval
    assert decided.row_kind({"lost": 0, "lost_poison": ">0"}) == Kind.RATE
    assert decided.row_kind({}) == decided.row_kind(None) == Kind.NONE
    assert decided.predictions({"throughput_ratio": {"a_vs_b": "<0.35"}, "lost_window": {"ends_after": "f1.end"}}) \
        == {"throughput_ratio.a_vs_b": "<0.35", "lost_window": {"ends_after": "f1.end"}}


def test_a_never_claim_did_not_hold_at_its_first_counterexample():
    d = decision({"lost": 0}, None, [True, True, False])
    assert (d.state, d.verdict, d.k, d.n, d.kind) == (State.DID_NOT_HOLD, False, 2, 3, Kind.NEVER)
    assert d.ci95 == pytest.approx(wilson95(2, 3))
    lo, hi = wilson95(1, 3)  # the share of runs in which it happens
    assert f"{lo * 100:.0f}–{hi * 100:.0f} %" in d.why and "disagree" in d.why
    first = decision({"lost": 0}, None, [False])
    assert first.state == State.DID_NOT_HOLD and first.decided and "disagree" not in first.why


def test_a_never_claim_held_after_the_minimum_of_clean_runs():
    assert decision({"lost": 0}, None, [True, True]).state == State.UNDECIDED
    d = decision({"lost": 0, "unexpected": 0}, None, [True, True, True])
    assert (d.state, d.verdict, d.n) == (State.HELD, True, 3)
    assert d.ci95[0] == pytest.approx(wilson95(3, 3)[0]) and d.ci95[1] == 1.0
    assert f"up to {wilson95(0, 3)[1] * 100:.0f} %" in d.why    # how often it could happen unseen: 56 %
    assert decision({"lost": 0}, None, [True] * 3, min_clean=5).state == State.UNDECIDED  # a parameter
    assert decision({"lost": 0}, None, [True] * 5, min_clean=5).state == State.HELD


def test_a_happens_claim_held_at_one_occurrence_and_its_absence_decides_nothing():
    d = decision({"lost": ">0"}, None, [False, False, True])
    assert (d.state, d.verdict, d.k, d.n) == (State.HELD, True, 1, 3)
    none = decision({"lost": ">0"}, None, [False] * 10)
    assert (none.state, none.verdict) == (State.UNDECIDED, None)
    assert f"at most {wilson95(0, 10)[1] * 100:.0f} %" in none.why      # 28 %


@pytest.mark.parametrize("verdicts, state", [
    ([True] * 3, State.UNDECIDED),        # lower bound 44 %: not above 50 %
    ([True] * 4, State.HELD),             # 51 %
    ([False] * 4, State.DID_NOT_HOLD),
    ([True, False, True, True], State.MIXED),
    ([True] * 9 + [False], State.MIXED),  # held in 90 %: under 95 %
    ([True] * 19 + [False], State.HELD),  # 95 %, lower bound 76 %
    ([True] + [False] * 19, State.DID_NOT_HOLD),
    ([], State.UNDECIDED),
])
def test_a_race_or_rate_by_its_interval(verdicts, state):
    d = decision({"unavailable_s": "<=2.5"}, None, verdicts)
    assert d.state == state
    k, n = sum(verdicts), len(verdicts)
    if n:  # the rule, stated independently: held in >= 95 % with the lower bound above 50 %, or the reverse
        lo, hi = wilson95(k, n)
        want = (State.HELD if k / n >= 0.95 and lo > 0.5 else State.DID_NOT_HOLD if k / n <= 0.05 and hi < 0.5
                else State.MIXED if 0 < k < n else State.UNDECIDED)
        assert d.state == want


def test_only_decided_runs_count_and_a_row_without_prediction_decides_nothing():
    d = decision({"lost": 0}, {"paused_count": 1}, [True, None, None, True, True])
    assert (d.state, d.n) == (State.HELD, 3) and "require: paused_count" in d.why
    none = decision({}, None, [True, False])
    assert none.state == State.NO_PREDICTION and not none.decided and none.verdict is None


def test_of_tally_pools_a_row_s_lines_and_leaves_a_superseded_one_out():
    lines = [{"held": 2, "decided": 2, "superseded": False}, {"held": 1, "decided": 1, "superseded": False},
             {"held": 0, "decided": 5, "superseded": True}]
    d = of_tally(lines, {"lost": 0})
    assert (d.state, d.k, d.n) == (State.HELD, 3, 3)
    assert of_tally(lines[0], {"lost": 0}).state == State.UNDECIDED
    assert of_tally(lines[2], {"lost": 0}).n == 0


# ---- the choice of the next runs -----------------------------------------------------------------

def _standing(sid: str, verdicts: list[bool], expect=None, spent=None, seconds=60.0):
    sc = SimpleNamespace(id=sid, name=f"{sid}-x", version="3.10")
    d = decision({"paused_nodes": ["rabbit3"]} if expect is None else expect, None, verdicts)
    return until.Standing(sc, d, 0, len(verdicts) if spent is None else spent, seconds)


def test_undecided_rows_first_then_mixed_then_fewest_decided_runs():
    rows = [_standing("R1", [True, False]),                     # mixed, 2 runs
            _standing("R2", [True, True]),                      # undecided, 2
            _standing("R3", [True] * 4),                        # decided: no run
            _standing("R4", []),                                # undecided, none
            _standing("R5", [True, False, True]),               # mixed, 3
            _standing("R6", [True, False] * 5),                 # mixed at its cap (10)
            _standing("R7", [True], spent=10),                  # undecided, at its cap: runs that decided nothing
            _standing("R8", [], expect={}),                     # no prediction
            _standing("K1", [True, True])]                      # undecided, 2: after R2 (catalogue order)
    chosen = [s.sc.id for s in until.plan_round(rows, 10, None)]
    assert chosen == ["R4", "R2", "K1", "R1", "R5"]
    assert [s.sc.id for s in until.plan_round(list(reversed(rows)), 10, None)] == chosen  # no order given matters


def test_a_round_fits_the_budget_left_in_its_order():
    rows = [_standing("R1", [], seconds=100), _standing("R2", [], seconds=300), _standing("R3", [], seconds=50)]
    assert [s.sc.id for s in until.plan_round(rows, 10, 200)] == ["R1", "R3"]  # R2 does not fit; R3 still does
    assert until.plan_round(rows, 10, 40) == []


# ---- the batch, with fake runs -------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class PlantedRun(StoredRun):
    """A StoredRun whose planted outcome may also be an interruption (``interrupt``: "raise"
    raises KeyboardInterrupt from the run, as a Ctrl-C would; "status": the run says it was
    interrupted, as harness.runner.Run does after healing) and whose run takes ``seconds``
    of the planted clock."""
    clock: Clock
    step = 60.0

    def execute(self):
        p = self.planted()
        PlantedRun.clock.t += p.get("seconds", PlantedRun.step)
        how = p.get("interrupt")
        if how is None:
            return super().execute()
        StoredRun.ran.append((self.sc.name, self.sc.version, self.info["catalogue"]["repeat"]))
        self.info["status"] = RunStatus.INTERRUPTED
        self.save_info()
        self.executed.set()
        if how == "raise":
            raise KeyboardInterrupt()
        return EXIT_UNKNOWN


@pytest.fixture
def planted(monkeypatch, tmp_path):
    """Batches of PlantedRuns under tmp_path/results, checked without Spark; an empty evidence
    directory; the planted clock."""
    StoredRun.plan, StoredRun.ran = {}, []
    PlantedRun.clock = Clock()
    monkeypatch.setattr(pipeline, "Run", PlantedRun)
    monkeypatch.setattr(pipeline, "CheckQueue", lambda master: CheckQueue(spark_factory=object))
    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path / "results"))
    (tmp_path / "evidence").mkdir()
    return tmp_path


def plant(name: str, outcomes: list[str]) -> None:
    """Repeat i of ``name`` at VERSION: held, fail (did not hold: lost 3), undecided, or an interruption."""
    what = {"held": {"held": True}, "fail": {"held": False, "lost": 3}, "undecided": {"held": None},
            "raise": {"interrupt": "raise"}, "status": {"interrupt": "status"}}
    for i, o in enumerate(outcomes):
        StoredRun.plan[(name, VERSION, i)] = what[o]


def files(*names: str) -> list[Path]:
    return [SCENARIOS / f"{n}.yaml" for n in names]


def cat_of(paths: list[Path]) -> identity.Catalogue:
    return identity.Catalogue([identity.entry(p) for p in paths])


def start(tmp_path: Path, names, cap=10, budget=None, **kw) -> tuple[int, Path]:
    paths = files(*names)
    ask = until.Ask([str(p) for p in paths], cap=cap, budget_s=budget, evidence=str(tmp_path / "evidence"))
    code = until.run_until_decided(ask, echo=lambda s: None, cat=cat_of(paths), clock=PlantedRun.clock, **kw)
    return code, tmp_path / "results" / until.KIND / "latest"


def decisions(out: Path) -> dict[str, dict]:
    return {d["scenario"]: d for d in json.loads((out / "decisions.json").read_text())}


def ran(name: str) -> list[int]:
    return [rep for n, _, rep in StoredRun.ran if n == name]


def test_a_never_row_stops_at_its_counterexample_a_clean_one_at_the_minimum_a_mixed_one_at_its_cap(planted):
    plant(NEVER, ["held", "fail", "held", "held"])
    plant(RATE, ["held", "fail"] * 5)
    code, out = start(planted, [NEVER, NEVER2, RATE], cap=6)
    assert code == EXIT_INVALID  # a row did not hold
    assert ran(NEVER) == [0, 1]                 # its first counterexample: no run after it
    assert ran(NEVER2) == [0, 1, 2]             # clean: the minimum, 3
    assert ran(RATE) == [0, 1, 2, 3, 4, 5]      # mixed: to its cap
    # rounds in order: undecided rows first (catalogue order), then the mixed one
    assert [n for n, _, _ in StoredRun.ran] == [NEVER, RATE, NEVER2, NEVER, RATE, NEVER2, NEVER2] + [RATE] * 4
    d = decisions(out)
    assert (d[NEVER]["state"], d[NEVER]["k"], d[NEVER]["n"], d[NEVER]["stopped"]) == ("DID NOT HOLD", 1, 2, "decided")
    assert (d[NEVER2]["state"], d[NEVER2]["n"], d[NEVER2]["kind"]) == ("held", 3, "never")
    assert (d[RATE]["state"], d[RATE]["k"], d[RATE]["n"]) == ("mixed", 3, 6)
    assert d[RATE]["stopped"].startswith("cap reached") and d[RATE]["ci95"] == pytest.approx(wilson95(3, 6), abs=1e-4)
    md = (out / "summary.md").read_text()
    assert "## Decisions" in md and "held 3 of 6 decided runs (95 % CI 19–81 %)" in md
    assert "Decisions:" in (out / "summary.txt").read_text()
    assert len(json.loads((out / "summary.json").read_text())) == 11  # every run's row


def test_runs_already_published_count_and_older_digests_do_not(planted):
    sc = load(files(NEVER)[0])
    stamp = identity.stamp(sc)
    def published(i, **kw):
        return {"scenario": NEVER, "id": sc.id, "version": VERSION, "repeat": i, "status": "completed",
                "harness_error": False, "prediction": True, "expect": sc.expect, "seconds": 90.0,
                "run": f"{NEVER}/2026-01-0{i}", **stamp, **kw}
    rows = [published(1), published(2),
            published(3, prediction=None),                                    # undecided: no count
            published(4, harness_error=True, status="harness-error"),          # no count
            *[published(5 + i, digest="0" * 64, prediction=False) for i in range(3)]]  # an older encoding
    (planted / "evidence" / "b1").mkdir()
    (planted / "evidence" / "b1" / "summary.json").write_text(json.dumps(rows))
    code, out = start(planted, [NEVER])
    assert code == EXIT_VALID and ran(NEVER) == [0]  # 2 published + 1: the minimum
    d = decisions(out)[NEVER]
    assert (d["state"], d["n"], d["runs_here"], d["expected_s"]) == ("held", 3, 1, 90.0)


def test_the_budget_stops_starting_runs(planted):
    PlantedRun.step = 160.0  # each run takes longer than its row's expected 120 s (nothing published: shard.DEFAULT_S)
    try:
        code, out = start(planted, [NEVER, NEVER2], budget=250.0)
    finally:
        PlantedRun.step = 60.0
    # planned both (2 x 120 s expected, of 250), but after the first (160 s) 90 s were left: Q1 not started
    assert StoredRun.ran == [(NEVER, VERSION, 0)]
    assert code == EXIT_UNKNOWN
    d = decisions(out)
    assert d[NEVER]["stopped"] == d[NEVER2]["stopped"] == "budget ended" and d[NEVER2]["runs_here"] == 0
    state = json.loads((out / until.STATE_FILE).read_text())
    assert state["spent_s"] == 160.0 and [r["repeat"] for r in state["runs"]] == [0]


@pytest.mark.parametrize("how", ["raise", "status"])
def test_a_ctrl_c_leaves_the_batch_resumable_and_the_interrupted_run_uncounted(planted, how):
    plant(NEVER, ["held", how, "held", "held"])
    code, out = start(planted, [NEVER, NEVER2])
    assert code == EXIT_UNKNOWN
    assert StoredRun.ran == [(NEVER, VERSION, 0), (NEVER2, VERSION, 0), (NEVER, VERSION, 1)]
    state = json.loads((out / until.STATE_FILE).read_text())
    runs = {(r["scenario"], r["repeat"]): r for r in state["runs"]}
    assert runs[(NEVER, 1)]["status"] == RunStatus.INTERRUPTED and not runs[(NEVER, 1)]["counted"]
    assert runs[(NEVER, 0)]["counted"] and runs[(NEVER2, 0)]["counted"] and len(runs) == 3
    d = decisions(out)
    assert (d[NEVER]["n"], d[NEVER]["stopped"]) == (1, "interrupted")
    batch_dir = out.resolve()
    StoredRun.ran = []
    code = until.run_until_decided(resume=batch_dir, echo=lambda s: None, cat=cat_of(files(NEVER, NEVER2)),
                                   clock=PlantedRun.clock)
    assert code == EXIT_VALID
    assert ran(NEVER) == [2, 3] and ran(NEVER2) == [1, 2]  # the interrupted run's repeat is not used again
    d = decisions(batch_dir)
    assert (d[NEVER]["state"], d[NEVER]["n"], d[NEVER]["runs_here"]) == ("held", 3, 3)  # 0, 2, 3: not 1
    assert (d[NEVER2]["state"], d[NEVER2]["n"]) == ("held", 3)
    summary = json.loads((batch_dir / "summary.json").read_text())
    assert sorted((r["scenario"] == NEVER, r["repeat"], r["status"]) for r in summary if r["scenario"] == NEVER) == \
        [(True, 0, "completed"), (True, 1, "interrupted"), (True, 2, "completed"), (True, 3, "completed")]


def test_a_run_found_started_without_an_end_is_interrupted_on_resume(planted, tmp_path):
    paths = files(NEVER)
    state = until.State(tmp_path / "b", until.Ask([str(p) for p in paths], evidence=str(tmp_path / "evidence")))
    state.out.mkdir()
    state.started(load(paths[0]), 0)  # then the process was killed
    state.save()
    reopened = until.State.open(state.out)
    assert reopened.runs[0]["status"] == RunStatus.INTERRUPTED and not reopened.runs[0]["counted"]
    assert reopened.next_repeat(load(paths[0])) == 1


def test_the_command_line(planted):
    plant(NEVER, ["held", "held", "fail"])
    ev = str(planted / "evidence")
    res = CliRunner().invoke(main, ["batch", "--until-decided", "--cap", "2", "--evidence", ev, str(files(NEVER)[0])])
    assert exit_of(res) == EXIT_UNKNOWN, res.output  # two clean runs: under the minimum, at the cap
    out = (planted / "results" / until.KIND / "latest").resolve()
    assert decisions(out)[NEVER]["stopped"] == "cap reached (2 of 2 runs)" and "## Decisions" in res.output
    res = CliRunner().invoke(main, ["batch", "--resume", str(out), "--cap", "5"])
    assert exit_of(res) == EXIT_INVALID, res.output  # the third run is a counterexample
    assert ran(NEVER) == [0, 1, 2] and decisions(out)[NEVER]["state"] == "DID NOT HOLD"
