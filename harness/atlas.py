"""The atlas (issue 54): the reader's entry to what the runs found. One generated page per seed
claim and per row x version, and an index, from the evidence alone: Markdown for the repository
(docs/atlas/: index.md, claims/<n>.md, rows/<id>@<version>.md) and the same pages in HTML for
``mqchaos serve`` and CI (``mqchaos docs atlas``: harness.docs_cli).

The evidence is a list of rows: each a published row, exactly what docs/batches/*/summary.json
holds per run, plus optional ``night`` and ``batch`` (``published_rows`` reads the committed
ones; the evidence store's rows feed ``build`` alike). A claim is quoted from the repository's
copy of its seed (harness.claims). Runs are counted by harness.rows.tally, per test (the
scenario's digest, harness.identity) and version: only runs of a file's present digest count
toward its verdict; an older encoding's runs are shown apart, as superseded, never pooled.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from jinja2 import Environment, PackageLoader
from markupsafe import Markup, escape

from harness import claims as seed_claims
from harness import identity, store
from harness import rows as R
from harness.spec import read_yaml

ATLAS_DIR = store.ROOT / "docs" / "atlas"
SEEDS, CLAIMS_MD = "docs/sources/seeds", "docs/sources/SEED-CLAIMS.md"  # the vendored sources (harness.claims)
SCENARIO_FILES, COMPARISON_FILES = "scenarios/*.yaml", "scenarios/comparisons/*.yaml"
NO_VERSION = "unknown"  # the page of runs that recorded no version
NO_REPORT = "report not published"  # a run whose report is not where the pages are
BY = "mqchaos docs atlas"
RULE = ("Only runs of a file's present encoding count toward its verdict (their digest, harness.identity, is "
        "the file's now); runs of an older encoding are shown apart as superseded, never pooled. \"held k of n\": "
        "of the n runs that decided (held or did not hold), k held; the interval is k/n's 95 % Wilson interval.")
STRONG, CODE = re.compile(r"\*\*(.+?)\*\*"), re.compile(r"`([^`]+)`")
TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d)-(\d\d)-(\d\d)")
MD = Environment(loader=PackageLoader("harness", "templates"), autoescape=False, trim_blocks=True,
                 lstrip_blocks=True, keep_trailing_newline=True)
HTML = Environment(loader=PackageLoader("harness", "templates"), autoescape=True)


# ---- the evidence ----------------------------------------------------------------------------

def published_rows(batches: Path = R.DOC_BATCHES) -> list[dict]:
    """Every published run row below ``batches`` (its */summary.json, as harness.doctables
    reads them), each with its batch's name (``batch``): the committed evidence."""
    files = sorted(Path(batches).glob(f"*/{R.SUMMARY_JSON}"))
    if not files:
        raise ValueError(f"{batches}: no published batch (*/{R.SUMMARY_JSON}) below it")
    return [{**r, "batch": r.get("batch") or f.parent.name} for f in files for r in json.loads(f.read_text())]


@dataclass(frozen=True)
class File:
    """A file of the catalogue as the atlas shows it: a scenario (a row) or a comparison."""
    name: str
    id: str
    path: str  # from the repository's root
    digest: str | None  # what it tests now (harness.identity)
    expect: Any = None
    require: dict = field(default_factory=dict)
    claims: tuple[int, ...] = ()
    control_of: str | None = None
    setup: str | None = None
    comparison: Any = None  # a harness.compare.Comparison


def read_files(cat: identity.Catalogue, root: Path = store.ROOT) -> list[File]:
    """The catalogue's scenario files and comparisons (below ``root``), with what ``cat`` says
    each tests now."""
    from harness import compare as C

    out = []
    for p in sorted(root.glob(SCENARIO_FILES)):
        data = read_yaml(p)
        data = data if isinstance(data, dict) else {}
        e = cat.by_name.get(str(data.get("name") or p.stem))
        if e is None:
            continue
        out.append(File(e.name, e.id or p.stem, str(p.relative_to(root)), e.digest, data.get("expect") or {},
                        data.get("require") or {}, tuple(data.get("claims") or ()), data.get("control_of"), e.setup))
    for p in sorted(root.glob(COMPARISON_FILES)):
        c = C.load(p)
        out.append(File(c.name, c.id, str(p.relative_to(root)), C.entry(c, cat).digest, c.prediction(), {},
                        tuple(c.claims), comparison=c))
    return out


def with_comparisons(rows: list[dict], cat: identity.Catalogue,
                     files: list[File]) -> tuple[list[dict], identity.Catalogue]:
    """The rows and each comparison's samples as rows of their own (a pair of its sides' runs
    of one batch and version: harness.compare), and the catalogue with the comparisons in it."""
    from harness import compare as C

    comparisons = [f.comparison for f in files if f.comparison is not None]
    if not comparisons:
        return rows, cat
    batches: dict[str, list[dict]] = {}
    for r in rows:
        batches.setdefault(r.get("batch") or "-", []).append(r)
    out = list(rows)
    for c in comparisons:
        samples = C.pairs(c, list(batches.items()), cat)
        out += [{**row, "batch": s["batch"]} for s, row in zip(samples, C.sample_rows(c, samples))]
    return out, cat.with_entries([C.entry(c, cat) for c in comparisons])


# ---- the tally's lines, each with its runs ---------------------------------------------------

class Line(NamedTuple):
    """A line of harness.rows.tally (one test and version) and its runs, newest first."""
    t: dict
    runs: list


def run_key(r: dict) -> str:
    """A run's identity, as the tally counts it once."""
    return r.get("run") or R.run_id(r.get("report")) or str(id(r))


def shown_run(r: dict) -> str:
    """A run's id as the pages show it ("-" for a row that names no run)."""
    return r.get("run") or R.run_id(r.get("report")) or "-"


def started(r: dict) -> str:
    """When a run began, from its id ("2026-11-28 08:18:44"); "" where its id has no time."""
    m = TIMESTAMP.search(shown_run(r))
    return f"{m[1]} {m[2]}:{m[3]}:{m[4]}" if m else ""


def _version(v) -> str | None:
    return None if v is None else str(v)


def lines(rows: list[dict], cat: identity.Catalogue) -> list[Line]:
    """harness.rows.tally's lines over ``rows``, each with the runs it counted (a run in two
    batches once, as the tally counts it)."""
    runs: dict[str, dict] = {}
    for r in rows:
        k = run_key(r)
        if k not in runs or runs[k].get("version") is None:
            runs[k] = r
    grouped: dict[tuple, list[dict]] = {}
    for r in runs.values():
        files, old = R.which_test(r, cat)
        key = (files, old, r.get("digest") if old else None, _version(r.get("version")), R.reported(r))
        grouped.setdefault(key, []).append(r)
    out = []
    for t in R.tally(rows, cat):
        key = (tuple(t["files"]), t["superseded"], t["digest"] if t["superseded"] else None, t["version"],
               t["reported"])
        mine = grouped.get(key, [])
        if len(mine) != t["runs"]:
            raise ValueError(f"{t['scenario']} @ {t['version']}: {len(mine)} runs found for the tally's {t['runs']}")
        out.append(Line(t, sorted(mine, key=lambda r: (started(r), r.get("batch") or ""), reverse=True)))
    return out


def version_order(v: str | None) -> tuple:
    """Versions in their natural order (3.9 before 3.10), an unrecorded one last."""
    if v is None:
        return (1,)
    return (0, *[(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.findall(r"\d+|[^\d.]+", v)])


@dataclass
class Row:
    """A file of the catalogue with its evidence: its tally's lines, present and superseded."""
    file: File
    current: list[Line]
    superseded: list[Line]

    def versions(self) -> list[str | None]:
        return sorted({ln.t["version"] for ln in self.current + self.superseded}, key=version_order)

    def at(self, version: str | None) -> tuple[list[Line], list[Line]]:
        return ([ln for ln in self.current if ln.t["version"] == version],
                [ln for ln in self.superseded if ln.t["version"] == version])


def page_of(row_id: str, version: str | None) -> str:
    """A row x version page's key: rows/<id>@<version>."""
    return f"rows/{row_id}@{NO_VERSION if version is None else version}"


@dataclass
class Evidence:
    """What the pages are made of: the claims, the files with their tally lines, and the
    superseded lines of files no longer in the catalogue."""
    claims: list
    rows: list[Row]
    orphans: list[Line]

    def asserting(self, n: int) -> list[Row]:
        return [r for r in self.rows if n in r.file.claims]

    def page(self, row_id: str, version: str | None = None) -> str | None:
        """The key of a row's page at ``version`` where it has one, else of its first
        version's; None for no row of the catalogue."""
        row = next((r for r in self.rows if r.file.id == row_id), None)
        if row is None:
            return None
        versions = row.versions() or [None]
        return page_of(row_id, version if version in versions else versions[0])


def gather(rows: list[dict], cat: identity.Catalogue, claims: list, files: list[File] | None = None) -> Evidence:
    """The evidence arranged by file: each tally line under the file it counts for (present:
    the files whose digest it is; superseded: the file of its name)."""
    files = read_files(cat) if files is None else files
    rows, cat = with_comparisons(rows, cat, files)
    tallied = lines(rows, cat)
    out, claimed = [], set()
    for f in sorted(files, key=lambda f: R.catalogue_order(f.id, f.name)):
        current = [ln for ln in tallied if not ln.t["superseded"] and f.name in ln.t["files"]]
        old = [ln for ln in tallied if ln.t["superseded"] and ln.t["scenario"] == f.name]
        claimed.update(id(ln) for ln in current + old)
        out.append(Row(f, current, old))
    return Evidence(list(claims), out, [ln for ln in tallied if id(ln) not in claimed])


# ---- the pages, as blocks --------------------------------------------------------------------

class Link(NamedTuple):
    """A link in a page: to another page (``page``: its key), a repository file (``repo``: its
    path, ``line``) or a run's report (``report``: the run's id)."""
    text: str
    kind: str
    target: str
    line: int | None = None


class Block(NamedTuple):
    """A page's block: h2, h3, p, quote (its ``parts``) or table (``head``, ``items``: rows of
    cells). Parts are text and Links."""
    kind: str
    parts: tuple = ()
    head: tuple = ()
    items: tuple = ()


class Page(NamedTuple):
    title: str
    blocks: list


def joined(items, sep: str = ", ") -> list:
    """Parts (an item may be a list of parts) with ``sep`` between items."""
    out: list = []
    for i, x in enumerate(items):
        out += ([sep] if i else []) + (x if isinstance(x, list) else [x])
    return out


def para(*parts) -> Block:
    return Block("p", tuple(parts))


def table(head, rows) -> Block:
    return Block("table", head=tuple(head), items=tuple(tuple(tuple(c) if isinstance(c, list) else (c,) for c in r)
                                                        for r in rows))


def interval(t: dict) -> str:
    if not t["decided"]:
        return "-"
    lo, hi = t["ci95"]
    return f"{lo * 100:.0f}–{hi * 100:.0f} %"


def counted(t: dict) -> str:
    return f"held {t['held']} of {t['decided']}" if t["decided"] else "no run decided"


def others(t: dict) -> str:
    return ", ".join(f"{w} {n}" for w, n in sorted(t["others"].items())) or "-"


def last_run(ln: Line) -> list:
    """The newest run of a line: when, its batch (and night), its id, its report."""
    r = ln.runs[0]
    where = r.get("batch") or "-"
    where += f", night {r['night']}" if r.get("night") else ""
    return [f"{started(r) or '-'} · {where} · {shown_run(r)} · ", Link("report", "report", shown_run(r))]


def version_link(row_id: str, t: dict) -> Link:
    return Link(R.version_text(t["version"], t["reported"]), "page", page_of(row_id, t["version"]))


def tally_table(row_id: str, current: list[Line]) -> Block:
    head = ["version (reported)", "held k of n decided runs", "95 % interval", "other runs", "runs", "last run"]
    return table(head, [[[version_link(row_id, ln.t)], counted(ln.t), interval(ln.t), others(ln.t),
                         str(ln.t["runs"]), last_run(ln)] for ln in current])


def superseded_table(row_id: str, old: list[Line]) -> Block:
    head = ["digest", "version (reported)", "prediction then", "held k of n decided runs", "95 % interval",
            "other runs", "runs", "last run"]
    return table(head, [[f"`{identity.short(ln.t['digest'])}`", [version_link(row_id, ln.t)],
                         R.md_cell(ln.t["claim"]), counted(ln.t), interval(ln.t), others(ln.t), str(ln.t["runs"]),
                         last_run(ln)] for ln in old])


def prediction(f: File) -> str:
    if f.comparison is not None:
        return R.fmt(f.expect)
    return R.prediction_text(f.expect, f.require) or "none (measured only)"


def encoding(f: File) -> Block:
    return para(f"Present encoding: digest `{identity.short(f.digest)}`; prediction: {prediction(f)}; file ",
             Link(f.path, "repo", f.path), ".")


def summary(row: Row) -> list:
    """A row's present tallies in one cell: per version, held k of n and its interval, each
    linking to its page; how many superseded runs are kept apart."""
    parts = joined(([version_link(row.file.id, ln.t), f": {counted(ln.t)}" +
                     (f" ({interval(ln.t)})" if ln.t["decided"] else "")] for ln in row.current), "; ")
    if not row.current:
        parts.append("no run of the present encoding")
    old = sum(ln.t["runs"] for ln in row.superseded)
    return parts + ([f"; {old} superseded run(s) apart"] if old else [])


def claim_blocks(c, index: dict) -> list[Block]:
    """A claim quoted from its seed (each quote with the seed and line where it stands), where
    it stands, and the item as SEED-CLAIMS.md words it (with its notes of the day it was read)."""
    found = [q for q in c.quotes if q.seed]
    out = [Block("quote", (f"\"{q.text}\" (", Link(f"{q.seed}, line {q.line}", "repo", f"{SEEDS}/{q.seed}", q.line),
                           ")")) for q in found]
    out += [para("Seed: ", Link(c.seed, "repo", f"{SEEDS}/{c.seed}", c.seed_line), f" ({c.topic}); place: "
              f"{seed_claims.place_text(c, index) or 'not given'}."),
            para("As ", Link("SEED-CLAIMS.md", "repo", CLAIMS_MD), f" words it (item {c.number}, line {c.line}): ",
                 c.text)]
    return out


def row_section(row: Row, ev: Evidence) -> list[Block]:
    """One asserting row on a claim's page: its present encoding and tally per version, its
    superseded encodings apart, and the files of its set-up under another prediction."""
    f = row.file
    out = [Block("h3", (Link(f.id, "page", ev.page(f.id)), f": {f.name}")),
           encoding(f)]
    out.append(tally_table(f.id, row.current) if row.current else para("No run of the present encoding yet."))
    if row.superseded:
        out += [para("Superseded encodings (not counted):"), superseded_table(f.id, row.superseded)]
    same = [r for r in ev.rows if f.setup and r.file.setup == f.setup and r is not row]
    if same:
        links = joined(Link(r.file.id, "page", ev.page(r.file.id)) for r in same)
        out.append(para("The same set-up under another prediction (not counted here): ", *links, "."))
    return out


def claim_page(c, ev: Evidence, index: dict) -> Page:
    blocks = claim_blocks(c, index) + [Block("h2", ("Rows asserting it",))]
    asserting = ev.asserting(c.number)
    for row in asserting:
        blocks += row_section(row, ev)
    if not asserting:
        blocks.append(para("No row asserts this claim yet."))
    blocks.append(para(RULE))
    return Page(f"Claim {c.number} (seed {c.seed_id}: {c.topic})", blocks)


RUNS_HEAD = ["started (UTC)", "batch", "run", "digest", "verdict", "how decided", "lost", "confirmed / attempted",
             "report"]


def runs_table(ln: Line, cat_superseded: bool) -> Block:
    """A line's runs, one row each; a superseded line's verdicts say so."""
    rows = []
    for r in ln.runs:
        verdict = R.verdict_text(r)
        batch = (r.get("batch") or "-") + (f", night {r['night']}" if r.get("night") else "")
        rows.append([started(r) or "-", batch, shown_run(r), f"`{identity.short(r.get('digest'))}`",
                     f"superseded ({verdict})" if cat_superseded else verdict,
                     R.md_cell(r.get("decided_by") or r.get("reason")), R.fmt(r.get("lost")),
                     f"{R.fmt(r.get('confirmed'))} / {R.fmt(r.get('attempted'))}",
                     [Link("report", "report", shown_run(r))]])
    return table(RUNS_HEAD, rows)


def row_head(row: Row, version: str | None, ev: Evidence) -> list[Block]:
    """What a row asserts (its claims, or the row it is a control of), its present encoding,
    its other versions."""
    f = row.file
    if f.claims:
        what = ["Asserts seed claim(s) ", *joined(Link(str(n), "page", f"claims/{n}") for n in f.claims), "."]
    elif f.control_of:
        target = ev.page(f.control_of, version)
        what = ["A control, read against ", Link(f.control_of, "page", target) if target else f.control_of,
                "; it asserts no seed claim."]
    else:
        what = ["Asserts no seed claim (beyond the seeds, or an exploration)."]
    more = joined(Link(v or NO_VERSION, "page", page_of(f.id, v)) for v in row.versions() if v != version)
    return [para(*what), encoding(f)] + ([para("Other versions: ", *more, ".")] if more else [])


def row_page(row: Row, version: str | None, ev: Evidence) -> Page:
    current, old = row.at(version)
    blocks = row_head(row, version, ev) + [Block("h2", ("Verdict of the present encoding",))]
    blocks.append(tally_table(row.file.id, current) if current
                  else para("No run of the present encoding at this version."))
    for ln in current:
        blocks += [Block("h3", (f"Runs at {R.version_text(ln.t['version'], ln.t['reported'])}",)),
                   runs_table(ln, False)]
    if old:
        blocks += [Block("h2", ("Superseded encodings (not counted)",)), superseded_table(row.file.id, old)]
        for ln in old:
            blocks += [Block("h3", (f"Runs of digest {identity.short(ln.t['digest'])} at "
                                    f"{R.version_text(ln.t['version'], ln.t['reported'])}",)), runs_table(ln, True)]
    blocks.append(para(RULE))
    title = f"{row.file.id} @ {version or NO_VERSION}: {row.file.name}"
    return Page(title, blocks)


def index_page(ev: Evidence, index: dict) -> Page:
    blocks = [para("One page per seed claim and per row × version, generated from the evidence alone: the published "
                "runs (docs/batches/*/summary.json), the scenario files (scenarios/) and the seed claims, quoted "
                "from the repository's copy of the seeds (docs/sources/). " + RULE),
              Block("h2", ("The seed claims",))]
    rows = []
    for c in ev.claims:
        asserting = ev.asserting(c.number)
        cell = joined(([f"{r.file.id}: ", *summary(r)] for r in asserting), "; ")
        rows.append([[Link(str(c.number), "page", f"claims/{c.number}")], c.seed_id,
                     R.md_cell(seed_claims.place_text(c, index)),
                     ", ".join(r.file.id for r in asserting) or "no row yet", cell or "-"])
    blocks.append(table(["claim", "seed", "place in the seed", "rows asserting it", "present runs, per version"],
                        rows))
    blocks += _unclaimed(ev)
    return Page("The atlas: what the runs found, claim by claim", blocks)


def _unclaimed(ev: Evidence) -> list[Block]:
    controls = [r for r in ev.rows if not r.file.claims and r.file.control_of]
    rest = [r for r in ev.rows if not r.file.claims and not r.file.control_of]
    out = [Block("h2", ("Controls (read against another row; no seed claim)",)),
           table(["row", "scenario", "control of", "present runs, per version"],
                 [[r.file.id, r.file.name, r.file.control_of, summary(r)] for r in controls]),
           Block("h2", ("Rows asserting no seed claim (beyond the seeds, explorations)",)),
           table(["row", "scenario", "present runs, per version"],
                 [[r.file.id, r.file.name, summary(r)] for r in rest])]
    if ev.orphans:
        out += [Block("h2", ("Runs of files no longer in the catalogue (superseded)",)),
                table(["scenario", "digest", "version (reported)", "held k of n decided runs", "95 % interval",
                       "other runs", "runs"],
                      [[ln.t["scenario"], f"`{identity.short(ln.t['digest'])}`",
                        R.version_text(ln.t["version"], ln.t["reported"]), counted(ln.t), interval(ln.t),
                        others(ln.t), str(ln.t["runs"])] for ln in ev.orphans])]
    return out


@dataclass
class Atlas:
    """The pages by key (index, claims/<n>, rows/<id>@<version>) and the evidence they show."""
    pages: dict[str, Page]
    evidence: Evidence


def build(rows: list[dict], catalogue: identity.Catalogue, claims: list | None = None,
          files: list[File] | None = None) -> Atlas:
    """The atlas over evidence ``rows`` (published rows, optionally with ``night`` and
    ``batch``), the catalogue's present digests and the seed claims (harness.claims);
    ``files``: the catalogue's files (default: the repository's scenarios and comparisons)."""
    claims = list(seed_claims.claims() if claims is None else claims)
    ev = gather(rows, catalogue, claims, files)
    index = {c.number: c for c in claims}
    pages = {"index": index_page(ev, index)}
    pages.update({f"claims/{c.number}": claim_page(c, ev, index) for c in claims})
    for row in ev.rows:
        for v in row.versions() or [None]:
            pages[page_of(row.file.id, v)] = row_page(row, v, ev)
    return Atlas(pages, ev)


# ---- rendering -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Output:
    """How one rendering resolves its links: the format (md, html), where the pages go, the
    repository seen from there (a relative path or a URL; None: repository paths as text) and
    the results root where runs' reports are looked for (None: none linked)."""
    ext: str
    out: Path
    repo: str | None
    reports: Path | None = None

    def href(self, link: Link, key: str) -> str | None:
        here = posixpath.dirname(key)
        up = "../" * len(here.split("/")) if here else ""  # from the page to the atlas's root
        if link.kind == "page":
            return up + f"{link.target}.{self.ext}"
        if link.kind == "repo":
            if self.repo is None:
                return None
            anchor = f"#L{link.line}" if link.line else ""
            if "://" in self.repo:
                return f"{self.repo.rstrip('/')}/{link.target}{anchor}"
            return up + posixpath.join(self.repo, link.target) + anchor
        report = self.reports / link.target / (store.REPORT_HTML if self.ext == "html" else store.REPORT_MD) \
            if self.reports else None
        return os.path.relpath(report, self.out / here) if report and report.is_file() else None


def inline(parts, o: Output, key: str) -> str:
    """A block's parts as text of the format: links resolved, or their text where they lead
    nowhere (a report not published)."""
    out = []
    for x in parts:
        if not isinstance(x, Link):
            out.append(str(x) if o.ext == "md" else html_text(str(x)))
            continue
        href = o.href(x, key)
        if o.ext == "md":
            out.append(f"[{x.text}]({href})" if href else (NO_REPORT if x.kind == "report" else x.text))
        else:
            out.append(f'<a href="{escape(href)}">{escape(x.text)}</a>' if href else
                       str(escape(NO_REPORT if x.kind == "report" else x.text)))
    return "".join(out)


def html_text(text: str) -> str:
    """Text as HTML: escaped, its Markdown emphasis and code (SEED-CLAIMS.md's **[partial]**,
    a digest's `...`) as HTML's."""
    html = str(escape(text))
    return CODE.sub(r"<code>\1</code>", STRONG.sub(r"<strong>\1</strong>", html))


def render(page: Page, key: str, o: Output, sources: str, by: str = BY) -> str:
    """A page as Markdown or HTML (the templates atlas.md.j2, atlas.html.j2)."""
    def cell(c):
        text = inline(c, o, key)
        return R.md_cell(text) if o.ext == "md" else text

    blocks = [{"kind": b.kind, "text": Markup(inline(b.parts, o, key)) if o.ext == "html" else inline(b.parts, o, key),
               "head": list(b.head), "items": [[cell(c) for c in i] for i in b.items]} for b in page.blocks]
    if o.ext == "html":
        blocks = [dict(b, items=[[Markup(c) for c in i] for i in b["items"]]) for b in blocks]
    env = MD if o.ext == "md" else HTML
    here = posixpath.dirname(key)
    home = ("../" * len(here.split("/")) if here else "") + f"index.{o.ext}"
    return env.get_template(f"atlas.{o.ext}.j2").render(title=page.title, blocks=blocks, by=by, sources=sources,
                                                        home=None if key == "index" else home)


def sources_text(batches: Path) -> str:
    return f"{R.repo_path(batches)}/*/{R.SUMMARY_JSON} {SCENARIO_FILES} {COMPARISON_FILES} {CLAIMS_MD} {SEEDS}/*.txt"


def texts(atlas: Atlas, o: Output, sources: str, by: str = BY) -> dict[str, str]:
    """Every page rendered, by its file's path below the atlas's directory."""
    return {f"{key}.{o.ext}": render(page, key, o, sources, by) for key, page in atlas.pages.items()}


def write(pages: dict[str, str], out: Path) -> None:
    """The pages written below ``out``; an earlier atlas's pages no longer made are removed
    (only files of the pages' own format under claims/ and rows/). ValueError for a directory
    that holds something else."""
    out = Path(out)
    index = next(k for k in pages if k.startswith("index."))
    if out.is_dir() and any(out.iterdir()) and not (out / index).is_file():
        raise ValueError(f"{out}: not empty and no atlas (no {index}): not written into")
    ext = Path(index).suffix
    for sub in ("claims", "rows"):
        for old in (out / sub).glob(f"*{ext}") if (out / sub).is_dir() else ():
            if f"{sub}/{old.name}" not in pages:
                old.unlink()
    for name, text in pages.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)


def markdown(source: Path = R.DOC_BATCHES, out: Path = ATLAS_DIR) -> dict[str, str]:
    """The Markdown atlas over the published batches ``source`` as it is written to ``out``
    (the repository's docs/atlas by default: tests/test_atlas.py compares the two)."""
    by = BY + ("" if Path(source).resolve() == R.DOC_BATCHES.resolve() else f" --from {R.repo_path(source)}")
    atlas = build(published_rows(source), identity.catalogue())
    return texts(atlas, Output("md", Path(out), repo_from(out)), sources_text(source), by)


def generate(source: Path | None = None, out: Path | None = None, html: bool = False,
             reports: Path | None = None, repo_url: str | None = None) -> str:
    """``mqchaos docs atlas``: the atlas over the published batches ``source`` (default
    docs/batches) written to ``out`` (default docs/atlas, Markdown; with ``html``, the results
    root's atlas/, its runs' reports linked from ``reports``, default the results root, and the
    repository's files from ``repo_url`` when given); the line saying what was written."""
    source = Path(source) if source else R.DOC_BATCHES
    out = Path(out) if out else (store.results_root() / "atlas" if html else ATLAS_DIR)
    if not html:
        pages = markdown(source, out)
    else:
        by = BY + " --html" + ("" if source.resolve() == R.DOC_BATCHES.resolve() else f" --from {R.repo_path(source)}")
        o = Output("html", out, repo_url, Path(reports) if reports else store.results_root())
        pages = texts(build(published_rows(source), identity.catalogue()), o, sources_text(source), by)
    write(pages, out)
    n = sum(1 for k in pages if k.startswith("claims/"))
    return f"{out}: {len(pages)} pages (the index, {n} claims, {len(pages) - 1 - n} rows x versions)"


def repo_from(out: Path) -> str | None:
    """The repository seen from an atlas written to ``out``: a relative path when ``out`` lies
    inside it, else None (repository files named as text)."""
    real = Path(out).resolve()
    if not real.is_relative_to(store.ROOT):
        return None
    return os.path.relpath(store.ROOT, real)


def write_served(root: Path, stored: list[dict], batches: Path = R.DOC_BATCHES) -> Path:
    """``mqchaos serve``'s atlas, in HTML at ``root``/atlas: over the published batches and the
    runs ``stored`` below ``root`` (harness.browse.run_rows; their reports linked), a run in
    both counted once."""
    rows = published_rows(batches) if any(Path(batches).glob(f"*/{R.SUMMARY_JSON}")) else []
    atlas = build(rows + stored, identity.catalogue())
    out = Path(root) / "atlas"
    write(texts(atlas, Output("html", out, None, Path(root)), f"{sources_text(batches)} and the runs below {root}",
                "mqchaos serve"), out)
    return out / "index.html"
