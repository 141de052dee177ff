"""When a row's verdict is decided (issue 54): a stated rule, by the kind of prediction.

A row is one scenario file's present test (its digest, ``harness.identity``) at one broker
version. Its evidence is the verdicts of its runs of that digest and version that decided
something: held (True) or did not hold (False). A run interrupted, undecided (the set-up a
claim requires did not happen, a fault without effect, the drain unfinished ...), a harness
error or a run of an older digest never counts (``harness.rows.tally`` groups the runs and
counts only held / did not hold; ``decision`` ignores anything else it is given). ``k`` is
the number of decided runs in which the prediction held, ``n`` the number of decided runs,
and the interval is Wilson's 95 % score interval of the share k / n
(``harness.measures.wilson``): the shares of runs in which the prediction holds that the
runs so far cannot rule out.

The kind of a prediction, read from its ``expect:`` as ``harness.expect`` parses it (a nested
mapping names nested figures; a time window is one prediction):

- **never**: something never happens: a figure bounded at zero from above, ``0``,
  ``"== 0"``, ``"<= 0"`` (``lost: 0``, ``unexpected: 0``).
- **happens**: something happens: a figure bounded away from zero, ``"> 0"``, ``"!= 0"``
  (``lost: ">0"``).
- **race or rate**: everything else: a bound on a figure that varies
  (``unavailable_s: "<= 2.5"``, ``lost_share: "<1"``, ``">= 1"``), a share, a figure against
  another, a time window, and an exact outcome (``paused_nodes: [rabbit3]``,
  ``self_healed: true``, ``isr_min: 1``), which a race between the faults and the broker
  may or may not produce.

A row is of the kind all its predictions share; a row whose predictions are of different
kinds is a race or rate (a run's verdict is their conjunction, so a run that did not hold
cannot say which prediction failed). A row without a prediction (a control, ``measure:``
only) has nothing to decide.

The rule (``MIN_CLEAN`` = 3, ``SHARE`` = 0.95 and ``BOUND`` = 0.5 are parameters):

- never: one decided run that did not hold (a counterexample) decides **did not hold**,
  whatever other runs held; the interval of the share of runs in which it happens is shown.
  Without one, ``MIN_CLEAN`` decided clean runs decide **held**, and the interval bounds how
  often it could happen unseen (after 3 clean runs, in up to 56 % of runs; after 10, 28 %).
  Fewer: **undecided**.
- happens: one decided run that held (an occurrence) decides **held**. None in n decided
  runs decides nothing: **undecided**, with the interval bounding how often it happens
  (after 10 runs without it, in at most 28 % of runs); it never decides "did not hold".
- race or rate: by the interval of the share of runs in which it held: **held** when it held
  in at least ``SHARE`` (95 %) of the decided runs and the interval's lower bound lies above
  ``BOUND`` (50 %: it holds in most runs, at 95 % confidence; 4 agreeing runs are the
  fewest); **did not hold** when it held in at most 1 - ``SHARE`` (5 %) and the upper bound
  lies below 1 - ``BOUND``; otherwise **mixed** when the runs disagree, **undecided** when
  they agree but are too few.

A row whose runs disagree and that the rule leaves open is mixed; a never-row with a
counterexample among clean runs is decided (did not hold) and says its runs disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Iterable

from harness.expect import COMPARISON, is_window
from harness.measures import wilson
from harness.verdicts import Word

MIN_CLEAN = 3     # decided clean runs that decide a never-claim held
SHARE = 0.95      # a race or rate holds (fails) in at least this share of the decided runs ...
BOUND = 0.5       # ... and the interval's lower (upper) bound lies above (below) this share (1 - it)


class Kind(StrEnum):
    """The kind of a prediction (see the module's doc)."""
    NEVER = "never"
    HAPPENS = "happens"
    RATE = "race or rate"
    NONE = "no prediction"


class State(StrEnum):
    """A row's decision, in the verdict words of ``harness.verdicts.Word`` where they are one."""
    HELD = Word.HELD
    DID_NOT_HOLD = Word.DID_NOT_HOLD
    MIXED = "mixed"
    UNDECIDED = Word.UNDECIDED
    NO_PREDICTION = Word.MEASURED_ONLY


VERDICT = {State.HELD: True, State.DID_NOT_HOLD: False}


@dataclass(frozen=True)
class Decision:
    """A row's decision: its state, the verdict it decides (True, False, or None when it
    decides none), the kind of its prediction, held in ``k`` of ``n`` decided runs, the 95 %
    Wilson interval of k / n (None without a decided run) and why, in words."""
    state: State
    verdict: bool | None
    kind: Kind
    k: int
    n: int
    ci95: tuple[float, float] | None
    why: str

    @property
    def decided(self) -> bool:
        return self.state in VERDICT

    def text(self) -> str:
        """``held 3 of 3 decided runs (95 % CI 44-100 %)``, or ``no decided run``."""
        if not self.n:
            return "no decided run"
        lo, hi = self.ci95
        return f"held {self.k} of {self.n} decided runs (95 % CI {pct(lo)}–{pct(hi)} %)"

    def as_dict(self) -> dict:
        return {"state": str(self.state), "verdict": self.verdict, "kind": str(self.kind), "k": self.k,
                "n": self.n, "ci95": None if self.ci95 is None else [round(x, 4) for x in self.ci95],
                "text": self.text(), "why": self.why}


def pct(x: float) -> str:
    return f"{x * 100:.0f}"


def predictions(expect: dict | None) -> dict[str, Any]:
    """``expect`` flattened as ``harness.expect`` reads it: a nested mapping names nested
    figures (``throughput_ratio: {all_vs_none: "<0.35"}``), a time window is one prediction."""
    out: dict[str, Any] = {}

    def walk(key: str, v: Any) -> None:
        if isinstance(v, dict) and v and not is_window(v):
            for k, x in v.items():
                walk(f"{key}.{k}", x)
        else:
            out[key] = v
    for k, v in (expect or {}).items():
        walk(str(k), v)
    return out


def kind_of(expected: Any) -> Kind:
    """The kind of one prediction (see the module's doc)."""
    if isinstance(expected, (bool, list, dict)):
        return Kind.RATE
    if isinstance(expected, (int, float)):
        op, x = "==", float(expected)
    else:
        m = COMPARISON.match(str(expected))
        if not m:  # a figure against another figure
            return Kind.RATE
        op, x = m.group(1) or "==", float(m.group(2))
    if x == 0 and op in ("==", "<="):
        return Kind.NEVER
    if x == 0 and op in (">", "!="):
        return Kind.HAPPENS
    return Kind.RATE


def row_kind(expect: dict | None) -> Kind:
    """The kind every prediction of ``expect`` shares; different kinds: a race or rate."""
    kinds = {kind_of(v) for v in predictions(expect).values()}
    if not kinds:
        return Kind.NONE
    return kinds.pop() if len(kinds) == 1 else Kind.RATE


def decision(expect: dict | None, require: dict | None, verdicts: Iterable[bool | None], *,
             min_clean: int = MIN_CLEAN, share: float = SHARE, bound: float = BOUND) -> Decision:
    """The row's decision from the verdicts of its decided runs (anything but True / False is
    left out: it decided nothing), by the rule of the module's doc."""
    decided = [v for v in verdicts if v is True or v is False]
    k, n = sum(decided), len(decided)
    kind = row_kind(expect)
    ci = wilson(k, n)
    setup = f"; counted only where its set-up (require: {_keys(require)}) happened" if require else ""
    if kind == Kind.NONE:
        return Decision(State.NO_PREDICTION, None, kind, k, n, ci, "the scenario states no prediction")
    if kind == Kind.NEVER:
        state, why = _never(k, n, min_clean)
    elif kind == Kind.HAPPENS:
        state, why = _happens(k, n)
    else:
        state, why = _rate(k, n, share, bound)
    return Decision(state, VERDICT.get(state), kind, k, n, ci, why + setup)


def _keys(d: dict) -> str:
    return ", ".join(predictions(d))


def _share(k: int, n: int) -> str:
    lo, hi = wilson(k, n)
    return f"{pct(lo)}–{pct(hi)} %"


def _at_most(n: int) -> str:
    """The interval's upper bound after ``n`` runs without it: how often it could happen unseen."""
    return f"{pct(wilson(0, n)[1])} %"


def _never(k: int, n: int, min_clean: int) -> tuple[State, str]:
    bad = n - k
    if bad:
        why = (f"a claim that it never happens: {bad} counterexample{'s' if bad > 1 else ''} in {n} decided "
               f"run{'s' if n > 1 else ''}: it did not hold; it happens in {_share(bad, n)} of runs")
        return State.DID_NOT_HOLD, why + (f" (the runs disagree: {k} held)" if k else "")
    bound = f"it could happen unseen in up to {_at_most(n)} of runs" if n else "no decided run yet"
    if n >= min_clean:
        return State.HELD, f"a claim that it never happens: {n} clean decided runs (at least {min_clean}); {bound}"
    return State.UNDECIDED, f"a claim that it never happens: {n} clean decided run(s), fewer than {min_clean}; {bound}"


def _happens(k: int, n: int) -> tuple[State, str]:
    if k:
        return State.HELD, (f"a claim that it happens: it happened in {k} of {n} decided runs "
                            f"({_share(k, n)} of runs); one occurrence decides")
    if not n:
        return State.UNDECIDED, "a claim that it happens: no decided run yet"
    return State.UNDECIDED, (f"a claim that it happens: not seen in {n} decided runs, which decides nothing: "
                             f"it happens in at most {_at_most(n)} of runs")


def _rate(k: int, n: int, share: float, bound: float) -> tuple[State, str]:
    if not n:
        return State.UNDECIDED, "a race or rate: no decided run yet"
    lo, hi = wilson(k, n)
    rule = (f"held in {k} of {n} ({pct(k / n)} %), interval {pct(lo)}–{pct(hi)} %; decided when held in "
            f">= {pct(share)} % with the interval above {pct(bound)} %, or in <= {pct(1 - share)} % with it "
            f"below {pct(1 - bound)} %")
    if k / n >= share and lo > bound:
        return State.HELD, "a race or rate: " + rule
    if k / n <= 1 - share and hi < 1 - bound:
        return State.DID_NOT_HOLD, "a race or rate: " + rule
    if 0 < k < n:
        return State.MIXED, "a race or rate whose runs disagree: " + rule
    return State.UNDECIDED, "a race or rate, too few runs: " + rule


def of_tally(t: dict | list[dict], expect: dict | None, require: dict | None = None, **rule) -> Decision:
    """The decision of a line of ``harness.rows.tally`` (``held`` of ``decided``), or of
    several lines of one row (one per version its nodes reported: their decided runs pool),
    for the row's prediction (``expect``, ``require``: the file's present ones). A superseded
    line (an older digest) counts nothing."""
    lines = [x for x in ([t] if isinstance(t, dict) else t) if not x.get("superseded")]
    k, n = sum(x["held"] for x in lines), sum(x["decided"] for x in lines)
    return decision(expect, require, [True] * k + [False] * (n - k), **rule)
