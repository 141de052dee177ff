"""The prediction language: a scenario's ``expect:`` judged against what a run measured.

``expect:`` maps a measured quantity to a prediction: a number (equality), a comparison
string (">0", "<=5", "==0"), true/false, or a list / mapping compared whole. Nested
mappings name nested quantities (``throughput_ratio: {all_vs_none: "<0.35"}`` is
``throughput_ratio.all_vs_none``) unless the quantity itself is a mapping.

A time window (``lost_window``: when the lost messages were confirmed; ``unavailable_window``:
from the first unavailable interval's start to the last one's end) is judged against the
faults' own times: ``lost_window: {ends_after: f1.end, ends_before: f2.start}`` (R2: the loss
ends between the restarted mirror's return and the master's kill). ``fN`` is the N-th fault
the schedule applies (a ``start``/``unpause`` step ends one, it does not count), ``.start``
when it was applied, ``.end`` when it was lifted; a number is seconds on the run's clock.
"""
from __future__ import annotations

import operator
import re
from typing import Any

from harness.results import JUDGED_KEYS
from harness.verdicts import UNDRAINED_LOSS, merge, undecided
from harness.windows import NAMED

# What the checker measures for every run: check.json's judged keys (harness.results), and
# what ``measured`` reads off them and the run's drain record. A row shows the predicted
# quantities beyond these (harness.rows.run_row).
CHECKER_KEYS = set(JUDGED_KEYS) | {"unavailable_intervals", "unavailable_window", "lost_nodes", "drain_complete"}
# Figures derived from the checker's: the share of confirmed messages lost (R4: the whole queue);
# whether every lost write was taken by the nodes of one side of the first cut (R8).
DERIVED_KEYS = {"lost_share", "lost_on_one_side", "unknown_lost", "unavailable_longest_producer_s",
                "whole_run.unavailable_longest_producer_s"}
# What the run loop measures for every broker (run.json measurements).
RUN_KEYS = {"blocked_s", "self_healed", "nodes_down_s", "nodes_down_count", "redelivered_deliveries", "consumer_crashes",
            "consumer_cancels",
            "consumers_silent", "at_risk", "at_risk_at_fault", "unsynced_bytes_dropped", "power_loss_writes_seen",
            "read_after_heal"}
# The checker's figures taken again over the effect window (the bare name) when the run has
# one; ``whole_run.NAME`` keeps the checker's whole-run figure.
WINDOWED_CHECKER_KEYS = ("unavailable_s", "unavailable_intervals", "unavailable_window")
# Decided by the run itself whatever its history says: a node that never came back is
# evidence enough, even when the drain (and so every count) is undecided.
OWN_EVIDENCE = {"self_healed"}
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
       ">": operator.gt, "<": operator.lt}
COMPARISON = re.compile(r"^\s*(>=|<=|==|!=|>|<)?\s*(-?[0-9.]+(?:e-?[0-9]+)?)\s*$")
# A figure against another of the same run (seed 004: the quorum queue keeps more of its
# publish rate under a backlog than the mirrored one): "> throughput_ratio.mirrored_vs_idle".
FIGURE_REF = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*$")
WINDOW = {"starts_after": (0, operator.ge), "starts_before": (0, operator.le),
          "ends_after": (1, operator.ge), "ends_before": (1, operator.le)}
FAULT_TIME = re.compile(r"^f([1-9][0-9]*)\.(start|end)$")


def decidable(sc) -> set[str]:
    """The quantities a run of ``sc`` measures: what its ``expect:`` may name. The plug-in's
    figures are the effect window's (harness.windows); ``after_heal.NAME`` and
    ``whole_run.NAME`` name the same figure over another window."""
    own = sc.measurement_names()
    return (CHECKER_KEYS | DERIVED_KEYS | RUN_KEYS | own | sc.prefill_names()
            | {f"{w}.{k}" for w in NAMED for k in own} | {f"whole_run.{k}" for k in WINDOWED_CHECKER_KEYS})


def flatten(d: dict, prefix: str = "") -> dict:
    """{"throughput_ratio": {"all_vs_none": 0.2}} -> {"throughput_ratio.all_vs_none": 0.2}.
    A mapping that is itself a value (masters per node) stays reachable under its own key."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out[key] = v
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
    return out


def expectations(sc, field: str = "expect") -> dict:
    """The scenario's predictions (or, with ``field="require"``, its requirements) with nested
    mappings flattened at any depth (``a: {b: {c: x}}`` is ``a.b.c: x``), except where the quantity itself is a
    mapping (``masters_after: {rabbit1: 3, ...}``)."""
    keys = decidable(sc)
    out = {}

    def walk(k: str, v: Any) -> None:
        if isinstance(v, dict) and k not in keys:
            for kk, vv in v.items():
                walk(f"{k}.{kk}", vv)
        else:
            out[k] = v
    for k, v in getattr(sc, field).items():
        walk(k, v)
    return out


def undecidable(sc) -> list[str]:
    """The predictions and requirements no run of ``sc`` measures (refused at load time), as
    ``expect.KEY`` / ``require.KEY``."""
    keys = decidable(sc)
    return ([f"{field}.{k}" for field in ("expect", "require") for k in expectations(sc, field) if k not in keys]
            + [f"measure.{k}" for k in getattr(sc, "measure", []) if k not in keys]
            + [f"{field}.{k}: {v}" for field in ("expect", "require") for k, v in expectations(sc, field).items()
               if isinstance(v, str) and FIGURE_REF.match(v) and FIGURE_REF.match(v).group(2) not in keys])


def measured(result: dict, info: dict) -> dict:
    """Every quantity an ``expect:`` entry may name, from check.json and run.json."""
    m = {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    m["valid"] = result.get("valid")
    if isinstance(result.get("ok"), int) and isinstance(result.get("lost"), int) and result["ok"]:
        m["lost_share"] = round(result["lost"] / result["ok"], 4)
    # writes with no known outcome (no confirm asked, or it never came) that were never read
    # (seed 000: publishing without confirms): recovered counts info and fail writes read
    if all(isinstance(result.get(k), int) for k in ("info", "recovered", "recovered_fail")):
        m["unknown_lost"] = result["info"] - (result["recovered"] - result["recovered_fail"])
    m["drain_complete"] = (info.get("drain") or {}).get("complete")
    m["lost_window"] = result.get("lost_window")
    unav = result.get("unavailable") or []
    effect = ((info.get("measurements") or {}).get("windows") or {}).get("effect")
    for prefix, intervals in (("whole_run.", unav), ("", clip(unav, effect) if effect else unav)):
        m[f"{prefix}unavailable_s"] = round(sum(z - a for a, z in intervals), 3)
        m[f"{prefix}unavailable_intervals"] = len(intervals)
        m[f"{prefix}unavailable_window"] = [intervals[0][0], intervals[-1][1]] if intervals else None
    # each publisher's longest outage (seed 000's "constant availability" is each client's:
    # the pooled figure counts a second only when every producer failed)
    by_producer = result.get("unavailable_by_producer") or {}
    for prefix, span in (("whole_run.", None), ("", effect)):
        gaps = [y - x for iv in by_producer.values() for x, y in (clip(iv, span) if span else iv)]
        m[f"{prefix}unavailable_longest_producer_s"] = round(max(gaps, default=0.0), 3)
    for key in ("lost_by_node", "lost_by_producer"):
        if isinstance(result.get(key), dict):
            m.update(flatten({key: result[key]}))
            if key == "lost_by_node":
                m["lost_nodes"] = sorted(n for n, k in result[key].items() if k)
    sides = (info.get("measurements") or {}).get("partition_sides")
    if sides and m.get("lost_nodes"):  # the source's "the losing side's writes are lost" (R8)
        m["lost_on_one_side"] = any(set(m["lost_nodes"]) <= set(s) for s in sides)
    m.update(flatten(info.get("measurements") or {}))
    # what a plug-in measured in its own drain (Kafka's read_then_gone)
    m.update(flatten((info.get("drain") or {}).get("figures") or {}))
    if info.get("prefill"):
        m.update(flatten({"prefill": info["prefill"]}))
    return m


def clip(intervals: list, span: list) -> list[list[float]]:
    """The client-side unavailable intervals inside the effect window (harness.windows): the
    clients' unavailability during the harness's own restart is not the fault's."""
    a, b = span
    return [[max(x, a), min(y, b)] for x, y in sorted(intervals) if y > a and x < b]


def judge(expected: Any, actual: Any) -> bool | None:
    if actual is None:
        return None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual == expected
    if isinstance(expected, (list, dict)):
        norm = (lambda x: sorted(x)) if isinstance(expected, list) else (lambda x: x)
        return isinstance(actual, type(expected)) and norm(actual) == norm(expected)
    if isinstance(expected, (int, float)):
        return actual == expected
    m = COMPARISON.match(str(expected))
    if not m:
        return None
    return OPS[m.group(1) or "=="](actual, float(m.group(2)))


def is_window(expected: Any) -> bool:
    return isinstance(expected, dict) and bool(expected) and set(expected) <= set(WINDOW)


def window_problems(expected: dict, faults: int) -> list[str]:
    """What is wrong with a window prediction, given how many faults the schedule applies."""
    out = []
    for k, ref in expected.items():
        if isinstance(ref, (int, float)) and not isinstance(ref, bool):
            continue
        m = FAULT_TIME.match(str(ref))
        if not m:
            out.append(f"{k}: {ref!r} is neither seconds nor fN.start / fN.end")
        elif int(m.group(1)) > faults:
            out.append(f"{k}: {ref} names fault {m.group(1)}, but the schedule applies {faults}")
    return out


def judge_window(expected: dict, actual: Any, m: dict) -> bool | None:
    """Each bound of the window against a fault's time (or a number); None when the window
    or a fault's time is unknown (no loss has no loss window: the run decides nothing on it)."""
    if not (isinstance(actual, (list, tuple)) and len(actual) == 2):
        return None
    out: list[bool | None] = []
    for k, ref in expected.items():
        side, op = WINDOW[k]
        f = FAULT_TIME.match(str(ref))
        t = m.get(f"faults_at.f{f.group(1)}.{f.group(2)}") if f else ref
        out.append(op(actual[side], t) if isinstance(t, (int, float)) and actual[side] is not None else None)
    return merge(out)


def checkable(expected: Any) -> bool:
    """A prediction ``judge`` can decide (not free text)."""
    return (isinstance(expected, (bool, int, float, list, dict)) or bool(COMPARISON.match(str(expected)))
            or bool(FIGURE_REF.match(str(expected))))


def referenced(expected: Any) -> str | None:
    """The other figure a prediction compares with (``"> NAME"``), if it names one."""
    ref = FIGURE_REF.match(expected) if isinstance(expected, str) else None
    return ref.group(2) if ref else None


def _failed(checks: list[dict]) -> str:
    return ", ".join(f"{c['key']}={c['actual']} (predicted {c['expected']})" for c in checks if c["held"] is False)


def _check(key: str, exp: Any, m: dict) -> dict:
    other = referenced(exp)
    if other is not None:  # the run's own other figure, shown beside the verdict as evidence
        mine, theirs = m.get(key), m.get(other)
        held = (None if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (mine, theirs))
                else OPS[FIGURE_REF.match(exp).group(1)](mine, theirs))
        return {"key": key, "expected": exp, "actual": mine, "than": theirs, "held": held}
    return {"key": key, "expected": exp, "actual": m.get(key),
            "held": None if key not in m else judge_window(exp, m[key], m) if is_window(exp) else judge(exp, m[key])}


def _checks(wanted: dict, m: dict) -> list[dict]:
    return [_check(key, exp, m) for key, exp in wanted.items()]


def verdict(sc, result: dict, info: dict) -> dict:
    """{"held": True/False/None, "reason": ..., "checks": [...], "requirements": [...]} for
    one checked run."""
    m = measured(result, info)
    checks = _checks(expectations(sc), m)
    required = _checks(expectations(sc, "require"), m)
    out = _verdict(checks, result, info)
    unmet = [c for c in required if c["held"] is not True] + _nothing_at_risk(checks, m)
    if checks and unmet:  # the run is about something else: whatever it measured decides nothing
        out["held"] = None
        out["reason"] = ("could not decide: the set-up the claim needs did not happen: "
                         + ", ".join(f"{c['key']}={c['actual']} (required {c['expected']})" for c in unmet))
    if required:
        out["requirements"] = required
    return out


def _nothing_at_risk(checks: list[dict], m: dict) -> list[dict]:
    """A ``lost: 0`` prediction needs something the faults could have lost: nothing in the
    broker's hands when a fault struck proves nothing (harness.windows ``at_risk_at_fault``;
    a run from before issue 52 has only the looser ``at_risk``, which any run still publishing
    passes). An unmeasured at-risk count (a run before issue 34) leaves the rule out."""
    zero = [c for c in checks if c["key"] == "lost" and judge(c["expected"], 0) is True and judge(c["expected"], 1) is False]
    key = "at_risk_at_fault" if "at_risk_at_fault" in m else "at_risk"
    if not zero or not isinstance(m.get(key), int) or m[key] > 0:
        return []
    return [{"key": key, "expected": ">0", "actual": m[key], "held": False}]


def _verdict(checks: list[dict], result: dict, info: dict) -> dict:
    held = merge(c["held"] for c in checks) if checks else None
    if not checks:
        reason = "the scenario states no prediction"
    elif held is False:
        reason = "prediction did not hold: " + _failed(checks)
    elif held is None:
        reason = "could not decide: " + ", ".join(c["key"] for c in checks if c["held"] is None)
    else:
        reason = "prediction held"
    if held is not None and UNDRAINED_LOSS in undecided(info, [], lost=result.get("lost")):
        held, reason = None, "could not decide: " + UNDRAINED_LOSS
    own = [c for c in checks if c["key"] in OWN_EVIDENCE and c["held"] is False]
    if checks and result.get("undecided") and own:
        held, reason = False, ("prediction did not hold: " + _failed(own)
                               + "; the rest could not be decided: " + "; ".join(result["undecided"]))
    elif checks and result.get("undecided"):  # the run itself decides nothing (harness.verdicts)
        held, reason = None, "could not decide: " + "; ".join(result["undecided"])
    elif checks and "valid" in result and result["valid"] is None:  # a broken or empty history
        held, reason = None, f"could not decide: the checker could not ({result.get('reason')})"
    return {"held": held, "reason": reason, "checks": checks}
