"""Tri-state verdicts and exit codes, and the one rule that merges them.

A verdict is True (valid / held), False (anomalies / did not hold) or None (unknown:
undecided, or the harness failed). Exit codes: 0 valid, 1 anomalies, 2 unknown or a
harness error. Merging follows Jepsen's checker composition: any False makes the whole
False; otherwise any None makes it None; otherwise True. The same rule serves
`mqchaos check`, `run`, `suite` and `catalogue`.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Iterable

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN = 0, 1, 2


class RunStatus(StrEnum):
    """Every status a run has (run.json ``status``) or a batch's row shows: one vocabulary.
    A StrEnum, so a member is the plain string in JSON, tables and comparisons with what
    run.json holds."""
    RUNNING = "running"          # up to the end of the drain (a run killed there keeps it)
    COMPLETED = "completed"      # loaded, faulted, healed and drained: its history decides
    INTERRUPTED = "interrupted"  # Ctrl-C: healed, its history kept, undecided
    HARNESS_ERROR = "harness-error"  # the harness failed (never a broker finding); retried
    ABANDONED = "abandoned"      # prepared by a batch's pipeline, never ran
    # A run whose claim does not exist in the broker's version (the feature it is about was
    # removed): it brings no cluster up, decides nothing, and exits EXIT_UNKNOWN with the reason.
    NOT_APPLICABLE = "not-applicable"
    # A version matrix's cell whose version refuses the scenario at load time
    # (``version_problems``: a setting the version does not boot with): nothing ran, it
    # decides nothing (EXIT_UNKNOWN) and it is no finding.
    REFUSED = "refused"
    # a batch's rows only: a job the batch never ran, a file that is no scenario
    NOT_RUN = "not run"
    INVALID_FILE = "invalid scenario file"


class Word(StrEnum):
    """The words every table, page and report shows for a verdict (harness.rows, harness.matrix,
    harness.report, harness.trend_report and the pages' templates): one vocabulary. A StrEnum,
    so a member is the plain string wherever it is written."""
    HELD = "held"                    # the scenario's prediction was borne out
    DID_NOT_HOLD = "DID NOT HOLD"    # the broker behaved otherwise: a finding
    UNDECIDED = "undecided"          # the run decides nothing (harness.verdicts.undecided)
    NOT_APPLICABLE = "not applicable"  # the version lacks the claim (RunStatus.NOT_APPLICABLE)
    REFUSED = "refused at load"      # the version refuses the scenario (RunStatus.REFUSED)
    HARNESS_ERROR = "harness error"  # never a broker finding
    MEASURED_ONLY = "measured only"  # a control: no prediction, so nothing was left undecided
    # no prediction: the checker's validity
    VALID = "valid"
    ANOMALIES = "anomalies"
    INVALID = "INVALID"              # the report's line of the checker's verdict
    UNKNOWN = "unknown"
    NOTHING_FOUND = "nothing found"  # an exploration's exit 0: the checker found no anomaly


# A prediction's verdict (True / False / None) in words; a checker's validity where no
# prediction was stated.
HELD_WORDS = {True: Word.HELD, False: Word.DID_NOT_HOLD, None: Word.UNDECIDED}
VALID_WORDS = {True: Word.VALID, False: Word.ANOMALIES, None: Word.UNDECIDED}
CHECKER_WORDS = {True: Word.VALID, False: Word.INVALID, None: Word.UNKNOWN}  # the report's checker line
# an exploration's run by its exit code (harness.explore's table)
EXIT_WORDS = {EXIT_VALID: Word.NOTHING_FOUND, EXIT_INVALID: Word.ANOMALIES, EXIT_UNKNOWN: Word.UNDECIDED}


class Shade(StrEnum):
    """A verdict's class on the pages, which their stylesheets colour (.held, .failed,
    .undecided, .na: harness/templates); also a matrix cell's state (matrix.json)."""
    HELD = "held"
    FAILED = "failed"
    UNDECIDED = "undecided"
    NA = "na"  # not applicable, refused: no verdict to colour


SHADES = {True: Shade.HELD, False: Shade.FAILED, None: Shade.UNDECIDED}


RUN_STATUSES = frozenset(RunStatus)
# A run not yet (or never) finished: `mqchaos analyze` counts it as incomplete.
INCOMPLETE = (RunStatus.INTERRUPTED, RunStatus.RUNNING)
NOT_APPLICABLE, REFUSED = RunStatus.NOT_APPLICABLE, RunStatus.REFUSED

Verdict = bool | None


def merge(verdicts: Iterable[Verdict]) -> Verdict:
    """False if any is False; else None if any is None; else True (True for none at all)."""
    out: Verdict = True
    for v in verdicts:
        if v is False:
            return False
        if v is None:
            out = None
    return out


def exit_code(verdict: Verdict) -> int:
    return EXIT_VALID if verdict is True else EXIT_INVALID if verdict is False else EXIT_UNKNOWN


def run_exit_code(result: dict) -> int:
    """A checked run's exit code: by its prediction when the scenario states one (0 held,
    1 did not hold, 2 undecided), else by the checker's validity."""
    pred = result.get("prediction")
    if isinstance(pred, dict) and pred.get("checks"):
        return exit_code(pred.get("held"))
    return exit_code(result.get("valid"))


def verdict_of(code: int) -> Verdict:
    return True if code == EXIT_VALID else False if code == EXIT_INVALID else None


def merge_codes(codes: Iterable[int]) -> int:
    """The exit code of a batch from its members' codes, by ``merge``."""
    return exit_code(merge(verdict_of(c) for c in codes))


# A prediction judged on a run with loss whose drain is not known to have finished (also a
# run.json without a drain record, which the checker's validity tolerates): the lost
# messages may still be in the queue.
UNDRAINED_LOSS = "the drain did not finish, 'lost' may still be queued"
# A run directory without run.json (a history copied alone, a run killed before its first
# save): its history may be whole or cut anywhere, and nothing says which.
NO_RECORD = "no run.json: nothing says the run completed"


def undecided(info: dict | None, faults: list[dict], lost: int | None = None) -> list[str]:
    """Why a run's history cannot decide anything (then valid is null, exit 2): the run has
    no record (``info`` None: ``NO_RECORD``) or did not complete (killed, interrupted, harness
    error), its drain did not finish, or a fault step failed or left no evidence that it took
    effect (nemesis.jsonl ``details``). Given the run's ``lost`` (harness.expect, judging a
    prediction), also ``UNDRAINED_LOSS``."""
    reasons = [NO_RECORD] if info is None else []
    info = info or {}
    status = info.get("status")
    if status == NOT_APPLICABLE:
        return [not_applicable(info.get("not_applicable"))]
    if status is not None and status != RunStatus.COMPLETED:
        reasons.append(f"the run did not complete (status: {status})")
    recovery = info.get("operator_recovery")
    if isinstance(recovery, dict) and recovery.get("failed"):
        reasons.append(f"the cluster could not be brought back after the faults: {str(recovery['failed'])[:300]}")
    drain = info.get("drain")
    if isinstance(drain, dict) and drain.get("complete") is False:
        reasons.append("the drain did not finish: messages may still be queued")
    if lost and not (drain if isinstance(drain, dict) else {}).get("complete"):
        reasons.append(UNDRAINED_LOSS)
    for f in faults:
        d = f.get("details") if isinstance(f.get("details"), dict) else {}
        what = f"{f.get('fault')} {','.join(map(str, f.get('targets') or [])) or d.get('spec')}"
        if d.get("error"):
            reasons.append(f"fault {what} failed: {str(d['error'])[:200]}")
        elif d.get("effective") is False:
            reasons.append(f"fault {what} had no effect (evidence: {d.get('evidence')})")
    return reasons


def not_applicable(reason: str | None) -> str:
    """The reason a not-applicable run gives, as every table and report shows it."""
    return f"not applicable: {reason or 'the claim does not exist in this version'}"


def not_applicable_result(reason: str | None) -> dict:
    """check.json of a not-applicable run: nothing was checked, the prediction undecided."""
    why = not_applicable(reason)
    return {"valid": None, "reason": why, "undecided": [why],
            "prediction": {"held": None, "reason": why, "checks": []}}
