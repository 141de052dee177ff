"""The row model of a batch (one row per run) and its reporters: a text table, Markdown,
JUnit XML and JSON. Every batch (``make test-partition``, the catalogue, nightly) renders
the same rows."""
from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from checkers.trend import broker_version
from harness import expect, identity, store, windows
from harness.claims import claim as seed_claim
from harness.identity import Catalogue
from harness.measures import wilson
from harness.results import PUBLISHED_KEYS, ROW_FIGURES, CheckResult, Row
from harness.templates import TEMPLATES
from harness.verdicts import HELD_WORDS, REFUSED, SHADES, RunStatus, Shade, Word

# the old names of three verdict words (tests/test_result_schema.py reads one): Word's members
NOT_APPLICABLE_TEXT, REFUSED_TEXT, MEASURED_ONLY_TEXT = Word.NOT_APPLICABLE, Word.REFUSED, Word.MEASURED_ONLY


def run_row(sc, result: CheckResult, info: dict, run_dir: Path) -> Row:
    """The figures of one checked run."""
    m = expect.measured(result, info)
    # The row's own measurement: what the prediction names beyond the usual counts.
    specific = {k: m.get(k) for k in [*expect.expectations(sc), *expect.expectations(sc, "require")]
                if k not in expect.CHECKER_KEYS}
    specific.update({k: m.get(k) for k in getattr(sc, "measure", [])})  # no claim: measured
    for field in ("expect", "require"):  # a figure a prediction is compared with is shown too
        specific.update({ref: m.get(ref) for v in expect.expectations(sc, field).values()
                         if (ref := expect.referenced(v)) is not None})
    # what the faults could have lost (harness.windows.at_risk), in every row: a reader of a
    # published ``lost: 0`` can see whether anything was exposed (issue 52)
    specific.update({k: m[k] for k in ("at_risk", "at_risk_at_fault") if k in m})
    if isinstance((info.get("measurements") or {}).get("at_risk_at_start"), dict):
        specific["at_risk_at_start"] = info["measurements"]["at_risk_at_start"]
    if m.get("self_healed") is False:  # the cluster had to be restarted by hand: always shown
        specific["self_healed"] = False
    # ordering by .get: a check.json from before the checker recorded its rule
    return Row(scenario=sc.name, id=sc.id, **{col: result[key] for col, key in ROW_FIGURES.items()},
               ordering=result.get("ordering"), unavailable_s=result["unavailable_s"],
               blocked_s=m.get("blocked_s"), measurement=specific, valid=result["valid"],
               prediction=result["prediction"]["held"], reason=result["prediction"]["reason"],
               decided_by=decided_by(result["prediction"]), expect=sc.expect, require=sc.require,
               version=sc.version, brokers=info.get("brokers"), **identity.stamp(sc),
               report=str(Path(run_dir) / store.REPORT_MD))


def not_applicable_row(sc, result: dict, run_dir: Path) -> Row:
    """The row of a run whose claim does not exist in its version: nothing measured."""
    return Row(scenario=sc.name, id=sc.id, valid=None, prediction=None, not_applicable=True,
               reason=result["reason"], decided_by=result["reason"], expect=sc.expect,
               require=sc.require, version=sc.version, **identity.stamp(sc),
               report=str(Path(run_dir) / store.CHECK_JSON))


def decided_by(prediction: dict) -> str:
    """How a verdict was reached, in a table cell: the checks that decided it (all of them
    when it held, the failed ones when not) and the set-up it required; or why nothing was."""
    held = prediction.get("held")
    checks = prediction.get("checks") or []
    if held is None:
        return prediction.get("reason") or "no prediction"
    shown = checks if held else [c for c in checks if c.get("held") is False]
    out = "; ".join(f"{c['key']}={fmt(c.get('actual'))} vs {fmt(c.get('expected'))}"
                    + (f" ({fmt(c['than'])})" if "than" in c else "") for c in shown)
    setup = prediction.get("requirements") or []
    if setup:
        out += " (set-up: " + ", ".join(f"{c['key']}={fmt(c.get('actual'))}" for c in setup) + ")"
    return out


def verdict_word(r: Row) -> str:
    """A row's verdict in the one vocabulary (held, DID NOT HOLD, undecided, not applicable,
    refused at load, harness error, measured only), without how it was reached."""
    if r.get("not_applicable"):
        return Word.NOT_APPLICABLE
    if r.get("status") == REFUSED:
        return Word.REFUSED
    if r.get("harness_error"):
        return Word.HARNESS_ERROR
    if r.get("prediction") is None and not r.get("expect") and r.get("status") == RunStatus.COMPLETED:
        return Word.MEASURED_ONLY  # a control states no prediction: nothing was left undecided
    return HELD_WORDS[r.get("prediction")]


def verdict_text(r: Row) -> str:
    """``verdict_word`` and whether a retry after a harness error preceded it."""
    word = verdict_word(r)
    if r.get("not_applicable") or r.get("status") == REFUSED:
        return word
    if r.get("harness_error"):
        return word + (" (retried)" if r.get("retried") else "")
    return word + (" (after a retry)" if r.get("retried") else "")


def catalogue_order(sid: str | None, name: str) -> tuple:
    """Catalogue order (R, Q, K; then by number, then by name) from a row's id and name."""
    sid = sid or name
    head = "RQK".find(sid[:1]) if sid[:1] in "RQK" else 9
    digits = "".join(ch for ch in sid[1:] if ch.isdigit())
    return head, int(digits or 0), name


def several_versions(rows: list[Row]) -> bool:
    """Whether the rows run some broker at more than one version (a matrix): then each row
    names its version."""
    seen: dict = {}
    for r in rows:
        if r.get("version") is not None:
            seen.setdefault(r.get("broker"), set()).add(str(r["version"]))
    return any(len(v) > 1 for v in seen.values())


def with_version(r: dict, name: str) -> str:
    return f"{name} @ {r['version']}" if r.get("version") is not None else name


def fmt(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={fmt(x)}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:g}"
    return "-" if v is None else str(v)


# ---- tallies: runs counted per test (harness.identity) and version ----------------------------

def reported(r: dict) -> str | None:
    """The broker version the row's nodes reported (its ``brokers``), None where unknown."""
    said = r.get("brokers") if isinstance(r.get("brokers"), dict) else {}
    # each node's own record (``nodes``) is no version: a row without ``broker`` would take it for one
    v = broker_version({"broker": r.get("broker"), "brokers": {k: v for k, v in said.items() if k != "nodes"}})
    return None if v == "unknown" else v


def version_text(version, shown: str | None) -> str:
    """A version as a tally shows it: the one asked for, and what the nodes reported where that
    says more ("3.10 (3.10.8)")."""
    if version is None:
        return shown or "-"
    return f"{version} ({shown})" if shown and shown != str(version) else str(version)


def shown_verdict(r: Row, cat: Catalogue | None = None) -> str:
    """``verdict_text``, marked when the run's digest is no file's present one (``cat``): a
    superseded run is shown, never counted as the present file's."""
    text = verdict_text(r)
    return f"superseded ({text})" if cat is not None and cat.superseded(r) else text


def row_id(r: Row, cat: Catalogue | None = None) -> str | None:
    """A row's id: its file's present one (found by the scenario's name: ids moved between
    files), else the one it recorded."""
    return cat.id_of(r) if cat is not None else r.get("id")


def which_test(r: Row, cat: Catalogue) -> tuple[tuple[str, ...], bool]:
    """The files a run's test is (those whose present digest is the run's: their runs pool,
    whatever file name the run recorded) and False; else the file it ran, by name, and True:
    superseded."""
    files = cat.files_of(r.get("digest"))
    return (tuple(e.name for e in files), False) if files else ((r["scenario"],), True)


def _tally(rows: list[Row], cat: Catalogue) -> list[tuple[dict, list[Row]]]:
    """The tally's lines (see ``tally``), each with its runs' rows."""
    by_run: dict[str, Row] = {}
    for r in rows:  # a run in two batches (a matrix re-tabulating a day's runs) counts once
        run = r.get("run") or run_id(r.get("report")) or str(id(r))
        if run not in by_run or by_run[run].get("version") is None:
            by_run[run] = r
    groups: dict[tuple, list[Row]] = {}
    for r in by_run.values():
        files, old = which_test(r, cat)
        version = None if r.get("version") is None else str(r["version"])
        groups.setdefault((files, old, r.get("digest") if old else None, version, reported(r)), []).append(r)
    out = []
    for (files, old, digest, version, shown), runs in groups.items():
        seen = Counter(verdict_word(r) for r in runs)
        k = seen.pop(Word.HELD, 0)
        n = k + seen.pop(Word.DID_NOT_HOLD, 0)
        ci = wilson(k, n)
        ids = [row_id({"scenario": f, "id": runs[0].get("id")}, cat) for f in files]
        out.append(({"id": None if ids == [None] else " = ".join(i or "-" for i in ids),
                     "scenario": " = ".join(files), "files": list(files), "version": version, "reported": shown,
                     "claim": prediction_text(runs[0].get("expect"), runs[0].get("require")),
                     "digest": runs[0].get("digest"), "setup": runs[0].get("setup_digest"), "superseded": old,
                     "held": k, "decided": n, "runs": len(runs),
                     "ci95": [round(ci[0], 4), round(ci[1], 4)] if ci else None, "others": dict(seen)}, runs))
    return sorted(out, key=lambda x: (catalogue_order(x[0]["id"], x[0]["scenario"]), x[0]["version"] or "",
                                      x[0]["reported"] or "", x[0]["superseded"], x[0]["digest"] or ""))


def tally(rows: list[Row], cat: Catalogue | None = None) -> list[dict]:
    """Per test and version, every run's verdict counted: held k of the n runs that decided
    (held or did not hold), with k/n's 95 % Wilson interval, since one run's verdict is a
    sample; the other verdicts (undecided, not applicable, ...) counted beside. A test is the
    scenario's digest (harness.identity: set-up, faults and prediction), a version the one asked
    for with the one the nodes reported. A run whose digest no file of the catalogue (``cat``;
    default: the repository's scenario files) has now is superseded: its file's older encoding,
    or a file since removed; such runs get lines of their own (per file name and digest) and
    never count for the present file. Rows naming the same run (by its id) count once."""
    return [t for t, _ in _tally(rows, identity.catalogue() if cat is None else cat)]


def tally_runs(rows: list[Row], cat: Catalogue | None = None) -> list[tuple[dict, list[Row]]]:
    """``tally``'s lines, each with its runs' rows (harness.evidence: the nights they ran)."""
    return _tally(rows, identity.catalogue() if cat is None else cat)


def tally_text(t: dict) -> str:
    """``held k of n (95 % CI lo-hi %)`` and the runs that decided nothing; a superseded
    line says so first, with its digest."""
    if t["decided"]:
        lo, hi = t["ci95"]
        text = f"held {t['held']} of {t['decided']} (95 % CI {lo * 100:.0f}–{hi * 100:.0f} %)"
    else:
        text = "no run decided"
    others = ", ".join(f"{w} {n}" for w, n in sorted(t["others"].items()))
    text += f"; also {others}" if others else ""
    return f"superseded (digest {identity.short(t['digest'])}): {text}" if t.get("superseded") else text


TALLY_HEAD = ["id", "scenario", "version (reported)", "claim (expect, require)",
              "held k of n decided runs (95 % Wilson interval)", "runs"]


def tally_cells(t: dict) -> list[str]:
    """One line of the tally, as cells under ``TALLY_HEAD`` (documents and ``mqchaos serve``)."""
    return [t["id"] or "-", t["scenario"], version_text(t["version"], t["reported"]), md_cell(t["claim"]) or "-",
            tally_text(t), str(t["runs"])]


def tally_lines(rows: list[Row], cat: Catalogue | None = None) -> list[str]:
    """The tally as a Markdown table (documents, ``mqchaos doc-table --tally``)."""
    return md_table(TALLY_HEAD, [tally_cells(t) for t in tally(rows, cat)])


# ---- the seed claims (issue 37: docs/seeds.md) -----------------------------------------------
# The claim table's words for each seed; which seed an item of SEED-CLAIMS.md quotes is its
# section's (harness.claims: the repository's copy, docs/sources/SEED-CLAIMS.md)
CLAIM_SEEDS = {"000": "000 (RabbitMQ mirroring, partitions)", "001": "001 (mirrored-queue guide)",
               "002": "002 (Kafka replication)", "003": "003 (clustering, federation, partitions)",
               "004": "004 (quorum-queue local delivery)"}
CLAIMS_HEAD = ["claim", "seed", "row(s) asserting it", "verdicts so far (held k of n decided runs)"]


def claim_seed(n: int) -> str:
    return CLAIM_SEEDS[seed_claim(n).seed_id]


def prediction_text(expect: dict | None, require: dict | None) -> str:
    """A prediction as a tally shows it (a file's ``expect`` / ``require``)."""
    return fmt({k: v for k, v in (("expect", expect), ("require", require)) if v})


def figures_seen(runs: list[Row], keys) -> str:
    """The figures ``keys`` as the runs' rows show them, where they do (R9's runs read for
    R9r's claim: "self_healed=False in 2 of 3 runs"); empty when none shows one."""
    out = []
    for key in keys:
        seen = Counter(fmt(v) for r in runs if (v := r.get(key, (r.get("measurement") or {}).get(key))) is not None)
        out += [f"{key}={v} in {k} of {len(runs)} runs" for v, k in sorted(seen.items())]
    return ", ".join(out)


def _claim_parts(name: str, tallied: list[tuple[dict, list[Row]]], cat: Catalogue) -> list[str]:
    """One asserting file's parts of a claim's line: its present test's tally per version
    (files of one digest pooled: one test), then how many of its runs are superseded (an
    older encoding: not counted)."""
    label = row_id({"scenario": name}, cat) or name
    parts, old = [], 0
    for t, _ in tallied:
        if t["superseded"] and t["scenario"] == name:
            old += t["runs"]
        elif not t["superseded"] and name in t["files"]:
            head = t["id"] if len(t["files"]) > 1 else label
            parts.append(f"{head} @ {version_text(t['version'], t['reported'])}: {tally_text(t)}")
    return (parts or [f"{label}: not run yet"]) + ([f"{label}: {old} superseded run(s), not counted"] if old else [])


def _beside_parts(names: list[str], tallied: list[tuple[dict, list[Row]]], cat: Catalogue) -> list[str]:
    """The runs of an asserting file's present set-up under another prediction (R9's runs
    beside R9r's claim; an older encoding of another file too): their own verdicts, never
    counted for the claim, and the asserting file's figures where their rows show them."""
    parts = []
    for name in names:
        own = cat.by_name.get(name)
        if own is None or own.setup is None:
            continue
        for t, runs in tallied:
            if t["setup"] != own.setup or name in t["files"] or (t["superseded"] and t["scenario"] in names):
                continue
            label = f"{t['id'] or t['scenario']} (same set-up, another prediction"
            label += ", an older encoding)" if t["superseded"] else ")"
            seen = figures_seen(runs, own.expect)
            if not (t["decided"] or seen):  # not applicable, undecided: nothing of the situation
                continue
            parts.append(f"{label} @ {version_text(t['version'], t['reported'])}: "
                         f"{tally_text(dict(t, superseded=False))}" + (f"; its runs show {seen}" if seen else ""))
    return parts


def claim_lines(claimed: list[tuple[str, list[int]]], rows: list[Row], count: int,
                cat: Catalogue | None = None) -> list[str]:
    """Claim by claim (1..count), the files whose ``claims:`` name it (``claimed``: by file
    name) and the tally of their present test's published runs, per version; beside them the
    runs of the same set-up under another prediction (R9's beside R9r's: how the situation
    went). Only runs of a file's present digest count (``tally``): a superseded run did not
    test what the file asserts now, and is counted apart. A claim no file asserts says so."""
    cat = identity.catalogue() if cat is None else cat
    by_claim: dict[int, list[str]] = {}
    for name, claims in claimed:
        for c in claims:
            by_claim.setdefault(c, []).append(name)
    tallied = _tally(rows, cat)
    lines = []
    for n in range(1, count + 1):
        names = sorted(by_claim.get(n, []), key=lambda x: catalogue_order(row_id({"scenario": x}, cat), x))
        if not names:
            lines.append([str(n), claim_seed(n), "no row yet", "-"])
            continue
        parts = [p for name in names for p in _claim_parts(name, tallied, cat)] + _beside_parts(names, tallied, cat)
        lines.append([str(n), claim_seed(n), ", ".join(row_id({"scenario": x}, cat) or x for x in names),
                      "; ".join(parts)])
    return md_table(CLAIMS_HEAD, lines)


# ---- reporters -------------------------------------------------------------------------------

TEXT_COLUMNS = ("scenario", "attempted", "confirmed", "lost", "duplicated", "unavailable_s", "verdict", "report")


def text_table(rows: list[Row]) -> str:
    """The console table (``make test-partition``): the verdict in the index's words, not the
    checker's validity beside the prediction's (a reader wants one word per run)."""
    def cell(r: dict, c: str) -> str:
        return verdict_text(r) if c == "verdict" else str(r.get(c, "-"))
    cells = [TEXT_COLUMNS] + [tuple(cell(r, c) for c in TEXT_COLUMNS) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(TEXT_COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in cells)


MD_HEAD = ["id", "scenario", "attempted", "confirmed", "lost", "dup", "order viol.", "unavail. s",
           "measurement", "prediction", "verdict", "how decided", "run s"]


def markdown(rows: list[Row], out: Path, title: str) -> str:
    lines = [f"# {title}", "", *table_lines(rows, out.parent.parent)]
    lines += ["", f"Verdicts: *{Word.HELD}* = the source's prediction was borne out; *{Word.DID_NOT_HOLD}* = the "
              "broker behaved otherwise (a finding, see the run's report); "
              f"*{Word.UNDECIDED}* = the run did not measure what the prediction needs (reason in summary.json); "
              f"*{Word.HARNESS_ERROR}* = not a broker finding."]
    return "\n".join(lines) + "\n"


def table_lines(rows: list[Row], links_from: Path | None = None, cat: Catalogue | None = None) -> list[str]:
    """The Markdown table of a batch; scenario names link to their reports when
    ``links_from`` is given (the results directory), and are plain text in documents, where
    ``cat`` (the present scenario files: harness.identity) marks a superseded run's verdict
    and gives each row its file's present id."""
    cells = []
    versions = several_versions(rows)
    for r in rows:
        rep = r.get("report")
        name = with_version(r, r["scenario"]) if versions else r["scenario"]
        link = f"[{name}]({relative(rep, links_from)})" if rep and links_from else name
        order = f"{r.get('ordering_violations', '-')} ({r.get('ordering') or '-'})"
        cells.append([str(x) for x in (
            row_id(r, cat) or "-", link, r.get("attempted", "-"), r.get("confirmed", "-"), r.get("lost", "-"),
            r.get("duplicated", "-"), order, fmt(r.get("unavailable_s")), fmt(r.get("measurement")),
            fmt(r.get("expect")), shown_verdict(r, cat), md_cell(r.get("decided_by") or r.get("reason")),
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


def junit(rows: list[Row], name: str = "mqchaos-catalogue", flaky: Callable[[Row], str | None] | None = None) -> str:
    """One testcase per scenario run: a prediction that did not hold is a failure (with the
    figures), a harness error is an error, an undecided run is skipped. ``flaky`` (harness.evidence)
    says why a row's test is flaky at its version, else None: such a row carries a property
    ``flaky``, and its prediction that did not hold is skipped ("flaky: ..."), not a failure."""
    cases, failures, errors, skipped = [], 0, 0, 0
    versions = several_versions(rows)
    for r in rows:
        cname = with_version(r, r["scenario"]) if versions else r["scenario"]
        cname += f" #{r['repeat']}" if r.get("repeat") else ""
        figures = (f"attempted={r.get('attempted')} confirmed={r.get('confirmed')} lost={r.get('lost')} "
                   f"duplicated={r.get('duplicated')} ordering_violations={r.get('ordering_violations')} "
                   f"unavailable_s={r.get('unavailable_s')} measurement={fmt(r.get('measurement'))} "
                   f"predicted={fmt(r.get('expect'))} report={r.get('report')}")
        body, why = "", flaky(r) if flaky else None
        if r["harness_error"]:
            errors += 1
            body = f"<error message={quoteattr(str(r.get('reason')))}>{escape(json.dumps(r.get('earlier_attempts')))}</error>"
        elif r.get("prediction") is False and why:
            skipped += 1
            body = f"<skipped message={quoteattr('flaky: ' + why)}/>"
        elif r.get("prediction") is False:
            failures += 1
            body = f"<failure message={quoteattr(str(r.get('reason')))}>{escape(figures)}</failure>"
        elif r.get("prediction") is None:
            skipped += 1
            body = f"<skipped message={quoteattr(str(r.get('reason')))}/>"
        props = f"<system-out>{escape(figures)}{' (retried after a harness error)' if r['retried'] else ''}</system-out>"
        props = f'<properties><property name="flaky" value={quoteattr(why)}/></properties>{props}' if why else props
        cases.append(f'  <testcase classname={quoteattr("mqchaos." + (r.get("id") or r["scenario"]))} '
                     f'name={quoteattr(cname)} time="{r.get("seconds") or 0}">{body}{props}</testcase>')
    total = sum(float(r.get("seconds") or 0) for r in rows)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name={quoteattr(name)} tests="{len(rows)}" failures="{failures}" errors="{errors}" '
            f'skipped="{skipped}" time="{total:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def write_all(rows: list[Row], out: Path, title: str) -> None:
    """summary.json, summary.md, summary.txt and junit.xml in the batch directory; its
    ``latest`` link moves to it."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    (out / "summary.md").write_text(markdown(rows, out, title))
    (out / "summary.txt").write_text(text_table(rows) + "\n")
    (out / "junit.xml").write_text(junit(rows))
    (out / "index.html").write_text(index_html(rows, out, title))
    store.finish_batch(out)


INDEX_HEAD = ["id", "scenario", "verdict", "attempted", "confirmed", "lost", "dup", "unavail. s", "measured",
              "predicted", "run s"]
INDEX_LEGEND = ("attempted / confirmed: messages the producers sent / the broker confirmed; lost: confirmed and "
                "never delivered; dup: delivered more than once; unavail. s: the longest time no write "
                "succeeded; measured: the figures the prediction names beyond these counts; predicted: the "
                "scenario's prediction; run s: the run's own wall time, in seconds.")


def index_html(rows: list[Row], out: Path, title: str, started: bool = False,
               tallied: list[dict] | None = None, cat: Catalogue | None = None) -> str:
    """A page of runs, one row each: its verdict, a link to its report; with ``started`` a
    column for when it began (the store's page); with ``tallied`` (``tally``) each scenario
    and version's verdicts over those runs, above them; with ``cat`` (harness.identity) a
    superseded run's verdict marked as such."""
    items = []
    versions = several_versions(rows) or started
    for r in rows:
        pred = r.get("prediction")
        cls = Shade.UNDECIDED if r.get("harness_error") or pred is None else SHADES[bool(pred)]
        rep = r.get("report")
        link = os.path.relpath(Path(rep).with_name(store.REPORT_HTML), out) if rep else None
        name = with_version(r, r["scenario"]) if versions else r.get("scenario")
        cells = [row_id(r, cat) or "-", name, shown_verdict(r, cat), r.get("attempted", "-"), r.get("confirmed", "-"),
                 r.get("lost", "-"), r.get("duplicated", "-"), fmt(r.get("unavailable_s")),
                 fmt(r.get("measurement")), fmt(r.get("expect")), fmt(r.get("seconds"))]
        items.append({"cls": cls, "link": link, "cells": cells + ([r.get("started") or "-"] if started else [])})
    held = sum(1 for i in items if i["cls"] == Shade.HELD)
    failed = sum(1 for i in items if i["cls"] == Shade.FAILED)
    tally_rows = [tally_cells(t) for t in tallied or []]
    return TEMPLATES.get_template("index.html.j2").render(
        title=title, head=INDEX_HEAD + (["started (UTC)"] if started else []), rows=items, legend=INDEX_LEGEND,
        tally_head=TALLY_HEAD, tally=tally_rows,
        summary=f"{len(items)} run(s): {held} held, {failed} did not hold, {len(items) - held - failed} "
                "undecided, not applicable or harness errors.")


# ---- published copies: the committed sources of the documents' tables ------------------------

# Where a document's table finds its source: in the repository, so anyone can derive it again
# (results/ is the machine's own and is not committed).
DOC_BATCHES = store.ROOT / "docs" / "batches"
SUMMARY_JSON, SPLIT_JSON = "summary.json", "split.json"


def published_batches(batches: Path = DOC_BATCHES) -> list[tuple[Path, list]]:
    """Each published batch below ``batches`` (docs/batches), in name order: its summary.json
    and the runs' rows it holds (a file that holds no list of rows is passed over)."""
    found = []
    for f in sorted(Path(batches).glob(f"*/{SUMMARY_JSON}")):
        rows = json.loads(f.read_text())
        if isinstance(rows, list):
            found.append((f, rows))
    return found


NOT_REDERIVABLE = ("not re-derivable: its source was never committed; to be re-published from the next "
                   "catalogue run")
# what a published row keeps: the figures the tables show and what decided its verdict (the
# Row's keys marked Published, in their order: harness.results)
COMPACT_KEYS = PUBLISHED_KEYS
EVIDENCE_KEYS = ("checks", "requirements", "window", "operator_events", "operations", "faults")


def run_name(run_dir: Path) -> str:
    """A run's id, ``<scenario>/<timestamp>``: its directory below the results root."""
    return f"{run_dir.parent.name}/{run_dir.name}"


def run_id(path: str | None) -> str | None:
    """A run's id from the path of one of its files (its report), None without one."""
    return run_name(Path(path).parent) if path else None


def operator_events(run_dir: Path, info: dict) -> list[dict]:
    """What the harness itself did to the cluster in a run, beyond the scenario's faults (a
    restart as an operator would, a stale partition's repair): nemesis.jsonl's operator
    records (harness.windows). A run from before issue 34 recorded its restart of the nodes
    that did not serve in run.json only: that record stands in for it."""
    out = windows.operator_events(store.read_jsonl(Path(run_dir) / store.NEMESIS_LOG))
    if info.get("operator_recovery") and not any(e.get("action") == "restart" for e in out):
        out.append({"fault": "operator_recovery", **info["operator_recovery"]})
    return out


def _evidence(run_dir: Path) -> dict:
    """What decided a run's verdict, from its files: the prediction's checks and set-up, the
    windows its figures were taken over, the operator's events (each where recorded)."""
    info = store.read_run(run_dir) or {}
    pred = (store.read_check(run_dir) or {}).get("prediction") or {}
    out = {k: pred[k] for k in ("checks", "requirements") if pred.get(k)}
    window = (info.get("measurements") or {}).get("windows") or pred.get("window")
    ops = operator_events(run_dir, info)
    changes = operations(run_dir)
    faults = fault_times(run_dir) if changes else []  # beside operations: which phase each fault hit
    gaps = (store.read_check(run_dir) or {}).get("unavailable") or []
    for step in (*changes, *faults):  # the seconds with only failed writes while each was on
        step["unavailable_s"] = overlap_s(step.get("t_start"), step.get("t_end"), gaps)
    return {**out, **({"window": window} if window else {}), **({"operator_events": ops} if ops else {}),
            **({"operations": changes} if changes else {}), **({"faults": faults} if faults else {})}


def overlap_s(start: float | None, end: float | None, intervals: list) -> float | None:
    """Seconds of ``intervals`` ([a, b] pairs) within [start, end]; None when the step has
    no end (it failed or never finished)."""
    if start is None or end is None:
        return None
    return round(sum(max(0.0, min(end, b) - max(start, a)) for a, b in intervals), 3)


def fault_times(run_dir: Path) -> list[dict]:
    """The run's faults that are not operations, each with its targets, its times and
    whether it took effect (nemesis.jsonl): where they fell among the operations."""
    from nemesis.faults import OPERATIONS

    return [{"fault": rec["fault"], "targets": rec.get("targets"), "t_start": rec.get("t_start"),
             "t_end": rec.get("t_end"), "effective": (rec.get("details") or {}).get("effective")}
            for rec in store.read_jsonl(run_dir / store.NEMESIS_LOG)
            if rec.get("fault") and rec["fault"] not in OPERATIONS]


def operations(run_dir: Path) -> list[dict]:
    """The scenario's operator changes (upgrade, finalize, member changes: issue 39) as
    nemesis.jsonl recorded them, with what showed each took effect (the nodes' versions, the
    feature levels, the member sets before and after)."""
    from nemesis.faults import OPERATIONS

    out = []
    for rec in store.read_jsonl(run_dir / store.NEMESIS_LOG):
        if rec.get("fault") not in OPERATIONS:
            continue
        d = rec.get("details") or {}
        keep = {k: v for k, v in d.items() if k.endswith("_before") or k in (
            "version", "phase", "before", "sequence", "effective", "evidence", "error", "refused",
            "members_after_refusal")}
        out.append({"fault": rec["fault"], "targets": rec.get("targets"), "t_start": rec.get("t_start"),
                    "t_end": rec.get("t_end"), **keep})
    return out


def compact_row(r: Row) -> dict:
    """A row as the repository keeps it: its figures, its verdict and how it was decided (the
    prediction's checks, the window, the operator's events, from the run's files while they
    exist), and the run's id in place of a path on this machine."""
    out = {k: r[k] for k in COMPACT_KEYS if k in r}
    if isinstance(out.get("brokers"), dict):  # each node's image: the versions above suffice
        out["brokers"] = {k: v for k, v in out["brokers"].items() if k != "nodes"}
    out["run"] = r.get("run") or run_id(r.get("report"))
    run_dir = Path(r["report"]).parent if r.get("report") else None
    found = _evidence(run_dir) if run_dir is not None and run_dir.is_dir() else {}
    for k in EVIDENCE_KEYS:
        if r.get(k) or found.get(k):
            out[k] = r.get(k) or found[k]
    return out


def compact_json(items: list) -> str:
    """A list as JSON, one item a line: small, and a change to one row is one line of diff."""
    return "[\n" + ",\n".join(json.dumps(x, separators=(",", ":"), default=str) for x in items) + "\n]\n"


def published_dir(batch_dir: Path, batches: Path = DOC_BATCHES, name: str | None = None) -> Path:
    """Where a batch's published copy lives: the batch itself when it already lies under
    ``batches`` (the committed copy), else ``batches/<name or the batch's own name>``."""
    real = Path(batch_dir).resolve()
    if real.is_relative_to(Path(batches).resolve()):
        return Path(batch_dir)
    return Path(batches) / (name or real.name)


def publish(batch_dir: Path, batches: Path = DOC_BATCHES, name: str | None = None) -> Path:
    """The batch's summary.json copied, compact, to its published directory (nothing to do when
    it is that directory already); returns the directory."""
    out = published_dir(batch_dir, batches, name)
    if out != Path(batch_dir):
        rows = json.loads((Path(batch_dir) / SUMMARY_JSON).read_text())
        out.mkdir(parents=True, exist_ok=True)
        (out / SUMMARY_JSON).write_text(compact_json([compact_row(r) for r in rows]))
    return out


def repo_path(path: Path) -> str:
    """``path`` as the documents name it: relative to the repository when it lies inside."""
    real = Path(path).resolve()
    return str(real.relative_to(store.ROOT)) if real.is_relative_to(store.ROOT) else str(path)
