"""The version matrix (``mqchaos batch --matrix``): a batch's rows (``harness.rows``, one per run)
folded into one comparison table per broker, scenario by version.

    results/matrix/<timestamp>/matrix.json   the table as data: what later tools read
                                             (``mqchaos docs table matrix``)
                               matrix.md, matrix.html
    beside the batch's own summary.{json,md,txt}, junit.xml, index.html: the runs one by one

A cell holds the runs of one scenario at one version. A run is *decided* when its exit code
(``harness.verdicts``) is 0 or 1; exit 2 (not finished, a fault without effect, a harness
error, not applicable) decides nothing and never counts as "no loss". A run *with loss* is a
decided run with lost > 0.

- One run: its confirmed, lost, duplicated and unavailable seconds, and its verdict.
- Several (``--repeat N``): the share of decided runs with loss with its 95 % Wilson score
  interval (``harness.measures.wilson``), decided / total, the median and p99 of the decided
  runs' unavailable seconds (linear interpolation, as ``mqchaos summarize``), the verdicts
  counted.
- "not applicable": the version lacks the claim (no cluster was brought up); "refused at
  load": the version refuses the scenario outright (e.g. a setting the version does not boot with).
  The reasons of every cell that decided nothing are listed under the table.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from checkers.trend import broker_version
from harness import brokers, store
from harness import rows as R
from harness.identity import Catalogue
from harness.measures import percentile, wilson
from harness.templates import TEMPLATES
from harness.results import Row
from harness.verdicts import (EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, HELD_WORDS, NOT_APPLICABLE, REFUSED,
                              VALID_WORDS, RunStatus, Shade, Word, merge_codes)

MATRIX_JSON, MATRIX_MD, MATRIX_HTML = "matrix.json", "matrix.md", "matrix.html"
# what each run keeps in matrix.json (Row keys: harness.results)
RUN_KEYS = ("repeat", "status", "exit", "confirmed", "lost", "duplicated", "unavailable_s", "retried",
            "reason", "report", "digest")


def verdict(r: Row) -> str:
    """A run's verdict as a cell counts it (a retry after a harness error is not a verdict)."""
    if r.get("not_applicable"):
        return Word.NOT_APPLICABLE
    if r.get("status") == REFUSED:
        return Word.REFUSED
    if r.get("harness_error"):
        return Word.HARNESS_ERROR
    if r.get("prediction") is None and r.get("exit") in (EXIT_VALID, EXIT_INVALID):  # no prediction: the checker
        return VALID_WORDS[r["exit"] == EXIT_VALID]
    return HELD_WORDS[r.get("prediction")]


def decided(r: Row) -> bool:
    return r.get("exit") in (EXIT_VALID, EXIT_INVALID)


def cell(runs: list[Row]) -> dict:
    """One scenario at one version: its runs and what they add up to (see the module's doc)."""
    done = [r for r in runs if decided(r)]
    lossy = [r for r in done if (r.get("lost") or 0) > 0]
    unavailable = [float(r["unavailable_s"]) for r in done if isinstance(r.get("unavailable_s"), (int, float))]
    ci = wilson(len(lossy), len(done))
    verdicts = Counter(verdict(r) for r in runs)
    code = merge_codes(r.get("exit", EXIT_UNKNOWN) for r in runs) if runs else None
    if not runs:
        state = RunStatus.NOT_RUN
    elif verdicts.get(Word.NOT_APPLICABLE) == len(runs):
        state = NOT_APPLICABLE
    elif verdicts.get(Word.REFUSED) == len(runs):
        state = REFUSED
    else:
        state = {EXIT_VALID: Shade.HELD, EXIT_INVALID: Shade.FAILED}.get(code, Shade.UNDECIDED)
    return {"state": state, "exit": code, "total": len(runs), "decided": len(done), "with_loss": len(lossy),
            "loss_share": round(len(lossy) / len(done), 4) if done else None,
            "loss_ci95": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
            "unavailable_p50": _round(percentile(unavailable, 0.5)),
            "unavailable_p99": _round(percentile(unavailable, 0.99)),
            "verdicts": dict(verdicts),
            "runs": [{**{k: r.get(k) for k in RUN_KEYS}, "verdict": verdict(r)}
                     for r in sorted(runs, key=lambda r: r.get("repeat") or 0)]}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _columns(rows: list[Row], versions: dict[str, list[str]] | None) -> dict[str, list[str]]:
    """The versions of each broker, in the order given (else each plug-in's own order)."""
    out = {k: list(v) for k, v in (versions or {}).items()}
    for r in rows:
        b, v = r.get("broker"), r.get("version")
        if b is None or v is None:
            continue
        if b not in out:
            out[b] = []
        if str(v) not in out[b]:
            out[b].append(str(v))
            if not versions and b in brokers.KINDS:
                known = list(brokers.get(b).generations)
                out[b].sort(key=lambda x: known.index(x) if x in known else len(known))
    return out


def build(rows: list[Row], versions: dict[str, list[str]] | None = None, title: str = "") -> dict:
    """matrix.json from a batch's rows: per broker (in ``versions``' order, else the plug-ins'),
    its versions and one row per scenario (catalogue order) with a cell per version; the rows
    of files that did not load at all under ``invalid``; ``exit``: the runs' merged by the one
    rule (``harness.verdicts``)."""
    columns = _columns(rows, versions)
    by: dict[str, dict[str, dict]] = {}
    invalid = []
    for r in rows:
        b, v = r.get("broker"), r.get("version")
        if b is None or v is None:
            invalid.append({"file": r.get("scenario"), "reason": r.get("reason")})
            continue
        entry = by.setdefault(b, {}).setdefault(r["scenario"], {"id": r.get("id"), "runs": {}})
        entry["runs"].setdefault(str(v), []).append(r)
    tables = []
    for b, vs in columns.items():
        if b not in by:
            continue
        running = {}
        for v in vs:
            seen = sorted({broker_version({"broker": b, "brokers": r["brokers"]})
                           for s in by[b].values() for r in s["runs"].get(v, [])
                           if isinstance(r.get("brokers"), dict)} - {"unknown"})
            running[v] = ", ".join(seen) or None
        table_rows = [{"scenario": name, "id": s["id"], "cells": {v: cell(s["runs"].get(v, [])) for v in vs}}
                      for name, s in sorted(by[b].items(), key=lambda kv: R.catalogue_order(kv[1]["id"], kv[0]))]
        tables.append({"broker": b, "versions": vs, "running": running, "rows": table_rows})
    return {"kind": "matrix", "title": title, "versions": {t["broker"]: t["versions"] for t in tables},
            "repeat": max((int(r.get("repeat") or 0) + 1 for r in rows), default=0),
            "exit": merge_codes(r.get("exit", EXIT_UNKNOWN) for r in rows) if rows else EXIT_UNKNOWN,
            "tables": tables, "invalid": invalid}


def only(m: dict, wanted: set[str]) -> dict:
    """The matrix with the scenarios named (by name or id) only."""
    tables = [{**t, "rows": [r for r in t["rows"] if r["scenario"] in wanted or r.get("id") in wanted]}
              for t in m["tables"]]
    return {**m, "tables": [t for t in tables if t["rows"]]}


# ---- text ------------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _num(x) -> str:
    return "–" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def superseded(c: dict | None, cat: Catalogue | None) -> bool:
    """A cell whose runs tested what no scenario file tests now (harness.identity); a batch
    loads each file once, so a cell's runs share one digest and are never pooled across two."""
    return cat is not None and c is not None and any(cat.superseded(r) for r in c["runs"])


def cell_text(c: dict | None, old: bool = False) -> str:
    """A cell as a table shows it; ``old``: its runs are superseded, and it says so."""
    def word(w: str) -> str:
        return f"superseded ({w})" if old else w

    if c is None or c["state"] == RunStatus.NOT_RUN:
        return RunStatus.NOT_RUN.value
    if c["state"] == NOT_APPLICABLE:
        return word(Word.NOT_APPLICABLE)
    if c["state"] == REFUSED:
        return word(Word.REFUSED)
    if c["total"] == 1:
        r = c["runs"][0]
        if r.get("confirmed") is None:
            return word(r["verdict"])
        return (f"{word(r['verdict'])}: ok {_num(r['confirmed'])}, lost {_num(r['lost'])}, "
                f"dup {_num(r['duplicated'])}, "
                f"unavail. {_num(r['unavailable_s'])} s")
    parts = []
    if c["decided"]:
        lo, hi = c["loss_ci95"]
        parts.append(f"loss in {c['with_loss']}/{c['decided']} ({_pct(c['loss_share'])}, "
                     f"95 % CI {lo * 100:.0f}–{_pct(hi)})")
    else:
        parts.append("no run decided")
    parts.append(f"decided {c['decided']}/{c['total']}")
    if c["unavailable_p50"] is not None:
        parts.append(f"unavail. s p50 {_num(c['unavailable_p50'])}, p99 {_num(c['unavailable_p99'])}")
    parts.append(", ".join(f"{v} {n}" for v, n in sorted(c["verdicts"].items(), key=lambda kv: -kv[1])))
    return ("superseded: " if old else "") + "; ".join(parts)


def _header(t: dict, v: str) -> str:
    running = t.get("running", {}).get(v)
    return f"{t['broker']} {v}" + (f" ({running})" if running and running != v else "")


def notes(m: dict, cat: Catalogue | None = None) -> list[str]:
    """Why each cell that decided something less than all its runs did not: one line per cell
    and reason (with how many runs gave it)."""
    out = []
    for t in m["tables"]:
        for row in t["rows"]:
            for v, c in row["cells"].items():
                why = Counter(R.md_cell(r.get("reason") or r.get("status")) for r in c["runs"] if not decided(r))
                for reason, n in why.items():
                    times = f" ({n} of {c['total']} runs)" if c["total"] > 1 else ""
                    out.append(f"- {R.row_id(row, cat) or row['scenario']} on {t['broker']} {v}{times}: {reason}")
    return out + [f"- {i['file']}: invalid scenario file: {R.md_cell(i['reason'])}" for i in m.get("invalid", [])]


def markdown_lines(m: dict, links_from: Path | None = None, cat: Catalogue | None = None) -> list[str]:
    """The matrix's tables (one per broker) and the reasons of the cells that decided nothing,
    in Markdown; a one-run cell links to its report when ``links_from`` (the results directory)
    is given; plain text in documents (``mqchaos doc-table --matrix``), where ``cat`` (the
    present scenario files) marks a superseded cell and gives each row its file's present id."""
    lines: list[str] = []
    for t in m["tables"]:
        if lines:
            lines.append("")
        vs = t["versions"]
        lines += [f"**{t['broker']}**", "",
                  "| id | scenario | " + " | ".join(_header(t, v) for v in vs) + " |", "|" + "---|" * (len(vs) + 2)]
        for row in t["rows"]:
            cells = []
            for v in vs:
                c = row["cells"].get(v)
                text = R.md_cell(cell_text(c, superseded(c, cat)))
                rep = c["runs"][0].get("report") if c and c["total"] == 1 else None
                if rep and links_from is not None and c["state"] not in (REFUSED,):
                    head, _, tail = text.partition(":")
                    text = f"[{head}]({R.relative(rep, links_from)})" + (f":{tail}" if tail else "")
                cells.append(text)
            lines.append(f"| {R.row_id(row, cat) or '-'} | {row['scenario']} | " + " | ".join(cells) + " |")
    why = notes(m, cat)
    if why:
        lines += ["", "Runs that decided nothing (exit 2), and why:", "", *why]
    return lines


LEGEND = (f"A cell of one run: its verdict (*{Word.HELD}*: the scenario's prediction was borne out; "
          f"*{Word.DID_NOT_HOLD}*: a finding; *{Word.UNDECIDED}* / *{Word.HARNESS_ERROR}*: neither), then "
          "confirmed (ok), lost, duplicated "
          "and unavailable seconds. A cell of several runs: the share of decided runs (exit 0 or 1) with "
          "loss and its 95 % Wilson score interval, decided / total (an undecided run never counts as "
          "no loss), the median and p99 of the decided runs' unavailable seconds, the verdicts counted. "
          f"*{Word.NOT_APPLICABLE}*: the version lacks the claim (no cluster was brought up); *{Word.REFUSED}*: "
          "the version refuses the scenario. The matrix's exit code merges every run's (any 1 makes 1, "
          "else any 2 makes 2): a not-applicable or refused cell is undecided, as in the catalogue.")


def markdown(m: dict, out: Path) -> str:
    lines = [f"# {m['title']}", "", *markdown_lines(m, out.parent.parent), "", LEGEND, "",
             f"Every run: [summary.md](summary.md). Exit code: {m['exit']}."]
    return "\n".join(lines) + "\n"


# a cell's class on the page by its state
CLASS = {**{s: s for s in (Shade.HELD, Shade.FAILED, Shade.UNDECIDED)}, NOT_APPLICABLE: Shade.NA, REFUSED: Shade.NA,
         RunStatus.NOT_RUN: Shade.UNDECIDED}


def html(m: dict, out: Path) -> str:
    tables = []
    for t in m["tables"]:
        rows = []
        for row in t["rows"]:
            cells = []
            for v in t["versions"]:
                c = row["cells"].get(v)
                links = [(f"#{(r.get('repeat') or 0) + 1}", os.path.relpath(_page(r["report"]), out))
                         for r in (c["runs"] if c else []) if r.get("report") and c["state"] != REFUSED]
                cells.append({"cls": CLASS.get(c["state"] if c else RunStatus.NOT_RUN, Shade.UNDECIDED),
                              "text": cell_text(c), "links": links})
            rows.append({"id": row.get("id") or "-", "scenario": row["scenario"], "cells": cells})
        tables.append({"broker": t["broker"], "head": [_header(t, v) for v in t["versions"]], "rows": rows})
    return TEMPLATES.get_template("matrix.html.j2").render(
        title=m["title"], tables=tables, notes=[n[2:] for n in notes(m)], legend=LEGEND.replace("*", ""),
        exit=m["exit"])


def _page(report: str) -> Path:
    """A run's page: report.html beside its report.md; a not-applicable run has only check.json."""
    p = Path(report)
    return p.with_name(store.REPORT_HTML) if p.name == store.REPORT_MD else p


def write(rows: list[Row], out: Path, title: str, versions: dict[str, list[str]] | None = None) -> dict:
    """matrix.json, matrix.md and matrix.html in the batch directory (whose index.html links
    them); returns the matrix."""
    m = build(rows, versions, title)
    store.write_json(out / MATRIX_JSON, m)
    (out / MATRIX_MD).write_text(markdown(m, out))
    (out / MATRIX_HTML).write_text(html(m, out))
    index = out / "index.html"
    if index.is_file():
        page = index.read_text()
        index.write_text(page.replace("<h1>", f'<p><a href="{MATRIX_HTML}">The version matrix</a></p><h1>', 1))
    return m


def read(batch_dir: Path) -> dict:
    """A matrix batch's matrix.json (ValueError if the directory holds none)."""
    path = Path(batch_dir) / MATRIX_JSON
    if not path.is_file():
        raise ValueError(f"{batch_dir}: no {MATRIX_JSON} (not a matrix batch)")
    return json.loads(path.read_text())
