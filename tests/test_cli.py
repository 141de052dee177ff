"""The command line in a few verbs (issue 53): the verb groups compose the project's parts
(running, reading results, the cluster, the documents), and every old verb still works for
a while, saying its new spelling in one line on stderr, then doing the same with the same
exit code. No Docker, no Spark: what a verb calls is replaced where it would start either."""
from __future__ import annotations

import json
import re
import shutil

import click
import pytest
from click.testing import CliRunner

import harness.batch
from harness import check_service, cluster_cli, old_verbs, store, trend_report
from harness.cli import SECTIONS, main
from harness.store import ROOT
from harness.verdicts import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID

import nemesis.cli

# old verb -> its new spelling, as the notice says it
OLD = {"suite": "batch --kind suites --in-order --retries 0 --text", "catalogue": "batch",
       "matrix": "batch --matrix", "analyze": "summarize", "check-server": "check server start",
       "doc-table": "docs table batch",
       **{v: f"cluster {v}" for v in ("engine", "images", "up", "down", "status", "logs", "heal", "nemesis")}}


@pytest.fixture(autouse=True)
def results(tmp_path, monkeypatch):
    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path / "results"))
    return tmp_path / "results"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def notice(old: str, new: str) -> str:
    return f"mqchaos {old} is now `mqchaos {new}`"


@pytest.fixture
def batches(monkeypatch):
    """Every call of the batch runner, by keyword, instead of running it (exit 1)."""
    calls = []

    def run_batch(only=None, repeat=1, files=None, **kw):
        calls.append(dict(only=only, repeat=repeat, files=files and [str(f) for f in files], **kw))
        return EXIT_INVALID
    monkeypatch.setattr(harness.batch, "run_batch", run_batch)
    return calls


# ---- the new verbs ----------------------------------------------------------------------------------------

def test_the_verbs_are_the_groups_of_the_issue():
    shown = {name for name, cmd in main.commands.items() if not cmd.hidden}
    assert shown == {n for names in SECTIONS.values() for n in names} == {
        "run", "batch", "explore", "validate", "check", "recheck", "summarize", "evidence", "serve", "convert",
        "cluster", "docs"}
    assert set(main.commands["evidence"].commands) == {"append", "report", "backfill"}
    assert set(main.commands["cluster"].commands) == {"engine", "images", "up", "down", "status", "logs", "heal",
                                                      "nemesis"}
    assert set(main.commands["check"].commands) == {"runs", "server"}
    assert set(main.commands["check"].commands["server"].commands) == {"start", "status", "stop"}
    assert set(main.commands["docs"].commands["table"].commands) == {
        "batch", "matrix", "tally", "claims", "compare", "budget", "explore"}
    assert {name for name, cmd in main.commands.items() if cmd.hidden} == set(OLD)
    text = invoke("--help").output
    assert all(f"\n{title}:\n" in text for title in SECTIONS)
    listed = {m[1] for m in re.finditer(r"^  ([a-z-]+)  ", text, re.M)}
    assert listed == shown  # an old verb is not listed


def test_every_group_and_command_has_help():
    def walk(cmd: click.Command, path: list[str]):
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            if not sub.hidden:
                yield from walk(sub, [*path, name])
    for path, cmd in walk(main, []):
        res = invoke(*path, "--help")
        assert res.exit_code == 0 and "Usage:" in res.output, (path, res.output)
        assert cmd.get_short_help_str(), path


def test_check_takes_run_directories_or_its_server(monkeypatch):
    seen = []
    monkeypatch.setattr(check_service, "run_check", lambda dirs, **kw: seen.append((dirs, kw)) or EXIT_INVALID)
    assert invoke("check", "a", "b", "--ordering", "fifo").exit_code == EXIT_INVALID
    assert invoke("check", "runs", "--ordering", "fifo", "a", "b").exit_code == EXIT_INVALID
    assert seen[0] == seen[1] and seen[0][0] == ["a", "b"] and seen[0][1]["ordering"] == "fifo"
    res = invoke("check")
    assert res.exit_code == 2 and "Missing argument 'RUN_DIRS...'" in res.output
    assert invoke("check", "--no-such-option", "r").exit_code == 2
    monkeypatch.setattr(check_service, "status", lambda: None)
    res = invoke("check", "server", "status")
    assert res.exit_code == EXIT_UNKNOWN and "no check server answers" in res.output


def test_batch_options_cover_the_suite_the_catalogue_and_the_matrix(batches):
    assert invoke("batch", "--only", "R9,K7", "--shard", "2/4", "--version", "4.0").exit_code == EXIT_INVALID
    assert batches[-1] == dict(only=["R9", "K7"], repeat=1, files=None, kind="catalogue", retries=1, master=None,
                               keep_cluster=False, sort=True, table="summary.md", versions={"rabbitmq": "4.0"},
                               matrix=False, shard=(2, 4))
    assert invoke("batch", "--matrix", "--version", "rabbitmq=3.10,4.0", "--repeat", "3").exit_code == EXIT_INVALID
    m = batches[-1]
    assert (m["kind"], m["table"], m["matrix"], m["repeat"], m["versions"]["rabbitmq"]) == (
        "matrix", "matrix.md", True, 3, ["3.10", "4.0"])
    assert set(m["versions"]) == {"rabbitmq", "kafka"}  # a broker named in none: every version it has
    assert invoke("batch", "--in-order", "--text", "--keep-cluster", "x.yaml").exit_code == EXIT_INVALID
    assert (batches[-1]["sort"], batches[-1]["table"], batches[-1]["keep_cluster"], batches[-1]["files"]) == (
        False, "summary.txt", True, ["x.yaml"])
    res = invoke("batch", "--version", "rabbitmq=3.10,4.0")  # several versions: --matrix
    assert res.exit_code == 2 and "--version" in res.output and len(batches) == 3


def test_batch_plan_and_merge_run_nothing(batches, monkeypatch, tmp_path):
    planned = []
    monkeypatch.setattr(harness.batch, "plan", lambda *a: planned.append(a) or ([], []))
    res = invoke("batch", "--plan", "--only", "R9", "--in-order", "--shard", "1/2")
    assert res.exit_code == 0 and res.output.startswith("0 run(s), in the order they would run")
    assert planned == [(["R9"], 1, None, False, {}, (1, 2))]
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "summary.md").write_text("the merged table\n")
    monkeypatch.setattr(harness.batch, "merge", lambda dirs, kind: merged)
    res = invoke("batch", "--merge", str(tmp_path), "--kind", "nightly")
    assert res.exit_code == 0 and res.output == "the merged table\n\n" and batches == []


# ---- the old verbs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("old", sorted(set(OLD) - {"check-server", "doc-table"}))
def test_an_old_verb_shows_the_new_verb_s_help_after_its_notice(old):
    new = OLD[old].split(" --")[0].split()
    res, again = invoke(old, "--help"), invoke(*new, "--help")
    assert res.exit_code == again.exit_code == 0
    assert res.stderr.splitlines() == [notice(old, OLD[old]) + (" (--dry-run: --plan)" if old == "matrix" else "")]
    assert res.stdout == again.stdout


def test_the_old_batch_verbs_run_the_batch_as_they_did(batches):
    res = invoke("suite", "a.yaml", "b.yaml", "--version", "4.0")
    assert res.exit_code == EXIT_INVALID and res.stderr.startswith(notice("suite", OLD["suite"]))
    assert batches[-1] == dict(only=None, repeat=1, files=["a.yaml", "b.yaml"], kind="suites", retries=0,
                               master=None, keep_cluster=False, sort=False, table="summary.txt",
                               versions={"rabbitmq": "4.0"}, matrix=False, shard=None)
    invoke("suite", "--retries", "2", "--keep-cluster", "a.yaml")
    assert (batches[-1]["retries"], batches[-1]["keep_cluster"]) == (2, True)  # the last --retries given wins
    res = invoke("suite")  # it needs files (the batch alone would run the whole catalogue)
    assert res.exit_code == 2 and "Missing argument" in res.output and len(batches) == 2
    assert invoke("catalogue", "--only", "R9", "--kind", "nightly", "--repeat", "2").exit_code == EXIT_INVALID
    assert batches[-1] == dict(only=["R9"], repeat=2, files=None, kind="nightly", retries=1, master=None,
                               keep_cluster=False, sort=True, table="summary.md", versions={}, matrix=False,
                               shard=None)
    assert invoke("matrix", "--versions", "rabbitmq=3.10", "--only", "R9").exit_code == EXIT_INVALID
    assert (batches[-1]["kind"], batches[-1]["table"], batches[-1]["matrix"], batches[-1]["versions"]["rabbitmq"]) \
        == ("matrix", "matrix.md", True, ["3.10"])


def test_matrix_dry_run_is_the_plan(batches, monkeypatch):
    monkeypatch.setattr(harness.batch, "plan", lambda *a: ([], []))
    old, new = invoke("matrix", "--dry-run", "--only", "R9"), invoke("batch", "--matrix", "--plan", "--only", "R9")
    assert old.exit_code == new.exit_code == 0 and old.stdout == new.stdout and batches == []


def test_old_verbs_keep_their_exit_codes(monkeypatch):
    monkeypatch.setattr(cluster_cli, "engine_answers", lambda: False)
    monkeypatch.setattr(nemesis.cli, "engine_answers", lambda: False)
    for old, code in (("status", 1), ("down", 0), ("heal", 0)):
        res, again = invoke(old), invoke("cluster", old)
        assert res.exit_code == again.exit_code == code and res.stdout == again.stdout, old
        assert res.stderr.splitlines() == [notice(old, f"cluster {old}")]
    monkeypatch.setattr(trend_report, "main", lambda *a, **kw: EXIT_INVALID)
    assert invoke("analyze", "results").exit_code == invoke("summarize", "results").exit_code == EXIT_INVALID
    assert invoke("analyze").exit_code == 2  # a usage error, as before (RESULTS... is required)


def test_an_old_verb_that_crashes_exits_2(monkeypatch, results):
    def crash(*a, **kw):
        raise RuntimeError("planted")
    monkeypatch.setattr(trend_report, "main", crash)
    res = invoke("analyze", "results")
    assert res.exit_code == EXIT_UNKNOWN and "harness error (exit 2): RuntimeError: planted" in res.output
    assert "RuntimeError: planted" in (results / store.HARNESS_ERRORS).read_text()


def test_check_server_flags_are_its_subcommands(monkeypatch):
    stopped, served = [], []
    monkeypatch.setattr(check_service, "status", lambda: {"pid": 7})
    monkeypatch.setattr(check_service, "stop", lambda: stopped.append(True))
    monkeypatch.setattr(check_service, "serve", lambda **kw: served.append(kw))
    res = invoke("check-server", "--status")
    assert res.exit_code == EXIT_VALID and res.stdout == '{"pid": 7}\n' and not stopped
    assert res.stderr.splitlines() == [notice("check-server --status", "check server status")]
    res = invoke("check-server", "--stop")
    assert res.exit_code == EXIT_VALID and res.stdout == '{"pid": 7}\nstopped\n' and stopped
    assert invoke("check-server", "--master", "local[1]", "--idle-timeout", "5").exit_code == EXIT_VALID
    assert invoke("check", "server", "start", "--master", "local[1]", "--idle-timeout", "5").exit_code == EXIT_VALID
    assert served == [{"master": "local[1]", "idle_timeout": 5.0}] * 2
    monkeypatch.setattr(check_service, "status", lambda: None)
    assert invoke("check-server", "--stop").exit_code == invoke("check", "server", "stop").exit_code == EXIT_UNKNOWN


PUBLISHED = "docs/batches/2026-11-25T18-22-34Z"  # a committed batch: nothing is published again


@pytest.mark.parametrize("old,new", [
    ([PUBLISHED, "--only", "R9"], ["batch", PUBLISHED, "--only", "R9"]),
    (["docs/batches", "--tally", "--only", "R9"], ["tally", "docs/batches", "--only", "R9"]),
], ids=["batch", "tally"])
def test_doc_table_writes_what_docs_table_does_in_its_own_spelling(old, new, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    docs = {}
    for spelling, args in (("old", ["doc-table", *old]), ("new", ["docs", "table", *new])):
        doc = tmp_path / f"{spelling}.md"
        doc.write_text("a\n<!-- table:t -->\n<!-- /table:t -->\nb\n")
        res = invoke(*args, "--into", str(doc), "--name", "t")
        assert res.exit_code == 0, res.output
        docs[spelling] = (doc.read_text().splitlines(), res.stderr)
    (old_lines, old_err), (new_lines, new_err) = docs["old"], docs["new"]
    assert old_lines[2] == new_lines[2].replace(f"docs table {new[0]} {new[1]}", f"doc-table {old[0]}").replace(
        f"{old[0]} --only R9", f"{old[0]}{' --tally' if new[0] == 'tally' else ''} --only R9")
    assert f"`mqchaos doc-table {' '.join(old)}`" in old_lines[2] and f"`mqchaos docs table {' '.join(new)}`" in \
        new_lines[2]
    assert old_lines[3:] == new_lines[3:] and len(new_lines) > 6  # the same table
    mode = new[0]
    assert old_err == notice("doc-table" + ("" if mode == "batch" else f" --{mode}"), f"docs table {mode}") + "\n"
    assert new_err == ""


def test_docs_table_refuses_a_missing_source_or_marker(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("no markers\n")
    res = invoke("docs", "table", "explore", str(tmp_path), "--into", str(doc), "--name", "t")
    assert res.exit_code == EXIT_UNKNOWN and "no explore record" in res.output
    shutil.copytree(ROOT / PUBLISHED, tmp_path / "b" / "x")
    res = invoke("docs", "table", "tally", str(tmp_path / "b"), "--into", str(doc), "--name", "t")
    assert res.exit_code == EXIT_UNKNOWN and "needs one <!-- table:t -->" in res.output
    assert json.loads((tmp_path / "b" / "x" / "summary.json").read_text())  # the source untouched


def test_the_old_verbs_module_lists_each_old_verb_once():
    names = [c.name for c in old_verbs.COMMANDS]
    assert sorted(names) == sorted(OLD) and all(c.hidden for c in old_verbs.COMMANDS)
