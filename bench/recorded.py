"""What the recorded benchmarks share (bench/log_bench.py, bench/cycle_bench.py): measure and
record in docs/batches/, or write a document's table from a committed record."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
DOC_BATCHES = REPO / "docs" / "batches"


def main(prog: str, stem: str, measure: Callable[[list[int], int], dict], table: Callable[[dict], list[str]],
         argv: list[str] | None = None) -> int:
    """``--sizes`` measured and recorded as docs/batches/<stem>-<ts>.json (exit 1 unless
    every planted figure was found exactly), or ``--record``'s table written ``--into`` a
    document between its ``--name`` markers."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--plant", type=int, default=50)
    ap.add_argument("--record", type=Path, help="write the table from this committed record instead of measuring")
    ap.add_argument("--into", type=Path)
    ap.add_argument("--name")
    args = ap.parse_args(argv)
    if args.record is None:
        record = measure([int(float(s)) for s in args.sizes.split(",")], args.plant)
        at = record["at"].replace(":", "-").replace("+00-00", "Z")
        args.record = DOC_BATCHES / f"{stem}-{at}.json"
        args.record.write_text(json.dumps(record, indent=1) + "\n")
        print(f"record: {args.record}")
        ok = all(r["exact"] for r in record["rows"])
    else:
        record, ok = json.loads(args.record.read_text()), True
    if args.into:
        from harness.rows import splice

        source = args.record.resolve().relative_to(REPO) if args.record.is_absolute() else args.record
        by = f"python -m {prog.removeprefix('python -m ')} --record {source}"
        args.into.write_text(splice(args.into.read_text(), args.name, table(record), str(source), by=by))
    return 0 if ok else 1


def timed_check(run: Path, spark, mode: str = "all") -> tuple[float, dict]:
    """One check of ``run`` in a warm session, timed: ``mode`` all, nocycles (no cycle
    search: checkers.cycles), identity (no log, transaction or cycle query either)."""
    import time

    from checkers import check as C
    from checkers.history import open_runs

    saved_present, saved_queries = C.present, C.Y.queries
    if mode == "identity":
        C.present = lambda produce, consume: (False, False)
    if mode == "nocycles":
        C.Y.queries = lambda produce, consume: []
    try:
        runs, _ = open_runs([str(run)])
        t0 = time.monotonic()
        res = C.check_runs(spark, runs)[runs[0].dir]
        return round(time.monotonic() - t0, 1), res
    finally:
        C.present, C.Y.queries = saved_present, saved_queries
