"""The one batch runner: a selection of scenarios run against real clusters, each judged
against its prediction, in one table.

    mqchaos catalogue [--only R2,K7] [--repeat N]     every scenario file (or some rows)
    mqchaos suite FILE...                             the given files (make test-partition)

Each scenario runs on a fresh cluster; the histories of all runs are then checked in ONE
Spark job (start-up paid once), and each run gets its verdict and report. A run whose
harness failed (cluster never healthy, client crashed) is retried and marked so: it is
never counted as a broker finding. Output: results/<kind>/<timestamp>/summary.{md,json,txt}
and junit.xml (``harness.rows``). The exit code merges the runs' by ``harness.verdicts``.
"""
from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from checkers.check import check_runs
from checkers.history import convert, open_runs
from checkers.spark import session
from harness import rows as R
from harness import store
from harness.expect import verdict
from harness.runner import Interrupted, Run, log
from harness.scenario import Scenario, ScenarioError, load, parse_recorded
from harness.verdicts import EXIT_UNKNOWN, merge_codes

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

    @property
    def status(self) -> str:
        return self.run.info.get("status", "not run") if self.run else "not run"


def select(files: list[Path], only: list[str] | None,
           sort: bool = True) -> tuple[list[Scenario], list[tuple[str, str]]]:
    """Scenarios to run, in catalogue order (R, Q, K; then by id), and the files that did not
    validate (each with its error). `only` matches ids (R5 picks R5 and R5b) or names."""
    scenarios, bad = [], []
    for f in files:
        try:
            scenarios.append(load(f))
        except ScenarioError as e:
            bad.append((str(f), str(e)))
    if only:
        want = [o.strip() for o in only if o.strip()]
        scenarios = [s for s in scenarios
                     if any(s.name == w or (s.id or "") == w or s.name.startswith(w + "-")
                            or (s.id or "").rstrip("abcdefgh") == w for w in want)]
    return (sorted(scenarios, key=order_key) if sort else scenarios), bad


def order_key(sc: Scenario) -> tuple:
    sid = sc.id or sc.name
    head = "RQK".find(sid[:1]) if sid[:1] in "RQK" else 9
    digits = "".join(ch for ch in sid[1:] if ch.isdigit())
    return head, int(digits or 0), sc.name


def run_one(sc: Scenario, repeat: int, results: Path | None, retries: int = 1,
            keep_cluster: bool = False) -> Entry:
    e = Entry(sc, repeat)
    for attempt in range(retries + 1):
        t0 = time.monotonic()
        run = Run(sc, results=results, check=False, keep_cluster=keep_cluster)
        run.info["catalogue"] = {"repeat": repeat, "attempt": attempt}
        run.execute()
        e.run, e.seconds = run, round(time.monotonic() - t0, 1)
        if run.info["status"] != "harness-error":
            break
        e.attempts.append({"run": str(run.dir), "error": run.info.get("error")})
        log(f"{sc.name}: harness error ({run.info.get('error')}); "
            + ("retrying once" if attempt < retries else "giving up"))
    return e


def check_all(entries: list[Entry], master: str | None = None) -> None:
    """One Spark job over every completed run; then each run's verdict and report."""
    done = [e for e in entries if e.status == "completed"]
    if not done:
        return
    spark = session(master, "mqchaos-catalogue")
    for e in done:
        convert(spark, str(e.run.dir))
    runs, errors = open_runs([str(e.run.dir) for e in done])
    for path, err in errors:
        log(f"check: {path}: {err}")
    results = check_runs(spark, runs)  # each run under its own ordering rule (run.json)
    for e in done:
        res = results.get(str(e.run.dir))
        if res is None:
            e.code = EXIT_UNKNOWN
            continue
        e.code = e.run.finish(res)


def row(e: Entry) -> dict:
    base = {"id": e.scenario.id, "scenario": e.scenario.name, "repeat": e.repeat, "seconds": e.seconds,
            "status": e.status, "retried": bool(e.attempts), "earlier_attempts": e.attempts,
            "expect": e.scenario.expect, "exit": e.code}
    s = (e.run.info.get("summary") if e.run else None) or {}
    if s:
        base.update(s)
    else:
        base.update(prediction=None, valid=e.status, reason=(e.run.info.get("error") if e.run else None)
                    or f"run {e.status}", report=str(e.run.dir) if e.run else None)
    base["harness_error"] = e.status != "completed"
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
        if info is None:
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
    rows = list(by_key.values())
    by_name = {sc.name: sc for sc in select(sorted(SCENARIO_DIR.glob("*.yaml")), None)[0]}
    rows.sort(key=lambda r: order_key(by_name[r["scenario"]]) if r["scenario"] in by_name else (9, 0, r["scenario"]))
    out = store.new_batch_dir(kind, results)
    sources = ", ".join(Path(d).name for d in dirs)
    write_outputs(rows, [], out, f"mqchaos {kind}, merged from {sources}")
    return out


def _interrupted(signum, frame):
    raise Interrupted()


def run_batch(only: list[str] | None = None, repeat: int = 1, files: list[Path] | None = None,
              results: Path | None = None, kind: str = "catalogue", retries: int = 1,
              master: str | None = None, keep_cluster: bool = False, sort: bool = True,
              table: str = "summary.md", echo=print) -> int:
    """Run the scenarios (``files``, default every file in scenarios/; ``only`` picks rows;
    in catalogue order unless not ``sort``), check them in one Spark job, write the batch's
    summary and echo its ``table``; return the merged exit code."""
    scenarios, invalid = select(files or sorted(SCENARIO_DIR.glob("*.yaml")), only, sort)
    for path, err in invalid:
        log(err)
    out = store.new_batch_dir(kind, results)
    t0 = time.monotonic()
    entries: list[Entry] = []
    # SIGTERM (a CI time limit) ends the batch like Ctrl-C: what ran is still summarised.
    prev = signal.signal(signal.SIGTERM, _interrupted)
    interrupted = False
    try:
        for rep in range(repeat):
            for sc in scenarios:
                log(f"{kind}: {sc.name} (repeat {rep + 1}/{repeat}, {len(entries) + 1}/{len(scenarios) * repeat})")
                entries.append(run_one(sc, rep, results, retries, keep_cluster))
                if entries[-1].status == "interrupted":  # the run healed and kept its history
                    raise Interrupted()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        log(f"{kind} interrupted: checking and summarising the runs so far")
    try:  # Ctrl-C again during the check still leaves a summary (without verdicts)
        check_all(entries, master)
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
    finally:
        rows = [row(e) for e in entries]
        write_outputs(rows, invalid, out, f"mqchaos {kind}, {out.name} ({time.monotonic() - t0:.0f} s)"
                      + (", interrupted" if interrupted else ""))
        log(f"summary: {out / 'summary.md'}")
        echo((out / table).read_text())
        signal.signal(signal.SIGTERM, prev)
    codes = [e.code for e in entries] + [EXIT_UNKNOWN] * (len(invalid) + interrupted)
    return merge_codes(codes)
