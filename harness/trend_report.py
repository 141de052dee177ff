"""`mqchaos summarize`'s summary (Jepsen's test-all summary; once `mqchaos analyze`): the trend rows of many runs (checkers.trend, one Spark job)
as Markdown, HTML, JSON and plots; and the command itself.

    mqchaos summarize results/ [--master URL] [--out DIR]
    spark-submit --master spark://127.0.0.1:7077 harness/trend_report.py results/ --out DIR

What it writes into --out (default results/analysis/<UTC timestamp>/), beside the
Parquet tables checkers.trend writes there (runs, by_version, by_day):

  summary.md, summary.html, summary.json, loss_rate.png, unavailable.png

The figures' definitions: checkers/trend.py (and docs/nightly.md).
"""
from __future__ import annotations

import argparse
import base64
import html
import json
import math
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

from checkers.trend import AnalyzeError, build, submitted_master
from harness import store
from harness.results import ORDERINGS
from harness.rows import md_table
from harness.util import entry_point, setup_logging
from harness.verdicts import Word


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


# checkers.trend's verdict counts under the verdict words (harness.verdicts.Word)
VERDICT_COLS = [("held", Word.HELD), ("not_held", Word.DID_NOT_HOLD.lower()), ("undecided", Word.UNDECIDED),
                ("harness_errors", f"{Word.HARNESS_ERROR}s")]
VERSION_COLS = [("scenario", "scenario"), ("broker_version", "version"), ("runs", "runs"),
                ("runs_with_loss", "with loss"), ("confirmed", "confirmed"),
                ("lost_per_million", "lost / M confirmed"), ("duplicated_per_million", "dup / M confirmed"),
                ("unavailable_p50", "unavail. s p50"), ("unavailable_p99", "p99"), ("unavailable_max", "max"),
                *VERDICT_COLS[:3],
                ("no_prediction", "no prediction"), VERDICT_COLS[3],
                ("incomplete", "incomplete"), ("unreadable", "unreadable"),
                ("malformed_lines", "malformed lines"), ("first_date", "first"), ("last_date", "last")]
DAY_COLS = [("scenario", "scenario"), ("run_date", "date"), ("versions", "versions"), ("runs", "runs"),
            ("runs_with_loss", "with loss"), ("lost_per_million", "lost / M confirmed"),
            ("duplicated_per_million", "dup / M confirmed"), ("unavailable_p50", "unavail. s p50"),
            ("unavailable_p99", "p99"), ("unavailable_max", "max"), *VERDICT_COLS]


def _md_table(rows: list[dict], cols) -> list[str]:
    return md_table([h for _, h in cols], [[_fmt(r.get(k)).replace("|", "\\|") for k, _ in cols] for r in rows])


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
    title = "mqchaos summarize"
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
        "<!doctype html><html><head><meta charset='utf-8'><title>mqchaos summarize</title><style>",
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
    t = build(spark, args, out, ordering=ordering, threshold=threshold, prefer_parquet=prefer_parquet,
              list_with_spark=list_with_spark)
    write_summary(out, t.runs, t.by_version, t.by_day, t.errors, t.meta)
    return json.loads((out / "summary.json").read_text())


def main(args: list[str], *, master: str | None = None, out: str | None = None,
         ordering: str | None = None, threshold: float = 1.0, prefer_parquet: bool = True,
         stdout=None) -> int:
    """Exit 0: summary written (runs that could not be read are listed in it);
    2: nothing could be analyzed."""
    stdout = stdout or sys.stdout
    from checkers.history import HistoryError
    from checkers.spark import session

    out_dir = Path(out) if out else default_out()
    spark = session(master or submitted_master(), "mqchaos-analyze")
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
    p = argparse.ArgumentParser(prog="harness/trend_report.py")
    p.add_argument("results", nargs="+")
    p.add_argument("--master")
    p.add_argument("--out")
    p.add_argument("--ordering", choices=ORDERINGS)
    p.add_argument("--unavailable-threshold", type=float, default=1.0)
    p.add_argument("--json-only", action="store_true")
    return p.parse_args(argv)


if __name__ == "__main__":  # spark-submit harness/trend_report.py RESULTS... [--out DIR]
    with entry_point():
        setup_logging()
        a = _args(sys.argv[1:])
        sys.exit(main(a.results, master=a.master, out=a.out, ordering=a.ordering,
                      threshold=a.unavailable_threshold, prefer_parquet=not a.json_only))
