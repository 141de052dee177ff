"""The prediction language: a scenario's ``expect:`` judged against what a run measured.

``expect:`` maps a measured quantity to a prediction: a number (equality), a comparison
string (">0", "<=5", "==0"), true/false, or a list / mapping compared whole. Nested
mappings name nested quantities (``throughput_ratio: {all_vs_none: "<0.35"}`` is
``throughput_ratio.all_vs_none``) unless the quantity itself is a mapping.
"""
from __future__ import annotations

import operator
import re
from typing import Any

from harness.verdicts import merge

# What the checker measures for every run (check.json), and what the run records itself.
CHECKER_KEYS = {"attempted", "ok", "fail", "info", "produce_records", "delivered", "deliveries", "lost",
                "duplicated", "duplicate_deliveries", "unexpected", "recovered", "recovered_fail",
                "id_conflicts", "ordering_violations", "malformed_lines", "unavailable_s", "valid",
                "unavailable_intervals", "drain_complete", "unavailable_s_producer_max", "read_gap_max_s"}
# Figures derived from the checker's: the share of confirmed messages lost (R4: the whole queue).
DERIVED_KEYS = {"lost_share"}
# What the run loop measures for every broker (run.json measurements).
RUN_KEYS = {"blocked_s", "self_healed", "nodes_down_s", "redelivered_deliveries", "consumer_crashes",
            "consumers_silent"}
# Decided by the run itself whatever its history says: a node that never came back is
# evidence enough, even when the drain (and so every count) is undecided.
OWN_EVIDENCE = {"self_healed"}
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
       ">": operator.gt, "<": operator.lt}
COMPARISON = re.compile(r"^\s*(>=|<=|==|!=|>|<)?\s*(-?[0-9.]+(?:e-?[0-9]+)?)\s*$")


def decidable(sc) -> set[str]:
    """The quantities a run of ``sc`` measures: what its ``expect:`` may name."""
    return CHECKER_KEYS | DERIVED_KEYS | RUN_KEYS | sc.measurement_names() | sc.prefill_names()


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
    mappings flattened (``a: {b: x}`` is ``a.b: x``), except where the quantity itself is a
    mapping (``masters_after: {rabbit1: 3, ...}``)."""
    keys = decidable(sc)
    out = {}
    for k, v in getattr(sc, field).items():
        if isinstance(v, dict) and k not in keys:
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def undecidable(sc) -> list[str]:
    """The predictions and requirements no run of ``sc`` measures (refused at load time), as
    ``expect.KEY`` / ``require.KEY``."""
    keys = decidable(sc)
    return [f"{field}.{k}" for field in ("expect", "require") for k in expectations(sc, field) if k not in keys]


def measured(result: dict, info: dict) -> dict:
    """Every quantity an ``expect:`` entry may name, from check.json and run.json."""
    m = {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    m["valid"] = result.get("valid")
    m["unavailable_intervals"] = len(result.get("unavailable") or [])
    if isinstance(result.get("ok"), int) and isinstance(result.get("lost"), int) and result["ok"]:
        m["lost_share"] = round(result["lost"] / result["ok"], 4)
    m["drain_complete"] = (info.get("drain") or {}).get("complete")
    m.update(flatten(info.get("measurements") or {}))
    if info.get("prefill"):
        m.update(flatten({"prefill": info["prefill"]}))
    return m


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


def checkable(expected: Any) -> bool:
    """A prediction ``judge`` can decide (not free text)."""
    return isinstance(expected, (bool, int, float, list, dict)) or bool(COMPARISON.match(str(expected)))


def _failed(checks: list[dict]) -> str:
    return ", ".join(f"{c['key']}={c['actual']} (predicted {c['expected']})" for c in checks if c["held"] is False)


def _checks(wanted: dict, m: dict) -> list[dict]:
    return [{"key": key, "expected": exp, "actual": m.get(key), "held": judge(exp, m.get(key)) if key in m else None}
            for key, exp in wanted.items()]


def verdict(sc, result: dict, info: dict) -> dict:
    """{"held": True/False/None, "reason": ..., "checks": [...], "requirements": [...]} for
    one checked run."""
    m = measured(result, info)
    checks = _checks(expectations(sc), m)
    required = _checks(expectations(sc, "require"), m)
    out = _verdict(checks, result, info)
    unmet = [c for c in required if c["held"] is not True]
    if checks and unmet:  # the run is about something else: whatever it measured decides nothing
        out["held"] = None
        out["reason"] = ("could not decide: the set-up the claim needs did not happen: "
                         + ", ".join(f"{c['key']}={c['actual']} (required {c['expected']})" for c in unmet))
    if required:
        out["requirements"] = required
    return out


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
    if held is not None and result.get("lost") and not (info.get("drain") or {}).get("complete"):
        held, reason = None, "could not decide: the drain did not finish, 'lost' may still be queued"
    own = [c for c in checks if c["key"] in OWN_EVIDENCE and c["held"] is False]
    if checks and result.get("undecided") and own:
        held, reason = False, ("prediction did not hold: " + _failed(own)
                               + "; the rest could not be decided: " + "; ".join(result["undecided"]))
    elif checks and result.get("undecided"):  # the run itself decides nothing (harness.verdicts)
        held, reason = None, "could not decide: " + "; ".join(result["undecided"])
    elif checks and "valid" in result and result["valid"] is None:  # a broken or empty history
        held, reason = None, f"could not decide: the checker could not ({result.get('reason')})"
    return {"held": held, "reason": reason, "checks": checks}
