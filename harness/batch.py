"""The one batch runner: a selection of scenarios run against real clusters, each judged
against its prediction, in one table.

    mqchaos catalogue [--only R2,K7] [--repeat N]     every scenario file (or some rows)
    mqchaos suite FILE...                             the given files (make test-partition)
    mqchaos matrix [--only R9,K7] --versions rabbitmq=3.10,4.0   the same rows at several
                                                      versions, one table scenario x version

Each scenario runs on a fresh cluster. What does not disturb a run's faults is overlapped
(``Pipeline``): runs are ordered so that consecutive runs use different brokers wherever
possible (one compose project per broker); the next run's cluster comes up during the
current run's load at a CPU weight that yields to it, and the next run starts once the
current one is drained, while its teardown and cluster down finish beside the next run's
warm-up (its first fault waits for them); one Spark session, started with the batch at the
lowest CPU priority, checks each run as soon as its history is closed (harness.checking).
No two runs' loads, and nothing but that background work, share the machine with a run's
faults. A run whose
harness failed (cluster never healthy, client crashed) is retried and marked so: it is
never counted as a broker finding. Output: results/<kind>/<timestamp>/summary.{md,json,txt}
and junit.xml (``harness.rows``), rows in the order given; a matrix adds
matrix.{json,md,html} (``harness.matrix``). Runs whose claim the version lacks (not
applicable: no cluster) go first. The exit code merges the runs' by ``harness.verdicts``.
"""
from __future__ import annotations

import copy
import json
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from harness import matrix as M
from harness import rows as R
from harness import store
from harness.checking import Checker
from harness.expect import verdict
from harness.results import Row
from harness.runner import Hooks, Interrupted, Run, log
from harness.scenario import Scenario, ScenarioError, load, parse, parse_recorded, read
from harness.verdicts import (EXIT_UNKNOWN, NOT_APPLICABLE, REFUSED, RunStatus, merge_codes,
                              not_applicable_result, run_exit_code)

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


@dataclass
class Entry:
    """One scenario run of the catalogue (after its retry, if any)."""
    scenario: Scenario
    repeat: int
    run: Run | None = None
    seconds: float = 0.0
    attempts: list[dict] = field(default_factory=list)  # harness errors of earlier attempts
    code: int = EXIT_UNKNOWN
    position: int = 0           # in the order given (the table's), not the order run
    check_error: str | None = None

    @property
    def status(self) -> str:
        return self.run.info.get("status", RunStatus.NOT_RUN) if self.run else RunStatus.NOT_RUN


class Bad(NamedTuple):
    """A scenario file that did not load: as a whole (an invalid file), or at one version of
    a matrix while it names its scenario (refused at that version: ``scenario`` ... set)."""
    path: str
    error: str
    scenario: str | None = None
    id: str | None = None
    broker: str | None = None
    version: str | None = None

    @property
    def reason(self) -> str:
        """The error without the line naming the file (a refusal names its scenario)."""
        return self.error if self.scenario is None else self.error.split("\n", 1)[-1].strip()


Versions = dict[str, str] | dict[str, list[str]]


def select(files: list[Path], only: list[str] | None, sort: bool = True,
           versions: Versions | None = None) -> tuple[list[Scenario], list[Bad]]:
    """Scenarios to run, in catalogue order (R, Q, K; then by id), and the files that did not
    validate (each with its error). `only` matches ids (R5 picks R5 and R5b) or names.
    ``versions``, by broker: one version (--version) or a list (a matrix, ``mqchaos matrix
    --versions``): then each file is loaded once per version of its broker, those versions
    overriding its own ``version:`` (the one rule), in the order given; one that refuses it
    at load time is a ``Bad`` naming the scenario and the version."""
    scenarios: list[Scenario] = []
    bad: list[Bad] = []
    for f in files:
        if versions and any(isinstance(v, list) for v in versions.values()):
            _load_each_version(f, versions, scenarios, bad)
            continue
        try:
            scenarios.append(load(f, versions))
        except ScenarioError as e:
            bad.append(Bad(str(f), str(e)))
    if only:
        want = [o.strip() for o in only if o.strip()]
        scenarios = [s for s in scenarios if wanted(s.name, s.id, want)]
        # a file that did not load is reported only if selected; one that did not load at all
        # by its file name, which starts with its id (Q6a on 4.3 is no error of a batch of R rows)
        bad = [b for b in bad if (wanted(b.scenario, b.id, want) if b.scenario is not None
                                  else wanted(Path(b.path).stem, Path(b.path).stem.split("-")[0], want))]
    return (sorted(scenarios, key=order_key) if sort else scenarios), bad


def _load_each_version(f: Path, versions: Versions, scenarios: list[Scenario], bad: list[Bad]) -> None:
    try:
        data = read(f)
    except ScenarioError as e:
        bad.append(Bad(str(f), str(e)))
        return
    broker = data.get("broker") if isinstance(data, dict) else None
    chosen = versions.get(broker) if isinstance(broker, str) else None
    if not isinstance(chosen, list):  # a broker the matrix does not vary: the usual rule
        try:
            scenarios.append(parse(data, str(f), version=versions if chosen else None))
        except ScenarioError as e:
            bad.append(Bad(str(f), str(e)))
        return
    for v in chosen:
        try:
            scenarios.append(parse(copy.deepcopy(data), str(f), version={broker: v}))
        except ScenarioError as e:
            sid = data.get("id")
            bad.append(Bad(str(f), str(e), str(data.get("name") or Path(f).stem),
                           None if sid is None else str(sid), broker, v))


def wanted(name: str, sid: str | None, want: list[str]) -> bool:
    """Whether --only's ``want`` picks the scenario: by id (R5 picks R5 and R5b) or name."""
    return any(name == w or (sid or "") == w or name.startswith(w + "-")
               or (sid or "").rstrip("abcdefgh") == w for w in want)


def order_key(sc: Scenario) -> tuple:
    return R.catalogue_order(sc.id, sc.name)


def interleave(jobs: list, kind=lambda job: job[0].broker) -> list:
    """``jobs`` reordered so that consecutive jobs are of different kinds wherever possible
    (each kind's own order kept; the kind with most left goes next): then each next cluster
    can come up while the previous run ends."""
    queues: dict = {}
    for pos, job in enumerate(jobs):
        queues.setdefault(kind(job), []).append((pos, job))
    out, prev = [], None
    while any(queues.values()):
        left = [k for k, q in queues.items() if q]
        choice = [k for k in left if k != prev] or left
        prev = max(choice, key=lambda k: (len(queues[k]), -queues[k][0][0]))
        out.append(queues[prev].pop(0)[1])
    return out


class Pipeline:
    """Overlaps a batch's runs without disturbing any run's faults (see the module's doc).

    Run N's load (warm-up, faults, heal, recovery) and drain are its own; once drained, its
    teardown, check and cluster down go on in a thread (``finishing``) while run N+1 starts
    on its cluster, which came up during N's load at the background CPU weight. N+1's first
    fault waits until N is down (``before_faults``); only then does N+2's cluster start (the
    same compose project as N's, alternating brokers). Checks run in the Spark session at
    the lowest CPU priority (harness.checking)."""

    def __init__(self, results: Path | None, keep_cluster: bool, checker: Checker) -> None:
        self.results, self.keep_cluster, self.checker = results, keep_cluster, checker
        self.next: tuple[Scenario, int] | None = None      # the job after the running one
        self.prepared: tuple[tuple, Run] | None = None     # its run, cluster coming up (by _job)
        self.finishing: list[threading.Thread] = []  # drained runs' ends still under way

    def hooks(self, entry: Entry) -> Hooks:
        def before_faults() -> None:
            self.wait_finished()  # no other run's end beside this run's faults
            nxt = self.next
            # one compose project per broker: the same broker's next cluster waits for this one
            if nxt is None or self.keep_cluster or nxt[0].broker == entry.scenario.broker:
                return
            try:
                run = Run(nxt[0], results=self.results, check=False, keep_cluster=self.keep_cluster)
            except Exception as e:  # noqa: BLE001 - the next run starts as usual; this one goes on
                log(f"{nxt[0].name}: could not prepare its run ({type(e).__name__}: {e})")
                return
            run.info["catalogue"] = {"repeat": nxt[1], "attempt": 0}
            log(f"{nxt[0].name}: bringing its cluster up (background CPU weight) during {entry.scenario.name}")
            run.prepare(background=True)
            self.prepared = (_job(*nxt), run)

        def history_closed(run: Run) -> None:
            def done(code: int, error: str | None) -> None:
                entry.code, entry.check_error = code, error
            self.checker.submit(run, done)

        def finish(rest) -> None:
            thread = threading.Thread(target=rest, name=f"end-{entry.scenario.name}", daemon=True)
            thread.start()
            self.finishing.append(thread)

        return Hooks(before_faults=before_faults, history_closed=history_closed,
                     finish=None if self.keep_cluster else finish)

    def take(self, sc: Scenario, repeat: int, attempt: int = 0) -> Run | None:
        """The run prepared for this job, if any (its cluster up or coming up); else, once
        every other run is down, None (the job, or its retry, brings its own cluster up)."""
        if attempt == 0 and self.prepared and self.prepared[0] == _job(sc, repeat):
            run, self.prepared = self.prepared[1], None
            return run
        self.abandon()
        self.wait_finished()
        return None

    def wait_finished(self) -> None:
        """Until every drained run's teardown and cluster down are done (not its check)."""
        while self.finishing:
            self.finishing[0].join()
            self.finishing.pop(0)

    def abandon(self) -> None:
        """A prepared run that will not run (the batch ends, or the current run is retried):
        its cluster goes down and its directory says it never ran."""
        if not self.prepared:
            return
        _, run = self.prepared
        self.prepared = None
        run.abandon()

    def close(self) -> None:
        """The batch ends (or is interrupted): the prepared cluster down, every run ended."""
        self.abandon()
        self.wait_finished()


def _job(sc: Scenario, repeat: int) -> tuple:
    """A job's identity: a matrix runs one scenario at several versions."""
    return sc.name, sc.version, repeat


def run_one(sc: Scenario, repeat: int, results: Path | None, retries: int = 1,
            keep_cluster: bool = False, pipeline: Pipeline | None = None) -> Entry:
    e = Entry(sc, repeat)
    for attempt in range(retries + 1):
        t0 = time.monotonic()
        run = pipeline.take(sc, repeat, attempt) if pipeline else None
        if run is None:
            run = Run(sc, results=results, check=False, keep_cluster=keep_cluster)
            run.info["catalogue"] = {"repeat": repeat, "attempt": attempt}
        if pipeline:
            run.hooks = pipeline.hooks(e)
        run.execute()
        e.run, e.seconds = run, round(time.monotonic() - t0, 1)
        if run.info["status"] != RunStatus.HARNESS_ERROR:
            break
        if pipeline:
            pipeline.abandon()  # the retry runs alone
        e.attempts.append({"run": str(run.dir), "error": run.info.get("error")})
        log(f"{sc.name}: harness error ({run.info.get('error')}); "
            + ("retrying once" if attempt < retries else "giving up"))
    return e


def row(e: Entry) -> Row:
    base = Row(id=e.scenario.id, scenario=e.scenario.name, broker=e.scenario.broker, version=e.scenario.version,
               repeat=e.repeat, seconds=e.seconds, status=e.status, retried=bool(e.attempts),
               earlier_attempts=e.attempts, expect=e.scenario.expect, exit=e.code)
    s = (e.run.info.get("summary") if e.run else None) or {}  # the run's own row (harness.rows)
    if s:
        base.update(s)
    else:  # never checked: its status stands where the checker's validity would
        base.update(prediction=None, valid=e.status, reason=(e.run.info.get("error") if e.run else None)
                    or e.check_error or f"run {e.status}", report=str(e.run.dir) if e.run else None)
    base["harness_error"] = e.status not in (RunStatus.COMPLETED, NOT_APPLICABLE)
    return base


def bad_row(b: Bad) -> Row:
    """The row of a file that did not load (a harness error: no broker finding), or of a
    matrix version that refused it at load time (undecided, not a harness error)."""
    if b.scenario is None:
        return Row(scenario=b.path, id=None, repeat=0, seconds=0, status=RunStatus.INVALID_FILE, retried=False,
                   harness_error=True, reason=b.error, expect=None, exit=EXIT_UNKNOWN,
                   valid=RunStatus.INVALID_FILE)
    return Row(scenario=b.scenario, id=b.id, broker=b.broker, version=b.version, repeat=0, seconds=0,
               status=REFUSED, retried=False, harness_error=False, prediction=None, valid=None, reason=b.reason,
               decided_by=b.reason, expect=None, exit=EXIT_UNKNOWN, file=b.path)


def write_outputs(rows: list[Row], invalid: list[Bad] | list[tuple[str, str]], out: Path, title: str,
                  matrix: dict[str, list[str]] | None = None) -> None:
    """The batch's summary files (harness.rows), with a row for each file that did not validate
    and for each version of a matrix that refused a scenario at load time (not run, undecided,
    not a harness error); a matrix (its versions by broker) adds its table (harness.matrix)."""
    rows += [bad_row(Bad(*x)) for x in invalid]
    R.write_all(rows, out, title)
    if matrix is not None:
        M.write(rows, out, title, matrix)


def rows_from_runs(run_dirs: list[Path]) -> list[Row]:
    """Summary rows rebuilt offline from run directories (run.json + check.json), e.g. when
    a catalogue was interrupted before its summary: per scenario and repeat, the last
    completed attempt, the earlier harness errors counted as retries."""
    by_key: dict[tuple, list] = {}
    for d in sorted(run_dirs, key=lambda d: Path(d).name):
        info = store.read_run(d)
        if info is None or info.get("status") == RunStatus.ABANDONED:  # prepared, never ran
            continue
        rep = (info.get("catalogue") or {}).get("repeat", 0)
        version = (info.get("version") or {}).get("version") if isinstance(info.get("version"), dict) else None
        by_key.setdefault((info["scenario"], version, rep), []).append((Path(d), info))
    rows = []
    for (name, _, rep), attempts in by_key.items():
        d, info = attempts[-1]
        sc = parse_recorded(info["params"], str(d / store.RUN_JSON))
        earlier = [{"run": str(a), "error": i.get("error")} for a, i in attempts[:-1]
                   if i.get("status") == RunStatus.HARNESS_ERROR]
        base = Row(id=sc.id, scenario=name, broker=sc.broker, version=sc.version, repeat=rep,
                   status=info.get("status"), exit=EXIT_UNKNOWN,
                   seconds=round(max((info.get("phases") or {"": 0}).values()), 1),
                   retried=bool(earlier), earlier_attempts=earlier, expect=sc.expect)
        result = store.read_check(d)
        if info.get("status") == RunStatus.COMPLETED and result is not None:
            if "prediction" not in result:
                result["prediction"] = verdict(sc, result, info)
            base.update(R.run_row(sc, result, info, d))
            base.update(harness_error=False, exit=run_exit_code(result))
        elif info.get("status") == NOT_APPLICABLE:
            base.update(R.not_applicable_row(sc, not_applicable_result(info.get("not_applicable")), d),
                        harness_error=False)
        else:
            base.update(prediction=None, reason=info.get("error") or f"run {info.get('status')}",
                        report=str(d), harness_error=True)
        rows.append(base)
    by_name = {sc.name: sc for sc in select(sorted(SCENARIO_DIR.glob("*.yaml")), None)[0]}
    rows.sort(key=lambda r: (order_key(by_name[r["scenario"]]) if r["scenario"] in by_name
                             else (9, 0, r["scenario"]), r["repeat"]))  # stable: versions as run
    return rows


def merge(dirs: list[Path], results: Path | None = None, kind: str = "catalogue") -> Path:
    """One summary from several catalogue runs (e.g. a full run and a re-run of some rows):
    for each scenario and repeat, the row of the latest directory given that has it."""
    by_key: dict[tuple, dict] = {}
    for d in dirs:
        for r in json.loads((Path(d) / "summary.json").read_text()):  # a batch's own file (rows)
            by_key[(r["scenario"], r.get("repeat", 0))] = r
    by_name = {sc.name: sc for sc in select(sorted(SCENARIO_DIR.glob("*.yaml")), None)[0]}
    # the merged summary is today's catalogue: a row whose scenario file is gone is not in it
    gone = sorted({name for name, _ in by_key if name not in by_name})
    if gone:
        log(f"merge: left out the rows of scenarios no longer in {SCENARIO_DIR}: {', '.join(gone)}")
    rows = [r for (name, _), r in by_key.items() if name in by_name]
    rows.sort(key=lambda r: order_key(by_name[r["scenario"]]))
    out = store.new_batch_dir(kind, results)
    sources = ", ".join(Path(d).name for d in dirs)
    write_outputs(rows, [], out, f"mqchaos {kind}, merged from {sources}")
    return out


def _matrix_versions(versions: Versions | None) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in (versions or {}).items()}


def _interrupted(signum, frame):
    raise Interrupted()


def plan(only: list[str] | None = None, repeat: int = 1, files: list[Path] | None = None, sort: bool = True,
         versions: Versions | None = None) -> tuple[list[tuple[Scenario, int, int]], list[Bad]]:
    """A batch's jobs, (scenario, repeat, position in the table), in the order they run, and
    the files that did not load (``select``'s arguments). Jobs whose claim the version lacks
    go first (no cluster: they only write their directory); the rest are ``interleave``d by
    broker. The table's order (position): by repeat, then scenario, then version."""
    scenarios, invalid = select(files or sorted(SCENARIO_DIR.glob("*.yaml")), only, sort, versions)
    jobs = [(sc, rep, pos) for pos, (rep, sc) in enumerate((rep, sc) for rep in range(repeat) for sc in scenarios)]
    instant = [j for j in jobs if j[0].not_applicable()]
    return instant + interleave([j for j in jobs if not j[0].not_applicable()]), invalid


def run_batch(only: list[str] | None = None, repeat: int = 1, files: list[Path] | None = None,
              results: Path | None = None, kind: str = "catalogue", retries: int = 1,
              master: str | None = None, keep_cluster: bool = False, sort: bool = True,
              table: str = "summary.md", echo=print, versions: Versions | None = None,
              matrix: bool = False) -> int:
    """Run the scenarios (``files``, default every file in scenarios/; ``only`` picks rows;
    in catalogue order unless not ``sort``; ``versions``: --version, by broker, or with
    ``matrix`` a list of versions per broker, ``select``), overlapped by a ``Pipeline`` and
    checked in one Spark session, write the batch's summary (and the matrix's table) and
    echo its ``table``; return the merged exit code."""
    jobs, invalid = plan(only, repeat, files, sort, versions)
    for b in invalid:
        log(b.error if b.version is None else f"{b.scenario} on {b.broker} {b.version}: refused: {b.reason}")
    out = store.new_batch_dir(kind, results)
    t0 = time.monotonic()
    entries: list[Entry] = []
    checker = Checker(master) if jobs else None  # its JVM starts with the first cluster
    pipeline = Pipeline(results, keep_cluster, checker) if checker else None
    # SIGTERM (a CI time limit) ends the batch like Ctrl-C: what ran is still summarised.
    prev = signal.signal(signal.SIGTERM, _interrupted)
    interrupted = False
    try:
        for k, (sc, rep, pos) in enumerate(jobs):
            log(f"{kind}: {sc.name} ({sc.broker} {sc.version}, repeat {rep + 1}/{repeat}, {k + 1}/{len(jobs)})")
            pipeline.next = jobs[k + 1][:2] if k + 1 < len(jobs) else None
            entries.append(run_one(sc, rep, results, retries, keep_cluster, pipeline))
            entries[-1].position = pos
            if entries[-1].status == RunStatus.INTERRUPTED:  # the run healed and kept its history
                raise Interrupted()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        log(f"{kind} interrupted: checking and summarising the runs so far")
    try:  # Ctrl-C again during the checks still leaves a summary (without their verdicts)
        if pipeline:
            pipeline.close()
            checker.close()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
    finally:
        entries.sort(key=lambda e: e.position)
        rows = [row(e) for e in entries]
        write_outputs(rows, invalid, out, f"mqchaos {kind}, {out.name} ({time.monotonic() - t0:.0f} s)"
                      + (", interrupted" if interrupted else ""),
                      matrix=_matrix_versions(versions) if matrix else None)
        log(f"summary: {out / 'summary.md'}")
        echo((out / table).read_text())
        signal.signal(signal.SIGTERM, prev)
    codes = [e.code for e in entries] + [EXIT_UNKNOWN] * (len(invalid) + interrupted)
    return merge_codes(codes)
