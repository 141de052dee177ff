"""The one batch runner: a selection of scenarios run against real clusters, each judged
against its prediction, in one table.

    mqchaos catalogue [--only R2,K7] [--repeat N]     every scenario file (or some rows)
    mqchaos suite FILE...                             the given files (make test-partition)

Each scenario runs on a fresh cluster. What does not disturb a run's faults is overlapped
(``Pipeline``): runs are ordered so that consecutive runs use different brokers wherever
possible (one compose project per broker), and the next run's cluster comes up once the
current run's load is over, while it drains and goes down; one Spark session, started with
the batch, checks each run as soon as its history is closed (harness.checking); no run
starts its workload while a check or another cluster's start-up still runs. A run whose
harness failed (cluster never healthy, client crashed) is retried and marked so: it is
never counted as a broker finding. Output: results/<kind>/<timestamp>/summary.{md,json,txt}
and junit.xml (``harness.rows``), rows in the order given. The exit code merges the runs'
by ``harness.verdicts``.
"""
from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import rows as R
from harness import store
from harness.checking import Checker
from harness.expect import verdict
from harness.runner import Hooks, Interrupted, Run, log
from harness.scenario import Scenario, ScenarioError, load, parse_recorded
from harness.verdicts import EXIT_UNKNOWN, NOT_APPLICABLE, merge_codes, not_applicable_result

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
        return self.run.info.get("status", "not run") if self.run else "not run"


def select(files: list[Path], only: list[str] | None, sort: bool = True,
           versions: dict[str, str] | None = None) -> tuple[list[Scenario], list[tuple[str, str]]]:
    """Scenarios to run, in catalogue order (R, Q, K; then by id), and the files that did not
    validate (each with its error). `only` matches ids (R5 picks R5 and R5b) or names;
    ``versions``: --version, by broker."""
    scenarios, bad = [], []
    for f in files:
        try:
            scenarios.append(load(f, versions))
        except ScenarioError as e:
            bad.append((str(f), str(e)))
    if only:
        want = [o.strip() for o in only if o.strip()]

        def wanted(name: str, sid: str) -> bool:
            return any(name == w or sid == w or name.startswith(w + "-") or sid.rstrip("abcdefgh") == w
                       for w in want)
        scenarios = [s for s in scenarios if wanted(s.name, s.id or "")]
        # a file that did not load is reported only if selected: by its name, which starts
        # with its id (Q6a on 4.3 is no error of a batch of R rows)
        bad = [(f, e) for f, e in bad if wanted(Path(f).stem, Path(f).stem.split("-")[0])]
    return (sorted(scenarios, key=order_key) if sort else scenarios), bad


def order_key(sc: Scenario) -> tuple:
    sid = sc.id or sc.name
    head = "RQK".find(sid[:1]) if sid[:1] in "RQK" else 9
    digits = "".join(ch for ch in sid[1:] if ch.isdigit())
    return head, int(digits or 0), sc.name


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
    """Overlaps a batch's runs without disturbing any run's faults (see the module's doc)."""

    def __init__(self, results: Path | None, keep_cluster: bool, checker: Checker) -> None:
        self.results, self.keep_cluster, self.checker = results, keep_cluster, checker
        self.next: tuple[Scenario, int] | None = None      # the job after the running one
        self.prepared: tuple[tuple, Run] | None = None     # its run, cluster coming up

    def hooks(self, entry: Entry) -> Hooks:
        def load_over() -> None:
            self.checker.release()  # pictures and copies may run until the next workload
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
            log(f"{nxt[0].name}: bringing its cluster up while {entry.scenario.name} ends")
            run.prepare()
            self.prepared = ((nxt[0].name, nxt[1]), run)

        def history_closed(run: Run) -> None:
            def done(code: int, error: str | None) -> None:
                entry.code, entry.check_error = code, error
            self.checker.submit(run, done)

        def before_load() -> None:
            self.checker.hold()

        return Hooks(load_over=load_over, history_closed=history_closed, before_load=before_load)

    def take(self, sc: Scenario, repeat: int) -> Run | None:
        """The run prepared for this job, if any (its cluster up or coming up)."""
        if self.prepared and self.prepared[0] == (sc.name, repeat):
            run, self.prepared = self.prepared[1], None
            return run
        self.abandon()
        return None

    def abandon(self) -> None:
        """A prepared run that will not run (the batch ends, or the current run is retried):
        its cluster goes down and its directory says it never ran."""
        if not self.prepared:
            return
        _, run = self.prepared
        self.prepared = None
        run.abandon()


def run_one(sc: Scenario, repeat: int, results: Path | None, retries: int = 1,
            keep_cluster: bool = False, pipeline: Pipeline | None = None) -> Entry:
    e = Entry(sc, repeat)
    for attempt in range(retries + 1):
        t0 = time.monotonic()
        run = pipeline.take(sc, repeat) if pipeline and attempt == 0 else None
        if run is None:
            run = Run(sc, results=results, check=False, keep_cluster=keep_cluster)
            run.info["catalogue"] = {"repeat": repeat, "attempt": attempt}
        if pipeline:
            run.hooks = pipeline.hooks(e)
        run.execute()
        e.run, e.seconds = run, round(time.monotonic() - t0, 1)
        if run.info["status"] != "harness-error":
            break
        if pipeline:
            pipeline.abandon()  # the retry runs alone
        e.attempts.append({"run": str(run.dir), "error": run.info.get("error")})
        log(f"{sc.name}: harness error ({run.info.get('error')}); "
            + ("retrying once" if attempt < retries else "giving up"))
    return e


def row(e: Entry) -> dict:
    base = {"id": e.scenario.id, "scenario": e.scenario.name, "repeat": e.repeat, "seconds": e.seconds,
            "status": e.status, "retried": bool(e.attempts), "earlier_attempts": e.attempts,
            "expect": e.scenario.expect, "exit": e.code}
    s = (e.run.info.get("summary") if e.run else None) or {}
    if s:
        base.update(s)
    else:
        base.update(prediction=None, valid=e.status, reason=(e.run.info.get("error") if e.run else None)
                    or e.check_error or f"run {e.status}", report=str(e.run.dir) if e.run else None)
    base["harness_error"] = e.status not in ("completed", NOT_APPLICABLE)
    return base


def write_outputs(rows: list[dict], invalid: list[tuple[str, str]], out: Path, title: str) -> None:
    """The batch's summary files (harness.rows), with a row for each file that did not validate."""
    for path, err in invalid:
        rows.append({"scenario": path, "id": None, "repeat": 0, "seconds": 0, "status": "invalid scenario file",
                     "retried": False, "harness_error": True, "reason": err, "expect": None, "exit": EXIT_UNKNOWN,
                     "valid": "invalid scenario file"})
    R.write_all(rows, out, title)


def rows_from_runs(run_dirs: list[Path]) -> list[dict]:
    """Summary rows rebuilt offline from run directories (run.json + check.json), e.g. when
    a catalogue was interrupted before its summary: per scenario and repeat, the last
    completed attempt, the earlier harness errors counted as retries."""
    by_key: dict[tuple, list] = {}
    for d in sorted(run_dirs, key=lambda d: Path(d).name):
        info = store.read_run(d)
        if info is None or info.get("status") == "abandoned":  # prepared, never ran
            continue
        rep = (info.get("catalogue") or {}).get("repeat", 0)
        by_key.setdefault((info["scenario"], rep), []).append((Path(d), info))
    rows = []
    for (name, rep), attempts in by_key.items():
        d, info = attempts[-1]
        sc = parse_recorded(info["params"], str(d / store.RUN_JSON))
        earlier = [{"run": str(a), "error": i.get("error")} for a, i in attempts[:-1]
                   if i.get("status") == "harness-error"]
        base = {"id": sc.id, "scenario": name, "repeat": rep, "status": info.get("status"),
                "seconds": round(max((info.get("phases") or {"": 0}).values()), 1),
                "retried": bool(earlier), "earlier_attempts": earlier, "expect": sc.expect}
        result = store.read_check(d)
        if info.get("status") == "completed" and result is not None:
            if "prediction" not in result:
                result["prediction"] = verdict(sc, result, info)
            base.update(R.run_row(sc, result, info, d))
            base["harness_error"] = False
        elif info.get("status") == NOT_APPLICABLE:
            base.update(R.not_applicable_row(sc, not_applicable_result(info.get("not_applicable")), d),
                        harness_error=False)
        else:
            base.update(prediction=None, reason=info.get("error") or f"run {info.get('status')}",
                        report=str(d), harness_error=True)
        rows.append(base)
    by_name = {sc.name: sc for sc in select(sorted(SCENARIO_DIR.glob("*.yaml")), None)[0]}
    rows.sort(key=lambda r: (order_key(by_name[r["scenario"]]) if r["scenario"] in by_name
                             else (9, 0, r["scenario"]), r["repeat"]))
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


def _interrupted(signum, frame):
    raise Interrupted()


def run_batch(only: list[str] | None = None, repeat: int = 1, files: list[Path] | None = None,
              results: Path | None = None, kind: str = "catalogue", retries: int = 1,
              master: str | None = None, keep_cluster: bool = False, sort: bool = True,
              table: str = "summary.md", echo=print, versions: dict[str, str] | None = None) -> int:
    """Run the scenarios (``files``, default every file in scenarios/; ``only`` picks rows;
    in catalogue order unless not ``sort``; ``versions``: --version, by broker), overlapped
    by a ``Pipeline`` and checked in one Spark session, write the batch's summary and echo
    its ``table``; return the merged exit code."""
    scenarios, invalid = select(files or sorted(SCENARIO_DIR.glob("*.yaml")), only, sort, versions)
    for path, err in invalid:
        log(err)
    out = store.new_batch_dir(kind, results)
    t0 = time.monotonic()
    jobs = [(sc, rep, pos) for pos, (rep, sc) in enumerate((rep, sc) for rep in range(repeat) for sc in scenarios)]
    jobs = interleave(jobs)
    entries: list[Entry] = []
    checker = Checker(master) if scenarios else None  # its JVM starts with the first cluster
    pipeline = Pipeline(results, keep_cluster, checker) if checker else None
    # SIGTERM (a CI time limit) ends the batch like Ctrl-C: what ran is still summarised.
    prev = signal.signal(signal.SIGTERM, _interrupted)
    interrupted = False
    try:
        for k, (sc, rep, pos) in enumerate(jobs):
            log(f"{kind}: {sc.name} (repeat {rep + 1}/{repeat}, {k + 1}/{len(jobs)})")
            pipeline.next = jobs[k + 1][:2] if k + 1 < len(jobs) else None
            entries.append(run_one(sc, rep, results, retries, keep_cluster, pipeline))
            entries[-1].position = pos
            if entries[-1].status == "interrupted":  # the run healed and kept its history
                raise Interrupted()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        log(f"{kind} interrupted: checking and summarising the runs so far")
    try:  # Ctrl-C again during the checks still leaves a summary (without their verdicts)
        if pipeline:
            pipeline.abandon()
            checker.close()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
    finally:
        entries.sort(key=lambda e: e.position)
        rows = [row(e) for e in entries]
        write_outputs(rows, invalid, out, f"mqchaos {kind}, {out.name} ({time.monotonic() - t0:.0f} s)"
                      + (", interrupted" if interrupted else ""))
        log(f"summary: {out / 'summary.md'}")
        echo((out / table).read_text())
        signal.signal(signal.SIGTERM, prev)
    codes = [e.code for e in entries] + [EXIT_UNKNOWN] * (len(invalid) + interrupted)
    return merge_codes(codes)
