"""The atlas (issue 54, harness.atlas) and the claims it quotes (harness.claims): the seed claims
parse from the repository's copy (76, in order, each found in its seed) and the copy equals
../shared's where that is beside the repository; a planted set of published rows gives pages
that say exactly k of n, the interval, the superseded runs apart and the last run; the
committed docs/atlas is what the committed evidence gives; and neither the atlas nor README's
verdict tables show a superseded run as a present one."""
from __future__ import annotations

import json
import os
import re
import shlex

import pytest
from click.testing import CliRunner

from harness import atlas as A
from harness import claims as C
from harness import identity
from harness import matrix as M
from harness import rows as R
from harness.cli import main
from harness.identity import Catalogue, Entry
from harness.spec import SEED_CLAIMS
from harness.store import ROOT

# ---- the claims ------------------------------------------------------------------------------


def test_the_vendored_seed_claims_parse_to_76_items_in_order_each_found_in_its_seed():
    claims = C.claims()
    assert [c.number for c in claims] == list(range(1, SEED_CLAIMS + 1)) and SEED_CLAIMS == 76
    seeds = {p.name for p in C.SEEDS.glob("*.txt")}
    assert len(seeds) == 5 and {c.seed for c in claims} == seeds
    # the sections' bounds the claim table always had (harness.rows.claim_seed)
    assert [max(c.number for c in claims if c.seed_id == s) for s in ("000", "001", "002", "003", "004")] == [
        21, 42, 61, 72, 76]
    assert [R.claim_seed(n)[:3] for n in (1, 21, 22, 42, 43, 61, 62, 72, 73, 76)] == [
        "000", "000", "001", "001", "002", "002", "003", "003", "004", "004"]
    # every claim quotes its own seed, and the words stand there (whitespace aside)
    assert all(c.seed_line for c in claims), [c.number for c in claims if not c.seed_line]
    c17 = C.claim(17)
    assert c17.place is None and c17.tags == ("contradicted, unasserted in R9",)
    text = (C.SEEDS / c17.seed).read_text().splitlines()[c17.seed_line - 1]
    assert "Один раз в секунду он проверяет восстановление связности" in text
    assert C.claim(14).place == "Ignore" and C.claim(53).place == "Scenario 4"
    assert C.place_text(C.claim(7)) == "Same section as claim 6 (Отказоустойчивая очередь), line 69"
    # item 4 quotes seed 002 too ("Also 002"): found there
    assert [q.seed[:3] for q in C.claim(4).quotes] == ["000", "000", "002"]
    # a quote holding quotes is one quote (item 33)
    assert C.claim(33).quotes[0].text.endswith('"consumer cancellation notification"')
    with pytest.raises(KeyError):
        C.claim(77)


def test_an_item_outside_a_seeds_section_is_refused(tmp_path):
    with pytest.raises(ValueError, match="item 1 stands under no seed's section"):
        C.parse("# x\n1. a claim\n", tmp_path)


def test_the_vendored_copies_equal_shareds_where_it_is_beside_the_repository(tmp_path):
    assert (C.SOURCES / "SCENARIOS.md").is_file() and C.SEED_CLAIMS_MD.is_file()
    if not C.SHARED.is_dir():
        if os.environ.get("CI"):  # CI clones with ../shared beside: its absence is a failure
            pytest.fail(f"{C.SHARED} is missing")
        pytest.skip("../shared is not beside the repository")
    assert C.vendored_differences() == []
    # a changed copy, a missing seed, an extra seed: each named
    shared = tmp_path / "shared"
    (shared / "seeds").mkdir(parents=True)
    copy = tmp_path / "copy"
    (copy / "seeds").mkdir(parents=True)
    for d in (shared, copy):
        (d / "SEED-CLAIMS.md").write_text("a")
        (d / "SCENARIOS.md").write_text("b")
    (shared / "seeds" / "0.txt").write_text("x")
    (copy / "seeds" / "1.txt").write_text("y")
    (copy / "SCENARIOS.md").write_text("B")
    got = C.vendored_differences(shared, copy)
    assert len(got) == 3 and any("1.txt: not in" in g for g in got) and any("0.txt: differs" in g for g in got)


# ---- a planted atlas -------------------------------------------------------------------------

SEED_TEXT = "Intro.\n\nПравило: \"никогда не теряет сообщений\" при сбое.\n"
CLAIMS_TEXT = ("# Seed claims\n\n### 000_x.txt (a planted seed)\n"
               "1. Правило: \"никогда не теряет сообщений\". **[partial]**: A1 and B1.\n"
               "2. Same: \"no such words\". No row.\n")


def run(sid, name, version, held, ts, digest, batch="b1", **kw):
    """A published row of one run: held True / False, or None (undecided)."""
    return {"id": sid, "scenario": name, "version": version, "status": "completed", "prediction": held,
            "valid": held, "expect": {"lost": 0}, "require": {}, "digest": digest, "batch": batch,
            "run": f"{name}/2026-11-{ts}.000Z", "reason": "r", "decided_by": "lost=0 vs 0", "lost": 0,
            "brokers": {"rabbitmq": {"3.10": "3.10.8", "4.0": "4.0.5"}[version]}, **kw}


@pytest.fixture
def planted(tmp_path):
    (tmp_path / "000_x.txt").write_text(SEED_TEXT)
    claims = C.parse(CLAIMS_TEXT, tmp_path)
    files = [A.File("A-row", "A1", "scenarios/A-row.yaml", "dA", {"lost": 0}, {}, (1,), setup="s"),
             A.File("B-row", "B1", "scenarios/B-row.yaml", "dB", {"lost": 0}, {}, (1,)),
             A.File("K-row", "K1", "scenarios/K-row.yaml", "dK", {}, {}, (), control_of="A1", setup="s")]
    cat = Catalogue([Entry(f.name, f.id, f.digest, f.setup) for f in files])
    rows = [run("A1", "A-row", "3.10", True, "20T10-00-00", "dA"),
            run("A1", "A-row", "3.10", False, "21T10-00-00", "dA", batch="b2", night=2),
            run("A1", "A-row", "3.10", True, "22T10-00-00", "dA", batch="b2"),
            run("A1", "A-row", "3.10", None, "23T10-00-00", "dA", batch="b3"),  # undecided: not counted
            run("A1", "A-row", "3.10", True, "10T10-00-00", "dA-old"),  # an older encoding: apart
            run("A1", "A-row", "3.10", True, "11T10-00-00", "dA-old"),
            run("A1", "A-row", "4.0", True, "24T10-00-00", "dA"),
            run("B1", "B-row", "3.10", False, "20T11-00-00", "dB"),
            run("K1", "K-row", "3.10", None, "20T12-00-00", "dK", expect={})]  # a control: measured only
    rows.append(dict(rows[0], batch="b9"))  # the same run published twice: counted once
    return A.build(rows, cat, claims, files)


def md(atlas, key):
    return A.render(atlas.pages[key], key, A.Output("md", ROOT / "docs" / "atlas", "../.."), "src")


def section(text: str, head: str) -> str:
    """A page's text from the heading ``head`` to the next heading of its level or above."""
    level = head.split(" ")[0]
    after = text.split(head + "\n", 1)[1]
    return re.split(rf"\n#{{1,{len(level)}}} ", after)[0]


def test_a_claims_page_quotes_its_seed_and_counts_only_the_present_encoding(planted):
    page = md(planted, "claims/1")
    assert '> "никогда не теряет сообщений" ([000_x.txt, line 3](../../../docs/sources/seeds/000_x.txt#L3))' in page
    assert "place: Правило, line 3." in page
    a1 = section(page, "### [A1](../rows/A1@3.10.md): A-row")
    current, old = a1.split("Superseded encodings (not counted):")
    # A1 @ 3.10: 2 held of 3 decided (the undecided run beside, the run published twice once)
    assert ("| [3.10 (3.10.8)](../rows/A1@3.10.md) | held 2 of 3 | 21–94 % | undecided 1 | 4 | "
            "2026-11-23 10:00:00 · b3 · A-row/2026-11-23T10-00-00.000Z · report not published |") in current
    assert "| [4.0 (4.0.5)](../rows/A1@4.0.md) | held 1 of 1 | 21–100 % | - | 1 |" in current
    assert "dA-old" not in current and "held 2 of 2" not in current
    assert "| `dA-old` | [3.10 (3.10.8)](../rows/A1@3.10.md) | expect=lost=0 | held 2 of 2 | 34–100 % | - | 2 |" in old
    assert "Present encoding: digest `dA`; prediction: expect=lost=0; file [scenarios/A-row.yaml]" \
           "(../../../scenarios/A-row.yaml)." in a1
    assert "same set-up under another prediction (not counted here): [K1](../rows/K1@3.10.md)" in a1
    # a claim with two rows: both, each with its own tally
    b1 = section(page, "### [B1](../rows/B1@3.10.md): B-row")
    assert "| held 0 of 1 | 0–79 % |" in b1 and "Superseded" not in b1
    assert "No row asserts this claim yet." in md(planted, "claims/2")


def test_a_row_x_version_page_lists_its_runs_and_its_superseded_ones_apart(planted):
    page = md(planted, "rows/A1@3.10")
    assert "Asserts seed claim(s) [1](../claims/1.md)." in page and "Other versions: [4.0](../rows/A1@4.0.md)." in page
    runs = section(page, "### Runs at 3.10 (3.10.8)")
    shown = re.findall(r"A-row/2026-11-(\d\d)T", runs)
    assert shown == ["23", "22", "21", "20"]  # newest first, each run once
    assert "| 2026-11-21 10:00:00 | b2, night 2 | A-row/2026-11-21T10-00-00.000Z | `dA` | DID NOT HOLD |" in runs
    assert "superseded" not in runs
    old = section(page, "## Superseded encodings (not counted)")
    assert re.findall(r"A-row/2026-11-(\d\d)T", section(old, "### Runs of digest dA-old at 3.10 (3.10.8)")) == [
        "11", "10"]
    assert old.count("superseded (held)") == 2
    assert "4.0" not in section(page, "## Verdict of the present encoding")
    ctl = md(planted, "rows/K1@3.10")
    assert "A control, read against [A1](../rows/A1@3.10.md); it asserts no seed claim." in ctl
    assert "prediction: none (measured only)" in ctl and "measured only" in section(ctl, "### Runs at 3.10 (3.10.8)")


def test_the_index_lists_every_claim_and_the_rows_without_one(planted):
    page = md(planted, "index")
    assert ("| [1](claims/1.md) | 000 | Правило, line 3 | A1, B1 | A1: [3.10 (3.10.8)](rows/A1@3.10.md): held 2 of 3 "
            "(21–94 %); [4.0 (4.0.5)](rows/A1@4.0.md): held 1 of 1 (21–100 %); 2 superseded run(s) apart; B1: "
            "[3.10 (3.10.8)](rows/B1@3.10.md): held 0 of 1 (0–79 %) |") in page
    assert "| [2](claims/2.md) | 000 | Same as claim 1 (Правило) | no row yet | - |" in page
    controls = section(page, "## Controls (read against another row; no seed claim)")
    assert "| K1 | K-row | A1 | [3.10 (3.10.8)](rows/K1@3.10.md): no run decided |" in controls
    assert set(planted.pages) == {"index", "claims/1", "claims/2", "rows/A1@3.10", "rows/A1@4.0", "rows/B1@3.10",
                                  "rows/K1@3.10"}


def test_html_pages_say_the_same_and_link_reports_where_the_run_is(planted, tmp_path):
    out = tmp_path / "atlas"
    report = tmp_path / "results" / "A-row" / "2026-11-23T10-00-00.000Z" / "report.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html></html>")
    o = A.Output("html", out, None, tmp_path / "results")
    A.write(A.texts(planted, o, "src", "by"), out)
    page = (out / "rows" / "A1@3.10.html").read_text()
    assert '<a href="../../results/A-row/2026-11-23T10-00-00.000Z/report.html">report</a>' in page
    assert "held 2 of 3" in page and "21–94 %" in page and "report not published" in page
    assert '<a href="../claims/1.html">1</a>' in page and "scenarios/A-row.yaml" in page  # named, not linked
    # a page no longer made is removed; a directory holding something else is refused
    (out / "rows" / "Z9@1.html").write_text("old")
    A.write(A.texts(planted, o, "src", "by"), out)
    assert not (out / "rows" / "Z9@1.html").exists()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x")
    with pytest.raises(ValueError, match="not empty and no atlas"):
        A.write(A.texts(planted, o, "src", "by"), tmp_path / "other")


# ---- the committed atlas ---------------------------------------------------------------------


def test_the_committed_atlas_is_what_the_committed_evidence_gives():
    """docs/atlas is generated (`mqchaos docs atlas`) from docs/batches, scenarios/ and
    docs/sources/: generating it again gives the same files, byte for byte."""
    want = A.markdown()
    have = {str(p.relative_to(A.ATLAS_DIR)): p.read_text() for p in A.ATLAS_DIR.rglob("*.md")}
    stale = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    assert not stale, f"docs/atlas is not what `mqchaos docs atlas` writes now ({len(stale)} files: {stale[:8]})"


def test_the_atlas_shows_no_superseded_run_as_a_present_one():
    """Over the committed evidence: every run a present line counts has its file's present
    digest, every page's present runs show it, and every other run is marked superseded."""
    cat = identity.catalogue()
    atlas = A.build(A.published_rows(), cat)
    by_id = {r.file.id: r for r in atlas.evidence.rows}
    for row in atlas.evidence.rows:
        for ln in row.current:
            assert {r.get("digest") for r in ln.runs} == {row.file.digest}, (row.file.name, ln.t)
        for ln in row.superseded:
            assert all(r.get("digest") != row.file.digest for r in ln.runs), (row.file.name, ln.t)
    for key, page in atlas.pages.items():
        if not key.startswith("rows/"):
            continue
        row = by_id[key[len("rows/"):].split("@")[0]]
        text = md(atlas, key)
        present = text.split("## Superseded encodings (not counted)")[0]
        for block in re.split(r"\n### Runs at ", present)[1:]:
            assert set(re.findall(r"\| `([0-9a-f:raw]+)` \|", block)) <= {identity.short(row.file.digest)}, key
            assert not [ln for ln in block.splitlines() if ln.startswith("| ") and "superseded" in ln], key


def _readme_tables():
    """README.md's generated verdict tables: (command arguments, the table's lines)."""
    text = (ROOT / "README.md").read_text()
    for m in re.finditer(r"<!-- generated by `mqchaos docs table (\w+) ([^`]+)` from [^\n]*-->\n(.*?)<!-- /table:",
                         text, re.S):
        yield m[1], shlex.split(m[2]), [ln for ln in m[3].splitlines() if ln.startswith("| ") and
                                        not ln.startswith("| id |")]


def test_readmes_verdict_tables_mark_every_superseded_run():
    cat = identity.catalogue()
    seen = 0
    for mode, args, lines in _readme_tables():
        only = set(args[args.index("--only") + 1].split(",")) if "--only" in args else None
        if mode == "batch":
            rows = json.loads((ROOT / args[0] / R.SUMMARY_JSON).read_text())
            rows = [r for r in rows if not only or r["scenario"] in only or r.get("id") in only]
            verdicts = [ln.split(" | ")[R.MD_HEAD.index("verdict")] for ln in lines]
            marked = [cat.superseded(r) for r in rows]
        else:
            assert mode == "matrix", mode
            m = M.read(ROOT / args[0])
            m = M.only(m, only) if only else m
            verdicts = [c for ln in lines for c in ln.strip("| ").split(" | ")[2:]]
            marked = [M.superseded(row["cells"].get(v), cat) for t in m["tables"] for row in t["rows"]
                      for v in t["versions"]]
        assert len(verdicts) == len(marked), (mode, args)
        for shown, old in zip(verdicts, marked):
            assert shown.startswith("superseded") == old, (mode, args, shown)
        seen += len(verdicts)
    assert seen > 0


def test_docs_atlas_writes_the_pages_and_refuses_missing_evidence(tmp_path):
    res = CliRunner().invoke(main, ["docs", "atlas", "--from", str(tmp_path), "--out", str(tmp_path / "a")])
    assert res.exit_code != 0 and "no published batch" in res.output


def test_serve_writes_the_atlas_over_the_stored_runs_and_links_it(tmp_path):
    """`mqchaos serve`: the atlas in HTML below the results root, over the published batches and
    the runs stored there (here none published), each stored run's report linked; the store's
    page links it."""
    from harness import browse

    sc = identity.catalogue().by_id["R9"]
    root = tmp_path / "results"
    run_dir = root / sc.name / "2026-11-23T10-00-00.000Z"
    run_dir.mkdir(parents=True)
    (run_dir / "report.html").write_text("<html></html>")
    stored = [{"id": "R9", "scenario": sc.name, "version": "3.10", "status": "completed", "prediction": True,
               "expect": {"lost": 0}, "digest": sc.digest, "run": f"{sc.name}/2026-11-23T10-00-00.000Z"}]
    index = A.write_served(root, stored, batches=tmp_path / "none")
    page = (root / "atlas" / "rows" / "R9@3.10.html").read_text()
    assert index.is_file() and "held 1 of 1" in page
    assert f'href="../../{sc.name}/2026-11-23T10-00-00.000Z/report.html"' in page
    assert 'href="atlas/index.html"' in browse.write_index(root).read_text()
