"""A batch's summary: the row of each run (``Entry``, ``row``) and of each file or matrix
version that did not load (``bad_row``), the summary files (``write_outputs``: harness.rows;
a matrix's table, harness.matrix), and the same rows rebuilt offline from run directories
(``rows_from_runs``) or merged from several batches (``merge``)."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from harness import matrix as M
from harness import rows as R
from harness import identity, store
from harness.batch.jobs import SCENARIO_DIR, Bad, order_key, select
from harness.expect import verdict
from harness.results import Row
from harness.runner import Run
from harness.scenario import Scenario, parse_recorded
from harness.verdicts import EXIT_UNKNOWN, NOT_APPLICABLE, REFUSED, RunStatus, not_applicable_result, run_exit_code

log = logging.getLogger(__name__)


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


def row(e: Entry) -> Row:
    base = Row(id=e.scenario.id, scenario=e.scenario.name, broker=e.scenario.broker, version=e.scenario.version,
               repeat=e.repeat, seconds=e.seconds, status=e.status, retried=bool(e.attempts),
               earlier_attempts=e.attempts, expect=e.scenario.expect, exit=e.code,
               **identity.stamp(e.scenario))
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
    try:  # what the file tests (at its own version: a matrix version refused it)
        stamp = identity.stamp_text(Path(b.path).read_text(encoding="utf-8"), b.path)
    except OSError:
        stamp = {}
    if b.scenario is None:
        return Row(scenario=b.path, id=None, repeat=0, seconds=0, status=RunStatus.INVALID_FILE, retried=False,
                   harness_error=True, reason=b.error, expect=None, exit=EXIT_UNKNOWN,
                   valid=RunStatus.INVALID_FILE, **stamp)
    return Row(scenario=b.scenario, id=b.id, broker=b.broker, version=b.version, repeat=0, seconds=0,
               status=REFUSED, retried=False, harness_error=False, prediction=None, valid=None, reason=b.reason,
               decided_by=b.reason, expect=None, exit=EXIT_UNKNOWN, file=b.path, **stamp)


def write_outputs(rows: list[Row], invalid: list[Bad] | list[tuple[str, str]], out: Path, title: str,
                  matrix: dict[str, list[str]] | None = None) -> None:
    """The batch's summary files (harness.rows), with a row for each file that did not validate
    and for each version of a matrix that refused a scenario at load time (not run, undecided,
    not a harness error); a matrix (its versions by broker) adds its table (harness.matrix)."""
    rows += [bad_row(Bad(*x)) for x in invalid]
    R.write_all(rows, out, title)
    if matrix is not None:
        M.write(rows, out, title, matrix)


DECISIONS_JSON = "decisions.json"
DECISION_HEAD = ["id", "scenario", "version", "prediction", "decision", "held k of n decided runs (95 % Wilson interval)",
                 "runs here", "stopped", "why"]


def write_decisions(out: Path, decisions: list[dict]) -> None:
    """Each row's decision (harness.decided: ``Decision.as_dict`` and why it stopped, from
    ``mqchaos batch --until-decided``) in decisions.json and in a section of summary.md and
    summary.txt (after ``write_outputs``)."""
    (out / DECISIONS_JSON).write_text(json.dumps(decisions, indent=1) + "\n")
    cells = [[d["id"] or "-", d["scenario"], d["version"], d["kind"], d["state"], d["text"], str(d["runs_here"]),
              R.md_cell(d["stopped"]), R.md_cell(d["why"])] for d in decisions]
    with (out / "summary.md").open("a") as f:
        f.write("\n## Decisions (harness.decided)\n\n" + "\n".join(R.md_table(DECISION_HEAD, cells)) + "\n")
    with (out / "summary.txt").open("a") as f:
        f.write("\nDecisions:\n" + "".join(f"{d['scenario']} @ {d['version']}: {d['state']}, {d['text']}; "
                                            f"{d['stopped']}; {d['why']}\n" for d in decisions))


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
                   retried=bool(earlier), earlier_attempts=earlier, expect=sc.expect, **identity.stamp(sc))
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
        log.warning("merge: left out the rows of scenarios no longer in %s: %s", SCENARIO_DIR, ", ".join(gone))
    rows = [r for (name, _), r in by_key.items() if name in by_name]
    rows.sort(key=lambda r: order_key(by_name[r["scenario"]]))
    out = store.new_batch_dir(kind, results)
    sources = ", ".join(Path(d).name for d in dirs)
    write_outputs(rows, [], out, f"mqchaos {kind}, merged from {sources}")
    return out
