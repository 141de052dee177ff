"""The run store: where runs live on disk and what their files are called.

    results/<scenario>/<UTC timestamp>/        one run (``new_run_dir``)
        run.json        what ran: the scenario as run, phases, status, measurements
        check.json      the checker's result and the verdict against the prediction
        history/        produce-*.jsonl, consume-*.jsonl (+ parquet/ copy), replica-<node>.jsonl (Kafka)
        nemesis.jsonl   the fault timeline;  nemesis-state.json while faults are active
        observations.jsonl, findings.jsonl, logs/, report.md, report.html, publishes.png, rates.png,
        broker-state.png (harness.plots)
    results/<scenario>/latest, results/latest  links to the newest run
    results/<kind>/<UTC timestamp>/            one batch (catalogue, suite, nightly)
    results/harness-errors.log                 every command's uncaught exception (``log_harness_error``)
    results/evidence-store/<night>.jsonl             the evidence store: every night's published rows (harness.evidence)

A run is a directory with run.json or history/ (the shallowest: nothing below a run
is another run). This module is the only one that knows these names; the checkers
read runs through it and nothing else of the harness.
"""
from __future__ import annotations

import glob
import json
import os
import re
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, TypedDict

ROOT = Path(__file__).resolve().parent.parent
RESULTS_ENV = "MQCHAOS_RESULTS"

RUN_JSON = "run.json"
CHECK_JSON = "check.json"
HISTORY = "history"
NEMESIS_LOG = "nemesis.jsonl"
NEMESIS_STATE = "nemesis-state.json"
FINDINGS = "findings.jsonl"
OBSERVATIONS = "observations.jsonl"
LOGS = "logs"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
LATEST = "latest"
# below the results root: every uncaught exception's traceback, the command that raised it
HARNESS_ERRORS = "harness-errors.log"
# below the results root: the evidence kept across nights, one JSONL file per night (harness.evidence)
EVIDENCE = "evidence-store"

_GLOB = re.compile(r"[*?\[]")


def results_root(root: str | os.PathLike | None = None) -> Path:
    """The results root: ``root`` if given, else $MQCHAOS_RESULTS, else <repo>/results;
    always a real absolute path, so a run's path depends neither on the working directory
    nor on links (``find_runs`` names runs by their real path too)."""
    return Path(os.path.realpath(root or os.environ.get(RESULTS_ENV) or ROOT / "results"))


def evidence_dir(root: str | os.PathLike | None = None) -> Path:
    """results/evidence-store/: this machine's evidence store (harness.evidence)."""
    return results_root(root) / EVIDENCE


def stamp(precise: bool = False) -> str:
    """A UTC timestamp usable as a directory name (milliseconds if ``precise``)."""
    now = datetime.now(timezone.utc)
    if precise:
        return now.strftime("%Y-%m-%dT%H-%M-%S.%fZ")[:-4] + "Z"
    return now.strftime("%Y-%m-%dT%H-%M-%SZ")


def point_latest(link: Path, target: str) -> None:
    """Swap ``link`` to ``target`` atomically (a reader never sees it missing). The temporary
    link's name is this call's own: two runs of a batch pointing ``results/latest`` at once
    would otherwise remove or replace each other's."""
    tmp = link.with_name(f"{link.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    if tmp.is_symlink():
        tmp.unlink()
    tmp.symlink_to(target)
    tmp.replace(link)


def new_run_dir(scenario: str, root: str | os.PathLike | None = None) -> Path:
    """results/<scenario>/<UTC timestamp, ms>/ with history/: a directory no other run has.
    Two runs of one scenario may start within a millisecond (a matrix's repeats of a claim the
    version lacks bring nothing up; a batch of fake runs): the later waits for the next
    millisecond's name rather than fail on the first's (issue 52)."""
    base = results_root(root)
    (base / scenario).mkdir(parents=True, exist_ok=True)
    while True:
        st = stamp(precise=True)
        d = base / scenario / st
        try:
            d.mkdir()  # atomic: of two processes, one gets the name
            break
        except FileExistsError:
            time.sleep(0.001)
    (d / HISTORY).mkdir()
    point_latest(base / scenario / LATEST, st)
    point_latest(base / LATEST, f"{scenario}/{st}")
    return d


def new_batch_dir(kind: str, root: str | os.PathLike | None = None) -> Path:
    """results/<kind>/<timestamp>/ for a batch's summary (its `latest` is set by ``finish_batch``)."""
    d = results_root(root) / kind / stamp()
    d.mkdir(parents=True, exist_ok=True)
    return d


def finish_batch(d: Path) -> None:
    point_latest(d.parent / LATEST, d.name)


def log_harness_error(text: str, root: str | os.PathLike | None = None) -> Path | None:
    """Append an uncaught exception's traceback (``text``), with the time, the process and
    its command line, to the results root's harness-errors.log; where the root cannot be
    written, to the system's temporary directory. The file written, or None (neither could)."""
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    entry = f"==== {when} pid {os.getpid()}: {' '.join(sys.argv)}\n{text.rstrip()}\n"
    for d in (results_root(root), Path(tempfile.gettempdir())):
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd = os.open(d / HARNESS_ERRORS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                # one appending write: two processes' entries stay whole (argv may hold undecodable bytes)
                os.write(fd, entry.encode(errors="replace"))
            finally:
                os.close(fd)
            return d / HARNESS_ERRORS
        except OSError:
            continue
    return None


# ---- JSON files --------------------------------------------------------------------------

def write_json(path: Path, data: Any) -> None:
    """Atomically: a reader (or a crash) never sees half a file; two writers at once each
    write their own temporary file (the last rename wins, whole)."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)


def read_json(path: Path) -> tuple[dict | None, str | None]:
    """(data, None); (None, None) if the file does not exist; (None, why) if unreadable."""
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return None, f"{path.name} is not valid JSON: {e}"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


class RunRecord(TypedDict, total=False):
    """run.json: what ran and how it went. The run loop (harness.runner) writes it as the run
    goes, the check queue and the judge (harness.judge) add the verdict's part; everything
    that reads a run reads it through ``read_run``. Keys, by who writes them:"""
    # -- at creation (harness.runner.Run)
    scenario: str
    id: str
    broker: str
    seed: int
    ordering: str
    params: dict                # the scenario as run (harness.scenario.parse_recorded reads it)
    digest: str                 # what the run tested (harness.identity.digest of the scenario as run)
    version: dict               # {"version": asked for, "from": where the choice came from}
    history_version: int        # docs/history.md
    started_at: str
    t0_unix: float              # the run clock's origin on the wall clock
    status: str                 # harness.verdicts.RunStatus
    phases: dict                # phase name -> run clock seconds
    # -- during the run
    brokers: dict               # what the nodes report they run
    background_start: dict      # a batch's next cluster: the CPU weights it came up with
    prefill: dict
    warmup_extended_s: float
    operator_recovery: dict     # the nodes restarted because the cluster did not heal
    whole_waited_for: str       # what "whole" waited for, in the plug-in's words (brokers.protocol.SaysWhole)
    self_healed: bool
    operator_events: list       # the harness's own actions on the cluster since the faults
    drain: dict
    error: str                  # a harness error's text
    heal_error: str
    consumer_crashes: dict
    consumer_cancels: dict
    client_errors: dict
    client_events: dict
    measurements: dict          # harness.observe.measure + the probes'
    not_applicable: str
    catalogue: dict             # a batch's repeat and attempt
    # -- once checked and judged (harness.judge)
    check_timing: dict
    summary: dict               # the run's row (harness.rows)
    exit_code: int


RUN_KEYS = frozenset(RunRecord.__annotations__)


def read_run(run_dir: str | os.PathLike) -> RunRecord | None:
    return read_json(Path(run_dir) / RUN_JSON)[0]


def undeclared(record: dict) -> list[str]:
    """Keys of ``record`` that RunRecord does not declare (a run of this version writing one
    is a harness bug; an older run's record may hold keys since retired, and is kept)."""
    return sorted(set(record) - RUN_KEYS)


def write_run(run_dir: str | os.PathLike, info: RunRecord) -> None:
    write_json(Path(run_dir) / RUN_JSON, info)


def read_check(run_dir: str | os.PathLike) -> dict | None:
    return read_json(Path(run_dir) / CHECK_JSON)[0]


def write_check(run_dir: str | os.PathLike, result: dict) -> None:
    write_json(Path(run_dir) / CHECK_JSON, result)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Every whole JSON object line of a file; a torn or damaged line is skipped."""
    out: list[dict] = []
    p = Path(path)
    if not p.is_file():
        return out
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


# ---- a run's files -----------------------------------------------------------------------

def history_files(run_dir: str | os.PathLike, kind: str) -> list[str]:
    """history/<kind>*.jsonl (kind: produce or consume), sorted."""
    return sorted(str(p) for p in (Path(run_dir) / HISTORY).glob(f"{kind}*.jsonl") if p.is_file())


def history_records(run_dir: str | os.PathLike, kind: str) -> list[dict]:
    return [r for f in history_files(run_dir, kind) for r in read_jsonl(f)]


def read_logs(run_dir: str | os.PathLike) -> dict[str, str]:
    d = Path(run_dir) / LOGS
    return {p.stem: p.read_text(encoding="utf-8", errors="replace") for p in sorted(d.glob("*.log"))}


# ---- finding runs ------------------------------------------------------------------------

def is_run(p: Path) -> bool:
    return (p / RUN_JSON).is_file() or (p / HISTORY).is_dir()


def find_runs(args: list[str], local: Callable[[str], str] = str
              ) -> tuple[list[Path], list[tuple[str, str]]]:
    """Run directories named by the arguments: runs, globs, or directories with runs below
    them at any depth. ``latest`` links and overlapping arguments name a run once (by its
    real path, which is the name returned); links are not walked into. Returns
    (runs, [(argument, error)]). ``local`` turns an argument into a local path (a
    ValueError from it is that argument's error)."""
    runs: list[Path] = []
    errors: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(p: Path) -> None:
        real = os.path.realpath(p)
        if real not in seen:
            seen.add(real)
            runs.append(Path(real))

    for given in args:
        try:
            arg = local(given)
        except ValueError as e:
            errors.append((given, str(e)))
            continue
        pattern = not os.path.exists(arg) and bool(_GLOB.search(arg))
        found = 0
        for path in (sorted(glob.glob(arg)) if pattern else [arg]):
            p = Path(path)
            if not p.exists():
                errors.append((path, "no such run directory"))
            elif not p.is_dir():
                if not pattern:
                    errors.append((path, "not a directory"))
            elif is_run(p):
                add(p)
                found += 1
            else:
                below = 0
                for r in _runs_below(p):
                    add(r)
                    below += 1
                found += below
                if not below and not pattern:
                    errors.append((path, "no run directory (run.json or history/) in it or below it"))
        if pattern and not found:
            # what a pattern matched that is not a run (a batch directory) is skipped, but a
            # pattern that names no run at all is reported
            errors.append((given, "the pattern matches no run directory"))
    return runs, errors


def _runs_below(top: Path) -> Iterator[Path]:
    # os.walk does not follow links: `latest` is not walked into (a bounded walk)
    for root, dirs, _files in os.walk(top):
        r = Path(root)
        if is_run(r):
            dirs[:] = []  # nothing below a run is another run
            yield r
            continue
        dirs.sort()


def state_files(root: str | os.PathLike | None = None, limit: int = 200) -> list[Path]:
    """nemesis-state.json of runs that may have died with faults active."""
    base = results_root(root)
    return sorted(base.glob(f"*/*/{NEMESIS_STATE}"))[:limit]
