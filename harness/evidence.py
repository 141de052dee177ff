"""The evidence kept across nights (issue 54): every night's published rows in one store,
and what they say together.

An evidence row is a published row, exactly what docs/batches/*/summary.json holds per run
(``harness.rows.compact_row``: the ``Row`` keys marked Published, the run id ``run`` and
what decided the verdict), plus ``night`` (the UTC date, YYYY-MM-DD) and ``batch`` (the
batch's name: its directory's, as ``harness.rows.publish`` would name its copy).

The store is a directory of JSON Lines files, one per night: ``<night>.jsonl``, one row a
line, only ever appended to (a night's file is written once by the nightly and grows only
when a backfill or a re-append brings a run of that night not yet there). On a machine it is
``results/evidence-store/`` (``harness.store.evidence_dir``); in CI it is the ``evidence``
branch of the repository, checked out beside the tree, appended to and pushed by the nightly
workflow (.github/workflows/nightly.yml). A run is in the store once: ``append`` leaves out a
row whose run id (``run_key``) is there already, so appending a batch twice adds nothing.

``analyze`` reads the store as ``harness.rows.tally`` reads published rows (one grouping:
per test, the scenario's digest, and per version, the one asked for with the one the nodes
reported; runs of an older digest superseded, never pooled) and adds, per line, the nights
its runs came from; then the flips: between versions of one test, a regression (held at an
older version, did not hold at a newer one) or a fix (the reverse); within one version, flaky
(held on some runs, did not hold on others); and the stale rows (a scenario file of the
catalogue with no run of its current digest in the store).
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable

from harness import decided, identity, store
from harness import rows as R
from harness.identity import Catalogue
from harness.verdicts import Word

SUFFIX = ".jsonl"
NIGHT = re.compile(r"(\d{4}-\d{2}-\d{2})")
MIXED = "mixed"  # a line whose decided runs both held and did not hold
REGRESSION, FIX, FLAKY, DIFFERS = "regression", "fix", "flaky", "differs"
REPORT_MD, REPORT_JSON, JUNIT_XML = "evidence.md", "evidence.json", "junit.xml"


# ---- the store ---------------------------------------------------------------------------------

def store_dir(where: str | os.PathLike | None = None) -> Path:
    """The store: ``where``, else results/evidence-store/ (harness.store)."""
    return Path(where) if where else store.evidence_dir()


def night_text(night: str) -> str:
    """A night as the store names it, YYYY-MM-DD; ValueError otherwise."""
    try:
        return datetime.strptime(str(night), "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError:
        raise ValueError(f"night {night!r}: a UTC date, YYYY-MM-DD") from None


def today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def run_night(r: dict) -> str | None:
    """The UTC date a run started, from its id (``<scenario>/<UTC timestamp>``)."""
    m = NIGHT.match(str(r.get("run") or "").rsplit("/", 1)[-1])
    return m.group(1) if m else None


def run_key(r: dict) -> str:
    """What makes a row one run in the store: its run id; a row with none (a file refused at
    load runs nothing) is its batch's, by scenario, version and repeat."""
    return r.get("run") or f"{r.get('batch')}:{r.get('scenario')}:{r.get('version')}:{r.get('repeat', 0)}"


def load(where: str | os.PathLike | None = None) -> list[dict]:
    """Every row of the store, night by night, each night's in the order appended (a torn
    line is skipped: harness.store.read_jsonl)."""
    d = store_dir(where)
    return [r for f in sorted(d.glob(f"*{SUFFIX}")) for r in store.read_jsonl(f)]


def published_row(r: dict, night: str, batch: str) -> dict:
    """A row of a published batch as the store keeps it: as it was published (``compact_row``
    without reading the run's files, which may lie on this machine: a row published before the
    copies were compact kept its report's path), the night and the batch."""
    r = {**r, "run": r.get("run") or R.run_id(r.get("report")), "report": None}
    return {**R.compact_row(r), "night": night_text(night), "batch": batch}


def add(rows: Iterable[dict], where: str | os.PathLike | None = None) -> list[dict]:
    """Evidence rows appended to their nights' files, each run once: those whose run is in the
    store already (or earlier in ``rows``) are left out. Returns the rows added."""
    d = store_dir(where)
    seen = {run_key(r) for r in load(d)}
    new: dict[str, list[dict]] = {}
    for r in rows:
        if run_key(r) not in seen:
            seen.add(run_key(r))
            new.setdefault(night_text(r["night"]), []).append(r)
    if new:
        d.mkdir(parents=True, exist_ok=True)
    for night, items in sorted(new.items()):
        text = "".join(json.dumps(r, separators=(",", ":"), default=str) + "\n" for r in items)
        path = d / f"{night}{SUFFIX}"
        if path.is_file() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
            text = "\n" + text  # a torn last line stays apart (read_jsonl skips it)
        with open(path, "a", encoding="utf-8") as f:  # one write: the night's rows whole
            f.write(text)
    return [r for items in new.values() for r in items]


def batch_rows(batch_dir: Path) -> list[dict]:
    """A batch's rows: its summary.json."""
    return json.loads((Path(batch_dir) / R.SUMMARY_JSON).read_text())


def append(source: str | os.PathLike | list[dict], night: str | None = None,
           where: str | os.PathLike | None = None, batch: str | None = None) -> list[dict]:
    """A batch's rows (``source``: its directory, or its summary rows with ``batch`` naming
    it) appended to the store as the night ``night``: by default the UTC date its earliest
    run started (from the run ids), else today. Each row is kept as ``harness.rows.publish``
    would copy it (``compact_row``: what decided the verdict read from the run's files where
    they are on this machine). Idempotent: a run already in the store is not added again.
    Returns the rows added."""
    if isinstance(source, (str, os.PathLike)):
        batch = batch or Path(source).resolve().name  # results/nightly/latest: the batch it names
        rows = batch_rows(Path(source))
    else:
        rows = list(source)
    batch = batch or "unnamed"
    compact = [R.compact_row(r) for r in rows]
    if night is None:
        night = min(filter(None, map(run_night, compact)), default=None) or today()
    return add(({**r, "night": night_text(night), "batch": batch} for r in compact), where)


def backfill(where: str | os.PathLike | None = None, batches: Path = R.DOC_BATCHES) -> list[dict]:
    """Every published run (``batches``: docs/batches/*/summary.json; a matrix's runs are in
    its summary.json too) added to the store, as published, each on the night it ran (from
    its run id, else the batch's name, else the file's date). Idempotent. Returns the rows added."""
    out: list[dict] = []
    for f, rows in R.published_batches(batches):
        mtime = datetime.fromtimestamp(f.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d")
        fallback = (NIGHT.match(f.parent.name) or [None, mtime])[1]
        items = []
        for r in rows:
            e = published_row(r, fallback, f.parent.name)
            items.append({**e, "night": run_night(e) or fallback})
        out += add(items, where)
    return out


# ---- what the store says -----------------------------------------------------------------------

def line_verdict(t: dict) -> str | None:
    """A tally line's verdict: held (every decided run held), DID NOT HOLD (none did),
    mixed, or None (no run decided)."""
    if not t["decided"]:
        return None
    return Word.HELD if t["held"] == t["decided"] else Word.DID_NOT_HOLD if t["held"] == 0 else MIXED


def by_night(runs: list[dict]) -> dict[str, dict[str, int]]:
    """Each night's verdicts of a line's runs, in the one vocabulary."""
    out: dict[str, Counter] = {}
    for r in runs:
        out.setdefault(r.get("night") or "-", Counter())[R.verdict_word(r)] += 1
    return {n: dict(c) for n, c in sorted(out.items())}


def nights_with(line: dict, word: str) -> list[str]:
    return [n for n, c in line["nights"].items() if c.get(word)]


def label(t: dict) -> str:
    """A line's version as tables show it: asked for (reported)."""
    return R.version_text(t["version"], t["reported"])


def version_order(t: dict) -> tuple:
    """Versions in release order: by the numbers of the one reported, else the one asked for."""
    text = t.get("reported") or t.get("version") or ""
    return tuple(int(x) for x in re.findall(r"\d+", text)), text


def row_key(r: dict) -> tuple:
    """A row's tally line by digest and version (asked for, reported), as harness.rows groups."""
    return r.get("digest"), None if r.get("version") is None else str(r["version"]), R.reported(r)


def _line(t: dict, runs: list[dict]) -> dict:
    nights = by_night(runs)
    # the rule's decision (harness.decided): a never-claim's one counterexample among clean runs
    # decides that it did not hold, which is not a flaky line
    rule = decided.of_tally(t, runs[0].get("expect"), runs[0].get("require")) if runs else None
    return {**t, "version_label": label(t), "verdict": line_verdict(t), "nights": nights,
            "first_night": min(nights), "last_night": max(nights),
            "decision": str(rule.state) if rule else None}


def flaky(lines: list[dict]) -> list[dict]:
    """The lines (one test, one version) whose decided runs both held and did not hold and
    which harness.decided's rule leaves undecided (mixed): a never-claim with one counterexample
    did not hold, a happens-claim with one occurrence held; neither is flaky."""
    out = []
    for t in lines:
        if t["verdict"] != MIXED or t.get("decision") in (decided.State.HELD, decided.State.DID_NOT_HOLD):
            continue
        held_on, failed_on = nights_with(t, Word.HELD), nights_with(t, Word.DID_NOT_HOLD)
        out.append({"kind": FLAKY, "id": t["id"], "scenario": t["scenario"], "digest": t["digest"],
                    "superseded": t["superseded"], "version": t["version"], "reported": t["reported"],
                    "version_label": t["version_label"], "held": t["held"], "decided": t["decided"],
                    "held_on": held_on, "did_not_hold_on": failed_on,
                    "text": f"held {t['held']} of {t['decided']} at {t['version_label']}: held on "
                            f"{', '.join(held_on)}; did not hold on {', '.join(failed_on)}"})
    return out


def ordered(old: dict, new: dict) -> bool:
    """Whether two lines' versions are in release order, the one newer than the other: not
    where one's numbers begin the other's (3.10 and 3.10.8; 3.9 and 3.9-kraft, both 3.9.1)."""
    a, b = version_order(old)[0], version_order(new)[0]
    return a[:len(b)] != b and b[:len(a)] != a


def version_flips(lines: list[dict]) -> list[dict]:
    """Between the versions of one test whose runs agree (every decided run held, or none
    did), in release order: a regression where it held at the older and did not hold at the
    newer, a fix the reverse; where the two versions are not ordered (3.9 and 3.9-kraft, both
    3.9.1; a run that recorded no version asked for), "differs". A version whose runs are
    mixed is flaky, not a flip."""
    tests: dict[tuple, list[dict]] = {}
    for t in lines:
        tests.setdefault((t["scenario"], t["digest"], t["superseded"]), []).append(t)
    out = []
    for same in tests.values():
        steady = sorted((t for t in same if t["verdict"] in (Word.HELD, Word.DID_NOT_HOLD)), key=version_order)
        for old, new in zip(steady, steady[1:]):
            if old["verdict"] == new["verdict"]:
                continue
            kind = (REGRESSION if old["verdict"] == Word.HELD else FIX) if ordered(old, new) else DIFFERS
            out.append({"kind": kind, "id": new["id"], "scenario": new["scenario"], "digest": new["digest"],
                        "superseded": new["superseded"], "from_version": old["version_label"],
                        "to_version": new["version_label"], "from": old["verdict"], "to": new["verdict"],
                        "from_nights": sorted(old["nights"]), "to_nights": sorted(new["nights"]),
                        "text": f"{old['verdict']} at {old['version_label']} (last {old['last_night']}), "
                                f"{new['verdict']} at {new['version_label']} (since {new['first_night']})"})
    return out


def stale(rows: list[dict], cat: Catalogue) -> list[dict]:
    """The catalogue's files with no run of their current digest in the store, each with the
    newest run of its name (an older encoding), if any."""
    seen = {r.get("digest") for r in rows}
    newest: dict[str, dict] = {}
    for r in rows:
        old = newest.get(r.get("scenario"))
        if old is None or (r.get("night") or "", r.get("run") or "") >= (old.get("night") or "", old.get("run") or ""):
            newest[r.get("scenario")] = r
    out = []
    for e in sorted(cat.entries, key=lambda e: R.catalogue_order(e.id, e.name)):
        if e.digest in seen:
            continue
        last = newest.get(e.name)
        out.append({"id": e.id, "scenario": e.name, "digest": e.digest, "last_run": None if last is None else {
            "night": last.get("night"), "run": last.get("run"), "digest": last.get("digest"),
            "verdict": R.verdict_word(last)}})
    return out


def analyze(rows: list[dict], cat: Catalogue | None = None) -> dict:
    """What the store's rows say (see the module's doc): per line (test and version) the tally
    (held k of n decided, the 95 % Wilson interval, the others) with its nights; the flips
    between versions; the flaky lines; the stale files."""
    cat = identity.catalogue() if cat is None else cat
    lines = [_line(t, runs) for t, runs in R.tally_runs(rows, cat)]
    return {"runs": len(rows), "nights": sorted({r["night"] for r in rows if r.get("night")}),
            "batches": sorted({r["batch"] for r in rows if r.get("batch")}), "lines": lines,
            "flips": version_flips(lines), "flaky": flaky(lines), "stale": stale(rows, cat)}


def flaky_marker(analysis: dict) -> Callable[[dict], str | None]:
    """For harness.rows.junit: why a row's test and version is flaky in the evidence, else None."""
    marked = {(f["digest"], f["version"], f["reported"]): f["text"] for f in analysis["flaky"]}
    return lambda r: marked.get(row_key(r))


# ---- the report --------------------------------------------------------------------------------

LINE_HEAD = [*R.TALLY_HEAD, "nights (first – last)", "per night"]
FLIP_HEAD = ["id", "scenario", "flip", "from", "to", "nights"]
FLAKY_HEAD = ["id", "scenario", "version (reported)", "held k of n", "held on", "did not hold on"]
STALE_HEAD = ["id", "scenario file", "current digest", "newest run of its name (an older encoding)"]


def _night_cell(t: dict) -> str:
    return "; ".join(f"{n}: " + ", ".join(f"{w} {k}" for w, k in sorted(c.items())) for n, c in t["nights"].items())


def _flip_cells(f: dict) -> list[str]:
    name = f["scenario"] + (f" (superseded: digest {identity.short(f['digest'])})" if f["superseded"] else "")
    return [f["id"] or "-", name, f["kind"], f"{f['from']} at {f['from_version']}",
            f"{f['to']} at {f['to_version']}", f"{', '.join(f['from_nights'])} → {', '.join(f['to_nights'])}"]


def _stale_cells(s: dict) -> list[str]:
    last = s["last_run"]
    seen = "none in the store" if last is None else (f"{last['night']}: {last['verdict']} (digest "
                                             f"{identity.short(last['digest'])}, run {last['run'] or '-'})")
    return [s["id"] or "-", s["scenario"], identity.short(s["digest"]), seen]


def markdown(a: dict, source: str) -> str:
    """The report as Markdown: the flips, the flaky lines, the stale files, then every line."""
    nights = a["nights"]
    span = f"{nights[0]} to {nights[-1]}" if nights else "no night"
    out = [f"# Evidence across nights: {len(nights)} night(s), {span}", "",
           f"{a['runs']} run(s) of {len(a['batches'])} batch(es), from `{source}` (`mqchaos evidence report`, "
           "harness/evidence.py, docs/nightly.md). Per test (a scenario's digest) and broker version (asked "
           "for, and as the nodes reported it): held k of the n runs that decided, with its 95 % Wilson "
           "interval. Runs of an older digest are superseded and counted apart.", ""]
    flips = a["flips"]
    out += ["## Flips between versions", "",
            "A *regression*: the prediction held at the older version and did not hold at the newer one; a "
            "*fix*: the reverse (the words are the prediction's, not a judgement of the broker).", ""]
    out += R.md_table(FLIP_HEAD, [[R.md_cell(c) for c in _flip_cells(f)] for f in flips]) if flips else ["None."]
    out += ["", "## Flaky: one version, verdicts that differ", ""]
    out += R.md_table(FLAKY_HEAD, [[f["id"] or "-", f["scenario"], f["version_label"], f"{f['held']} of {f['decided']}",
                                    ", ".join(f["held_on"]), ", ".join(f["did_not_hold_on"])]
                                   for f in a["flaky"]]) if a["flaky"] else ["None."]
    out += ["", f"## Stale: {len(a['stale'])} scenario file(s) with no run of their current digest", ""]
    out += R.md_table(STALE_HEAD, [_stale_cells(s) for s in a["stale"]]) if a["stale"] else ["None."]
    out += ["", "## Per row and version", ""]
    out += R.md_table(LINE_HEAD, [[*R.tally_cells(t), f"{t['first_night']} – {t['last_night']}",
                                   R.md_cell(_night_cell(t))] for t in a["lines"]])
    return "\n".join(out) + "\n"


def write_report(a: dict, out: Path, source: str, junit_batch: Path | None = None) -> list[Path]:
    """evidence.md and evidence.json in ``out``; with ``junit_batch``, junit.xml: that batch's
    JUnit report with the rows the evidence calls flaky marked as such (harness.rows.junit)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_MD).write_text(markdown(a, source))
    (out / REPORT_JSON).write_text(json.dumps({"store": source, **a}, indent=1, default=str) + "\n")
    written = [out / REPORT_MD, out / REPORT_JSON]
    if junit_batch is not None:
        (out / JUNIT_XML).write_text(R.junit(batch_rows(junit_batch), flaky=flaky_marker(a)))
        written.append(out / JUNIT_XML)
    return written
