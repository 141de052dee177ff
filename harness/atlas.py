"""The atlas (issue 54): the reader's entry to what the runs found. One generated page per seed
claim and per row x version, and an index, from the evidence alone: Markdown for the repository
(docs/atlas/: index.md, claims/<n>.md, rows/<id>@<version>.md) and the same pages in HTML for
``mqchaos serve`` and CI (``mqchaos docs atlas``: harness.docs_cli).

The evidence is a list of rows: each a published row, exactly what docs/batches/*/summary.json
holds per run, plus optional ``night`` and ``batch`` (``published_rows`` reads the committed
ones; ``mqchaos docs atlas --evidence STORE`` adds an evidence store's, harness.evidence, each
run once by its run id: ``with_store``; ``mqchaos serve`` adds the runs below its results root).
A claim is quoted from the repository's copy of its seed (harness.claims). Runs are counted by
harness.rows.tally, per test (the scenario's digest, harness.identity) and version: only runs
of a file's present digest count toward its verdict; an older encoding's runs are shown apart,
as superseded, never pooled. Each row x version shows its decision (harness.decided.of_tally:
state, kind, k of n, interval, why), its runs toward until-decided's cap and why its other runs
decided nothing; each claim, on its page and in the index, its status at the seeds' versions
(RabbitMQ 3.10, Kafka 3.9 with ZooKeeper): decided, not yet (and why) or not applicable, as
``STATUS_RULE`` states.
"""
from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from jinja2 import Environment, PackageLoader
from markupsafe import Markup, escape

from harness import claims as seed_claims
from harness import decided, identity, store
from harness import rows as R
from harness.brokers import SEED_VERSIONS  # the versions the seeds describe (only harness.brokers names a broker)
from harness.spec import read_yaml
from harness.verdicts import RunStatus, Word

ATLAS_DIR = store.ROOT / "docs" / "atlas"
SEEDS, CLAIMS_MD = "docs/sources/seeds", "docs/sources/SEED-CLAIMS.md"  # the vendored sources (harness.claims)
SCENARIO_FILES, COMPARISON_FILES = "scenarios/*.yaml", "scenarios/comparisons/*.yaml"
NO_VERSION = "unknown"  # the page of runs that recorded no version
NO_REPORT = "report not published"  # a run whose report is not where the pages are
BY = "mqchaos docs atlas"
RULE = ("Only runs of a file's present encoding count toward its verdict (their digest, harness.identity, is "
        "the file's now); runs of an older encoding are shown apart as superseded, never pooled. \"held k of n\": "
        "of the n runs that decided (held or did not hold), k held; the interval is k/n's 95 % Wilson interval.")
SEEDS_TEXT = "RabbitMQ 3.10, Kafka 3.9 with ZooKeeper"
CAP = 10       # harness/batch/until.py's default cap on runs per row and version (until.CAP)
FEWEST = 3     # the bar: a claim rests on at least 3 decided runs of the present encoding ...
DISAGREE = 10  # ... and on at least 10 where its runs disagree
DECIDED, NOT_YET, NOT_APPLICABLE = "decided", "not yet", "not applicable"  # a claim's status there
AFTER_CAP, SO_FAR, NOTHING = "undecided after the cap", "undecided so far", "nothing to decide"  # a row's too
TOWARD_CAP = (Word.HELD, Word.DID_NOT_HOLD, Word.UNDECIDED, Word.HARNESS_ERROR)
STATUS_RULE = (
    f"At the seeds' versions ({SEEDS_TEXT}): a row's runs of its present encoding at its broker's seed "
    "version (a run that recorded no version asked for ran that version, its broker's default, when its nodes "
    "reported it or nothing), decided by harness.decided's rule (docs/nightly.md, \"When is a row decided\"): "
    f"a claim that something never happens is decided held after {decided.MIN_CLEAN} clean decided runs and "
    "did not hold at its first counterexample; a claim that something happens held at its first "
    "occurrence; a race or rate after at least 4 agreeing runs. A claim is **decided** when at least one row "
    "asserting it is decided there (so a claim decided on fewer than 3 decided runs was decided by one "
    "counterexample or occurrence: the count says how many claims rest on at least 3); **not applicable** when "
    "every row asserting it cannot run there (its scenario model's not_applicable, or its refusal at load); "
    f"else **not yet**: no row asserts it, or its rows are undecided so far (fewer runs than the cap) or "
    f"undecided after the cap ({CAP} runs toward it: harness/batch/until.py's default; computed from the "
    "evidence, which does not keep until.py's decisions.json: the row's decided runs and its runs that "
    "decided nothing, undecided or a harness error; an interrupted run never counts), with the reasons of the "
    f"runs that decided nothing. A row whose runs disagree is flagged with its count, under {DISAGREE} decided "
    "runs especially.")
STRONG, CODE = re.compile(r"\*\*(.+?)\*\*"), re.compile(r"`([^`]+)`")
TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d)T(\d\d)-(\d\d)-(\d\d)")
MD = Environment(loader=PackageLoader("harness", "templates"), autoescape=False, trim_blocks=True,
                 lstrip_blocks=True, keep_trailing_newline=True)
HTML = Environment(loader=PackageLoader("harness", "templates"), autoescape=True)


# ---- the evidence ----------------------------------------------------------------------------

def published_rows(batches: Path = R.DOC_BATCHES) -> list[dict]:
    """Every published run row below ``batches`` (its */summary.json, as harness.doctables
    reads them), each with its batch's name (``batch``): the committed evidence."""
    found = R.published_batches(batches)
    if not found:
        raise ValueError(f"{batches}: no published batch (*/{R.SUMMARY_JSON}) below it")
    return [{**r, "batch": r.get("batch") or f.parent.name} for f, rows in found for r in rows]


def run_of(r: dict) -> str | None:
    """A row's run id (None: it names no run)."""
    return r.get("run") or R.run_id(r.get("report"))


def stored_rows(where: Path) -> list[dict]:
    """The evidence store's rows (harness.evidence: one JSONL file per night below ``where``);
    ValueError when ``where`` is no directory."""
    from harness import evidence

    if not Path(where).is_dir():
        raise ValueError(f"{where}: no evidence store (a directory of <night>.jsonl files) there")
    return evidence.load(where)


def with_store(published: list[dict], stored: list[dict]) -> list[dict]:
    """The published rows and the store's, each run once by its run id: a run in both is its
    published row, with the night the store gives it; a stored run not published is added
    (a stored row naming no run once by harness.evidence.run_key)."""
    from harness import evidence

    nights = {run_of(r): r["night"] for r in stored if run_of(r) and r.get("night")}
    out = [{**r, "night": nights[run_of(r)]} if not r.get("night") and run_of(r) in nights else r for r in published]
    seen = {run_of(r) for r in published} - {None}
    for r in stored:
        key = run_of(r) or evidence.run_key(r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


@dataclass(frozen=True)
class File:
    """A file of the catalogue as the atlas shows it: a scenario (a row) or a comparison; its
    broker (a comparison's: its sides'), and why it cannot run at that broker's seed version
    (``seed_na``: its scenario model's ``not_applicable`` there, or its refusal at load; None:
    it can)."""
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
    broker: str | None = None
    seed_na: str | None = None


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
                        data.get("require") or {}, tuple(data.get("claims") or ()), data.get("control_of"), e.setup,
                        broker=data.get("broker"), seed_na=seed_applicability(data, p)))
    by_id = {f.id: f for f in out}
    for p in sorted(root.glob(COMPARISON_FILES)):
        c = C.load(p)
        sides = [by_id[i] for i in c.sides.values() if i in by_id]
        na = next((f"its side {f.id}: {f.seed_na}" for f in sides if f.seed_na), None)
        out.append(File(c.name, c.id, str(p.relative_to(root)), C.entry(c, cat).digest, c.prediction(), {},
                        tuple(c.claims), comparison=c, broker=sides[0].broker if sides else None, seed_na=na))
    return out


def seed_applicability(data: dict, path: Path) -> str | None:
    """Why a scenario file cannot run at its broker's seed version (``SEED_VERSIONS``): its
    model's ``not_applicable`` there, or what refuses it at load; None when it can (or its
    broker is none the seeds name)."""
    from harness import scenario as S

    seed = SEED_VERSIONS.get(data.get("broker"))
    if seed is None:
        return None
    try:
        sc = S.parse(data, str(path), version={data["broker"]: seed}, env={})
    except S.ScenarioError as e:
        problems = [ln.strip() for ln in str(e).splitlines()[1:]] or [str(e)]
        return f"refused at {seed}: {'; '.join(problems)}"
    return sc.not_applicable()


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

    def standing(self, version: str | None) -> Standing:
        return standing(self.file, self.at(version)[0])

    def at_seed(self) -> AtSeed:
        """The row at its broker's seed version (see ``STATUS_RULE``)."""
        f = self.file
        seed = SEED_VERSIONS.get(f.broker or "")
        st = standing(f, [ln for ln in self.current if at_seed(ln.t, f.broker)])
        if seed is None or f.seed_na:
            status = NOT_APPLICABLE
        elif st.decision.state == decided.State.NO_PREDICTION:
            status = NOTHING
        elif st.decision.decided:
            status = DECIDED
        else:
            status = AFTER_CAP if st.toward_cap >= CAP else SO_FAR
        return AtSeed(self, seed, st, status)


class Standing(NamedTuple):
    """A row at a version, from its lines of the present encoding there: its decision
    (harness.decided.of_tally: the lines' decided runs pooled), its runs, how many count toward
    the cap (decided, or undecided / a harness error; an interrupted run never) and the runs
    that decided nothing, by their verdict and reason."""
    decision: decided.Decision
    runs: list
    toward_cap: int
    nothing: dict

    @property
    def disagree(self) -> bool:
        return 0 < self.decision.k < self.decision.n

    def state(self) -> str:
        """The decision's state; "not applicable" where every run there was."""
        if not self.decision.n and self.runs and all(R.verdict_word(r) == Word.NOT_APPLICABLE for r in self.runs):
            return NOT_APPLICABLE
        return str(self.decision.state)


def why_nothing(r: dict) -> str:
    """Why a run decided nothing, as the atlas groups them: its verdict and its reason."""
    if r.get("status") == RunStatus.INTERRUPTED:
        return "interrupted (never counted)"
    word = R.verdict_word(r)
    reason = str(r.get("reason") or r.get("decided_by") or "no reason recorded")
    for prefix in ("could not decide: ", f"{Word.NOT_APPLICABLE}: "):
        reason = reason.removeprefix(prefix)
    return f"{word}: {reason if len(reason) <= 160 else reason[:159] + '…'}"


def standing(f: File, lines: list[Line]) -> Standing:
    """``f``'s standing from its present lines at one version (see ``Standing``)."""
    d = decided.of_tally([ln.t for ln in lines], f.expect, f.require)
    runs = [r for ln in lines for r in ln.runs]
    toward = sum(1 for r in runs if R.verdict_word(r) in TOWARD_CAP and r.get("status") != RunStatus.INTERRUPTED)
    nothing: dict[str, int] = {}
    for r in runs:
        if R.verdict_word(r) not in (Word.HELD, Word.DID_NOT_HOLD, Word.MEASURED_ONLY):
            nothing[why_nothing(r)] = nothing.get(why_nothing(r), 0) + 1
    return Standing(d, runs, toward, nothing)


def at_seed(t: dict, broker: str | None) -> bool:
    """Whether a tally line is at its broker's seed version: asked for it, or asked for none
    (the broker's default, the seed's) with the nodes reporting it or nothing."""
    seed = SEED_VERSIONS.get(broker or "")
    if seed is None:
        return False
    if t["version"] is not None:
        return t["version"] == seed
    return t["reported"] is None or t["reported"] == seed or t["reported"].startswith(seed + ".")


class AtSeed(NamedTuple):
    """A row at its broker's seed version: the version, its standing there, its status
    (decided, not applicable, undecided after the cap, undecided so far, nothing to decide)."""
    row: Any
    version: str | None
    standing: Standing
    status: str

    @property
    def decided(self) -> bool:
        return self.status == DECIDED


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
    seeds: dict = field(default_factory=dict)  # AtSeed by row id, once computed

    def asserting(self, n: int) -> list[Row]:
        return [r for r in self.rows if n in r.file.claims]

    def seed(self, row: Row) -> AtSeed:
        if row.file.id not in self.seeds:
            self.seeds[row.file.id] = row.at_seed()
        return self.seeds[row.file.id]

    def claim_status(self, n: int) -> tuple[str, list[AtSeed]]:
        """Claim ``n`` at the seeds' versions (``STATUS_RULE``): decided, not applicable or
        not yet, and each row asserting it there."""
        seen = [self.seed(r) for r in self.asserting(n)]
        if any(a.decided for a in seen):
            return DECIDED, seen
        if seen and all(a.status == NOT_APPLICABLE for a in seen):
            return NOT_APPLICABLE, seen
        return NOT_YET, seen

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


def decision_cell(row: Row, version: str | None) -> str:
    """A row's decision at a version (harness.decided: its lines there pooled), in a cell."""
    st = row.standing(version)
    return f"**{st.state()}**: {st.decision.why}"


def tally_table(row: Row, current: list[Line], decisions: bool = True) -> Block:
    """A row's present lines; with ``decisions``, each with its version's decision beside."""
    head = ["version (reported)", "held k of n decided runs", "95 % interval", "other runs", "runs",
            *(["decision at the version (harness.decided)"] if decisions else []), "last run"]
    return table(head, [[[version_link(row.file.id, ln.t)], counted(ln.t), interval(ln.t), others(ln.t),
                         str(ln.t["runs"]), *([decision_cell(row, ln.t["version"])] if decisions else []),
                         last_run(ln)] for ln in current])


def extras(st: Standing) -> str:
    """What a standing adds to its decision: its runs disagree, the runs that decided nothing."""
    d, out = st.decision, ""
    if st.disagree:
        out += f"; its runs disagree: held {d.k} of {d.n}" + (
            f", fewer than {DISAGREE} decided runs" if d.n < DISAGREE else "")
    if st.nothing:
        out += "; runs that decided nothing: " + ", ".join(f"{w} ({n})" for w, n in sorted(st.nothing.items()))
    return out


def status_text(a: AtSeed) -> str:
    """A row's status at the seeds' version and why, in words (see ``STATUS_RULE``)."""
    f, st = a.row.file, a.standing
    d = st.decision
    if a.status == NOT_APPLICABLE:
        return "not applicable: " + (f.seed_na or f"the seeds name no version of {f.broker or 'its broker'}")
    if a.status == NOTHING:
        return "nothing to decide (it states no prediction)"
    if a.status == DECIDED:
        text = f"decided, {d.state}: {d.text()}; {d.why}" + (
            f" (on fewer than {FEWEST} decided runs)" if d.n < FEWEST else "")
    elif a.status == AFTER_CAP:
        text = f"undecided after the cap ({st.toward_cap} runs toward the cap of {CAP}): {d.why}"
    elif not st.runs:
        old = sum(ln.t["runs"] for ln in a.row.superseded if at_seed(ln.t, f.broker))
        text = f"undecided so far: no run of the present encoding at {a.version}" + (
            f" ({old} superseded run(s) apart)" if old else "")
    else:
        text = (f"undecided so far ({d.n} decided run{'' if d.n == 1 else 's'}; {st.toward_cap} toward the cap "
                f"of {CAP}): {d.why}")
    return text + extras(st)


def seed_parts(a: AtSeed, ev: Evidence) -> list:
    """A row at the seeds' version in one line: its page there, and its status."""
    return [Link(a.row.file.id, "page", ev.page(a.row.file.id, a.version)), f" at {a.version or '-'}: ",
            status_text(a)]


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
                     (f" ({interval(ln.t)})" if ln.t["decided"] else "") +
                     f", {row.standing(ln.t['version']).state()}"] for ln in row.current), "; ")
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
    out.append(tally_table(row, row.current) if row.current else para("No run of the present encoding yet."))
    if row.superseded:
        out += [para("Superseded encodings (not counted):"), superseded_table(f.id, row.superseded)]
    same = [r for r in ev.rows if f.setup and r.file.setup == f.setup and r is not row]
    if same:
        links = joined(Link(r.file.id, "page", ev.page(r.file.id)) for r in same)
        out.append(para("The same set-up under another prediction (not counted here): ", *links, "."))
    return out


def claim_seed_blocks(c, ev: Evidence) -> list[Block]:
    """A claim's status at the seeds' versions, and each row asserting it there."""
    status, seen = ev.claim_status(c.number)
    out = [Block("h2", ("At the seeds' versions",)),
           para(f"**{status}** at the seeds' versions ({SEEDS_TEXT})" + ("" if seen else ": no row asserts it") +
                " (how a claim is decided there: ", Link("the atlas's index", "page", "index"), ").")]
    if seen:
        out.append(table(["row", "at", "status, decision (harness.decided) and why"],
                         [[[Link(a.row.file.id, "page", ev.page(a.row.file.id, a.version))], a.version or "-",
                           status_text(a)] for a in seen]))
    return out


def claim_page(c, ev: Evidence, index: dict) -> Page:
    blocks = claim_blocks(c, index) + claim_seed_blocks(c, ev) + [Block("h2", ("Rows asserting it",))]
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


def decision_blocks(row: Row, version: str | None, ev: Evidence) -> list[Block]:
    """A row's decision at the page's version (harness.decided), its runs toward the cap, and
    where the version is its broker's seed version, the row's status there."""
    st = row.standing(version)
    d = st.decision
    out = [para(f"Decision at this version (harness.decided; kind: {d.kind}): **{st.state()}**, {d.text()}: "
                f"{d.why}. Runs toward the cap: {st.toward_cap} of {CAP}{extras(st)}.")]
    a = ev.seed(row)
    mine = {id(r) for r in st.runs}
    if a.version is None or not (version == a.version or mine & {id(r) for r in a.standing.runs}):
        return out
    if mine == {id(r) for r in a.standing.runs} and a.status != NOT_APPLICABLE:
        return out + [para(f"At the seeds' versions ({SEEDS_TEXT}) this is the row's standing: **{a.status}**.")]
    return out + [para(f"At the seeds' versions ({SEEDS_TEXT}; with the runs of {a.version} that another page "
                       "shows): ", status_text(a), ".")]


def row_page(row: Row, version: str | None, ev: Evidence) -> Page:
    current, old = row.at(version)
    blocks = row_head(row, version, ev) + [Block("h2", ("Verdict of the present encoding",))]
    blocks.append(tally_table(row, current, decisions=False) if current
                  else para("No run of the present encoding at this version."))
    blocks += decision_blocks(row, version, ev)
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
              *seed_section(ev), Block("h2", ("The seed claims",))]
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


def seed_counts(ev: Evidence) -> list:
    """The count at the top of the index's seed-claim section (``STATUS_RULE``)."""
    statuses = [ev.claim_status(c.number) for c in ev.claims]
    count = {s: sum(1 for x, _ in statuses if x == s) for s in (DECIDED, NOT_YET, NOT_APPLICABLE)}
    on3 = sum(1 for s, seen in statuses if s == DECIDED and any(a.decided and a.standing.decision.n >= FEWEST
                                                                 for a in seen))
    capped = sum(1 for s, seen in statuses if s == NOT_YET and any(a.status == AFTER_CAP for a in seen))
    rows = {a.row.file.id: a for _, seen in statuses for a in seen}
    split = [a for a in rows.values() if a.status != NOT_APPLICABLE and a.standing.disagree]
    few = [a for a in split if a.standing.decision.n < DISAGREE]
    out = [f"{len(statuses)} seed claims at the seeds' versions ({SEEDS_TEXT}): **{count[DECIDED]} decided** ({on3} "
           f"of them on at least {FEWEST} decided runs of the present encoding), **{count[NOT_YET]} not yet** "
           f"({capped} of them with a row undecided after the cap), **{count[NOT_APPLICABLE]} not applicable**. "
           f"Rows asserting a claim whose runs there disagree: {len(split)}"]
    if few:
        out += [f", {len(few)} of them on fewer than {DISAGREE} decided runs (",
                *joined([Link(a.row.file.id, "page", ev.page(a.row.file.id, a.version)),
                         f" held {a.standing.decision.k} of {a.standing.decision.n}"] for a in few), ")"]
    return out + ["."]


def seed_section(ev: Evidence) -> list[Block]:
    """The index's section: the count, the rule, one line per claim with its status there."""
    rows = []
    for c in ev.claims:
        status, seen = ev.claim_status(c.number)
        rows.append([[Link(str(c.number), "page", f"claims/{c.number}")], f"**{status}**",
                     joined((seed_parts(a, ev) for a in seen), "; ") or "no row asserts it"])
    return [Block("h2", ("Seed claims at the seeds' versions",)), para(*seed_counts(ev)), para(STATUS_RULE),
            table(["claim", "status", "its rows at the seeds' versions"], rows)]


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


def sources_text(batches: Path, evidence: Path | None = None) -> str:
    store_text = f" {R.repo_path(evidence)}/*.jsonl" if evidence else ""
    return (f"{R.repo_path(batches)}/*/{R.SUMMARY_JSON}{store_text} {SCENARIO_FILES} {COMPARISON_FILES} {CLAIMS_MD} "
            f"{SEEDS}/*.txt")


def evidence_rows(source: Path, evidence: Path | None = None) -> list[dict]:
    """The published rows below ``source`` and, with ``evidence``, the store's there, each run
    once (``with_store``)."""
    rows = published_rows(source)
    return with_store(rows, stored_rows(evidence)) if evidence else rows


def spelled(source: Path, evidence: Path | None, html: bool = False) -> str:
    """The command that writes an atlas over these sources, as its pages name it."""
    return (BY + (" --html" if html else "")
            + ("" if Path(source).resolve() == R.DOC_BATCHES.resolve() else f" --from {R.repo_path(source)}")
            + (f" --evidence {R.repo_path(evidence)}" if evidence else ""))


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


def markdown(source: Path = R.DOC_BATCHES, out: Path = ATLAS_DIR, evidence: Path | None = None) -> dict[str, str]:
    """The Markdown atlas over the published batches ``source`` (and the evidence store
    ``evidence``) as it is written to ``out`` (the repository's docs/atlas by default:
    tests/test_atlas.py compares the two)."""
    atlas = build(evidence_rows(source, evidence), identity.catalogue())
    return texts(atlas, Output("md", Path(out), repo_from(out)), sources_text(source, evidence),
                 spelled(source, evidence))


def generate(source: Path | None = None, out: Path | None = None, html: bool = False,
             reports: Path | None = None, repo_url: str | None = None, evidence: Path | None = None) -> str:
    """``mqchaos docs atlas``: the atlas over the published batches ``source`` (default
    docs/batches) and, with ``evidence``, the rows of that evidence store (harness.evidence:
    one JSONL file per night; a run in both once), written to ``out`` (default docs/atlas,
    Markdown; with ``html``, the results root's atlas/, its runs' reports linked from
    ``reports``, default the results root, and the repository's files from ``repo_url`` when
    given); the line saying what was written."""
    source = Path(source) if source else R.DOC_BATCHES
    evidence = Path(evidence) if evidence else None
    out = Path(out) if out else (store.results_root() / "atlas" if html else ATLAS_DIR)
    if not html:
        pages = markdown(source, out, evidence)
    else:
        o = Output("html", out, repo_url, Path(reports) if reports else store.results_root())
        pages = texts(build(evidence_rows(source, evidence), identity.catalogue()), o,
                      sources_text(source, evidence), spelled(source, evidence, html=True))
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
