"""``mqchaos batch --until-decided`` (issue 54): rows run again until each is decided.

    mqchaos batch --until-decided [--only R9,R11b | FILE...] [--cap 10] [--budget SECONDS]
                  [--evidence docs/batches]
    mqchaos batch --until-decided --resume results/until-decided/<timestamp>

A row is a scenario file's present test (its digest, harness.identity) at one broker version.
Its evidence is its decided runs (held, did not hold) of that digest and version: those in the
published batches under ``--evidence`` (each ``*/summary.json``) and this batch's own, counted
by ``harness.rows.tally`` (a run in both counts once; a run interrupted, undecided or a harness
error counts for nothing) and decided by ``harness.decided``'s rule.

A row needs a run while it is not decided (held, did not hold), has a prediction, is
applicable at its version, and is under its cap: its decided runs (the evidence's and this
batch's) and this batch's runs of it that decided nothing (undecided, harness error) fewer
than ``--cap``. The batch runs in rounds: each round plans one run of each row that needs one,
in order (undecided rows, then mixed rows; within each, fewest decided runs first; then
catalogue order and version: no randomness), runs them through the batch's ``Pipeline``
(brokers interleaved, ``harness.batch.jobs.interleave``), waits for their verdicts and decides
again. So a never-claim stops at its first counterexample, a clean one at the minimum of
clean runs, and a mixed row goes on to its cap. ``--budget``: a run is not started when the
wall time the batch has left (across its sessions) is less than its row's expected wall time
(its newest published one, ``harness.batch.shard.wall_times`` over the evidence; a row never
published: the median of those published, ``shard.expected``); the batch ends when no row
that needs a run fits.

The batch directory keeps its state in ``until.json`` (what was asked, every run started:
scenario, version, repeat, its run directory, status, verdict, whether it counted; the wall
time spent), written before each run starts and after each ends. A run found started but not
ended (Ctrl-C, SIGTERM, a process killed) is recorded as interrupted: it never counts and its
repeat number is not used again. ``--resume DIR`` continues the batch where it stopped, with
what it was asked (a ``--cap`` or ``--budget`` given again replaces the old one). At the end of
each session: the summary of every run of the batch (``summary.*``, junit.xml), each row's
decision (state, k of n, interval, why, why it stopped) in ``decisions.json`` and appended to
summary.md and summary.txt. Exit: 1 if a row's decision is "did not hold", else 0 if every
row with a prediction is decided "held", else 2 (merged by harness.verdicts).
"""
from __future__ import annotations

import json
import logging
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import decided, identity, store
from harness import rows as R
from harness.batch import pipeline as P
from harness.batch import shard
from harness.batch.jobs import SCENARIO_DIR, interleave, select
from harness.batch.summary import Entry, row, write_decisions, write_outputs
from harness.identity import Catalogue
from harness.runner import Interrupted
from harness.scenario import Scenario
from harness.verdicts import EXIT_UNKNOWN, HELD_WORDS, RunStatus, exit_code, merge_codes

log = logging.getLogger(__name__)

KIND = "until-decided"
STATE_FILE = "until.json"
CAP = 10
STARTED = "started"  # a run's status in the state from its start until it ends
COUNTING = {HELD_WORDS[True], HELD_WORDS[False]}


@dataclass
class Ask:
    """What the batch was asked; kept in its state, so that ``--resume`` continues it."""
    files: list[str] | None = None
    only: list[str] | None = None
    versions: dict | None = None
    sort: bool = True
    cap: int = CAP
    budget_s: float | None = None
    evidence: str = str(shard.PUBLISHED)
    min_clean: int = decided.MIN_CLEAN
    retries: int = 1


@dataclass
class State:
    """The batch directory's record (``until.json``): what was asked, every run started and
    how it ended, the wall time spent in earlier sessions."""
    out: Path
    ask: Ask
    runs: list[dict] = field(default_factory=list)
    spent_s: float = 0.0

    @classmethod
    def open(cls, out: Path) -> State:
        data = json.loads((Path(out) / STATE_FILE).read_text())
        state = cls(Path(out), Ask(**data["ask"]), data["runs"], data["spent_s"])
        for r in state.runs:  # ended neither by a verdict nor by an interruption seen: a process killed
            if r["status"] == STARTED:
                r.update(status=RunStatus.INTERRUPTED, counted=False)
        return state

    def save(self) -> None:
        tmp = self.out / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps({"ask": asdict(self.ask), "spent_s": round(self.spent_s, 1), "runs": self.runs},
                                  indent=1, default=str) + "\n")
        tmp.replace(self.out / STATE_FILE)

    def of(self, sc: Scenario) -> list[dict]:
        return [r for r in self.runs if r["scenario"] == sc.name and r["version"] == str(sc.version)]

    def next_repeat(self, sc: Scenario) -> int:
        return max((r["repeat"] for r in self.of(sc)), default=-1) + 1

    def started(self, sc: Scenario, repeat: int) -> None:
        self.runs.append({"scenario": sc.name, "id": sc.id, "version": str(sc.version), "repeat": repeat,
                          "digest": identity.digest(sc), "status": STARTED, "run": None, "seconds": None,
                          "verdict": None, "counted": False, "row": None})

    def ended(self, entries: list[Entry]) -> None:
        """Each entry's run recorded with its row; a run started without an entry: interrupted."""
        by_key = {(r["scenario"], r["version"], r["repeat"]): r for r in self.runs}
        for e in entries:
            rec = by_key[(e.scenario.name, str(e.scenario.version), e.repeat)]
            r = row(e)
            word = R.verdict_word(r)
            rec.update(status=e.status, run=str(e.run.dir) if e.run else None, seconds=e.seconds, verdict=word,
                       counted=e.status != RunStatus.INTERRUPTED and word in COUNTING, row=r)
        for rec in self.runs:
            if rec["status"] == STARTED:
                rec.update(status=RunStatus.INTERRUPTED, counted=False)

    def rows(self, scenarios: dict[tuple[str, str], Scenario]) -> list[dict]:
        """Every run's row, in the order run; an interrupted run without one gets one saying so."""
        out = []
        for rec in self.runs:
            if rec["row"] is not None:
                out.append(rec["row"])
                continue
            sc = scenarios.get((rec["scenario"], rec["version"]))
            if sc is not None:
                r = row(Entry(sc, rec["repeat"]))
                r.update(status=RunStatus.INTERRUPTED, valid=RunStatus.INTERRUPTED,
                         reason="interrupted: never counted")
                out.append(r)
        return out

    def counting_rows(self) -> list[dict]:
        """This batch's rows the tally may count (an interrupted run's never)."""
        return [r["row"] for r in self.runs if r["row"] is not None and r["status"] != RunStatus.INTERRUPTED]


@dataclass
class Standing:
    """A row now: its scenario (at its version), its decision, this batch's runs of it (an
    interrupted one left out), its runs toward the cap and its expected wall time."""
    sc: Scenario
    decision: decided.Decision
    here: int
    spent: int
    expected_s: float
    not_applicable: str | None = None

    def needs_run(self, cap: int) -> bool:
        return (self.not_applicable is None and self.decision.state != decided.State.NO_PREDICTION
                and not self.decision.decided and self.spent < cap)

    def priority(self) -> tuple:
        """Undecided rows first, then mixed; fewest decided runs; catalogue order, version."""
        rank = 0 if self.decision.state == decided.State.UNDECIDED else 1
        return rank, self.decision.n, R.catalogue_order(self.sc.id, self.sc.name), str(self.sc.version)

    def stopped(self, cap: int, interrupted: bool) -> str:
        """Why the row has no further run."""
        if self.not_applicable is not None:
            return f"not applicable: {self.not_applicable}"
        if self.decision.state == decided.State.NO_PREDICTION:
            return "nothing to decide"
        if self.decision.decided:
            return "decided"
        if self.spent >= cap:
            return f"cap reached ({self.spent} of {cap} runs)"
        return "interrupted" if interrupted else "budget ended"

    def as_dict(self, cap: int, interrupted: bool) -> dict:
        return {"id": self.sc.id, "scenario": self.sc.name, "broker": self.sc.broker, "version": str(self.sc.version),
                "digest": identity.digest(self.sc), **self.decision.as_dict(), "runs_here": self.here,
                "runs_toward_cap": self.spent, "cap": cap, "expected_s": round(self.expected_s, 1),
                "stopped": self.stopped(cap, interrupted)}


def plan_round(standings: list[Standing], cap: int, remainder: float | None) -> list[Standing]:
    """The rows the next round runs once each, in order (``Standing.priority``): those that
    need a run and whose expected wall time fits what is left of the budget (None: no
    budget), each counted against it in turn."""
    chosen, left = [], remainder
    for s in sorted((s for s in standings if s.needs_run(cap)), key=Standing.priority):
        if left is not None:
            if s.expected_s > left:
                continue
            left -= s.expected_s
        chosen.append(s)
    return chosen


def evidence_rows(evidence: Path, exclude: Path | None = None) -> tuple[list[dict], list[Path]]:
    """The published rows under ``evidence`` (each batch directory's summary.json, or its own),
    but ``exclude``'s (this batch), and the batch directories they came from."""
    ev = Path(evidence)
    dirs = [ev] if (ev / "summary.json").is_file() else sorted(p for p in ev.glob("*") if p.is_dir())
    if exclude is not None:
        dirs = [d for d in dirs if d.resolve() != Path(exclude).resolve()]
    rows, used = [], []
    for d in dirs:
        try:
            got = json.loads((d / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        rows += [r for r in got if isinstance(r, dict)] if isinstance(got, list) else []
        used.append(d)
    return rows, used


def catalogue_for(files: list[str] | None) -> Catalogue:
    """The repository's scenario files, and the files given that test something none of them does."""
    cat = identity.catalogue()
    extra = [identity.entry(Path(f)) for f in files or []]
    return cat.with_entries([e for e in extra if not cat.files_of(e.digest)])


def _interrupted(signum, frame):
    raise Interrupted()


class UntilDecided:
    """One session of an until-decided batch (see the module's doc)."""

    def __init__(self, state: State, results: Path | None = None, master: str | None = None,
                 keep_cluster: bool = False, cat: Catalogue | None = None, clock=time.monotonic) -> None:
        self.state, self.results, self.master, self.keep_cluster, self.clock = state, results, master, keep_cluster, clock
        ask = state.ask
        files = [Path(f) for f in ask.files] if ask.files else sorted(SCENARIO_DIR.glob("*.yaml"))
        self.scenarios, self.invalid = select(files, ask.only, ask.sort, ask.versions)
        self.by_key = {(sc.name, str(sc.version)): sc for sc in self.scenarios}
        self.cat = catalogue_for(ask.files) if cat is None else cat
        self.evidence, dirs = evidence_rows(Path(ask.evidence), exclude=state.out)
        self.times = shard.wall_times(dirs)
        self.t0, self.spent0 = clock(), state.spent_s
        self.checker = self.pipeline = None
        self.entries: list[Entry] = []
        self.standings: dict[tuple[str, str], Standing] = {}

    # -- deciding ----------------------------------------------------------------------------
    def decide(self) -> list[Standing]:
        """Every row's standing from the evidence and this batch's runs so far."""
        lines = R.tally(self.evidence + self.state.counting_rows(), self.cat)
        cost, _ = shard.expected([sc.name for sc in self.scenarios], self.times)
        out = []
        for sc in self.scenarios:
            mine = [t for t in lines if not t["superseded"] and sc.name in t["files"] and t["version"] == str(sc.version)]
            d = decided.of_tally(mine, sc.expect, sc.require, min_clean=self.state.ask.min_clean)
            here = [r for r in self.state.of(sc) if r["status"] != RunStatus.INTERRUPTED]
            nothing = sum(1 for r in here if not r["counted"])
            out.append(Standing(sc, d, len(here), d.n + nothing, cost[sc.name], sc.not_applicable()))
        self.standings = {(s.sc.name, str(s.sc.version)): s for s in out}
        return out

    def remainder(self) -> float | None:
        """The budget's wall time left (None: no budget)."""
        if self.state.ask.budget_s is None:
            return None
        return self.state.ask.budget_s - self.spent()

    def spent(self) -> float:
        return self.spent0 + self.clock() - self.t0

    # -- running -----------------------------------------------------------------------------
    def may_start(self, sc: Scenario, repeat: int) -> bool:
        """A run starts only if its row's expected wall time fits the budget left; it is in
        the state (started) before it starts."""
        s = self.standings[(sc.name, str(sc.version))]
        left = self.remainder()
        if left is not None and left < s.expected_s:
            log.info("%s: not started: %.0f s of the budget left, %.0f s expected", sc.name, left, s.expected_s)
            return False
        self.state.started(sc, repeat)
        self.save()
        return True

    def save(self) -> None:
        self.state.spent_s = self.spent()
        self.state.save()

    def run_round(self, chosen: list[Standing]) -> tuple[bool, int]:
        """Run each chosen row once; wait for their verdicts. (Interrupted, runs started.)"""
        jobs = interleave([(s.sc, self.state.next_repeat(s.sc), pos) for pos, s in enumerate(chosen)])
        if self.pipeline is None:
            self.checker = P.CheckQueue(self.master)
            self.pipeline = P.Pipeline(self.results, self.keep_cluster, self.checker)
        before = len(self.state.runs)
        entries: list[Entry] = []
        interrupted = P.run_jobs(jobs, self.pipeline, entries, self.results, self.state.ask.retries,
                                 self.keep_cluster, KIND, may_start=self.may_start)
        self.entries += entries
        try:
            self.pipeline.close()
            self.checker.wait_idle()
        except (KeyboardInterrupt, Interrupted):
            interrupted = True
        self.state.ended(entries)
        self.save()
        return interrupted, len(self.state.runs) - before

    def run(self) -> bool:
        """Rounds until no row needs a run that fits the budget; True when interrupted."""
        try:
            while chosen := plan_round(self.decide(), self.state.ask.cap, self.remainder()):
                log.info("%s: a round of %d run(s): %s", KIND, len(chosen), ", ".join(s.sc.name for s in chosen))
                interrupted, started = self.run_round(chosen)
                if interrupted:
                    return True
                if not started:  # every run refused by the budget: none fits any more
                    return False
        except (KeyboardInterrupt, Interrupted):  # between runs: nothing under way is lost
            return True
        return False

    def close(self) -> bool:
        """Every run ended and checked; False if interrupted again meanwhile."""
        try:
            if self.pipeline is not None:
                self.pipeline.close()
                self.checker.close()
            return True
        except (KeyboardInterrupt, Interrupted):
            return False
        finally:
            self.state.ended(self.entries)  # their verdicts, now that every check is done
            self.save()

    def summarise(self, interrupted: bool, echo=print) -> int:
        """The summary of every run of the batch, each row's decision; the exit code."""
        out, cap = self.state.out, self.state.ask.cap
        standings = self.decide()
        title = f"mqchaos batch --until-decided, {out.name} ({self.spent():.0f} s)" + (", interrupted" if interrupted else "")
        write_outputs(self.state.rows(self.by_key), self.invalid, out, title)
        write_decisions(out, [s.as_dict(cap, interrupted) for s in standings])
        log.info("summary: %s", out / "summary.md")
        echo((out / "summary.md").read_text())
        codes = [exit_code(s.decision.verdict) for s in standings if s.decision.state != decided.State.NO_PREDICTION]
        return merge_codes(codes + [EXIT_UNKNOWN] * (len(self.invalid) + interrupted))


def run_until_decided(ask: Ask | None = None, resume: Path | None = None, results: Path | None = None,
                      master: str | None = None, keep_cluster: bool = False, echo=print,
                      cap: int | None = None, budget_s: float | None = None,
                      cat: Catalogue | None = None, clock=time.monotonic) -> int:
    """A new until-decided batch (``ask``) under results/until-decided/, or the one in
    ``resume`` continued (``cap``, ``budget_s``: given again, they replace its own); the
    merged exit code (see the module's doc)."""
    if resume is not None:
        state = State.open(Path(resume))
    else:
        state = State(store.new_batch_dir(KIND, results), ask or Ask())
    state.ask.cap = cap if cap is not None else state.ask.cap
    state.ask.budget_s = budget_s if budget_s is not None else state.ask.budget_s
    state.save()
    log.info("%s: %s (cap %d runs per row and version, budget %s)", KIND, state.out, state.ask.cap,
             "none" if state.ask.budget_s is None else f"{state.ask.budget_s:.0f} s, {state.spent_s:.0f} s spent")
    batch = UntilDecided(state, results, master, keep_cluster, cat, clock)
    # SIGTERM (a CI time limit) ends the batch like Ctrl-C: what ran is still summarised
    prev = signal.signal(signal.SIGTERM, _interrupted)
    try:
        interrupted = batch.run()
        interrupted = not batch.close() or interrupted
        return batch.summarise(interrupted, echo)
    finally:
        signal.signal(signal.SIGTERM, prev)
