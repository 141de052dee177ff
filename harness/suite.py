"""Run several scenarios in a row and print one summary table."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import click

from harness.runner import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, RESULTS, run_scenario
from harness.scenario import ScenarioError, load

COLUMNS = ("scenario", "attempted", "confirmed", "lost", "duplicated", "unavailable_s", "valid",
           "prediction", "report")


def table(rows: list[dict]) -> str:
    cells = [COLUMNS] + [tuple(str(r.get(c, "-")) for c in COLUMNS) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells)


def run_suite(files: list[str], keep_cluster: bool = False) -> int:
    rows, codes = [], []
    for f in files:
        try:
            sc = load(f)
        except ScenarioError as e:
            click.echo(str(e), err=True)
            rows.append({"scenario": f, "valid": "invalid scenario file"})
            codes.append(EXIT_UNKNOWN)
            continue
        code, r = run_scenario(sc, keep_cluster=keep_cluster)
        codes.append(code)
        row = r.info.get("summary") or {"scenario": sc.name, "valid": r.info.get("status"),
                                        "report": str(r.dir)}
        row["exit"] = code
        rows.append(row)
    out = table(rows)
    click.echo("\n" + out)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    d = RESULTS / "suites" / stamp
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps(rows, indent=1, default=str))
    (d / "summary.txt").write_text(out + "\n")
    click.echo(f"summary: {d}")
    if EXIT_UNKNOWN in codes:
        return EXIT_UNKNOWN
    return EXIT_INVALID if EXIT_INVALID in codes else EXIT_VALID
