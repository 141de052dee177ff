"""Benchmark of `mqchaos summarize` (once `mqchaos analyze`; the bench keeps its name, its
baselines and results are filed under it): many runs, local mode and a standalone cluster.

    make bench-analyze                                   # 1,000 runs x 100k messages
    make bench-analyze BENCH_ARGS="--runs 20 --messages 10000"

A synthetic results tree (results/<scenario>/<timestamp>/ as the run loop
leaves it: run.json, check.json with a prediction, the history as Parquet the
way `mqchaos convert` writes it) is generated once under bench/data/ with
numpy + pyarrow, with planted losses, duplicates and outages. Then the same
analysis runs twice, each in its own process, timed wall-clock from the
command's start to its exit (JVM start-up included):

  local       mqchaos summarize TREE --out ...                (local[*])
  standalone  spark-submit --master spark://127.0.0.1:<port> harness/trend_report.py TREE --out ...
              on one master + one worker started by checkers.spark.standalone (not timed:
              the cluster start is reported apart)

Both must report the planted totals (lost, duplicated) and agree with each
other on every aggregate. Results go to bench/results/analyze-<timestamp>.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.checker_bench import _ids, _prefixed, bench_env, cpu_busy
from harness.util import entry_point

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data"
# (scenario, broker, versions, ordering, loss rate, unavailable seconds)
SCENARIOS = [
    ("R2-manual-sync-promote-always", "rabbitmq", ("3.10.8", "3.12.1"), "fifo", 2e-3, 8.0),
    ("R9-pause-minority", "rabbitmq", ("3.10.8", "3.12.1"), "none", 0.0, 12.0),
    ("Q1-quorum-leader-faults", "rabbitmq", ("3.12.1", "3.13.7"), "fifo", 0.0, 10.0),
    ("K3-acks-all-minisr2", "kafka", ("3.7.0", "3.9.1"), "fifo", 0.0, 25.0),
    ("K7-leader-cut-from-zk-acks1", "kafka", ("3.7.0", "3.9.1"), "none", 0.3, 0.0),
]
PRODUCERS = 4


def _run(run_dir: Path, n: int, rng: np.random.Generator, sc: tuple, version: str, started: datetime,
         ) -> dict:
    """One run of n attempts; returns its planted figures."""
    name, broker, _, ordering, loss_rate, outage_s = sc
    prod = np.arange(n) % PRODUCERS
    seq = np.arange(n) // PRODUCERS
    duration = max(60.0, n / 2_000)
    t_inv = np.sort(rng.uniform(0, duration, n))
    t_cmp = t_inv + 0.01
    x = rng.random(n)
    outcome = np.where(x < 0.002, "fail", np.where(x < 0.004, "info", "ok")).astype(object)
    if outage_s:
        a = duration / 3
        outcome[(t_cmp > a) & (t_cmp < a + outage_s * rng.uniform(0.5, 1.5))] = "info"
    ok = outcome == "ok"
    lost = ok & (rng.random(n) < loss_rate * rng.uniform(0.5, 1.5))
    delivered = (ok & ~lost) | (~ok & (rng.random(n) < 0.2))
    idx = np.nonzero(delivered)[0]
    dup = idx[rng.random(len(idx)) < 2e-4]
    ids = _ids(prod, seq)
    hist = run_dir / "history"
    (hist / "parquet" / "produce").mkdir(parents=True, exist_ok=True)
    (hist / "parquet" / "consume").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({
        "msg_id": ids, "producer": _prefixed("p", prod), "seq": pa.array(seq, pa.int64()),
        "outcome": pa.array(outcome, pa.string()), "t_invoke": t_inv, "t_complete": t_cmp,
        "node": pa.array(np.full(n, "n1", object), pa.string()), "error": pa.nulls(n, pa.string())}),
        hist / "parquet" / "produce" / "part-0.parquet")
    all_idx = np.concatenate([idx, dup])
    m = len(all_idx)
    kafka = broker == "kafka"
    pq.write_table(pa.table({
        "msg_id": ids.take(pa.array(all_idx)), "consumer": _prefixed("c", prod[all_idx] % 2),
        "t": np.concatenate([t_cmp[idx] + 0.01, t_cmp[dup] + 300.0]),
        "redelivered": np.concatenate([np.zeros(len(idx), bool), np.ones(len(dup), bool)]),
        "source": pa.array(np.full(m, "t:0" if kafka else "q", object), pa.string()),
        "offset": pa.array(np.arange(m), pa.int64()) if kafka else pa.nulls(m, pa.int64()),
        "node": pa.array(np.full(m, "n2", object), pa.string()),
        "producer": _prefixed("p", prod[all_idx]), "seq": pa.array(seq[all_idx], pa.int64())}),
        hist / "parquet" / "consume" / "part-0.parquet")
    for kind in ("produce", "consume"):  # the JSONL record, stood in for by empty files
        (hist / f"{kind}-0.jsonl").touch()
    (hist / "parquet" / "_meta.json").write_text(json.dumps({"malformed": {"produce": 0, "consume": 0}}))
    brokers = {"rabbitmq": version, "erlang": "25.2.3"} if broker == "rabbitmq" else \
        {"kafka": f"kafka_2.13-{version}.jar"}
    (run_dir / "run.json").write_text(json.dumps({
        "scenario": name, "id": name.split("-")[0], "broker": broker, "seed": 0, "ordering": ordering,
        "started_at": started.isoformat(timespec="seconds"), "status": "completed", "brokers": brokers}))
    held = bool(lost.sum() == 0) if loss_rate == 0 else bool(lost.sum() > 0)
    (run_dir / "check.json").write_text(json.dumps({"prediction": {"held": held, "reason": "synthetic"}}))
    return {"lost": int(lost.sum()), "duplicated": int(len(dup)), "ok": int(ok.sum())}


def generate(runs: int, messages: int, seed: int = 7) -> tuple[Path, dict]:
    """results/<scenario>/<timestamp>/ for `runs` runs spread over 30 days."""
    tree = DATA / f"analyze-{runs}x{messages}"
    done = tree / "planted.json"
    if done.exists():
        return tree / "results", json.loads(done.read_text())
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 10, 24, tzinfo=timezone.utc)
    planted = {"lost": 0, "duplicated": 0, "ok": 0, "runs": runs, "messages": messages}
    for i in range(runs):
        sc = SCENARIOS[i % len(SCENARIOS)]
        day = (i * 30) // runs
        version = sc[2][0] if day < 15 else sc[2][1]  # an upgrade half-way
        started = t0 + timedelta(days=day, seconds=60 * i)
        d = tree / "results" / sc[0] / started.strftime("%Y-%m-%dT%H-%M-%S.000Z")
        p = _run(d, messages, rng, sc, version, started)
        for k in ("lost", "duplicated", "ok"):
            planted[k] += p[k]
        latest = d.parent / "latest"
        if latest.is_symlink():
            latest.unlink()
        latest.symlink_to(d.name)
    done.write_text(json.dumps(planted))
    return tree / "results", planted


def _git(*args: str) -> str | None:
    p = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT.parent)
    return p.stdout.strip() if p.returncode == 0 else None


def _sources_digest() -> str:
    """Which checker code was measured (the work tree may be ahead of the commit)."""
    import hashlib

    h = hashlib.sha256()
    for f in ("checkers/analysis.py", "checkers/history.py", "checkers/check.py", "checkers/spark/__init__.py",
              "checkers/trend.py", "harness/trend_report.py"):
        h.update((ROOT.parent / f).read_bytes())
    return h.hexdigest()[:12]


def _timed(cmd: list[str], env: dict, log: Path, timeout: float) -> float:
    t0 = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                              cwd=ROOT.parent)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {proc.returncode}; see {log}")
    return round(wall, 1)


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def _checks(summaries: dict, runs: int, planted: dict) -> dict:
    """Per mode: the figures analyze found, and whether they are the planted ones."""
    checks = {}
    for mode, s in summaries.items():
        lost = sum(r["lost"] for r in s["by_version"])
        dup = sum(r["duplicated"] for r in s["by_version"])
        conf = sum(r["confirmed"] for r in s["by_version"])
        checks[mode] = {"runs_checked": s["runs_checked"], "lost": lost, "duplicated": dup, "confirmed": conf,
                        "spark_seconds": s["seconds"], "master": s["master"],
                        "planted_ok": (s["runs_checked"], lost, dup, conf) ==
                        (runs, planted["lost"], planted["duplicated"], planted["ok"])}
    return checks


def _table(row: dict, summaries: dict, checks: dict, stamp: str) -> list[str]:
    md = [f"analyze: {row['runs']} runs x {row['messages']:,} messages ({row['attempts']:,} attempts), "
          f"{os.cpu_count()} cores, {stamp}",
          "", "| mode | wall s | of which in analyze (summary.json) | planted figures found |", "|---|---|---|---|"]
    for mode in summaries:
        md.append(f"| {mode} | {row[mode + '_s']} | {checks[mode]['spark_seconds']} | {checks[mode]['planted_ok']} |")
    if "standalone_start_s" in row:
        md.append(f"\nstandalone master + worker start: {row['standalone_start_s']} s")
    if "modes_agree" in row:
        md.append(f"local and standalone agree on every aggregate: {row['modes_agree']}")
    return md


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--modes", default="local,standalone")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--executor-memory", default="8g")
    ap.add_argument("--timeout", type=float, default=3000, help="per analysis, seconds")
    a = ap.parse_args()

    t0 = time.monotonic()
    tree, planted = generate(a.runs, a.messages)
    gen_s = round(time.monotonic() - t0, 1)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%SZ")
    work = ROOT / "results" / f"analyze-{stamp}"
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=py, PYSPARK_DRIVER_PYTHON=py,
               MQCHAOS_DRIVER_MEMORY=a.driver_memory)
    row = {"runs": a.runs, "messages": a.messages, "attempts": a.runs * a.messages,
           "generate_s": gen_s, "cpus": os.cpu_count(), "planted": planted,
           "commit": _git("rev-parse", "HEAD"), "checker_sources": _sources_digest()}
    print(f"tree: {tree} ({a.runs} runs x {a.messages:,}; generated/found in {gen_s} s)", flush=True)
    busy_before = cpu_busy(2.0)  # bench.guard concludes nothing from a busy machine
    summaries = {}
    if "local" in a.modes:
        out = work / "local"
        row["local_s"] = _timed([str(Path(py).parent / "mqchaos"), "summarize", str(tree), "--out", str(out)],
                                env, work / "local.log", a.timeout)
        summaries["local"] = _summary(out)
        print(f"local: {row['local_s']} s", flush=True)
    if "standalone" in a.modes:
        from checkers.spark.standalone import Standalone, spark_home

        out = work / "standalone"
        t1 = time.monotonic()
        with Standalone(port=0, webui_port=0, memory=a.executor_memory) as url:
            row["standalone_start_s"] = round(time.monotonic() - t1, 1)
            row["standalone_s"] = _timed(
                [os.path.join(spark_home(), "bin", "spark-submit"), "--master", url,
                 "--driver-memory", "2g", "--conf", f"spark.executor.memory={a.executor_memory}",
                 "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                 "harness/trend_report.py", str(tree), "--out", str(out)],
                env, work / "standalone.log", a.timeout)
        summaries["standalone"] = _summary(out)
        print(f"standalone: {row['standalone_s']} s (cluster start {row['standalone_start_s']} s)", flush=True)
    checks = _checks(summaries, a.runs, planted)
    row["checks"] = checks
    row["env"] = bench_env(busy_before)  # bench.guard compares only with a baseline of the same env
    if len(summaries) == 2:
        row["modes_agree"] = summaries["local"]["by_version"] == summaries["standalone"]["by_version"] \
            and summaries["local"]["by_day"] == summaries["standalone"]["by_day"]
    (work / "result.json").write_text(json.dumps(row, indent=1))
    (ROOT / "results" / f"analyze-{stamp}.json").write_text(json.dumps(row, indent=1))
    md = _table(row, summaries, checks, stamp)
    (ROOT / "results" / f"analyze-{stamp}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    ok = all(c["planted_ok"] for c in checks.values()) and row.get("modes_agree", True)
    return 0 if ok else 1


if __name__ == "__main__":
    with entry_point():
        sys.exit(main())
