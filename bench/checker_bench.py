"""Benchmark of the checker: PySpark vs an in-memory Python loop vs DuckDB.

    make bench                       # 1M, 10M, 50M attempts
    make bench BENCH_ARGS="--sizes 1e6 --python-max 1e7"

Synthetic histories with planted anomalies are written once as plain Parquet
under bench/data/, then laid out by Spark as `mqchaos convert` lays out a
run's copy (bucketed by msg_id; its time is reported as `copy_s`, a one-off
cost after a run), then every engine reads the same copy in its own process.
All must report identical counts (KEYS); Spark and DuckDB (bench.duckdb_check, which
computes every figure of check.json Spark's checker computes for this history) must
report identical figures (bench.duckdb_check.FIGURES, samples included), or the bench
fails. Results go to bench/results/checker-<timestamp>.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.util import entry_point

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"
KEYS = ("attempted", "ok", "fail", "info", "delivered", "deliveries", "lost", "duplicated",
        "duplicate_deliveries", "unexpected", "recovered", "ordering_violations")


def _prefixed(prefix: str, values: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(pa.scalar(prefix), pa.array(values).cast(pa.string()), "")


def _ids(producer: np.ndarray, seq: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise(_prefixed("p", producer), pa.array(seq).cast(pa.string()), "-")


def generate(n: int, seed: int = 42) -> Path:
    """n attempts by 8 producers; ~1% fail/info, 0.1% lost, 0.1% duplicated,
    0.01% reordered, 100 unexpected, and one 5 s outage."""
    run = DATA / f"run-{n}"
    plain = run / "history" / "plain"
    if (plain / "_done").exists():
        return run
    rng = np.random.default_rng(seed)
    producers = 8
    prod = np.arange(n) % producers
    seq = np.arange(n) // producers
    duration = max(60.0, n / 20_000)  # ~20k writes/s
    t_inv = np.sort(rng.uniform(0, duration, n))
    t_cmp = t_inv + 0.01  # completions keep publish order: reorderings are the planted ones
    x = rng.random(n)
    outcome = np.where(x < 0.005, "fail", np.where(x < 0.01, "info", "ok")).astype(object)
    mid = duration / 2
    outage = (t_cmp > mid) & (t_cmp < mid + 5)
    outcome[outage] = "info"
    ids = _ids(prod, seq)
    plain.mkdir(parents=True, exist_ok=True)
    produce = pa.table({
        "msg_id": ids, "producer": _prefixed("p", prod),
        "seq": pa.array(seq, pa.int64()), "outcome": pa.array(outcome, pa.string()),
        "t_invoke": t_inv, "t_complete": t_cmp, "node": pa.array(np.full(n, "rabbit1", object), pa.string()),
        "error": pa.nulls(n, pa.string())})
    (plain / "produce").mkdir(exist_ok=True)
    pq.write_table(produce, plain / "produce" / "part-0.parquet")
    # Deliveries: ok messages minus the lost ones, some recovered, duplicates, ghosts.
    delivered = ((outcome == "ok") & (rng.random(n) > 0.001)) | ((outcome != "ok") & (rng.random(n) < 0.2))
    idx = np.nonzero(delivered)[0]
    dup = idx[rng.random(len(idx)) < 0.001]
    t = t_cmp[idx] + 0.01
    swap = np.nonzero(rng.random(len(idx) - producers) < 0.0001)[0]
    t[swap], t[swap + producers] = t[swap + producers], t[swap].copy()  # same producer, next seq
    all_idx = np.concatenate([idx, dup])
    all_t = np.concatenate([t, t_cmp[dup] + 300.0])
    redeliv = np.concatenate([np.zeros(len(idx), bool), np.ones(len(dup), bool)])
    ghosts = 100
    c_ids = pa.concat_arrays([ids.take(pa.array(all_idx)), pa.array([f"ghost-{i}" for i in range(ghosts)])])
    c_prod = np.concatenate([prod[all_idx], np.zeros(ghosts, int)])
    consume = pa.table({
        "msg_id": c_ids, "consumer": _prefixed("c", c_prod % 2),
        "t": np.concatenate([all_t, np.full(ghosts, duration + 1.0)]),
        "redelivered": np.concatenate([redeliv, np.zeros(ghosts, bool)]),
        "source": pa.array(np.full(len(c_prod), "q", object), pa.string()),
        "offset": pa.nulls(len(c_prod), pa.int64()), "node": pa.array(np.full(len(c_prod), "rabbit2", object), pa.string()),
        "producer": pa.concat_arrays([_prefixed("p", prod[all_idx]),
                                      pa.nulls(ghosts, pa.string())]),
        "seq": pa.concat_arrays([pa.array(seq[all_idx], pa.int64()), pa.nulls(ghosts, pa.int64())])})
    (plain / "consume").mkdir(exist_ok=True)
    pq.write_table(consume, plain / "consume" / "part-0.parquet")
    # The JSONL record is stood in for by empty files: the checker reads the Parquet copy.
    for kind in ("produce", "consume"):
        (run / "history" / f"{kind}-0.jsonl").touch()
    (run / "run.json").write_text(json.dumps({"scenario": "bench", "ordering": "monotonic"}))
    (plain / "_done").touch()
    return run


def lay_out(run: Path) -> dict:
    """The checker's Parquet copy of the plain files, as `mqchaos convert` writes it."""
    meta = run / "history" / "parquet" / "_meta.json"
    if meta.exists() and json.loads(meta.read_text()).get("buckets"):
        return {"copy_s": None}
    t0 = time.monotonic()
    from checkers.history import write_copy
    from checkers.spark import session

    spark = session(None, "mqchaos-bench-copy")
    plain = run / "history" / "plain"
    from checkers import schema as S

    # read with the history's schema: fields added to it since (poison, rejected...) are null
    frames = {k: spark.read.schema(S.KINDS[k][0]).parquet(str(plain / k)) for k in ("produce", "consume")}
    m = write_copy(spark, frames, str(run / "history" / "parquet"), {"produce": 0, "consume": 0},
                   frames["produce"].count())
    meta.write_text(json.dumps(m))
    return {"copy_s": time.monotonic() - t0}


def _jvm_peak_rss_mb() -> float:
    """Peak RSS of this process's JVM children (Spark's driver)."""
    peak = 0.0
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"java" not in cmd:
                continue
            ppid = stat[3]
            # spark-submit runs java under a shell launched by this process
            if ppid != me and Path(f"/proc/{ppid}/stat").read_text().split()[3] != me:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except (OSError, IndexError):
            continue
    return round(peak, 1)


def run_spark(run: Path) -> dict:
    t0 = time.monotonic()
    from checkers.check import check_runs
    from checkers.history import open_runs
    from checkers.spark import session

    spark = session(None, "mqchaos-bench")
    t1 = time.monotonic()
    runs, _ = open_runs([str(run)])
    res = check_runs(spark, runs)[runs[0].dir]
    t2 = time.monotonic()
    rss = _jvm_peak_rss_mb()
    t3 = time.monotonic()
    spark.read.parquet(str(run / "history/parquet/produce"), str(run / "history/parquet/consume")).count()
    spark.read.parquet(str(run / "history/parquet/consume")).selectExpr("max(t)", "count(msg_id)").collect()
    t4 = time.monotonic()
    from bench.duckdb_check import figures

    return {"startup_s": t1 - t0, "check_s": t2 - t1, "jvm_peak_rss_mb": rss,
            "scan_s": t4 - t3, "counts": {k: res[k] for k in KEYS}, "figures": figures(res)}


def run_duckdb(run: Path) -> dict:
    """Every figure Spark's checker computes for this history, by DuckDB (bench.duckdb_check)
    from the same Parquet copy, in one connection."""
    from bench.duckdb_check import check  # (imports duckdb, as before the clock starts)

    t0 = time.monotonic()
    res = check(run)
    return {"check_s": time.monotonic() - t0, "counts": {k: res[k] for k in KEYS}, "figures": res}


def run_python(run: Path) -> dict:
    t0 = time.monotonic()
    rank = {"ok": 3, "info": 2, "fail": 1}
    best: dict[str, int] = {}
    pt = pq.read_table(run / "history/parquet/produce", columns=["msg_id", "outcome"])
    for mid, out in zip(pt.column("msg_id").to_pylist(), pt.column("outcome").to_pylist()):
        r = rank[out]
        if best.get(mid, 0) < r:
            best[mid] = r
    del pt
    ct = pq.read_table(run / "history/parquet/consume",
                       columns=["msg_id", "producer", "consumer", "seq", "t", "redelivered"])
    dlv: dict[str, int] = {}
    for mid in ct.column("msg_id").to_pylist():
        dlv[mid] = dlv.get(mid, 0) + 1
    lanes: dict = {}
    rows = sorted(zip(ct.column("producer").to_pylist(), ct.column("consumer").to_pylist(),
                      ct.column("t").to_pylist(), ct.column("seq").to_pylist(),
                      ct.column("redelivered").to_pylist()), key=lambda r: (r[0] or "", r[1], r[2], r[3] or 0))
    viol = 0
    for prod, cons, _, seq, red in rows:
        if red or prod is None:
            continue
        high = lanes.get((prod, cons))
        if high is not None and seq < high:
            viol += 1
        lanes[(prod, cons)] = seq if high is None else max(high, seq)
    counts = {
        "attempted": len(best), "ok": sum(1 for v in best.values() if v == 3),
        "fail": sum(1 for v in best.values() if v == 1), "info": sum(1 for v in best.values() if v == 2),
        "delivered": len(dlv), "deliveries": sum(dlv.values()),
        "lost": sum(1 for m, v in best.items() if v == 3 and m not in dlv),
        "duplicated": sum(1 for v in dlv.values() if v > 1),
        "duplicate_deliveries": sum(v - 1 for v in dlv.values() if v > 1),
        "unexpected": sum(1 for m in dlv if m not in best),
        "recovered": sum(1 for m, v in best.items() if v < 3 and m in dlv),
        "ordering_violations": viol,
    }
    return {"check_s": time.monotonic() - t0, "counts": counts}


ENGINES = {"spark": run_spark, "duckdb": run_duckdb, "python": run_python}
CHILDREN = {**ENGINES, "copy": lay_out}


def _child(engine: str, run: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.checker_bench", "--child", engine, run],
                         capture_output=True, text=True, cwd=ROOT.parent)
    if out.returncode:
        return {"error": out.stderr[-2000:]}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def cpu_busy(seconds: float) -> float | None:
    """The share of the machine's CPU time not idle over the next ``seconds`` (/proc/stat):
    what other work leaves the bench. None where /proc/stat cannot be read."""
    def times() -> list[int]:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    try:
        a = times()
        time.sleep(seconds)
        b = times()
    except (OSError, ValueError):
        return None
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    return round(1 - (d[3] + d[4]) / total, 3) if total > 0 else None


def bench_env(busy_before: float | None) -> dict:
    """Where the figures were taken: the CPU share other work took just before the engines
    began, the 1-minute load average as they ended, the CPUs, Spark's and Java's versions."""
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        java = None
    try:
        import pyspark
        spark = pyspark.__version__
    except ImportError:
        spark = None
    return {"busy_before": busy_before, "load_after": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(), "pyspark": spark, "java": java}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e6,1e7,5e7")
    ap.add_argument("--python-max", type=float, default=1e7,
                    help="largest size the in-memory Python loop is run at (it needs ~1 GB per 5M)")
    ap.add_argument("--engines", default="spark,duckdb,python")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(CHILDREN[a.child[0]](Path(a.child[1]))))
        return 0
    results = []
    for n in [int(float(s)) for s in a.sizes.split(",")]:
        t0 = time.monotonic()
        run = generate(n)
        busy_before = cpu_busy(2.0)  # bench.guard concludes nothing from a busy machine
        gen = time.monotonic() - t0
        row = {"attempts": n, "generate_s": round(gen, 1), "copy": _child("copy", str(run))}
        if "error" in row["copy"]:
            print(row["copy"]["error"], file=sys.stderr)
            return 2
        for e in a.engines.split(","):
            if e == "python" and n > a.python_max:
                row[e] = {"skipped": f"above --python-max {a.python_max:g}"}
                continue
            row[e] = _child(e, str(run))
            print(f"{n:>11,} {e:<7} {json.dumps({k: v for k, v in row[e].items() if k != 'figures'})}",
                  flush=True)
        counted = [row[e]["counts"] for e in ENGINES if "counts" in row.get(e, {})]
        row["identical_counts"] = all(c == counted[0] for c in counted)
        row["identical_figures"] = same_figures(row)
        row["env"] = bench_env(busy_before)
        results.append(row)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    out = ROOT / "results"
    out.mkdir(exist_ok=True)
    (out / f"checker-{stamp}.json").write_text(json.dumps(results, indent=1))
    lines = ["| attempts | copy s | spark start-up s | spark check s | JVM peak RSS MB | spark parquet scan s "
             "| duckdb s | python s | spark/duckdb | identical counts | identical figures |", "|" + "---|" * 11]
    for r in results:
        s, d, p = r.get("spark", {}), r.get("duckdb", {}), r.get("python", {})
        ratio = (s["check_s"] / d["check_s"]) if "check_s" in s and "check_s" in d else None
        f = lambda x: f"{x:.1f}" if isinstance(x, float) else "-"  # noqa: E731
        lines.append(f"| {r['attempts']:,} | {f(r['copy'].get('copy_s'))} | {f(s.get('startup_s'))} | {f(s.get('check_s'))} | "
                     f"{s.get('jvm_peak_rss_mb', '-')} | {f(s.get('scan_s'))} | {f(d.get('check_s'))} | "
                     f"{f(p.get('check_s'))} | {f(ratio)} | {r['identical_counts']} | "
                     f"{'-' if r['identical_figures'] is None else r['identical_figures']} |")
    (out / f"checker-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for r in results:
        if r["identical_figures"] is False:
            print(f"FIGURES DIFFER between spark and duckdb at {r['attempts']:,} attempts:\n  "
                  + "\n  ".join(r["figure_differences"]), file=sys.stderr)
    return 0 if all(r["identical_counts"] and r["identical_figures"] is not False for r in results) else 1


def same_figures(row: dict) -> bool | None:
    """Whether Spark and DuckDB computed the same figures (every one of
    bench.duckdb_check.FIGURES; floats to 1e-6); None when either did not run. The
    differences go in row["figure_differences"]."""
    from bench.duckdb_check import differences

    s, d = row.get("spark", {}).get("figures"), row.get("duckdb", {}).get("figures")
    if s is None or d is None:
        return None
    row["figure_differences"] = differences(s, d)
    return not row["figure_differences"]


if __name__ == "__main__":
    with entry_point():
        sys.exit(main())
