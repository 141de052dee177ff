"""The main job's wall time, split by phase (issue 20).

    make bench-main                      runs the main job's scenarios as one batch
    python -m bench.main_bench --batch results/suites/latest     splits a batch that ran
    python -m bench.main_bench --check-only                      the 100k-message check only

For each run: cluster up, waiting for the previous run (its end and its check), setup,
load (warm-up + faults), heal, recovery load, drain, teardown (logs, measurements), cluster
down; its check (Spark) and judging, which overlap the next run's start; the gap between
the previous run's workload and its own (what the pipeline did not hide; for the first
run, from the batch's start). Then the batch: wall time, the workloads' own seconds
(warm-up to producers stopped, heal included), and the rest. With ``--check-100k`` (default on when
running), one run's check of a 100,000-message history inside a warm batch session.
Writes bench/results/main-<timestamp>.json and prints the tables.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from harness import store
from harness.rows import (DOC_BATCHES, SPLIT_JSON, compact_json, md_cell, md_table, published_dir, repo_path,
                          run_name, splice)
from harness.util import entry_point, setup_logging

REPO = Path(__file__).resolve().parent.parent

PHASES = [  # (column, from, to) in run.json's phases
    ("up", "cluster-up", "cluster-ready"), ("wait", "cluster-ready", "setup"), ("setup", "setup", "warmup"),
    ("load", "warmup", "heal"), ("heal", "heal", "recovery"), ("recovery", "recovery", "stop-producers"),
    ("stop", "stop-producers", "drain"), ("drain", "drain", "teardown"), ("teardown", "teardown", "cluster-down"),
    ("down", "cluster-down", "end")]
WORKLOAD = ("warmup", "stop-producers")  # the run's own load: nothing else runs meanwhile
# the fault timings a run measures itself (run.json measurements; unavailable_s: check.json),
# compared before / after a change to the pipeline (--timings): whatever a run has of these
TIMINGS = ("unavailable_s", "masterless_s", "blocked_s", "paused_count", "isr_shrink_s", "leaderless_s",
           "isr_below_min_s", "leader_changes")


def split(run_dir: Path) -> dict:
    info = store.read_run(run_dir) or {}
    ph, t0 = info.get("phases") or {}, info.get("t0_unix")
    row = {"scenario": info.get("scenario"), "status": info.get("status"), "dir": str(run_dir)}
    for col, a, b in PHASES:
        row[col] = round(ph[b] - ph[a], 1) if a in ph and b in ph else None
    timing = info.get("check_timing") or {}
    row["check"], row["judge"] = timing.get("check_s"), timing.get("judge_s")
    # the warm-up's extension while the previous run went down, in the load column
    row["waited_prev"] = info.get("warmup_extended_s", 0.0) if ph else None
    m = dict(info.get("measurements") or {})
    m["unavailable_s"] = (store.read_check(run_dir) or {}).get("unavailable_s")
    row["timings"] = {k: m[k] for k in TIMINGS if m.get(k) is not None}
    if t0 is not None and all(k in ph for k in WORKLOAD):
        row["workload_unix"] = [t0 + ph[WORKLOAD[0]], t0 + ph[WORKLOAD[1]]]
        row["span_unix"] = [t0 + min(ph.values()), t0 + max(ph.values()) + (row["judge"] or 0)]
    return row


def batch_split(batch_dir: Path, wall: float | None = None) -> dict:
    """The batch's split: from its published copy (split.json, docs/batches) when it is one,
    else from its runs' files."""
    if (Path(batch_dir) / SPLIT_JSON).is_file():
        return json.loads((Path(batch_dir) / SPLIT_JSON).read_text())
    rows_ = json.loads((batch_dir / "summary.json").read_text())
    runs = [split(Path(r["report"]).parent) for r in rows_ if r.get("report")]
    if wall is None:  # the batch's own figure, in its title
        m = re.search(r"\((\d+) s", (batch_dir / "summary.md").read_text())
        wall = float(m.group(1)) if m else None
    workload = sum(r["workload_unix"][1] - r["workload_unix"][0] for r in runs if "workload_unix" in r)
    # between one workload's end and the next one's start: what the pipeline did not hide
    timed = sorted((r for r in runs if "workload_unix" in r), key=lambda r: r["workload_unix"][0])
    if timed:
        timed[0]["gap_before"] = round(timed[0]["workload_unix"][0] - min(r["span_unix"][0] for r in timed), 1)
    for prev, r in zip(timed, timed[1:]):
        r["gap_before"] = round(r["workload_unix"][0] - prev["workload_unix"][1], 1)
    return {"batch": str(batch_dir.resolve()), "wall_s": wall, "workload_s": round(workload, 1),
            "outside_workloads_s": round(wall - workload, 1) if wall else None,
            "verdicts": {r["scenario"]: r.get("prediction") for r in rows_},
            "exits": {r["scenario"]: r.get("exit") for r in rows_}, "runs": runs}


SPLIT_COLUMNS = ["scenario"] + [c for c, _, _ in PHASES] + ["waited_prev", "check", "judge", "gap_before"]


def _cells(res: dict) -> list[list[str]]:
    return [[md_cell(r.get(c)) for c in SPLIT_COLUMNS] for r in res["runs"]]


def _total(res: dict) -> str:
    return (f"wall {res['wall_s']} s; workloads {res['workload_s']} s; "
            f"everything else {res['outside_workloads_s']} s")


def table(res: dict) -> str:
    cells = [SPLIT_COLUMNS] + _cells(res)
    widths = [max(len(row[i]) for row in cells) for i in range(len(SPLIT_COLUMNS))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in cells]
    return "\n".join(lines + [_total(res)])


def split_markdown(res: dict) -> list[str]:
    """The phase split as a Markdown table (for `--into`), seconds, with the batch's totals."""
    return md_table(SPLIT_COLUMNS, _cells(res)) + ["", _total(res) + "."]


def timings_rows(batches: list[Path]) -> tuple[list[str], list[list[str]]]:
    """Each scenario's fault timings in each batch given (one column per batch)."""
    cols = [batch_split(b) for b in batches]
    names = sorted({r["scenario"] for c in cols for r in c["runs"]})
    rows = []
    for name in names:
        runs = [next((r for r in c["runs"] if r["scenario"] == name), {}) for c in cols]
        for k in TIMINGS:
            vals = [r.get("timings", {}).get(k) for r in runs]
            if any(v is not None for v in vals):
                rows.append([name, k] + ["-" if v is None else str(v) for v in vals])
    return ["scenario", "timing"] + [Path(c["batch"]).name for c in cols], rows


def timings_table(batches: list[Path]) -> str:
    head, rows = timings_rows(batches)
    return "\n".join("  ".join(r) for r in [head] + rows)


def publish(batch_dir: Path, batches: Path = DOC_BATCHES) -> Path:
    """The batch's split copied, compact, to docs/batches/<its name>/split.json (each run by its
    id, not its path on this machine), unless it is a published copy already: the documents'
    tables are derived from the repository. Returns the published directory."""
    if (Path(batch_dir) / SPLIT_JSON).is_file():  # a published copy already, wherever it lies
        return Path(batch_dir)
    out = published_dir(batch_dir, batches)
    if out != Path(batch_dir):
        res = batch_split(Path(batch_dir))
        runs = [{**{k: v for k, v in r.items() if k != "dir"}, "run": run_name(Path(r["dir"]))} for r in res["runs"]]
        head = json.dumps({k: v for k, v in {**res, "batch": out.name}.items() if k != "runs"}, separators=(",", ":"))
        out.mkdir(parents=True, exist_ok=True)
        (out / SPLIT_JSON).write_text(head[:-1] + ',"runs":' + compact_json(runs).rstrip("\n") + "}\n")
    return out


def into(doc: Path, name: str, lines: list[str], published: list[Path], flag: str) -> None:
    """The table written between the document's <!-- table:NAME --> markers (harness.rows.splice),
    naming the committed copies it came from and the command that derives it again."""
    dirs = " ".join(repo_path(p) for p in published)
    doc.write_text(splice(doc.read_text(), name, lines, " ".join(repo_path(p / SPLIT_JSON) for p in published),
                          by=f"python -m bench.main_bench {flag} {dirs}"))


def check_100k(messages: int = 100_000) -> dict:
    """One run's check of a ``messages`` history inside a batch's session: after its warm-up,
    the main job's four runs (about 20k messages each) are checked, then the measured one;
    each run's pictures and copy follow its verdict, as in a batch."""
    import tempfile

    from checkers import synth
    from harness.checking import CheckQueue
    from harness.runner import Run
    from harness.scenario import load

    sc = load(REPO / "scenarios" / "K7-leader-cut-from-zk-acks1.yaml")
    out, ch = {}, CheckQueue(app="mqchaos-bench-main")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, n) in enumerate([(f"main-job-{i}", 20_000) for i in range(1, 5)] + [("measured", messages)]):
            run = Run(sc, results=Path(tmp), check=False)
            produce, consume, _, _ = synth.build(random.Random(k), producers=4, per_producer=n // 4, lost=10,
                                                 duplicated=10, kafka=True, write_ahead=True)
            synth.write_run(run.dir, produce, consume, meta=run.info)
            run.info["status"] = "completed"
            run.executed.set()
            t0 = time.monotonic()
            judged = threading.Event()
            ch.submit(run, lambda code, err: judged.set())
            judged.wait()  # the verdict
            verdict = time.monotonic() - t0
            ch.wait_idle()  # then its pictures and Parquet copy
            out[name] = {"messages": n, "verdict_wall_s": round(verdict, 2),
                         "with_pictures_and_copy_s": round(time.monotonic() - t0, 2), **run.info["check_timing"]}
    ch.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, help="scenario files (the main job's)")
    ap.add_argument("--batch", type=Path, help="split a batch that already ran instead of running one")
    ap.add_argument("--check-only", action="store_true", help="only the 100k-message check")
    ap.add_argument("--no-check-100k", action="store_true")
    ap.add_argument("--timings", type=Path, nargs="+", metavar="BATCH",
                    help="only print each scenario's fault timings in these batches, side by side")
    ap.add_argument("--into", type=Path, metavar="DOC",
                    help="with --batch or --timings: also write the table into DOC between the markers "
                         "<!-- table:NAME --> and <!-- /table:NAME --> (--name)")
    ap.add_argument("--name", help="the table's marker in --into's document")
    ap.add_argument("--batches", type=Path, default=DOC_BATCHES,
                    help="where --into publishes each batch's split, compact, for the table to name "
                         "(default: the repository's docs/batches)")
    args = ap.parse_args(argv)
    if args.into and not (args.name and (args.batch or args.timings)):
        ap.error("--into needs --name and --batch or --timings")
    if args.timings:
        print(timings_table(args.timings))
        if args.into:
            pubs = [publish(b, args.batches) for b in args.timings]
            into(args.into, args.name, md_table(*timings_rows(pubs)), pubs, "--timings")
        return 0
    res: dict = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    code = 0
    if not args.check_only:
        if args.batch:
            res["main"] = batch_split(args.batch)
        else:
            from harness.batch import run_batch
            t0 = time.monotonic()
            code = run_batch(files=args.files, kind="bench-main", sort=False, echo=lambda s: None)
            res["main"] = batch_split(store.results_root() / "bench-main" / "latest", round(time.monotonic() - t0, 1))
        print(table(res["main"]))
        if args.into:
            pub = publish(args.batch, args.batches)
            into(args.into, args.name, split_markdown(batch_split(pub)), [pub], "--batch")
    if args.check_only or not (args.batch or args.no_check_100k):
        res["check_100k"] = check_100k()
        m = res["check_100k"]["measured"]
        print(f"check of {m['messages']:,} messages in a warm session: verdict in {m['verdict_wall_s']} s wall "
              f"(Spark {m['check_s']} s, judging {m['judge_s']} s); with the pictures and the Parquet copy "
              f"{m['with_pictures_and_copy_s']} s")
    out = REPO / "bench" / "results" / f"main-{res['at'].replace(':', '-')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"written: {out}")
    return code


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        sys.exit(main())
