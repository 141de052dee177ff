"""The atlas (issue 54, harness.atlas) and the claims it quotes (harness.claims): the seed claims
parse from the repository's copy (76, in order, each found in its seed) and the copy equals
../shared's where that is beside the repository; a planted set of published rows gives pages
that say exactly k of n, the interval, the superseded runs apart, the last run and each
version's decision (harness.decided); planted rows at the seeds' versions (a never-claim held
after 3 clean runs, one with a counterexample, one undecided with its runs' reasons, one at the
cap, a mixed one under 10, one not applicable, a claim with no row) give the index's status
lines and counts exactly; an evidence store's rows join the published ones, each run once; the
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
    files = [A.File("A-row", "A1", "scenarios/A-row.yaml", "dA", {"lost": 0}, {}, (1,), setup="s", broker="rabbitmq"),
             A.File("B-row", "B1", "scenarios/B-row.yaml", "dB", {"lost": 0}, {}, (1,), broker="rabbitmq"),
             A.File("K-row", "K1", "scenarios/K-row.yaml", "dK", {}, {}, (), control_of="A1", setup="s",
                    broker="rabbitmq")]
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
    # beside each line, its version's decision (harness.decided): a counterexample decides a lost: 0 row
    assert ("| [3.10 (3.10.8)](../rows/A1@3.10.md) | held 2 of 3 | 21–94 % | undecided 1 | 4 | **DID NOT HOLD**: "
            "a claim that it never happens: 1 counterexample in 3 decided runs: it did not hold; it happens in "
            "6–79 % of runs (the runs disagree: 2 held) | "
            "2026-11-23 10:00:00 · b3 · A-row/2026-11-23T10-00-00.000Z · report not published |") in current
    assert ("| [4.0 (4.0.5)](../rows/A1@4.0.md) | held 1 of 1 | 21–100 % | - | 1 | **undecided**: a claim that it "
            "never happens: 1 clean decided run(s), fewer than 3;") in current
    assert "dA-old" not in current and "held 2 of 2" not in current
    assert "| `dA-old` | [3.10 (3.10.8)](../rows/A1@3.10.md) | expect=lost=0 | held 2 of 2 | 34–100 % | - | 2 |" in old
    assert "Present encoding: digest `dA`; prediction: expect=lost=0; file [scenarios/A-row.yaml]" \
           "(../../../scenarios/A-row.yaml)." in a1
    assert "same set-up under another prediction (not counted here): [K1](../rows/K1@3.10.md)" in a1
    # a claim with two rows: both, each with its own tally
    b1 = section(page, "### [B1](../rows/B1@3.10.md): B-row")
    assert "| held 0 of 1 | 0–79 % |" in b1 and "Superseded" not in b1
    assert "No row asserts this claim yet." in md(planted, "claims/2")
    # at the seeds' versions: both rows decided by a counterexample, each on fewer than 3 decided runs
    seed = section(page, "## At the seeds' versions")
    assert seed.startswith("\n**decided** at the seeds' versions (RabbitMQ 3.10, Kafka 3.9 with ZooKeeper)")
    assert ("| [A1](../rows/A1@3.10.md) | 3.10 | decided, DID NOT HOLD: held 2 of 3 decided runs (95 % CI 21–94 %); "
            "a claim that it never happens: 1 counterexample in 3 decided runs") in seed
    assert "its runs disagree: held 2 of 3, fewer than 10 decided runs; runs that decided nothing: undecided: r (1) |" \
        in seed


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
    verdict = section(page, "## Verdict of the present encoding")
    assert "4.0" not in verdict
    assert ("Decision at this version (harness.decided; kind: never): **DID NOT HOLD**, held 2 of 3 decided runs "
            "(95 % CI 21–94 %): a claim that it never happens: 1 counterexample") in verdict
    assert "Runs toward the cap: 4 of 10; its runs disagree: held 2 of 3, fewer than 10 decided runs" in verdict
    assert "At the seeds' versions (RabbitMQ 3.10, Kafka 3.9 with ZooKeeper) this is the row's standing: " \
           "**decided**." in verdict
    assert "At the seeds' versions" not in md(planted, "rows/A1@4.0")
    ctl = md(planted, "rows/K1@3.10")
    assert "A control, read against [A1](../rows/A1@3.10.md); it asserts no seed claim." in ctl
    assert "prediction: none (measured only)" in ctl and "measured only" in section(ctl, "### Runs at 3.10 (3.10.8)")


def test_the_index_lists_every_claim_and_the_rows_without_one(planted):
    page = md(planted, "index")
    assert ("| [1](claims/1.md) | 000 | Правило, line 3 | A1, B1 | A1: [3.10 (3.10.8)](rows/A1@3.10.md): held 2 of 3 "
            "(21–94 %), DID NOT HOLD; [4.0 (4.0.5)](rows/A1@4.0.md): held 1 of 1 (21–100 %), undecided; 2 superseded "
            "run(s) apart; B1: [3.10 (3.10.8)](rows/B1@3.10.md): held 0 of 1 (0–79 %), DID NOT HOLD |") in page
    assert "| [2](claims/2.md) | 000 | Same as claim 1 (Правило) | no row yet | - |" in page
    controls = section(page, "## Controls (read against another row; no seed claim)")
    assert "| K1 | K-row | A1 | [3.10 (3.10.8)](rows/K1@3.10.md): no run decided, measured only |" in controls
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


# ---- the seed claims at the seeds' versions ---------------------------------------------------

SEED_CLAIMS_TEXT = "# Seed claims\n\n### 000_x.txt (a planted seed)\n" + "".join(
    f"{n}. Правило: \"никогда не теряет сообщений\" ({n}).\n" for n in range(1, 8))
NO_SETUP = "could not decide: the set-up the claim needs did not happen: at_risk_at_fault=0 (required >0)"
RATE = {"unavailable_s": "<= 2.5"}


def runs(sid, digest, verdicts, version="3.10", **kw):
    """Published rows of ``sid``'s runs, one per verdict (True, False, None: undecided), a
    minute apart; ``kw`` overrides each row's fields."""
    out = []
    for i, held in enumerate(verdicts):
        r = run(sid, f"{sid}-row", "3.10", held, f"20T10-{i:02d}-00", digest, **kw)
        out.append({**r, "version": version, "reason": NO_SETUP if held is None else "r"})
    return out


@pytest.fixture
def seeded(tmp_path):
    """Six rows, one claim each, at the seeds' versions; claim 7 has no row."""
    (tmp_path / "000_x.txt").write_text(SEED_TEXT)
    claims = C.parse(SEED_CLAIMS_TEXT, tmp_path)
    kraft = "the claim is about the KRaft controller quorum; this version keeps its metadata in ZooKeeper"
    files = [A.File("N1-row", "N1", "scenarios/N1.yaml", "dN1", {"lost": 0}, {}, (1,), broker="rabbitmq"),
             A.File("N2-row", "N2", "scenarios/N2.yaml", "dN2", {"lost": 0}, {}, (2,), broker="rabbitmq"),
             A.File("U1-row", "U1", "scenarios/U1.yaml", "dU1", {"lost": 0}, {"at_risk_at_fault": ">0"}, (3,),
                    broker="rabbitmq"),
             A.File("C1-row", "C1", "scenarios/C1.yaml", "dC1", RATE, {}, (4,), broker="rabbitmq"),
             A.File("M1-row", "M1", "scenarios/M1.yaml", "dM1", RATE, {}, (5,), broker="rabbitmq"),
             A.File("K1-row", "K1k", "scenarios/K1k.yaml", "dK1", {"lost": 0}, {}, (6,), broker="kafka",
                    seed_na=kraft)]
    cat = Catalogue([Entry(f.name, f.id, f.digest) for f in files])
    rows = (runs("N1", "dN1", [True, True]) + runs("N1", "dN1", [True], version=None, run="N1-row/2026-11-19T09-00-00Z")
            + runs("N2", "dN2", [True, False])
            + runs("U1", "dU1", [True, None, None])
            + runs("C1", "dC1", [True] * 6 + [False] * 4)
            + runs("C1", "dC1", [None], status="interrupted", harness_error=True, prediction=None,
                   reason="run interrupted", run="C1-row/2026-11-21T00-00-00Z")
            + runs("M1", "dM1", [True, True, False])
            + runs("K1k", "dK1", [True] * 3, version="3.9-kraft", brokers={"kafka": "3.9.1"}))
    return A.build(rows, cat, claims, files)


def test_each_row_at_the_seeds_versions_says_whether_it_is_decided_and_why_not(seeded):
    page = md(seeded, "index")
    lines = {m[1]: (m[2], m[3]) for m in re.finditer(r"^\| \[(\d)\]\(claims/\d\.md\) \| \*\*([a-z ]+)\*\* \| (.*) \|$",
                                                      section(page, "## Seed claims at the seeds' versions"), re.M)}
    assert {n: s for n, (s, _) in lines.items()} == {
        "1": "decided", "2": "decided", "3": "not yet", "4": "not yet", "5": "not yet", "6": "not applicable",
        "7": "not yet"}
    # a never-claim decided held after 3 clean runs (one recorded no version: the default, 3.10)
    assert lines["1"][1] == ("[N1](rows/N1@3.10.md) at 3.10: decided, held: held 3 of 3 decided runs (95 % CI "
                             "44–100 %); a claim that it never happens: 3 clean decided runs (at least 3); it could "
                             "happen unseen in up to 56 % of runs")
    # one with a counterexample: decided, on fewer than 3 runs, its runs disagree under 10
    assert lines["2"][1].startswith("[N2](rows/N2@3.10.md) at 3.10: decided, DID NOT HOLD: held 1 of 2 decided runs")
    assert lines["2"][1].endswith("(on fewer than 3 decided runs); its runs disagree: held 1 of 2, fewer than 10 "
                                  "decided runs")
    # undecided so far, with the reasons of the runs that decided nothing
    assert lines["3"][1] == (
        "[U1](rows/U1@3.10.md) at 3.10: undecided so far (1 decided run; 3 toward the cap of 10): a claim that it "
        "never happens: 1 clean decided run(s), fewer than 3; it could happen unseen in up to 79 % of runs; counted "
        "only where its set-up (require: at_risk_at_fault) happened; runs that decided nothing: undecided: the set-up "
        "the claim needs did not happen: at_risk_at_fault=0 (required >0) (2)")
    # at the cap: 10 runs toward it (the interrupted one never counts), its runs disagree at 10
    assert lines["4"][1].startswith("[C1](rows/C1@3.10.md) at 3.10: undecided after the cap (10 runs toward the cap "
                                    "of 10): a race or rate whose runs disagree: held in 6 of 10 (60 %)")
    assert lines["4"][1].endswith("; its runs disagree: held 6 of 10; runs that decided nothing: interrupted (never "
                                  "counted) (1)")
    # a mixed row under 10: not yet, flagged
    assert lines["5"][1].startswith("[M1](rows/M1@3.10.md) at 3.10: undecided so far (3 decided runs; 3 toward the "
                                    "cap of 10): a race or rate whose runs disagree")
    assert lines["5"][1].endswith("; its runs disagree: held 2 of 3, fewer than 10 decided runs")
    # not applicable at 3.9 (ZooKeeper), whatever it found at 3.9-kraft
    assert lines["6"][1] == ("[K1k](rows/K1k@3.9-kraft.md) at 3.9: not applicable: the claim is about the KRaft "
                             "controller quorum; this version keeps its metadata in ZooKeeper")
    assert lines["7"][1] == "no row asserts it"
    # the count at the top says exactly that
    assert ("7 seed claims at the seeds' versions (RabbitMQ 3.10, Kafka 3.9 with ZooKeeper): **2 decided** (1 of them "
            "on at least 3 decided runs of the present encoding), **4 not yet** (1 of them with a row undecided after "
            "the cap), **1 not applicable**. Rows asserting a claim whose runs there disagree: 3, 2 of them on fewer "
            "than 10 decided runs ([N2](rows/N2@3.10.md) held 1 of 2, [M1](rows/M1@3.10.md) held 2 of 3).") in page
    assert "\n**not applicable** at the seeds' versions" in md(seeded, "claims/6")
    assert "\n**not yet** at the seeds' versions (RabbitMQ 3.10, Kafka 3.9 with ZooKeeper): no row asserts it" in \
        md(seeded, "claims/7")


def test_the_seeds_versions_are_the_plugins_defaults_and_the_cap_is_until_decideds():
    from harness import brokers
    from harness.batch import until
    from harness.spec import read_yaml

    assert A.CAP == until.CAP
    for kind, version in A.SEED_VERSIONS.items():
        assert brokers.get(kind).generations[version].default, (kind, version)
    # the scenario model says whether a file runs at its broker's seed version
    na = {p.stem.split("-")[0]: A.seed_applicability(read_yaml(p), p) for p in
          (ROOT / "scenarios/K9-kraft-controller-cut.yaml", ROOT / "scenarios/M4-kraft-controller-remove-add.yaml",
           ROOT / "scenarios/R9-pause-minority.yaml")}
    assert na["K9"].startswith("the claim is about the KRaft controller quorum") and na["R9"] is None
    assert na["M4"].startswith("refused at 3.9: nemesis: remove_controller")


def test_the_evidence_store_adds_its_runs_each_once_by_run_id(tmp_path):
    """`mqchaos docs atlas --evidence STORE`: the published batches and the store's rows, a run
    in both counted once (the store's night lent to it)."""
    sc = identity.catalogue().by_id["R9"]
    one, two = (f"{sc.name}/2026-11-2{d}T10-00-00.000Z" for d in (3, 4))
    row = {"id": "R9", "scenario": sc.name, "version": "3.10", "status": "completed", "prediction": True,
           "valid": True, "expect": {"lost": 0}, "digest": sc.digest, "brokers": {"rabbitmq": "3.10.8"}}
    batches, store = tmp_path / "batches", tmp_path / "store"
    (batches / "b1").mkdir(parents=True)
    (batches / "b1" / R.SUMMARY_JSON).write_text(json.dumps([{**row, "run": one}]))
    store.mkdir()
    def line(run_id, night, batch):
        return json.dumps({**row, "run": run_id, "night": night, "batch": batch}) + "\n"

    (store / "2026-11-23.jsonl").write_text(line(one, "2026-11-23", "n1"))
    (store / "2026-11-24.jsonl").write_text(line(two, "2026-11-24", "n2") + line(two, "2026-11-24", "n3"))
    rows = A.evidence_rows(batches, store)
    assert [(r["run"], r["batch"], r.get("night")) for r in rows] == [
        (one, "b1", "2026-11-23"), (two, "n2", "2026-11-24")]
    out = tmp_path / "atlas"
    res = CliRunner().invoke(main, ["docs", "atlas", "--from", str(batches), "--evidence", str(store),
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    page = (out / "rows" / "R9@3.10.md").read_text()
    assert "| held 2 of 2 |" in page and page.count(one) == 1 and f"| b1, night 2026-11-23 | {one} |" in page
    assert f"--evidence {store}" in page.splitlines()[0] and f"{store}/*.jsonl" in page.splitlines()[0]
    res = CliRunner().invoke(main, ["docs", "atlas", "--from", str(batches), "--evidence", str(tmp_path / "none"),
                                    "--out", str(out)])
    assert res.exit_code != 0 and "no evidence store" in res.output


def test_the_nightly_builds_the_html_atlas_over_the_whole_store_and_uploads_it():
    import yaml

    steps = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())["jobs"]["evidence"]["steps"]
    runs = [s.get("run", "") for s in steps]
    at = next(i for i, r in enumerate(runs) if "mqchaos docs atlas" in r)
    assert at > next(i for i, r in enumerate(runs) if "make evidence-append" in r)
    for option in ("--html", '--evidence "$EVIDENCE_STORE"', "--out results/atlas", "--repo-url"):
        assert option in runs[at], option
    upload = next(s for s in steps[at:] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"] == "results/atlas/" and "atlas" in upload["with"]["name"]
    assert "--evidence" in CliRunner().invoke(main, ["docs", "atlas", "--help"]).output


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
