"""A run's report: report.html (from a template, with the run's pictures: harness.plots) and
report.md, from its run.json, check.json and artefacts. It renders the verdict
``harness.judge.decide`` wrote into check.json ("prediction") and decides nothing. Every
checked run gets one, also a run checked offline."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from harness import plots, store
from harness.scenario import ScenarioError, parse_recorded
from harness.results import DETAIL_GROUPS
from harness.templates import TEMPLATES
from harness.util import entry_point, setup_logging
from harness.verdicts import CHECKER_WORDS, HELD_WORDS, SHADES, Word
from harness.windows import OPERATOR_KINDS


def recovery_text(info: dict) -> str:
    """What the run did when the cluster did not recover by itself after the faults."""
    rec = info.get("operator_recovery") or {}
    if rec.get("failed"):
        return (f"the cluster did not recover by itself ({rec.get('reason')}), and restarting the nodes that "
                f"did not serve, as an operator would, did not bring it back: {rec['failed']}")
    return (f"the cluster did not recover by itself ({rec.get('reason')}); the run restarted "
            f"{rec.get('restarted')} as an operator would")


def value_text(x) -> str:
    """A measured value as a person reads it, not as JSON: ``a: 1; b: rabbit1, rabbit2``."""
    if isinstance(x, dict):
        return "; ".join(f"{k}: {_nested(v)}" for k, v in x.items()) or "none"
    if isinstance(x, (list, tuple)):
        return ", ".join(_nested(v) for v in x) or "none"
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, float):
        return f"{x:g}"
    return "–" if x is None else str(x)


def _nested(x) -> str:
    """A value inside another: a mapping or list in parentheses, so the outer one's separators
    stay readable."""
    return f"({value_text(x)})" if isinstance(x, (dict, list, tuple)) and x else value_text(x)


def brokers_text(brokers: dict | None) -> str:
    """run.json's ``brokers``: the versions the nodes run, then which nodes run which image."""
    brokers = brokers or {}
    head = ", ".join(f"{k} {v}" for k, v in brokers.items() if k != "nodes" and v and not isinstance(v, dict))
    by_image: dict[str, list[str]] = {}
    for node, about in (brokers.get("nodes") or {}).items():
        by_image.setdefault(str((about or {}).get("image", "image unknown")), []).append(node)
    nodes = "; ".join(f"{', '.join(ns)} on {image}" for image, ns in by_image.items())
    return head + (f" ({nodes})" if nodes else "") if head or nodes else "versions not recorded"


def history_text(run_dir: Path, result: dict, info: dict) -> str:
    """How big the history the check read was, and how long the check took."""
    files = list((Path(run_dir) / store.HISTORY).glob("*.jsonl"))
    size = sum(f.stat().st_size for f in files)
    counts = {k: result.get(k) for k in ("produce_records", "deliveries", "replica_records") if result.get(k)}
    text = f"{sum(counts.values()):,} records ({value_text(counts)}), {size / 1e6:.1f} MB in {len(files)} files"
    timing = info.get("check_timing") or {}
    return text + (f"; checked in {timing['check_s']:g} s" if timing.get("check_s") is not None else "")


def faults(run_dir: Path) -> list[dict]:
    return store.read_jsonl(Path(run_dir) / store.NEMESIS_LOG)


def write(run_dir: Path, sc, result: dict, info: dict, pictures: bool = True) -> None:
    """report.md and report.html; ``sc`` is None for a run without a recorded scenario.
    Without ``pictures`` (a batch draws them later, between runs) the pages have none."""
    run_dir = Path(run_dir)
    pictures = plots.draw_all(run_dir, result, info) if pictures else []
    (run_dir / store.REPORT_MD).write_text("\n".join(markdown(run_dir, sc, result, info, pictures)) + "\n",
                                           encoding="utf-8")
    (run_dir / store.REPORT_HTML).write_text(html_page(run_dir, sc, result, info, pictures), encoding="utf-8")


def markdown(run_dir: Path, sc, result: dict, info: dict, pictures: list[Path]) -> list[str]:
    v = result.get("prediction") or {"held": None, "reason": "no scenario recorded", "checks": []}
    rows = _counts(result)
    name = sc.name if sc else run_dir.name
    md = [f"# {name}" + (f" ({sc.id})" if sc and sc.id else ""), "", (sc.description.strip() if sc else ""), "",
          f"- broker: {sc.broker if sc else info.get('broker')}: {brokers_text(info.get('brokers'))}",
          f"- run: `{run_dir}` started {info.get('started_at')}, status {info.get('status')}",
          f"- checker verdict: **{CHECKER_WORDS[result['valid']]}** ({result.get('reason')})",
          f"- prediction: **{PREDICTION_MD[v['held']]}** — {v['reason']}",
          f"- drain: {value_text(info.get('drain'))}",
          f"- history: {history_text(run_dir, result, info)}"]
    if info.get("self_healed") is False:
        md.append(f"- **{recovery_text(info)}** (a finding about availability)")
    md += ["", "| measure | value |", "|---|---|"]
    md += [f"| {k} | {val} |" for k, val in rows]
    if v["checks"]:
        md += ["", "## Prediction", "", "| quantity | predicted | measured | held |", "|---|---|---|---|"]
        md += [f"| {c['key']} | {c['expected']} | {c['actual']} | {c['held']} |" for c in v["checks"]]
    meas = info.get("measurements") or {}
    plain = {k: x for k, x in meas.items() if not k.endswith("_timeline")}
    if plain or info.get("prefill"):
        md += ["", "## Measurements", "", "| quantity | value |", "|---|---|"]
        md += [f"| {k} | {_md(value_text(x))} |" for k, x in sorted(plain.items())]
        if info.get("prefill"):
            md.append(f"| prefill | {_md(value_text(info['prefill']))} |")
    for title, tl in _timelines(meas):
        md += ["", f"## {title}", "", "| t (s) | state |", "|---|---|"]
        md += [f"| {t} | {lab} |" for t, lab in tl]
    if result.get("lost_window"):
        a, z = result["lost_window"]
        md += ["", f"The lost messages had been confirmed between t={a:.2f}s and t={z:.2f}s."]
    md += ["", "## Unavailable intervals (s since start)", ""]
    md += [f"- {a:.2f} – {z:.2f} ({z - a:.2f} s)" for a, z in result.get("unavailable") or []] or ["- none"]
    md += ["", "## Unavailability, from both sides", "", "| seen by | what | value |", "|---|---|---|"]
    md += [f"| {who} | {what} | {value} |" for who, what, value in unavailability(result, meas)]
    md += ["", "## Fault timeline", "", "| start | end | fault | targets | effect |", "|---|---|---|---|---|"]
    md += [f"| {f['start']} | {f['end']} | {f['fault']} | {f['targets']} | {f['effect']} |"
           for f in fault_rows(run_dir)]
    detail = _detail(result)
    if detail:
        md += ["", "## Log, transactions, cycles", "", "| figure | value |", "|---|---|"]
        md += [f"| {k} | {x} |" for k, x in detail]
    md += ["", "## Samples", ""]
    md += [f"- {k}: {_md(ids)}" for k, ids in _samples(result)] or ["- none"]
    md += [""] + [f"![{p.stem}]({p.name})" for p in pictures]
    md += ["", "Artefacts: `history/` (produce/consume JSONL + Parquet), `nemesis.jsonl`, `logs/`, "
           "`check.json`, `run.json`. Re-check offline: `mqchaos check " + str(run_dir) + "`."]
    return md


# the verdict words (harness.verdicts.Word) as the report's lines and banner put them
PREDICTION_MD = {**HELD_WORDS, False: f"{Word.DID_NOT_HOLD} (finding)"}
VALIDITY_HTML = {True: Word.VALID, False: f"{Word.ANOMALIES} found", None: Word.UNDECIDED}
CHECK_HTML = {True: "yes", False: "no", None: Word.UNDECIDED}  # a check held?
HEADLINE = {True: f"prediction {Word.HELD}", False: f"PREDICTION {Word.DID_NOT_HOLD}", None: "could not decide"}
HEADLINE_UNPREDICTED = {**HEADLINE, True: Word.VALID, False: f"{Word.ANOMALIES} found".upper()}


def _md(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _counts(result: dict) -> list[tuple[str, object]]:
    return [("attempted", result["attempted"]), ("confirmed (ok)", result["ok"]), ("failed", result["fail"]),
            ("unknown (info)", result["info"]), ("lost", result["lost"]), ("duplicated", result["duplicated"]),
            ("unexpected", result["unexpected"]), ("recovered", result["recovered"]),
            ("recovered despite fail", result["recovered_fail"]),
            (f"ordering violations ({result.get('ordering')})", result["ordering_violations"]),
            ("unavailable seconds (pooled)", result["unavailable_s"]),
            ("malformed history lines", result["malformed_lines"])]


def _timelines(meas: dict) -> list[tuple[str, list]]:
    return [(f"{k.removesuffix('_timeline').replace('_', ' ')} over time (sampled each second, changes only)",
             meas[k][:200]) for k in sorted(meas) if k.endswith("_timeline") and meas[k]]


def _samples(result: dict) -> list[tuple[str, str]]:
    groups = [result.get("samples") or {}, *(result.get(s) or {} for s, _ in DETAIL_GROUPS)]
    return [(k, ", ".join(ids[:10]) + (" ..." if len(ids) > 10 else ""))
            for g in groups for k, ids in g.items() if ids]


def _detail(result: dict) -> list[tuple[str, object]]:
    """The log, transaction and cycle figures the run has (None: not applicable to it)."""
    return [(k, result[k]) for _, keys in DETAIL_GROUPS for k in keys if result.get(k) is not None]


def fault_rows(run_dir: Path) -> list[dict]:
    """nemesis.jsonl as a person reads it: when, what, on which nodes, and what it did."""
    out = []
    for f in faults(run_dir):
        d = f.get("details") if isinstance(f.get("details"), dict) else {}
        a, z = f.get("t_start"), f.get("t_end")
        ev = d.get("evidence") or {}
        if d.get("error"):
            effect, cls = f"failed: {str(d['error'])[:160]}", "bad"
        elif d.get("effective") is False:
            effect, cls = "no effect: " + json.dumps(ev)[:160], "bad"
        elif "dropped_packets" in ev:
            effect, cls = f"{sum(ev['dropped_packets'].values())} packets dropped", "good"
        elif "unsynced_bytes_dropped" in ev:  # a power loss
            lost = ev["unsynced_bytes_dropped"]
            effect = ("power cut; unsynced bytes dropped: "
                      + ", ".join(f"{n} {b:,}" for n, b in lost.items() if b is not None))
            cls = "good"
        elif f.get("fault") in OPERATOR_KINDS:  # the harness's hand: shown, never a fault's effect
            effect, cls = f"operator event: {f.get('action') or d.get('recovery')}", "muted"
        elif ev:
            effect, cls = ", ".join(f"{k}: {json.dumps(x)}" for k, x in ev.items())[:160], "good"
        else:
            effect, cls = "(no evidence recorded: a run from before the evidence)", "muted"
        links = d.get("links")
        targets = " ".join("/".join(link) for link in links) if links else ", ".join(map(str, f.get("targets") or []))
        out.append({"start": _t(a), "end": _t(z), "lasted": _t(z - a) if isinstance(a, (int, float))
                    and isinstance(z, (int, float)) else "-", "fault": f.get("fault"), "targets": targets,
                    "effect": effect, "cls": cls})
    return out


def _t(x) -> str:
    return f"{x:.1f}" if isinstance(x, (int, float)) else "-"


def html_page(run_dir: Path, sc, result: dict, info: dict, pictures: list[Path]) -> str:
    v = result.get("prediction") or {"held": None, "reason": "no scenario recorded", "checks": []}
    held = v["held"] if v["checks"] else result["valid"]
    banner = (SHADES[held], (HEADLINE if v["checks"] else HEADLINE_UNPREDICTED)[held])
    meas = info.get("measurements") or {}
    return TEMPLATES.get_template("report.html.j2").render(
        title=sc.name if sc else run_dir.name, scenario_name=sc.name if sc else run_dir.name,
        scenario_id=sc.id if sc else None, description=sc.description.strip() if sc else "",
        banner={"cls": banner[0], "headline": banner[1], "detail": v["reason"]},
        validity=VALIDITY_HTML[result["valid"]], check_words=CHECK_HTML,
        reason=result.get("reason"), broker=sc.broker if sc else info.get("broker"),
        versions=brokers_text(info.get("brokers")),
        run_dir=str(run_dir), started_at=info.get("started_at"), status=info.get("status"),
        drain=value_text(info.get("drain")),
        recovery=recovery_text(info) if info.get("self_healed") is False else None,
        checks=v["checks"], counts=_counts(result), plots=[p.name for p in pictures],
        unavailability=unavailability(result, meas), faults=fault_rows(run_dir),
        measurements=[(k, value_text(x)[:300]) for k, x in sorted(meas.items()) if not k.endswith("_timeline")],
        timelines=_timelines(meas), samples=_samples(result), detail=_detail(result))


def unavailability(result: dict, meas: dict) -> list[tuple[str, str, object]]:
    """Unavailability from both sides: what each client saw (per producer, per reader),
    what the broker's own state was (from the observer), and the clients' timeouts, which
    bound what a client can see."""
    rows: list[tuple[str, str, object]] = [("clients", "pooled over producers", f"{result.get('unavailable_s', 0)} s")]
    for p, iv in sorted((result.get("unavailable_by_producer") or {}).items()):
        rows.append(("clients", f"producer {p}", f"{sum(z - a for a, z in iv):.2f} s in {len(iv)} interval(s)"))
    if result.get("read_gaps") is None and "read_gaps" in result:
        rows.append(("clients", "readers' waits", "not computed (millions of records)"))
    for c, iv in sorted((result.get("read_gaps") or {}).items()):
        rows.append(("clients", f"reader {c}: longest wait", f"{max(z - a for a, z in iv):.2f} s ({len(iv)} wait(s))"))
    broker = [("broker", k, f"{meas[k]} s") for k in ("leaderless_s", "isr_below_min_s", "masterless_s") if k in meas]
    broker += [("broker", f"node {n} not running", f"{x} s") for n, x in (meas.get("nodes_down_s") or {}).items() if x]
    rows += broker or [("broker", "no unavailable state observed", "0 s")]
    rows += [("timeout in force", k, v) for k, v in (meas.get("client_timeouts") or {}).items()]
    return rows


def recorded(run_dir: Path) -> tuple | None:
    """(scenario, check.json, run.json) of a checked harness run, None if it is not one;
    the scenario None if the recorded one no longer validates (said on stderr)."""
    run_dir = Path(run_dir)
    info, result = store.read_run(run_dir), store.read_check(run_dir)
    if info is None or result is None or "params" not in info:
        return None  # not a harness run: nothing was predicted
    try:
        sc = parse_recorded(info["params"], str(run_dir / store.RUN_JSON))
    except ScenarioError as e:  # a scenario this version cannot read: the check stands, unjudged
        print(f"warning: {run_dir}: the recorded scenario no longer validates, prediction not judged: {e}",
              file=sys.stderr)
        sc = None
    return sc, result, info


def draw(run_dir: Path) -> None:
    """The report again with its pictures, from what a judged run wrote (a batch runs this
    in a process of its own at the lowest priority: ``python -m harness.report RUN_DIR``)."""
    got = recorded(run_dir)
    if got is None:
        raise SystemExit(f"{run_dir}: no judged run to draw")
    write(Path(run_dir), *got, pictures=True)


if __name__ == "__main__":
    with entry_point():
        setup_logging()
        draw(Path(sys.argv[1]))
