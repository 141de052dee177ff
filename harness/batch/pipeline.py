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

This module runs the batch (``run_batch``; each job with its retry, ``run_one``) through the
``Pipeline``; which jobs run, in what order: ``harness.batch.jobs``; their rows and the
summary files: ``harness.batch.summary``.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path

from harness import store
from harness.batch.jobs import Versions, plan
from harness.batch.summary import Entry, row, write_outputs
from harness.checking import CheckQueue
from harness.runner import Hooks, Interrupted, Run
from harness.scenario import Scenario
from harness.verdicts import EXIT_UNKNOWN, RunStatus, merge_codes

log = logging.getLogger(__name__)


class Pipeline:
    """Overlaps a batch's runs without disturbing any run's faults (see the module's doc).

    Run N's load (warm-up, faults, heal, recovery) and drain are its own; once drained, its
    teardown, check and cluster down go on in a thread (``finishing``) while run N+1 starts
    on its cluster, which came up during N's load at the background CPU weight. N+1's first
    fault waits until N is down (``before_faults``); only then does N+2's cluster start (the
    same compose project as N's, alternating brokers). Checks run in the Spark session at
    the lowest CPU priority (harness.checking)."""

    def __init__(self, results: Path | None, keep_cluster: bool, checker: CheckQueue) -> None:
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
                log.warning("%s: could not prepare its run (%s: %s)", nxt[0].name, type(e).__name__, e)
                return
            run.info["catalogue"] = {"repeat": nxt[1], "attempt": 0}
            log.info("%s: bringing its cluster up (background CPU weight) during %s", nxt[0].name, entry.scenario.name)
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
        log.error("%s: harness error (%s); %s", sc.name, run.info.get("error"),
                  "retrying once" if attempt < retries else "giving up")
    return e


def run_jobs(jobs: list[tuple[Scenario, int, int]], pipeline: Pipeline | None, entries: list[Entry],
             results: Path | None, retries: int = 1, keep_cluster: bool = False, kind: str = "catalogue",
             repeat: int = 1, may_start=None) -> bool:
    """Run ``jobs`` (scenario, repeat, position in the table) in order through ``pipeline``,
    appending each one's ``Entry`` to ``entries`` as it ends; ``may_start(sc, repeat)``, if
    given, is asked first and a job it refuses is left out. True when interrupted (Ctrl-C,
    SIGTERM, or a run that was): the run under way then has no entry."""
    try:
        for k, (sc, rep, pos) in enumerate(jobs):
            if may_start is not None and not may_start(sc, rep):
                continue
            log.info("%s: %s (%s %s, repeat %d/%d, %d/%d)", kind, sc.name, sc.broker, sc.version, rep + 1, repeat, k + 1, len(jobs))
            pipeline.next = jobs[k + 1][:2] if k + 1 < len(jobs) else None
            entries.append(run_one(sc, rep, results, retries, keep_cluster, pipeline))
            entries[-1].position = pos
            if entries[-1].status == RunStatus.INTERRUPTED:  # the run healed and kept its history
                raise Interrupted()
    except (KeyboardInterrupt, Interrupted):
        log.warning("%s interrupted: checking and summarising the runs so far", kind)
        return True
    return False


def _matrix_versions(versions: Versions | None) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in (versions or {}).items()}


def _interrupted(signum, frame):
    raise Interrupted()


def run_batch(only: list[str] | None = None, repeat: int = 1, files: list[Path] | None = None,
              results: Path | None = None, kind: str = "catalogue", retries: int = 1,
              master: str | None = None, keep_cluster: bool = False, sort: bool = True,
              table: str = "summary.md", echo=print, versions: Versions | None = None,
              matrix: bool = False, shard: tuple[int, int] | None = None) -> int:
    """Run the scenarios (``files``, default every file in scenarios/; ``only`` picks rows;
    in catalogue order unless not ``sort``; ``versions``: --version, by broker, or with
    ``matrix`` a list of versions per broker, ``select``), overlapped by a ``Pipeline`` and
    checked in one Spark session, write the batch's summary (and the matrix's table) and
    echo its ``table``; return the merged exit code."""
    jobs, invalid = plan(only, repeat, files, sort, versions, shard)
    for b in invalid:
        log.warning(b.error if b.version is None else f"{b.scenario} on {b.broker} {b.version}: refused: {b.reason}")
    out = store.new_batch_dir(kind, results)
    t0 = time.monotonic()
    entries: list[Entry] = []
    checker = CheckQueue(master) if jobs else None  # its JVM starts with the first cluster
    pipeline = Pipeline(results, keep_cluster, checker) if checker else None
    # SIGTERM (a CI time limit) ends the batch like Ctrl-C: what ran is still summarised.
    prev = signal.signal(signal.SIGTERM, _interrupted)
    interrupted = run_jobs(jobs, pipeline, entries, results, retries, keep_cluster, kind, repeat)
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
        log.info("summary: %s", out / "summary.md")
        echo((out / table).read_text())
        signal.signal(signal.SIGTERM, prev)
    codes = [e.code for e in entries] + [EXIT_UNKNOWN] * (len(invalid) + interrupted)
    return merge_codes(codes)
