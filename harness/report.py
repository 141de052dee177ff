"""The run's verdict against the scenario's prediction, and its report.

`expect:` maps a measured quantity to a prediction: a number (equality),
or a comparison string such as ">0", "<=5", "==0", or true/false for `valid`.
"""
from __future__ import annotations

import html
import json
import operator
import re
from collections import Counter
from pathlib import Path

CHECKER_KEYS = {"attempted", "ok", "fail", "info", "produce_records", "delivered", "deliveries", "lost",
                "duplicated", "duplicate_deliveries", "unexpected", "recovered", "recovered_fail",
                "id_conflicts", "ordering_violations", "malformed_lines", "unavailable_s", "valid",
                "unavailable_intervals", "drain_complete"}
OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
       ">": operator.gt, "<": operator.lt}
_CMP = re.compile(r"^\s*(>=|<=|==|!=|>|<)?\s*(-?[0-9.]+(?:e-?[0-9]+)?)\s*$")


def decidable(sc) -> set[str]:
    """The quantities a run of `sc` measures: what its `expect:` may name."""
    from harness import observe, probes
    keys = set(CHECKER_KEYS)
    keys |= observe.RABBIT_MEASUREMENTS if sc.broker == "rabbitmq" else observe.KAFKA_MEASUREMENTS
    keys |= probes.measurement_names(sc.probes)
    if sc.workload.prefill:
        keys |= {"prefill.seconds", "prefill.rate"}
    return keys


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


def expectations(sc) -> dict:
    """The scenario's predictions with nested mappings flattened (`a: {b: x}` is `a.b: x`),
    except where the quantity itself is a mapping (`masters_after: {rabbit1: 3, ...}`)."""
    keys = decidable(sc)
    out = {}
    for k, v in sc.expect.items():
        if isinstance(v, dict) and k not in keys:
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def measured(result: dict, info: dict) -> dict:
    """Every quantity an `expect:` entry may name."""
    m = {k: v for k, v in result.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    m["valid"] = result.get("valid")
    m["unavailable_intervals"] = len(result.get("unavailable") or [])
    m["drain_complete"] = (info.get("drain") or {}).get("complete")
    m.update(flatten(info.get("measurements") or {}))
    if info.get("prefill"):
        m.update(flatten({"prefill": info["prefill"]}))
    return m


def judge(expected, actual) -> bool | None:
    if actual is None:
        return None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual == expected
    if isinstance(expected, (list, dict)):
        norm = (lambda x: sorted(x)) if isinstance(expected, list) else (lambda x: x)
        return isinstance(actual, type(expected)) and norm(actual) == norm(expected)
    if isinstance(expected, (int, float)):
        return actual == expected
    m = _CMP.match(str(expected))
    if not m:
        return None
    return OPS[m.group(1) or "=="](actual, float(m.group(2)))


def verdict(sc, result: dict, info: dict) -> dict:
    m = measured(result, info)
    checks = []
    for key, exp in expectations(sc).items():
        held = judge(exp, m.get(key)) if key in m else None
        checks.append({"key": key, "expected": exp, "actual": m.get(key), "held": held})
    if not checks:
        held, reason = None, "the scenario states no prediction"
    elif any(c["held"] is False for c in checks):
        held, reason = False, "prediction did not hold: " + ", ".join(
            f"{c['key']}={c['actual']} (predicted {c['expected']})" for c in checks if c["held"] is False)
    elif any(c["held"] is None for c in checks):
        held, reason = None, "could not decide: " + ", ".join(c["key"] for c in checks if c["held"] is None)
    else:
        held, reason = True, "prediction held"
    if held is not None and result.get("lost") and not (info.get("drain") or {}).get("complete"):
        held, reason = None, "could not decide: the drain did not finish, 'lost' may still be queued"
    return {"held": held, "reason": reason, "checks": checks}


def summary_row(sc, result: dict, info: dict, run_dir: Path) -> dict:
    m = measured(result, info)
    # The row's own measurement: what the prediction names beyond the usual counts.
    specific = {k: m.get(k) for k in expectations(sc) if k not in CHECKER_KEYS}
    if m.get("self_healed") is False:  # the cluster had to be restarted by hand: always shown
        specific["self_healed"] = False
    return {"scenario": sc.name, "id": sc.id, "attempted": result["attempted"], "confirmed": result["ok"],
            "failed": result["fail"], "unknown": result["info"], "lost": result["lost"],
            "duplicated": result["duplicated"], "ordering_violations": result["ordering_violations"],
            "ordering": result.get("ordering"), "unavailable_s": result["unavailable_s"],
            "blocked_s": m.get("blocked_s"), "measurement": specific, "valid": result["valid"],
            "prediction": result["prediction"]["held"], "reason": result["prediction"]["reason"],
            "expect": sc.expect, "brokers": info.get("brokers"), "report": str(run_dir / "report.md")}


def _read_jsonl(files) -> list[dict]:
    out = []
    for f in files:
        for line in Path(f).read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def faults(run_dir: Path) -> list[dict]:
    p = run_dir / "nemesis.jsonl"
    return _read_jsonl([p]) if p.exists() else []


def plot(run_dir: Path) -> Path | None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    produce = _read_jsonl(sorted((run_dir / "history").glob("produce*.jsonl")))
    consume = _read_jsonl(sorted((run_dir / "history").glob("consume*.jsonl")))
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
    out = run_dir / "throughput.png"
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
    timelines = {k: meas[k] for k in ("isr_timeline", "queue_timeline") if meas.get(k)}
    plain = {k: v for k, v in meas.items() if k not in timelines}
    if plain or info.get("prefill"):
        md += ["", "## Measurements", "", "| quantity | value |", "|---|---|"]
        md += [f"| {k} | {json.dumps(v, ensure_ascii=False)} |" for k, v in sorted(plain.items())]
        if info.get("prefill"):
            md.append(f"| prefill | {json.dumps(info['prefill'])} |")
    for k, rows in timelines.items():
        what = "ISR and leader" if k == "isr_timeline" else "queue master/leader and synchronised mirrors"
        md += ["", f"## {what} over time (sampled each second, changes only)", "",
               "| t (s) | state |", "|---|---|"]
        md += [f"| {t} | {lab} |" for t, lab in rows[:200]]
    if result.get("lost_window"):
        a, z = result["lost_window"]
        md += ["", f"The lost messages had been confirmed between t={a:.2f}s and t={z:.2f}s."]
    md += ["", "## Unavailable intervals (s since start)", ""]
    md += [f"- {a:.2f} – {z:.2f} ({z - a:.2f} s)" for a, z in result["unavailable"]] or ["- none"]
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
    (run_dir / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    body = md_to_html(md)
    (run_dir / "report.html").write_text(
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


def refresh(run_dir: Path) -> dict | None:
    """After an offline re-check: the prediction and the report again, from
    the run's own run.json (the scenario as run) and the new check.json."""
    from harness.scenario import parse

    run_dir = Path(run_dir)
    try:
        info = json.loads((run_dir / "run.json").read_text())
        result = json.loads((run_dir / "check.json").read_text())
    except (OSError, ValueError):
        return None
    if "params" not in info:
        return None  # not a harness run: nothing was predicted
    sc = parse(info["params"], str(run_dir / "run.json"))
    result["prediction"] = verdict(sc, result, info)
    (run_dir / "check.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    write(run_dir, sc, result, info)
    return result["prediction"]
