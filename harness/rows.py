"""The row model of a batch (one row per run) and its reporters: a text table, Markdown,
JUnit XML and JSON. Every batch (``make test-partition``, the catalogue, nightly) renders
the same rows."""
from __future__ import annotations

import json
import os
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from harness import expect, store
from harness.templates import TEMPLATES
from harness.verdicts import REFUSED

VERDICT = {True: "held", False: "DID NOT HOLD", None: "could not decide"}


def run_row(sc, result: dict, info: dict, run_dir: Path) -> dict:
    """The figures of one checked run."""
    m = expect.measured(result, info)
    # The row's own measurement: what the prediction names beyond the usual counts.
    specific = {k: m.get(k) for k in [*expect.expectations(sc), *expect.expectations(sc, "require")]
                if k not in expect.CHECKER_KEYS}
    if m.get("self_healed") is False:  # the cluster had to be restarted by hand: always shown
        specific["self_healed"] = False
    return {"scenario": sc.name, "id": sc.id, "attempted": result["attempted"], "confirmed": result["ok"],
            "failed": result["fail"], "unknown": result["info"], "lost": result["lost"],
            "duplicated": result["duplicated"], "ordering_violations": result["ordering_violations"],
            "ordering": result.get("ordering"), "unavailable_s": result["unavailable_s"],
            "blocked_s": m.get("blocked_s"), "measurement": specific, "valid": result["valid"],
            "prediction": result["prediction"]["held"], "reason": result["prediction"]["reason"],
            "decided_by": decided_by(result["prediction"]), "expect": sc.expect, "require": sc.require,
            "version": sc.version, "brokers": info.get("brokers"), "report": str(Path(run_dir) / store.REPORT_MD)}


def not_applicable_row(sc, result: dict, run_dir: Path) -> dict:
    """The row of a run whose claim does not exist in its version: nothing measured."""
    return {"scenario": sc.name, "id": sc.id, "valid": None, "prediction": None, "not_applicable": True,
            "reason": result["reason"], "decided_by": result["reason"], "expect": sc.expect,
            "require": sc.require, "version": sc.version, "report": str(Path(run_dir) / store.CHECK_JSON)}


def decided_by(prediction: dict) -> str:
    """How a verdict was reached, in a table cell: the checks that decided it (all of them
    when it held, the failed ones when not) and the set-up it required; or why nothing was."""
    held = prediction.get("held")
    checks = prediction.get("checks") or []
    if held is None:
        return prediction.get("reason") or "no prediction"
    shown = checks if held else [c for c in checks if c.get("held") is False]
    out = "; ".join(f"{c['key']}={_fmt(c.get('actual'))} vs {_fmt(c.get('expected'))}" for c in shown)
    setup = prediction.get("requirements") or []
    if setup:
        out += " (set-up: " + ", ".join(f"{c['key']}={_fmt(c.get('actual'))}" for c in setup) + ")"
    return out


def verdict_text(r: dict) -> str:
    if r.get("not_applicable"):
        return "not applicable"
    if r.get("status") == REFUSED:
        return "refused at load"
    if r.get("harness_error"):
        return "harness error" + (" (retried)" if r.get("retried") else "")
    return VERDICT[r.get("prediction")] + (" (after a retry)" if r.get("retried") else "")


def catalogue_order(sid: str | None, name: str) -> tuple:
    """Catalogue order (R, Q, K; then by number, then by name) from a row's id and name."""
    sid = sid or name
    head = "RQK".find(sid[:1]) if sid[:1] in "RQK" else 9
    digits = "".join(ch for ch in sid[1:] if ch.isdigit())
    return head, int(digits or 0), name


def several_versions(rows: list[dict]) -> bool:
    """Whether the rows run some broker at more than one version (a matrix): then each row
    names its version."""
    seen: dict = {}
    for r in rows:
        if r.get("version") is not None:
            seen.setdefault(r.get("broker"), set()).add(str(r["version"]))
    return any(len(v) > 1 for v in seen.values())


def with_version(r: dict, name: str) -> str:
    return f"{name} @ {r['version']}" if r.get("version") is not None else name


def _fmt(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:g}"
    return "-" if v is None else str(v)


# ---- reporters -------------------------------------------------------------------------------

TEXT_COLUMNS = ("scenario", "attempted", "confirmed", "lost", "duplicated", "unavailable_s", "valid",
                "prediction", "report")


def text_table(rows: list[dict]) -> str:
    """The console table (``make test-partition``)."""
    cells = [TEXT_COLUMNS] + [tuple(str(r.get(c, "-")) for c in TEXT_COLUMNS) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(TEXT_COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells)


MD_HEAD = ["id", "scenario", "attempted", "confirmed", "lost", "dup", "order viol.", "unavail. s",
           "measurement", "prediction", "verdict", "how decided", "run s"]


def markdown(rows: list[dict], out: Path, title: str) -> str:
    lines = [f"# {title}", "", *table_lines(rows, out.parent.parent)]
    lines += ["", "Verdicts: *held* = the source's prediction was borne out; *DID NOT HOLD* = the broker "
              "behaved otherwise (a finding, see the run's report); *could not decide* = the run did not "
              "measure what the prediction needs (reason in summary.json); *harness error* = not a "
              "broker finding."]
    return "\n".join(lines) + "\n"


def table_lines(rows: list[dict], links_from: Path | None = None) -> list[str]:
    """The Markdown table of a batch; scenario names link to their reports when
    ``links_from`` is given (the results directory), and are plain text in documents."""
    cells = []
    versions = several_versions(rows)
    for r in rows:
        rep = r.get("report")
        name = with_version(r, r["scenario"]) if versions else r["scenario"]
        link = f"[{name}]({relative(rep, links_from)})" if rep and links_from else name
        order = f"{r.get('ordering_violations', '-')} ({r.get('ordering') or '-'})"
        cells.append([str(x) for x in (
            r.get("id") or "-", link, r.get("attempted", "-"), r.get("confirmed", "-"), r.get("lost", "-"),
            r.get("duplicated", "-"), order, _fmt(r.get("unavailable_s")), _fmt(r.get("measurement")),
            _fmt(r.get("expect")), verdict_text(r), md_cell(r.get("decided_by") or r.get("reason")),
            r.get("seconds"))])
    return md_table(MD_HEAD, cells)


def md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines: the head, its rule, one line per row of cells."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def splice(doc: str, name: str, table: list[str], source: str, by: str = "mqchaos doc-table") -> str:
    """``doc`` with the lines between ``<!-- table:NAME -->`` and ``<!-- /table:NAME -->``
    replaced by ``table`` (and a line naming its source and the command ``by`` that wrote
    it): documents carry no figure typed by hand. ValueError if the markers are missing."""
    begin, end = f"<!-- table:{name} -->", f"<!-- /table:{name} -->"
    if doc.count(begin) != 1 or doc.count(end) != 1 or doc.index(begin) > doc.index(end):
        raise ValueError(f"the document needs one {begin} ... {end} pair")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    body = [f"<!-- generated by `{by}` from {source}; do not edit -->", *table]
    return head + begin + "\n" + "\n".join(body) + "\n" + end + tail


def md_cell(text) -> str:
    """Text fit for a Markdown cell."""
    return "-" if text is None else str(text).replace("|", "/").replace("\n", " ")


def relative(path: str, root: Path) -> str:
    """``path`` relative to ``root`` where it lies below it, else as it is."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def junit(rows: list[dict], name: str = "mqchaos-catalogue") -> str:
    """One testcase per scenario run: a prediction that did not hold is a failure (with the
    figures), a harness error is an error, a run that could not decide is skipped."""
    cases, failures, errors, skipped = [], 0, 0, 0
    versions = several_versions(rows)
    for r in rows:
        cname = with_version(r, r["scenario"]) if versions else r["scenario"]
        cname += f" #{r['repeat']}" if r.get("repeat") else ""
        figures = (f"attempted={r.get('attempted')} confirmed={r.get('confirmed')} lost={r.get('lost')} "
                   f"duplicated={r.get('duplicated')} ordering_violations={r.get('ordering_violations')} "
                   f"unavailable_s={r.get('unavailable_s')} measurement={_fmt(r.get('measurement'))} "
                   f"predicted={_fmt(r.get('expect'))} report={r.get('report')}")
        body = ""
        if r["harness_error"]:
            errors += 1
            body = f"<error message={quoteattr(str(r.get('reason')))}>{escape(json.dumps(r.get('earlier_attempts')))}</error>"
        elif r.get("prediction") is False:
            failures += 1
            body = f"<failure message={quoteattr(str(r.get('reason')))}>{escape(figures)}</failure>"
        elif r.get("prediction") is None:
            skipped += 1
            body = f"<skipped message={quoteattr(str(r.get('reason')))}/>"
        props = f"<system-out>{escape(figures)}{' (retried after a harness error)' if r['retried'] else ''}</system-out>"
        cases.append(f'  <testcase classname={quoteattr("mqchaos." + (r.get("id") or r["scenario"]))} '
                     f'name={quoteattr(cname)} time="{r.get("seconds") or 0}">{body}{props}</testcase>')
    total = sum(float(r.get("seconds") or 0) for r in rows)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name={quoteattr(name)} tests="{len(rows)}" failures="{failures}" errors="{errors}" '
            f'skipped="{skipped}" time="{total:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def write_all(rows: list[dict], out: Path, title: str) -> None:
    """summary.json, summary.md, summary.txt and junit.xml in the batch directory; its
    ``latest`` link moves to it."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    (out / "summary.md").write_text(markdown(rows, out, title))
    (out / "summary.txt").write_text(text_table(rows) + "\n")
    (out / "junit.xml").write_text(junit(rows))
    (out / "index.html").write_text(index_html(rows, out, title))
    store.finish_batch(out)


INDEX_HEAD = ["id", "scenario", "verdict", "attempted", "confirmed", "lost", "dup", "unavail. s", "measurement",
              "prediction", "run s"]


def index_html(rows: list[dict], out: Path, title: str) -> str:
    """The batch's page: one row per run, its verdict, a link to its report."""
    items = []
    versions = several_versions(rows)
    for r in rows:
        cls = ("undecided" if r.get("harness_error") or r.get("prediction") is None
               else "held" if r.get("prediction") else "failed")
        rep = r.get("report")
        link = os.path.relpath(Path(rep).with_name(store.REPORT_HTML), out) if rep else None
        name = with_version(r, r["scenario"]) if versions else r.get("scenario")
        items.append({"cls": cls, "link": link, "cells": [
            r.get("id") or "-", name, verdict_text(r), r.get("attempted", "-"), r.get("confirmed", "-"),
            r.get("lost", "-"), r.get("duplicated", "-"), _fmt(r.get("unavailable_s")), _fmt(r.get("measurement")),
            _fmt(r.get("expect")), r.get("seconds", "-")]})
    held = sum(1 for i in items if i["cls"] == "held")
    failed = sum(1 for i in items if i["cls"] == "failed")
    return TEMPLATES.get_template("index.html.j2").render(
        title=title, head=INDEX_HEAD, rows=items,
        summary=f"{len(items)} run(s): {held} held, {failed} did not hold, {len(items) - held - failed} "
                "undecided or harness errors.")
