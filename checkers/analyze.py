"""`mqchaos analyze`: one Spark job over many runs, a table and a summary.

    mqchaos analyze results/ [--master URL] [--out DIR]
    spark-submit --master spark://127.0.0.1:7077 checkers/analyze.py results/ --out DIR

Every run's figures come from the checker itself (`checkers.check.check_runs`,
all runs in one job): this module only aggregates them. What it writes into
--out (default results/analysis/<UTC timestamp>/):

  runs.parquet/        one row per run (RUN_SCHEMA)
  by_version.parquet/  per scenario and broker version (the summary's first table)
  by_day.parquet/      per scenario and run date (the trend)
  summary.md, summary.html, summary.json, loss_rate.png, unavailable.png

Definitions (docs/nightly.md):
  runs                  runs checked: status `completed` (or no status: a run not
                        written by the harness); `harness-error` runs are counted
                        apart and never judged, `interrupted` / `running` ones
                        (killed mid-run) are counted as incomplete
  runs_with_loss        checked runs with lost > 0
  lost_per_million      sum(lost) / sum(ok) * 1e6 over the group's checked runs
  duplicated_per_million  sum(duplicated) / sum(ok) * 1e6 (per million confirmed, too)
  unavailable p50/p99   of the runs' unavailable_s (each run's total), percentiles by
                        linear interpolation between closest ranks: with the values
                        sorted x[0..n-1], p at rank r = p*(n-1), x[floor r] + (r - floor r)
                        * (x[floor r + 1] - x[floor r]) (Spark's `percentile`, numpy's default)
  held / not_held / undecided / no_prediction
                        check.json `prediction.held` true / false / null / absent
"""
from __future__ import annotations

import math

import argparse
import base64
import html
import json
import os
import re
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from harness import store
from harness.results import ORDERINGS, CheckResult, value_type
from harness.verdicts import INCOMPLETE, RunStatus

HARNESS_ERROR = RunStatus.HARNESS_ERROR
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2})-(\d{2})-(\d{2})")


class AnalyzeError(ValueError):
    pass


# -- finding runs ------------------------------------------------------------------------

def _local(arg: str) -> str:
    if arg.startswith("file://"):
        return arg[len("file://"):]
    if arg.startswith("file:"):
        return arg[len("file:"):]
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", arg):
        raise AnalyzeError(f"{arg}: only local paths (and file: URIs) are found here; other "
                           "URIs are listed by Spark (checkers.listing, through collect)")
    return arg


def find_runs(args: list[str]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Run directories named by the arguments (runs, globs, directories with runs below them,
    file: URIs): the store's discovery (harness.store.find_runs)."""
    return store.find_runs(args, local=_local)


# -- what each run says about itself -----------------------------------------------------

def _started(meta: dict, run_dir: str) -> datetime | None:
    s = meta.get("started_at")
    if isinstance(s, str):
        try:
            t = datetime.fromisoformat(s.replace("Z", "+00:00"))
            return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
        except ValueError:
            pass
    m = _STAMP.search(run_dir.rstrip("/").rsplit("/", 1)[-1])  # results/<scenario>/<UTC timestamp>/
    if m:
        return datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}:{m.group(3)}:{m.group(4)}+00:00")
    return None


def broker_version(meta: dict) -> str:
    """The broker's own version from run.json `brokers` ({"rabbitmq": "3.10.8", "erlang": ...}
    or {"kafka": "kafka_2.13-3.9.1.jar"} -> "3.9.1"), else "unknown"."""
    brokers = meta.get("brokers") if isinstance(meta.get("brokers"), dict) else {}
    broker = meta.get("broker")
    v = brokers.get(broker) if broker else None
    if v is None:
        vals = [str(x) for k, x in sorted(brokers.items()) if k not in ("error", "erlang") and x]
        v = vals[0] if vals else None
    if v is None:
        return "unknown"
    v = str(v)
    m = re.match(r"^[a-z]+_[0-9.]+-(.+?)(\.jar)?$", v)  # a jar's name: <artifact>_<scala>-<version>.jar
    return m.group(1) if m else v


def _prediction(check: dict | None) -> tuple[str, str | None]:
    pred = (check or {}).get("prediction")
    if not isinstance(pred, dict) or "held" not in pred:
        return "none", None
    return {True: "held", False: "not_held"}.get(pred["held"], "undecided"), pred.get("reason")


# -- the per-run table ----------------------------------------------------------------------

# The Spark type of a check result's figure, by its type in harness.results.CheckResult.
SPARK_TYPE = {int: "bigint", float: "double", bool: "boolean", str: "string"}
# The check result's figures the per-run table keeps, by their CheckResult names.
FIGURES = ("source", "ordering", "attempted", "ok", "fail", "info", "delivered", "lost", "duplicated",
           "unexpected", "recovered", "ordering_violations", "malformed_lines", "unavailable_s", "valid")


def _figures(*names: str) -> list[tuple[str, str]]:
    return [(n, SPARK_TYPE[value_type(CheckResult, n)]) for n in names]


RUN_FIELDS = [  # (name, Spark type); the columns' order is the table's
    ("run_dir", "string"), ("scenario", "string"), ("scenario_id", "string"), ("broker", "string"),
    ("broker_version", "string"), ("brokers", "string"), ("started_at", "timestamp"),
    ("run_date", "date"), ("status", "string"), ("category", "string"), ("error", "string"),
    *_figures(*FIGURES[:-1]),
    ("unavailable_intervals", "int"), ("longest_unavailable_s", "double"),
    *_figures(FIGURES[-1]), ("prediction", "string"), ("prediction_reason", "string"),
]
RUN_SCHEMA = ", ".join(f"{n} {t}" for n, t in RUN_FIELDS)
# category: checked | harness_error | incomplete | unreadable


def _row(run_dir: str, meta: dict, check: dict | None) -> dict:
    """run_dir: a local path or a URI (s3a://bucket/results/R1/<ts>)."""
    started = _started(meta, run_dir)
    status = meta.get("status") if isinstance(meta.get("status"), str) else None
    category = ("harness_error" if status == HARNESS_ERROR else
                "incomplete" if status in INCOMPLETE else "checked")
    pred, reason = _prediction(check)
    row = {n: None for n, _ in RUN_FIELDS}
    row.update({
        "run_dir": str(run_dir),
        "scenario": str(meta.get("scenario") or run_dir.rstrip("/").rsplit("/", 2)[-2]),
        "scenario_id": meta.get("id"), "broker": meta.get("broker"),
        "broker_version": broker_version(meta),
        "brokers": json.dumps(meta.get("brokers"), sort_keys=True) if meta.get("brokers") else None,
        "started_at": started, "run_date": started.date() if started else None,
        "status": status, "category": category,
        "error": meta.get("error") if category == "harness_error" else None,
        "prediction": pred, "prediction_reason": reason,
    })
    return row


def _with_result(row: dict, res: dict) -> dict:
    for k in FIGURES:
        row[k] = res.get(k)
    iv = res.get("unavailable") or []
    row["unavailable_intervals"] = len(iv)
    row["longest_unavailable_s"] = round(max((z - a for a, z in iv), default=0.0), 3)
    return row


def collect(spark, args: list[str], *, ordering: str | None = None, threshold: float = 1.0,
            prefer_parquet: bool = True, list_with_spark: bool = False
            ) -> tuple[list[dict], list[tuple[str, str]]]:
    """Rows of the per-run table (every run found, checked or not) and the
    arguments that named no run. The checked runs go through check_runs in one job.

    Local paths (and file: URIs) are found by Python; other URIs (hdfs://,
    s3a://...) are listed by Spark (checkers.listing), as are file: URIs with
    `list_with_spark` (how that path is tested here)."""
    from checkers import listing
    from checkers.check import check_runs
    from checkers.history import open_runs

    def spark_listed(a: str) -> bool:
        return listing.is_uri(a) and (list_with_spark or not a.startswith("file:"))

    dirs, arg_errors = find_runs([a for a in args if not spark_listed(a)])
    rows: dict[str, dict] = {}
    to_check: list[str] = []
    for d in dirs:
        meta, err = store.read_json(d / store.RUN_JSON)
        check, _ = store.read_json(d / store.CHECK_JSON)
        row = _row(str(d), meta or {}, check)
        rows[str(d)] = row
        if err:
            row["category"], row["error"] = "unreadable", err
        elif row["category"] == "checked":
            to_check.append(str(d))
    runs, open_errors = open_runs(to_check, prefer_parquet=prefer_parquet)
    listed, key_of = [], {}
    for a in args:
        if not spark_listed(a):
            continue
        found, errors = listing.find(spark, a)
        arg_errors += errors
        for r in found:
            # once per run: a file: run also named by a local path is the same run
            key = os.path.realpath(r.dir[len("file:"):]) if r.dir.startswith("file:") else r.dir
            if key in rows:
                continue
            key_of[r.dir] = key
            row = rows[key] = _row(r.dir, r.meta or {}, r.check)
            if r.meta_error:
                row["category"], row["error"] = "unreadable", r.meta_error
            elif row["category"] == "checked":
                listed.append(r)
    more, more_errors = listing.open_listed(spark, listed, prefer_parquet=prefer_parquet)
    runs += more
    for p, e in open_errors + more_errors:
        key = key_of.get(p) or (p if p in rows else os.path.realpath(p))
        if key in rows:
            rows[key]["category"], rows[key]["error"] = "unreadable", e
        else:
            arg_errors.append((p, e))
    by_dir = {r["run_dir"]: r for r in rows.values()}
    if runs:  # one job for all of them, Parquet-read and JSONL-read runs alike
        results = check_runs(spark, runs, ordering=ordering, threshold=threshold)
        for run_dir, res in results.items():
            _with_result(by_dir.get(run_dir) or rows[os.path.realpath(run_dir)], res)
    return list(rows.values()), arg_errors


# -- aggregation (Spark) --------------------------------------------------------------------

def _aggregates(F, dates: bool = True) -> list:
    checked = F.col("category") == "checked"

    def n(cond):
        return F.sum(F.when(cond, 1).otherwise(0)).cast("int")

    def s(c):
        return F.sum(F.when(checked, F.col(c))).cast("bigint")

    pct = F.expr("percentile(CASE WHEN category = 'checked' THEN unavailable_s END, array(0.5, 0.99))")
    cols = [
        n(checked).alias("runs"),
        n(checked & (F.col("lost") > 0)).alias("runs_with_loss"),
        n(checked & (F.col("valid") == F.lit(False))).alias("runs_invalid"),
        s("attempted").alias("attempted"), s("ok").alias("confirmed"), s("lost").alias("lost"),
        s("duplicated").alias("duplicated"), s("malformed_lines").alias("malformed_lines"),
        # null, not an error, when nothing was confirmed (Spark 4 divides in ANSI mode)
        (F.try_divide(s("lost"), s("ok")) * 1e6).alias("lost_per_million"),
        (F.try_divide(s("duplicated"), s("ok")) * 1e6).alias("duplicated_per_million"),
        pct[0].alias("unavailable_p50"), pct[1].alias("unavailable_p99"),
        F.max(F.when(checked, F.col("unavailable_s"))).alias("unavailable_max"),
        n(checked & (F.col("prediction") == "held")).alias("held"),
        n(checked & (F.col("prediction") == "not_held")).alias("not_held"),
        n(checked & (F.col("prediction") == "undecided")).alias("undecided"),
        n(checked & (F.col("prediction") == "none")).alias("no_prediction"),
        n(F.col("category") == "harness_error").alias("harness_errors"),
        n(F.col("category") == "incomplete").alias("incomplete"),
        n(F.col("category") == "unreadable").alias("unreadable"),
    ]
    if dates:
        cols += [F.min("run_date").alias("first_date"), F.max("run_date").alias("last_date")]
    return cols


_CAST = {"double": float, "bigint": int, "int": int}


def _typed(row: dict) -> dict:
    return {n: (_CAST[t](row[n]) if t in _CAST and row[n] is not None else row[n]) for n, t in RUN_FIELDS}


def aggregate(spark, rows: list[dict]):
    """(runs, by_version, by_day) DataFrames."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([_typed(r) for r in rows], RUN_SCHEMA)
    by_version = (df.groupBy("scenario", "broker", "broker_version").agg(*_aggregates(F))
                  .orderBy("scenario", "broker_version"))
    by_day = (df.groupBy("scenario", "run_date")
              .agg(F.concat_ws(", ", F.array_sort(F.collect_set("broker_version"))).alias("versions"),
                   *_aggregates(F, dates=False))
              .orderBy("scenario", "run_date"))
    return df, by_version, by_day


# -- the summary -----------------------------------------------------------------------------

def _fmt(v, digits=1) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{digits}f}" if abs(v) >= 0.05 or v == 0 else f"{v:.3g}"
    if isinstance(v, (date, datetime)):
        return v.isoformat()
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


VERSION_COLS = [("scenario", "scenario"), ("broker_version", "version"), ("runs", "runs"),
                ("runs_with_loss", "with loss"), ("confirmed", "confirmed"),
                ("lost_per_million", "lost / M confirmed"), ("duplicated_per_million", "dup / M confirmed"),
                ("unavailable_p50", "unavail. s p50"), ("unavailable_p99", "p99"), ("unavailable_max", "max"),
                ("held", "held"), ("not_held", "did not hold"), ("undecided", "undecided"),
                ("no_prediction", "no prediction"), ("harness_errors", "harness errors"),
                ("incomplete", "incomplete"), ("unreadable", "unreadable"),
                ("malformed_lines", "malformed lines"), ("first_date", "first"), ("last_date", "last")]
DAY_COLS = [("scenario", "scenario"), ("run_date", "date"), ("versions", "versions"), ("runs", "runs"),
            ("runs_with_loss", "with loss"), ("lost_per_million", "lost / M confirmed"),
            ("duplicated_per_million", "dup / M confirmed"), ("unavailable_p50", "unavail. s p50"),
            ("unavailable_p99", "p99"), ("unavailable_max", "max"), ("held", "held"),
            ("not_held", "did not hold"), ("undecided", "undecided"), ("harness_errors", "harness errors")]


def _md_table(rows: list[dict], cols) -> list[str]:
    out = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(_fmt(r.get(k)).replace("|", "\\|") for k, _ in cols) + " |" for r in rows]
    return out


def _html_table(rows: list[dict], cols) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r.get(k)))}</td>" for k, _ in cols) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def plots(by_day: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    series: dict[str, list[dict]] = {}
    for r in by_day:
        if r["run_date"] is not None and r["runs"]:
            series.setdefault(r["scenario"], []).append(r)
    files = []
    specs = [("loss_rate.png", "messages lost per million confirmed",
              [("lost_per_million", "-", "o", "")]),
             ("unavailable.png", "unavailable seconds per run",
              [("unavailable_p50", "-", "o", " p50"), ("unavailable_max", ":", "^", " max")])]
    # Small multiples, one panel per scenario: a catalogue has 30+ of them,
    # too many lines (and legend entries) for one shared axis.
    names = sorted(series) or ["(no runs)"]
    cols = min(4, len(names))
    nrows = math.ceil(len(names) / cols)
    days = sorted({r["run_date"] for rs in series.values() for r in rs})
    for name, ylabel, lines in specs:
        fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.1 * nrows + 0.9), dpi=100,
                                 sharex=True, squeeze=False)
        for ax in axes.flat[len(names):]:
            ax.set_visible(False)
        for ax, sc in zip(axes.flat, names):
            for key, style, marker, suffix in lines:
                pts = [(r["run_date"], r[key]) for r in series.get(sc, []) if r[key] is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=style, marker=marker,
                            markersize=4, color="C0" if not suffix or suffix == " p50" else "C3",
                            label=suffix.strip() or None)
            if name == "loss_rate.png":  # 0 .. 10^6 per million: log above 1, 0 still shown
                ax.set_yscale("symlog", linthresh=1)
                ax.set_ylim(-0.5, 2e6)
            else:
                ax.set_ylim(bottom=0)
            ax.set_title(sc, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
        if days:
            span = (days[-1] - days[0]).days
            locator = mdates.DayLocator(interval=max(1, span // 4 + 1))
            for ax in axes.flat:
                ax.xaxis.set_major_locator(locator)
                ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
            if span == 0:
                axes.flat[0].set_xlim(days[0] - timedelta(days=1), days[0] + timedelta(days=1))
        handles, labels = axes.flat[0].get_legend_handles_labels()
        if labels:
            fig.legend(handles, labels, loc="upper right", fontsize=8)
        fig.suptitle(f"{ylabel}, per scenario and run date (UTC)", fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        fig.savefig(out / name)
        plt.close(fig)
        files.append(out / name)
    return files


def write_summary(out: Path, runs: list[dict], by_version: list[dict], by_day: list[dict],
                  errors: list[tuple[str, str]], meta: dict) -> None:
    pngs = plots(by_day, out)
    unreadable = [(r["run_dir"], r["error"]) for r in runs if r["category"] == "unreadable"]
    harness = [(r["run_dir"], r["error"] or "") for r in runs if r["category"] == "harness_error"]
    problems = errors + unreadable
    title = "mqchaos analyze"
    intro = (f"{meta['runs_found']} run(s) found, {meta['runs_checked']} checked in one Spark job "
             f"({meta['master']}, {meta['seconds']} s), {meta['harness_errors']} harness error(s), "
             f"{meta['incomplete']} incomplete, {len(problems)} error(s); generated {meta['generated_at']}.")
    notes = ("Figures per scenario and broker version over the checked runs. Lost and duplicated are per "
             "million confirmed messages (pooled over the runs); unavailable seconds are each run's total, "
             "p50 / p99 by linear interpolation. Verdicts are each run's check.json `prediction.held`. "
             "Harness errors are never judged.")
    md = [f"# {title}", "", intro, "", notes, "", "## Per scenario and broker version", ""]
    md += _md_table(by_version, VERSION_COLS)
    md += ["", "## Trend (per scenario and run date)", ""] + _md_table(by_day, DAY_COLS)
    md += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in pngs]
    if problems:
        md += ["", "## Errors (not analyzed)", ""] + [f"- `{p}`: {e}" for p, e in problems]
    if harness:
        md += ["", "## Harness errors (not judged)", ""] + [f"- `{p}`: {e}" for p, e in harness]
    md += ["", f"Per-run table: `{out / 'runs.parquet'}`", ""]
    (out / "summary.md").write_text("\n".join(md))

    imgs = "".join(
        f'<figure><img alt="{p.stem}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}"></figure>' for p in pngs)

    def ul(items):
        return "<ul>" + "".join(f"<li><code>{html.escape(p)}</code>: {html.escape(e)}</li>"
                                for p, e in items) + "</ul>"

    page = [
        "<!doctype html><html><head><meta charset='utf-8'><title>mqchaos analyze</title><style>",
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}",
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child{text-align:left}",
        "th{background:#eee}img{max-width:100%}</style></head><body>",
        f"<h1>{title}</h1><p>{html.escape(intro)}</p><p>{html.escape(notes)}</p>",
        "<h2>Per scenario and broker version</h2>", _html_table(by_version, VERSION_COLS),
        "<h2>Trend (per scenario and run date)</h2>", _html_table(by_day, DAY_COLS),
        "<h2>Plots</h2>", imgs,
    ]
    if problems:
        page += ["<h2>Errors (not analyzed)</h2>", ul(problems)]
    if harness:
        page += ["<h2>Harness errors (not judged)</h2>", ul(harness)]
    page += ["</body></html>"]
    (out / "summary.html").write_text("\n".join(page))

    def plain(rows):
        return [{k: (v.isoformat() if isinstance(v, (date, datetime)) else v) for k, v in r.items()}
                for r in rows]

    (out / "summary.json").write_text(json.dumps(
        {**meta, "by_version": plain(by_version), "by_day": plain(by_day),
         "errors": [{"path": p, "error": e} for p, e in problems],
         "harness_error_runs": [{"path": p, "error": e} for p, e in harness]}, indent=1) + "\n")


# -- entry points -------------------------------------------------------------------------------

def default_out() -> Path:
    return store.results_root() / "analysis" / store.stamp()


def analyze(spark, args: list[str], out: Path, *, ordering: str | None = None, threshold: float = 1.0,
            prefer_parquet: bool = True, list_with_spark: bool = False) -> dict:
    """The whole job on a given session; returns summary.json's content."""
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    rows, errors = collect(spark, args, ordering=ordering, threshold=threshold,
                           prefer_parquet=prefer_parquet, list_with_spark=list_with_spark)
    if not rows:
        raise AnalyzeError("no run directory found: " + "; ".join(f"{p}: {e}" for p, e in errors))
    df, by_version, by_day = aggregate(spark, rows)
    df.coalesce(1).write.mode("overwrite").parquet(str(out / "runs.parquet"))
    by_version.coalesce(1).write.mode("overwrite").parquet(str(out / "by_version.parquet"))
    by_day.coalesce(1).write.mode("overwrite").parquet(str(out / "by_day.parquet"))
    bv = [r.asDict() for r in by_version.collect()]
    bd = [r.asDict() for r in by_day.collect()]
    cat = [r["category"] for r in rows]
    meta = {"generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "inputs": list(args), "out": str(out), "master": spark.sparkContext.master,
            "runs_found": len(rows), "runs_checked": cat.count("checked"),
            "harness_errors": cat.count("harness_error"), "incomplete": cat.count("incomplete"),
            "unreadable": cat.count("unreadable"), "seconds": round(time.monotonic() - t0, 1)}
    write_summary(out, rows, bv, bd, errors, meta)
    return json.loads((out / "summary.json").read_text())


def _submitted_master() -> str | None:
    """The master spark-submit was given, when this process runs under it (the
    session builder would otherwise override it with local[*])."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master", None)


def main(args: list[str], *, master: str | None = None, out: str | None = None,
         ordering: str | None = None, threshold: float = 1.0, prefer_parquet: bool = True,
         stdout=None) -> int:
    """Exit 0: summary written (runs that could not be read are listed in it);
    2: nothing could be analyzed."""
    stdout = stdout or sys.stdout
    from checkers.history import HistoryError
    from checkers.spark import session

    out_dir = Path(out) if out else default_out()
    spark = session(master or _submitted_master(), "mqchaos-analyze")
    try:
        summary = analyze(spark, args, out_dir, ordering=ordering, threshold=threshold,
                          prefer_parquet=prefer_parquet)
    except (AnalyzeError, HistoryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for e in summary["errors"]:
        print(f"error: {e['path']}: {e['error']}", file=sys.stderr)
    print((out_dir / "summary.md").read_text().split("\n## Trend")[0], file=stdout)
    print(f"analyzed {summary['runs_checked']} of {summary['runs_found']} run(s) in "
          f"{summary['seconds']} s on {summary['master']}: {out_dir}/summary.html", file=stdout)
    return 0 if summary["runs_checked"] else 2


def _args(argv: list[str]) -> argparse.Namespace:
    """`mqchaos analyze`'s arguments, for spark-submit (which runs this file, not the CLI)."""
    p = argparse.ArgumentParser(prog="checkers/analyze.py")
    p.add_argument("results", nargs="+")
    p.add_argument("--master")
    p.add_argument("--out")
    p.add_argument("--ordering", choices=ORDERINGS)
    p.add_argument("--unavailable-threshold", type=float, default=1.0)
    p.add_argument("--json-only", action="store_true")
    return p.parse_args(argv)


if __name__ == "__main__":  # spark-submit checkers/analyze.py RESULTS... [--out DIR]
    a = _args(sys.argv[1:])
    sys.exit(main(a.results, master=a.master, out=a.out, ordering=a.ordering,
                  threshold=a.unavailable_threshold, prefer_parquet=not a.json_only))
