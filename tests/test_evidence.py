"""The evidence kept across nights (issue 54; harness/evidence.py, docs/nightly.md): two nights
simulated through the nightly workflow's own steps, without Docker (two catalogue shards a
night, written as a batch writes them, merged by `mqchaos batch --kind nightly --merge`,
appended by `mqchaos evidence append`, reported by `mqchaos evidence report` over the whole
store); appending twice adds nothing; the store starts with every published run; the JUnit
report marks a flaky row as such and leaves every other row as it was."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from harness import batch, evidence, identity, store
from harness import rows as R
from harness.cli import main
from harness.measures import wilson
from harness.verdicts import Word

ROOT = store.ROOT
# real files of the catalogue (a merge keeps only the rows of today's files)
FLAKY_ROW, REGRESSED, FIXED, STALE = ("R9-pause-minority", "Q1-quorum-leader-faults", "R1-mirrored-kill-master",
                                      "R48-balancer-drops-down-and-paused-nodes")
NIGHTS = ("2026-12-01", "2026-12-02")
OLD_DIGEST = "0" * 64  # an older encoding of STALE's file


def _row(name: str, night: str, held: bool, version: str, reported: str, results: Path, digest=None) -> dict:
    """One run's row as a batch writes it (harness.batch.summary.row after the run's own)."""
    entry = identity.catalogue().by_name[name]
    ts = f"{night}T02-{len(name):02d}-00.000Z"
    broker = "kafka" if name.startswith("K") else "rabbitmq"
    return {"id": entry.id, "scenario": name, "broker": broker, "version": version, "repeat": 0,
            "seconds": 60.0, "status": "completed", "retried": False, "earlier_attempts": [],
            "expect": entry.expect, "exit": 0 if held else 1, "attempted": 100, "confirmed": 100, "failed": 0,
            "unknown": 0, "lost": 0 if held else 3, "duplicated": 0, "ordering_violations": 0, "ordering": "none",
            "unavailable_s": 1.5, "measurement": {}, "valid": held, "prediction": held,
            "reason": "prediction held" if held else "prediction did not hold",
            "decided_by": f"lost={0 if held else 3}",
            "require": {}, "brokers": {broker: reported}, "digest": digest or entry.digest,
            "setup_digest": entry.setup, "harness_error": False,
            "report": str(results / name / ts / "report.md")}


def _night_rows(night: int, results: Path) -> list[list[dict]]:
    """The night's two shards' rows: FLAKY_ROW held on the first night and not on the second,
    at one version; REGRESSED held at 3.10 and did not at 4.0; FIXED the reverse; STALE ran
    only an older encoding."""
    d = NIGHTS[night]
    v, rep = ("3.10", "3.10.8") if night == 0 else ("4.0", "4.0.5")
    return [[_row(FLAKY_ROW, d, night == 0, "3.10", "3.10.8", results),
             _row(REGRESSED, d, night == 0, v, rep, results)],
            [_row(FIXED, d, night == 1, v, rep, results),
             _row(STALE, d, True, "3.10", "3.10.8", results, digest=OLD_DIGEST)]]


def invoke(*args: str):
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res.output


def _night(night: int, tmp: Path, store_dir: Path, with_night: bool, monkeypatch) -> Path:
    """One night as the workflow runs it: the shards' batches (each on its own runner), their
    merge (`make nightly-merge`), the append (`make evidence-append`); the merged batch."""
    monkeypatch.setattr(store, "stamp", lambda precise=False: f"{NIGHTS[night]}T08-00-00Z")  # the merge's name
    shards = []
    for i, rows in enumerate(_night_rows(night, tmp / "results"), 1):
        d = tmp / f"shards-{night}" / f"shard-{i}" / "nightly" / f"{NIGHTS[night]}T02-17-0{i}Z"
        batch.write_outputs(rows, [], d, f"shard {i}")  # summary.json etc., as `batch --shard` writes them
        shards.append(d)
    out = invoke("batch", "--kind", "nightly", *[a for d in shards for a in ("--merge", str(d))])
    assert "R9-pause-minority" in out
    merged = tmp / "results" / "nightly" / f"{NIGHTS[night]}T08-00-00Z"
    assert (tmp / "results" / "nightly" / store.LATEST).resolve() == merged.resolve()
    args = ["--night", NIGHTS[night]] if with_night else []  # the first night: from the run ids
    said = invoke("evidence", "append", str(tmp / "results" / "nightly" / "latest"), *args, "--store", str(store_dir))
    assert f"4 of 4 row(s) added to {store_dir} (night {NIGHTS[night]})" in said
    return merged


@pytest.fixture
def two_nights(tmp_path, monkeypatch):
    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path / "results"))
    ev = tmp_path / "evidence-branch"
    first = _night(0, tmp_path, ev, False, monkeypatch)
    second = _night(1, tmp_path, ev, True, monkeypatch)
    out = tmp_path / "report"
    invoke("evidence", "report", "--store", str(ev), "--out", str(out), "--junit", str(second))
    return {"store": ev, "first": first, "second": second, "report": json.loads((out / "evidence.json").read_text()),
            "md": (out / "evidence.md").read_text(), "junit": (out / "junit.xml").read_text()}


def _lines(report: dict, name: str) -> list[dict]:
    return [t for t in report["lines"] if t["scenario"] == name]


def test_the_second_nights_report_shows_both_nights(two_nights):
    rep = two_nights["report"]
    assert sorted(p.name for p in two_nights["store"].iterdir()) == [f"{n}.jsonl" for n in NIGHTS]
    assert rep["nights"] == list(NIGHTS) and rep["runs"] == 8
    assert rep["batches"] == sorted([two_nights["first"].name, two_nights["second"].name])
    (line,) = _lines(rep, FLAKY_ROW)  # one test, one version: both nights' runs in one line
    assert (line["held"], line["decided"], line["runs"]) == (1, 2, 2)
    assert line["nights"] == {NIGHTS[0]: {Word.HELD: 1}, NIGHTS[1]: {Word.DID_NOT_HOLD: 1}}
    assert line["ci95"] == [round(x, 4) for x in wilson(1, 2)]
    assert f"# Evidence across nights: 2 night(s), {NIGHTS[0]} to {NIGHTS[1]}" in two_nights["md"]


def test_a_verdict_that_flips_at_one_version_is_flaky(two_nights):
    rep = two_nights["report"]
    (f,) = rep["flaky"]
    assert (f["scenario"], f["version_label"], f["held_on"], f["did_not_hold_on"]) == (
        FLAKY_ROW, "3.10 (3.10.8)", [NIGHTS[0]], [NIGHTS[1]])
    assert not [x for x in rep["flips"] if x["scenario"] == FLAKY_ROW]  # no flip between versions
    assert re.search(rf"\| R9 \| {FLAKY_ROW} \| 3.10 \(3.10.8\) \| 1 of 2 \| {NIGHTS[0]} \| {NIGHTS[1]} \|",
                     two_nights["md"])


def test_a_flip_with_a_version_change_is_a_regression_and_the_reverse_a_fix(two_nights):
    flips = {f["scenario"]: f for f in two_nights["report"]["flips"]}
    assert set(flips) == {REGRESSED, FIXED}
    reg, fix = flips[REGRESSED], flips[FIXED]
    assert (reg["kind"], reg["from_version"], reg["to_version"]) == ("regression", "3.10 (3.10.8)", "4.0 (4.0.5)")
    assert (reg["from"], reg["to"], reg["from_nights"], reg["to_nights"]) == (
        Word.HELD, Word.DID_NOT_HOLD, [NIGHTS[0]], [NIGHTS[1]])
    assert (fix["kind"], fix["from"], fix["to"]) == ("fix", Word.DID_NOT_HOLD, Word.HELD)
    assert "| Q1 | Q1-quorum-leader-faults | regression | held at 3.10 (3.10.8) | DID NOT HOLD at 4.0 (4.0.5) |" \
        in two_nights["md"]


def test_a_file_with_no_run_of_its_current_digest_is_stale(two_nights):
    stale = {s["scenario"]: s for s in two_nights["report"]["stale"]}
    assert STALE in stale and not {FLAKY_ROW, REGRESSED, FIXED} & set(stale)
    assert stale[STALE]["last_run"]["digest"] == OLD_DIGEST and stale[STALE]["last_run"]["night"] == NIGHTS[1]
    (old,) = _lines(two_nights["report"], STALE)  # its runs: superseded, counted apart
    assert old["superseded"] and old["runs"] == 2


def test_the_junit_report_marks_the_flaky_row_and_leaves_the_others_as_they_were(two_nights):
    got, plain = two_nights["junit"], (two_nights["second"] / "junit.xml").read_text()
    flaky_case = re.search(r'<testcase classname="mqchaos.R9" .*?</testcase>', got).group(0)
    assert "<skipped message=\"flaky: held 1 of 2 at 3.10 (3.10.8)" in flaky_case and "<failure" not in flaky_case
    assert '<property name="flaky"' in flaky_case
    plain_case = plain.split('classname="mqchaos.R9"')[1].split("</testcase>")[0]
    assert '<failure message="prediction did not hold">' in plain_case
    others = lambda text: [c for c in text.splitlines() if "<testcase" in c and 'mqchaos.R9"' not in c]  # noqa: E731
    assert others(got) == others(plain) and len(others(got)) == 3  # Q1's failure is still a failure
    assert 'failures="1"' in got and 'skipped="1"' in got and 'failures="2"' in plain
    rows = evidence.batch_rows(two_nights["second"])
    assert R.junit(rows, flaky=lambda r: None) == R.junit(rows) == plain


def test_an_evidence_row_is_the_published_row_with_its_night_and_batch(two_nights):
    kept = evidence.load(two_nights["store"])
    merged = evidence.batch_rows(two_nights["second"])
    by_run = {r["run"]: r for r in kept}
    for r in merged:
        e = by_run[R.run_id(r["report"])]
        assert {k: v for k, v in e.items() if k not in ("night", "batch")} == R.compact_row(r)
        assert (e["night"], e["batch"]) == (NIGHTS[1], two_nights["second"].name)
        assert list(e)[-2:] == ["night", "batch"]


def test_appending_twice_adds_nothing(two_nights):
    ev = two_nights["store"]
    before = {p.name: p.read_bytes() for p in ev.iterdir()}
    assert evidence.append(two_nights["second"], None, ev) == []
    assert evidence.append(two_nights["first"], NIGHTS[1], ev) == []  # another night: still the same runs
    said = invoke("evidence", "append", str(two_nights["second"]), "--store", str(ev))
    assert "0 of 4 row(s) added" in said and "4 already there" in said
    assert {p.name: p.read_bytes() for p in ev.iterdir()} == before


def test_the_store_starts_with_every_published_run_once(tmp_path):
    added = evidence.backfill(tmp_path)
    published = [r for f in sorted(R.DOC_BATCHES.glob("*/summary.json")) for r in json.loads(f.read_text())]
    runs = {R.run_id(r.get("report")) or r.get("run") for r in published}
    assert len(added) == len({evidence.run_key(r) for r in added}) and {r["run"] for r in added} >= runs - {None}
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["night"]) and r["batch"] for r in added)
    assert all("report" not in r for r in added)  # a path on the machine that ran it: not kept
    assert evidence.backfill(tmp_path) == [] and len(evidence.load(tmp_path)) == len(added)


def test_versions_not_in_release_order_differ_rather_than_flip():
    def line(version, reported, verdict):
        return {"scenario": "K5a", "digest": "d", "superseded": False, "id": "K5a", "version": version,
                "reported": reported, "version_label": R.version_text(version, reported), "verdict": verdict,
                "nights": {"2026-12-01": {}}, "first_night": "2026-12-01", "last_night": "2026-12-01"}
    got = evidence.version_flips([line("3.9", "3.9.1", Word.HELD), line("3.9-kraft", "3.9.1", Word.DID_NOT_HOLD),
                                  line(None, "3.9.1", Word.DID_NOT_HOLD), line("4.1", "4.1.1", Word.HELD)])
    assert [(f["kind"], f["from_version"], f["to_version"]) for f in got] == [
        ("differs", "3.9 (3.9.1)", "3.9-kraft (3.9.1)"), ("fix", "3.9.1", "4.1 (4.1.1)")]


def test_a_night_is_a_utc_date():
    assert evidence.night_text("2026-12-01") == "2026-12-01"
    for bad in ("2026-13-01", "tonight", "2026-12-01T02"):
        with pytest.raises(ValueError, match="YYYY-MM-DD"):
            evidence.night_text(bad)


def test_the_workflow_appends_after_the_merge_and_reports_over_the_whole_store():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    jobs = wf["jobs"]
    assert jobs["evidence"]["needs"] == "merge"
    assert jobs["evidence"]["permissions"]["contents"] == "write"
    assert all(j.get("permissions", {}).get("contents") != "write" for n, j in jobs.items() if n != "evidence")
    assert wf["permissions"]["contents"] == "read"
    runs = "\n".join(s.get("run", "") for s in jobs["evidence"]["steps"])
    order = [runs.index(x) for x in ("git worktree add", "make evidence-append", "git push", "make evidence-report")]
    assert order == sorted(order)
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^EVIDENCE_APPEND = \$\(MQCHAOS\) evidence append ", make, re.M)
    assert re.search(r"^evidence-append:.*\n\t\$\(EVIDENCE_APPEND\)\n", make, re.M)
    assert re.search(r"^evidence-report:.*\n\t\$\(MQCHAOS\) evidence report ", make, re.M)
    # `make nightly` appends a whole night itself; without $(MAKE), so `make -n nightly` runs nothing
    nightly = re.search(r"^nightly:.*\n((?:\t.*\n)+)", make, re.M).group(1)
    assert "$(EVIDENCE_APPEND)" in nightly and "MAKE" not in nightly


def test_a_never_claims_counterexample_is_not_flaky_it_did_not_hold(tmp_path):
    """harness.decided's rule: one counterexample among clean runs decides that a claim that
    something never happens (Q10: lost 0, unexpected 0) did not hold; the evidence must not call
    that line flaky (JUnit would then skip the failure), while a race or rate (R9's mixed
    prediction) with one run each way stays flaky."""
    never = "Q10-quorum-follower-restart-app"
    rows = [{**_row(never, NIGHTS[0], True, "3.10", "3.10.8", tmp_path), "night": NIGHTS[0], "run": "a"},
            {**_row(never, NIGHTS[1], False, "3.10", "3.10.8", tmp_path), "night": NIGHTS[1], "run": "b"},
            {**_row(FLAKY_ROW, NIGHTS[0], True, "3.10", "3.10.8", tmp_path), "night": NIGHTS[0], "run": "c"},
            {**_row(FLAKY_ROW, NIGHTS[1], False, "3.10", "3.10.8", tmp_path), "night": NIGHTS[1], "run": "d"}]
    report = evidence.analyze(rows)
    assert [f["scenario"] for f in report["flaky"]] == [FLAKY_ROW]
    (line,) = [t for t in report["lines"] if t["scenario"] == never]
    assert line["decision"] == Word.DID_NOT_HOLD and line["verdict"] == evidence.MIXED
