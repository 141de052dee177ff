"""The performance guard (issue 42): a bench's newest figure against its committed baseline.

    python -m bench.guard checker          # the newest bench/results/checker-*.json
    python -m bench.guard analyze FILE     # a given result

bench/baseline/baseline.json names, per bench, the result files that form its baseline
(repeated runs of one code, same sizes; copies committed beside it, bench/results/ being
git-ignored), the figure compared (a dotted path into a
result) and the sizes that must match. The noise band comes from those runs themselves:
three times their relative range (max - min over the median), at least 5 %; a figure above
median x (1 + band) is a regression, reported loudly (a banner on stderr) and exit 1. A
result whose sizes differ from the baseline's is not compared (exit 2: nothing decided).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import median
from typing import Any, Iterator

from harness.util import entry_point

RESULTS = Path(__file__).resolve().parent / "results"
BASELINE = Path(__file__).resolve().parent / "baseline" / "baseline.json"
MIN_BAND = 0.05
# the share of the CPU other work took just before the bench began (bench.checker_bench's
# env.busy_before) above which a slow figure is not concluded to be a regression (2026-11-26:
# clean runs taken while other work ran measured 48.6 and 58.2 s against a 39.4 s baseline)
BUSY_SHARE = 0.25


def entries(result: Any, match: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The result's entries whose fields equal ``match``; a result file holds one entry or a
    list of them (one per size)."""
    for entry in result if isinstance(result, list) else [result]:
        if isinstance(entry, dict) and all(entry.get(k) == v for k, v in match.items()):
            yield entry


def figure(result: Any, path: str, match: dict[str, Any]) -> float | None:
    """The figure at ``path`` (dots) of the result entry whose fields equal ``match``."""
    for entry in entries(result, match):
        value: Any = entry
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def band(values: list[float]) -> float:
    """The relative noise band the repeated runs allow."""
    mid = median(values)
    return max(3 * (max(values) - min(values)) / mid, MIN_BAND) if mid > 0 else MIN_BAND


def judge(current: float | None, values: list[float]) -> dict[str, Any]:
    """{"regressed": True/False/None, "baseline_s", "band", "limit_s", "current_s", "ratio"}."""
    if current is None or not values:
        return {"regressed": None, "current_s": current, "baseline_s": median(values) if values else None}
    mid, b = median(values), band(values)
    limit = mid * (1 + b)
    return {"regressed": current > limit, "current_s": round(current, 3), "baseline_s": round(mid, 3),
            "band": round(b, 4), "limit_s": round(limit, 3), "ratio": round(current / mid, 3)}


def baseline_values(spec: dict[str, Any], where: Path = BASELINE.parent) -> list[float]:
    out = []
    for name in spec["runs"]:
        v = figure(json.loads((where / name).read_text()), spec["figure"], spec.get("match", {}))
        if v is not None:
            out.append(v)
    return out


def busy(result: Any, match: dict[str, Any]) -> float | None:
    """The CPU share other work took as the matching entry's bench began, if above BUSY_SHARE
    (None: idle, or not recorded)."""
    for entry in entries(result, match):
        share = (entry.get("env") or {}).get("busy_before")
        if isinstance(share, (int, float)) and share > BUSY_SHARE:
            return float(share)
    return None


ENV_KEYS = ("pyspark", "java", "cpus")  # what must be equal for two figures to be compared


def environment(result: Any, match: dict[str, Any]) -> dict[str, Any] | None:
    """The matching entry's recorded versions and CPUs (None: not recorded)."""
    for entry in entries(result, match):
        if entry.get("env"):
            return {k: entry["env"].get(k) for k in ENV_KEYS}
    return None


def check(bench: str, result_file: Path, baseline_file: Path = BASELINE) -> dict[str, Any]:
    spec = json.loads(baseline_file.read_text())[bench]
    values = baseline_values(spec, baseline_file.parent)
    result = json.loads(result_file.read_text())
    current = figure(result, spec["figure"], spec.get("match", {}))
    out = {"bench": bench, "result": result_file.name, "figure": spec["figure"], **judge(current, values)}
    # a baseline taken with other versions (or whose versions were never recorded) says nothing
    # of this result: 2026-11-26, a fresh venv (pyspark 4.3.0) ran the unchanged checker at
    # 48.6-51.2 s against a baseline of 39.4 s recorded without its versions
    here, there = environment(result, spec.get("match", {})), spec.get("env")
    if here is not None and here != there:
        out.update({"regressed": None, "env": here, "baseline_env": there})
        return out
    load = busy(result, spec.get("match", {}))
    if load is not None and out["regressed"]:
        out.update({"regressed": None, "busy_share": load})
    return out


def banner(out: dict[str, Any]) -> str:
    if "baseline_env" in out:
        return (f"bench {out['bench']}: {out['result']} not compared: its environment {out['env']} is not the "
                f"baseline's ({out['baseline_env'] or 'never recorded'}); take a baseline here (repeated runs on an "
                f"idle machine, named in bench/baseline/baseline.json with their env)")
    if out.get("busy_share") is not None:
        return (f"bench {out['bench']}: {out['result']} not concluded: {out['figure']} {out['current_s']} s is above "
                f"the band (up to {out['limit_s']} s), but the machine was busy as the bench began (other work "
                f"took {out['busy_share']:.0%} of the CPU, above {BUSY_SHARE:.0%}): run it again on an idle machine")
    if out["regressed"] is None:
        return (f"bench {out['bench']}: {out['result']} not compared ({out['figure']} missing, or sizes other "
                f"than the baseline's)")
    line = (f"{out['figure']} {out['current_s']} s against the baseline's median {out['baseline_s']} s "
            f"(x{out['ratio']}; the noise band allows up to {out['limit_s']} s, +{out['band']:.0%})")
    if not out["regressed"]:
        return f"bench {out['bench']}: within the noise band: {line}"
    bar = "!" * 78
    return f"{bar}\nPERFORMANCE REGRESSION in bench {out['bench']} ({out['result']}):\n{line}\n{bar}"


def newest(bench: str, results: Path = RESULTS) -> Path:
    files = sorted(results.glob(f"{bench}-*.json"))
    if not files:
        raise SystemExit(f"no bench/results/{bench}-*.json to compare")
    return files[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", help="a name in bench/baseline/baseline.json (checker, analyze)")
    ap.add_argument("result", nargs="?", type=Path, help="the result file (default: the newest)")
    args = ap.parse_args(argv)
    out = check(args.bench, args.result or newest(args.bench), BASELINE)
    print(banner(out), file=sys.stderr if out["regressed"] else sys.stdout)
    return {True: 1, False: 0, None: 2}[out["regressed"]]


if __name__ == "__main__":
    with entry_point():
        sys.exit(main())
