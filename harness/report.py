"""A run's report: report.md and report.html (with throughput.png), from its run.json,
check.json and artefacts. The verdict itself is ``harness.expect``'s."""
from __future__ import annotations

import html
import json
import sys
from collections import Counter
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt

from harness import expect, store
from harness.scenario import ScenarioError, parse_recorded

matplotlib.use("Agg")


def faults(run_dir: Path) -> list[dict]:
    return store.read_jsonl(Path(run_dir) / store.NEMESIS_LOG)


def plot(run_dir: Path) -> Path | None:
    produce = store.history_records(run_dir, "produce")
    consume = store.history_records(run_dir, "consume")
    if not produce:
        return None
    per = {o: Counter() for o in ("ok", "fail", "info")}
    for r in produce:
        if r.get("outcome") in per and isinstance(r.get("t_complete"), (int, float)):
            per[r["outcome"]][int(r["t_complete"])] += 1
    dlv = Counter(int(r["t"]) for r in consume if isinstance(r.get("t"), (int, float)))
    end = max([max(c, default=0) for c in per.values()] + [max(dlv, default=0)]) + 1
    xs = list(range(end))
    fig, ax = plt.subplots(figsize=(10, 4), dpi=100)
    for o, color in (("ok", "tab:green"), ("fail", "tab:red"), ("info", "tab:orange")):
        ax.plot(xs, [per[o][x] for x in xs], label=f"publish {o}/s", color=color, lw=1)
    ax.plot(xs, [dlv[x] for x in xs], label="delivered/s", color="tab:blue", lw=1, alpha=0.7)
    for f in faults(run_dir):
        a, z = f.get("t_start"), f.get("t_end") or end
        if isinstance(a, (int, float)):
            ax.axvspan(a, z, color="grey", alpha=0.2)
            ax.text(a, ax.get_ylim()[1] * 0.95, f.get("fault", "?"), fontsize=7, va="top")
    ax.set_xlabel("seconds since run start (grey: faults active)")
    ax.set_ylabel("messages / s")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    out = run_dir / store.PLOT
    fig.savefig(out)
    plt.close(fig)
    return out


def write(run_dir: Path, sc, result: dict, info: dict) -> None:
    run_dir = Path(run_dir)
    png = plot(run_dir)
    v = result["prediction"]
    rows = [("attempted", result["attempted"]), ("confirmed (ok)", result["ok"]), ("failed", result["fail"]),
            ("unknown (info)", result["info"]), ("lost", result["lost"]), ("duplicated", result["duplicated"]),
            ("unexpected", result["unexpected"]), ("recovered", result["recovered"]),
            ("recovered despite fail", result["recovered_fail"]),
            (f"ordering violations ({result['ordering']})", result["ordering_violations"]),
            ("unavailable seconds", result["unavailable_s"]), ("malformed history lines", result["malformed_lines"])]
    md = [f"# {sc.name}" + (f" ({sc.id})" if sc.id else ""), "", sc.description.strip(), "",
          f"- broker: {sc.broker} {json.dumps(info.get('brokers', {}))}",
          f"- run: `{run_dir}` started {info.get('started_at')}, status {info.get('status')}",
          f"- checker verdict: **{ {True: 'valid', False: 'INVALID', None: 'unknown'}[result['valid']] }** "
          f"({result['reason']})",
          f"- prediction: **{ {True: 'held', False: 'DID NOT HOLD (finding)', None: 'could not decide'}[v['held']] }** "
          f"— {v['reason']}",
          f"- drain: {json.dumps(info.get('drain'))}"]
    if info.get("self_healed") is False:
        rec = info.get("operator_recovery") or {}
        md.append(f"- **the cluster did not recover by itself** after the faults were lifted "
                  f"({rec.get('reason')}); the run restarted {rec.get('restarted')} as an operator would "
                  f"(a finding about availability)")
    md += ["", "| measure | value |", "|---|---|"]
    md += [f"| {k} | {val} |" for k, val in rows]
    if v["checks"]:
        md += ["", "## Prediction", "", "| quantity | predicted | measured | held |", "|---|---|---|---|"]
        md += [f"| {c['key']} | {c['expected']} | {c['actual']} | {c['held']} |" for c in v["checks"]]
    meas = info.get("measurements") or {}
    timelines = {k: meas[k] for k in sorted(meas) if k.endswith("_timeline") and meas[k]}
    plain = {k: v for k, v in meas.items() if k not in timelines}
    if plain or info.get("prefill"):
        md += ["", "## Measurements", "", "| quantity | value |", "|---|---|"]
        md += [f"| {k} | {json.dumps(v, ensure_ascii=False)} |" for k, v in sorted(plain.items())]
        if info.get("prefill"):
            md.append(f"| prefill | {json.dumps(info['prefill'])} |")
    for k, rows in timelines.items():
        md += ["", f"## {k.removesuffix('_timeline').replace('_', ' ')} over time "
               "(sampled each second, changes only)", "",
               "| t (s) | state |", "|---|---|"]
        md += [f"| {t} | {lab} |" for t, lab in rows[:200]]
    if result.get("lost_window"):
        a, z = result["lost_window"]
        md += ["", f"The lost messages had been confirmed between t={a:.2f}s and t={z:.2f}s."]
    md += ["", "## Unavailable intervals (s since start)", ""]
    md += [f"- {a:.2f} – {z:.2f} ({z - a:.2f} s)" for a, z in result["unavailable"]] or ["- none"]
    md += unavailability(result, meas)
    md += ["", "## Fault timeline", "", "| start | end | fault | targets | details |", "|---|---|---|---|---|"]
    for f in faults(run_dir):
        md.append(f"| {f.get('t_start')} | {f.get('t_end')} | {f.get('fault')} | {f.get('targets')} | "
                  f"`{json.dumps(f.get('details'), ensure_ascii=False)[:200]}` |")
    md += ["", "## Samples", ""]
    md += [f"- {k}: {', '.join(ids[:10])}" for k, ids in result["samples"].items() if ids] or ["- none"]
    if png:
        md += ["", f"![throughput]({png.name})"]
    md += ["", "Artefacts: `history/` (produce/consume JSONL + Parquet), `nemesis.jsonl`, `logs/`, "
           "`check.json`, `run.json`. Re-check offline: `mqchaos check " + str(run_dir) + "`."]
    (run_dir / store.REPORT_MD).write_text("\n".join(md) + "\n", encoding="utf-8")
    body = md_to_html(md)
    (run_dir / store.REPORT_HTML).write_text(
        f"<!doctype html><meta charset=utf-8><title>{html.escape(sc.name)}</title>"
        f"<style>body{{font-family:sans-serif;max-width:60em}}td,th{{border:1px solid #ccc;padding:2px 6px}}"
        f"table{{border-collapse:collapse}}</style>\n{body}\n", encoding="utf-8")


def md_to_html(lines: list[str]) -> str:
    """Just enough Markdown for the reports: headings, bullets, tables, images."""
    out, table = [], []

    def flush():
        if table:
            out.append("<table>" + "".join(table) + "</table>")
            table.clear()

    for line in lines:
        if line.startswith("|"):
            if not set(line) <= set("|- "):
                tag = "th" if not table else "td"
                cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
                table.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>")
            continue
        flush()
        if line.startswith("#"):
            n = len(line) - len(line.lstrip("#"))
            out.append(f"<h{n}>{html.escape(line[n:].strip())}</h{n}>")
        elif line.startswith("!["):
            out.append(f'<img src="{html.escape(line[line.index("(") + 1:-1])}" alt="plot">')
        elif line.startswith("- "):
            out.append(f"<li>{html.escape(line[2:])}</li>")
        elif line:
            out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return "\n".join(out)


def unavailability(result: dict, meas: dict) -> list[str]:
    """Unavailability from both sides: what each client saw (per producer, per reader),
    what the broker's own state was (from the observer), and the clients' timeouts, which
    bound what a client can see."""
    side = [("pooled over producers", f"{result.get('unavailable_s', 0)} s")]
    for p, iv in sorted((result.get("unavailable_by_producer") or {}).items()):
        side.append((f"producer {p}", f"{sum(z - a for a, z in iv):.2f} s in {len(iv)} interval(s)"))
    for c, iv in sorted((result.get("read_gaps") or {}).items()):
        side.append((f"reader {c}: longest wait", f"{max(z - a for a, z in iv):.2f} s ({len(iv)} wait(s))"))
    broker = [(k, meas[k]) for k in sorted(meas) if k in ("leaderless_s", "isr_below_min_s", "masterless_s")]
    broker += [(f"node {n} not running", f"{s} s") for n, s in (meas.get("nodes_down_s") or {}).items() if s]
    lines = ["", "## Unavailability, from both sides", "", "| seen by | what | value |", "|---|---|---|"]
    lines += [f"| clients | {k} | {v} |" for k, v in side]
    lines += [f"| broker | {k} | {v} |" for k, v in broker] or ["| broker | (no unavailable state observed) | 0 |"]
    lines += [f"| timeout in force | {k} | {v} |" for k, v in (meas.get("client_timeouts") or {}).items()]
    return lines


def judge_and_write(run_dir: Path, sc, result: dict, info: dict) -> dict:
    """The prediction judged, check.json and the report written; returns the verdict."""
    result["prediction"] = expect.verdict(sc, result, info)
    store.write_check(run_dir, result)
    write(Path(run_dir), sc, result, info)
    return result["prediction"]


def refresh(run_dir: Path) -> dict | None:
    """After an offline re-check: the prediction and the report again, from
    the run's own run.json (the scenario as run) and the new check.json."""
    run_dir = Path(run_dir)
    info, result = store.read_run(run_dir), store.read_check(run_dir)
    if info is None or result is None or "params" not in info:
        return None  # not a harness run: nothing was predicted
    try:
        sc = parse_recorded(info["params"], str(run_dir / store.RUN_JSON))
    except ScenarioError as e:  # a scenario this version cannot read: the check stands, unjudged
        print(f"warning: {run_dir}: the recorded scenario no longer validates, prediction not judged: {e}",
              file=sys.stderr)
        return None
    return judge_and_write(run_dir, sc, result, info)
