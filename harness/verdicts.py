"""Tri-state verdicts and exit codes, and the one rule that merges them.

A verdict is True (valid / held), False (anomalies / did not hold) or None (unknown:
undecided, or the harness failed). Exit codes: 0 valid, 1 anomalies, 2 unknown or a
harness error. Merging follows Jepsen's checker composition: any False makes the whole
False; otherwise any None makes it None; otherwise True. The same rule serves
`mqchaos check`, `run`, `suite` and `catalogue`.
"""
from __future__ import annotations

from typing import Iterable

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN = 0, 1, 2

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


def verdict_of(code: int) -> Verdict:
    return True if code == EXIT_VALID else False if code == EXIT_INVALID else None


def merge_codes(codes: Iterable[int]) -> int:
    """The exit code of a batch from its members' codes, by ``merge``."""
    return exit_code(merge(verdict_of(c) for c in codes))
