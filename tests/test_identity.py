"""Run identity (issues 52, 54; harness.identity): a run's digest is what it tested, the same
from the file, from run.json's params and at every version; prose changes nothing, a set-up,
a fault or a prediction changes it; published rows from before are backfilled from the
scenario files committed with them, adding keys and nothing else."""
import json
import subprocess

import pytest

from harness import browse, identity, rows, store
from harness.history import RunClock
from harness.runner import new_record
from harness.scenario import load, parse, read

ROOT = store.ROOT
R9R = ROOT / "scenarios" / "R9r-pause-minority-resumes.yaml"


def _digest(data: dict) -> str:
    return identity.digest(parse(data, "t", env={}))


def test_prose_and_the_version_change_nothing_a_set_up_a_fault_or_a_prediction_does():
    data = read(R9R)
    d = _digest(data)
    for prose in ({"name": "other"}, {"id": "Z9"}, {"description": "else"}, {"claims": [18]},
                  {"measure": ["paused_count"]}, {"version": "3.10"}, {"seed": data.get("seed", 0)}):
        assert _digest({**data, **prose}) == d, prose
    # a default written out, a number written as a float: the same test
    assert _digest({**data, "ordering": "none", "timing": {**data["timing"], "warmup": 5.0}}) == d
    stop = [dict(data["nemesis"][0], fault="stop", targets="queue_master")]  # R45's stop -> kill
    changed = [{"workload": {**data["workload"], "producers": 6}}, {"nemesis": stop},
               {"nemesis": [dict(stop[0], fault="kill")]},
               {"expect": {"self_healed": False}}, {"require": {}}]
    assert len({d, *(_digest({**data, **c}) for c in changed)}) == 1 + len(changed)
    # the set-up alone leaves the prediction out
    sc, other = parse(data, "t", env={}), parse({**data, "expect": {"lost": 0}}, "t", env={})
    assert identity.digest(sc, prediction=False) == identity.digest(other, prediction=False)
    assert identity.stamp(sc) == {"digest": d, "setup_digest": identity.digest(sc, prediction=False)}


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_a_runs_record_gives_the_files_digest_at_every_version(path):
    from harness import brokers

    sc = load(path)
    record = new_record(sc, RunClock(0.0))
    assert store.undeclared(record) == []  # run.json declares it (harness.store.RunRecord)
    assert record["digest"] == identity.of_params(record["params"]) == identity.entry(path).digest
    for version in brokers.get(sc.broker).generations:  # a matrix runs the file at each
        try:
            at = parse(read(path), str(path), version=version, env={})
        except ValueError:
            continue  # refused at load: a "refused at load" row
        assert identity.digest(at) == record["digest"], version
    del record["digest"]  # a run from before: computed from its params
    assert identity.of_record(record) == identity.entry(path).digest


def test_text_the_model_refuses_has_a_raw_digest_never_a_files():
    bad = R9R.read_text().replace("partition_handling", "partition_handlin")
    d, sc = identity.of_text(bad)
    assert sc is None and d == identity.raw_digest(bad) and d.startswith("raw:")
    assert identity.of_params({"broker": "rabbitmq", "nope": 1}).startswith("raw:")
    assert identity.stamp_text(bad) == {"digest": d, "setup_digest": d}


def test_the_catalogue_says_which_runs_are_superseded_and_finds_a_rows_file_by_name():
    cat = identity.Catalogue([identity.Entry("R11b-x", "R11b", "d1"), identity.Entry("R11-x", "R11", "d2")])
    assert not cat.superseded({"scenario": "R11b-x", "digest": "d1"})
    assert cat.superseded({"scenario": "R11b-x", "digest": "d0"}) and cat.superseded({"scenario": "R11b-x"})
    assert cat.id_of({"scenario": "R11b-x", "id": "R11"}) == "R11b"  # an old row's id, its file's now
    assert cat.id_of({"scenario": "R11b-renamed", "id": "R11", "digest": "d1"}) == "R11b"  # by its test
    assert cat.id_of({"scenario": "gone", "id": "G1"}) == "G1"


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def _repo(tmp_path):
    """A repository whose batch was committed with the first encoding of its scenario, which
    changed afterwards; a second file is found by its name: field alone."""
    repo = tmp_path / "repo"
    (repo / "scenarios").mkdir(parents=True)
    first = R9R.read_text()
    (repo / "scenarios" / "R9r-pause-minority-resumes.yaml").write_text(first)
    renamed = first.replace("name: R9r-pause-minority-resumes", "name: R9z-x")
    (repo / "scenarios" / "R9z-file-name-unlike-its-name.yaml").write_text(renamed)
    row = {"id": "R9r", "scenario": "R9r-pause-minority-resumes", "lost": 0, "unavailable_s": 10.726,
           "prediction": True, "brokers": {"rabbitmq": "3.10.8"}}
    batch = repo / "docs" / "batches" / "b1"
    batch.mkdir(parents=True)
    (batch / "summary.json").write_text(rows.compact_json([row, {**row, "scenario": "R9z-x", "id": "R9z"}]))
    other = repo / "docs" / "batches" / "b2"
    other.mkdir()
    (other / "summary.json").write_text(json.dumps([row], indent=1) + "\n")  # a batch's own format
    matrix = {"kind": "matrix", "tables": [{"broker": "rabbitmq", "versions": ["3.10"], "rows": [
        {"scenario": row["scenario"], "id": "R9r", "cells": {"3.10": {"runs": [{"repeat": 0, "lost": 0}]}}}]}]}
    (other / "matrix.json").write_text(json.dumps(matrix, indent=1, ensure_ascii=False) + "\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    sha = _git(repo, "rev-parse", "HEAD")
    (repo / "scenarios" / "R9r-pause-minority-resumes.yaml").write_text(first.replace("producers: 3", "producers: 6"))
    _git(repo, "commit", "-q", "-am", "re-encoded")
    return repo, sha, first


def test_the_backfill_stamps_each_row_from_the_file_committed_with_its_batch_adding_keys_only(tmp_path):
    repo, sha, first = _repo(tmp_path)
    before = {p: p.read_text() for p in (repo / "docs" / "batches").glob("*/*.json")}
    out = identity.backfill(repo / "docs" / "batches", repo)
    assert len(out) == 3 and all("stamped" in line and "no scenario file" not in line for line in out)
    stamp = identity.stamp_text(first)
    b1 = json.loads((repo / "docs/batches/b1/summary.json").read_text())
    assert {k: b1[0][k] for k in stamp} == stamp
    assert b1[0]["digest_from"] == f"git {sha}:scenarios/R9r-pause-minority-resumes.yaml"
    assert b1[1]["digest_from"] == f"git {sha}:scenarios/R9z-file-name-unlike-its-name.yaml"
    now = identity.entry(repo / "scenarios" / "R9r-pause-minority-resumes.yaml").digest
    assert b1[0]["digest"] != now  # the file changed after the batch: its runs are superseded
    m = json.loads((repo / "docs/batches/b2/matrix.json").read_text())
    assert m["tables"][0]["rows"][0]["cells"]["3.10"]["runs"][0]["digest"] == stamp["digest"]
    for path, text in before.items():  # the same bytes once the added keys are taken out again
        new = path.read_text()
        data = json.loads(new)
        for r in (data if isinstance(data, list) else data["tables"][0]["rows"][0]["cells"]["3.10"]["runs"]):
            for k in ("digest", "setup_digest", "digest_from"):
                r.pop(k)
        assert identity._dump_like(data, text) == text
    again = {p: p.read_text() for p in before}
    assert identity.backfill(repo / "docs" / "batches", repo) == []  # re-runnable: nothing left to do
    assert {p: p.read_text() for p in before} == again


def test_the_published_batches_are_backfilled():
    for path in sorted((ROOT / "docs" / "batches").glob("*/summary.json")):
        assert all(r.get("digest") for r in json.loads(path.read_text())), path


def test_serve_tallies_a_run_from_before_by_its_params_and_marks_an_older_encoding(tmp_path):
    sc = load(R9R)
    root = tmp_path / "results"
    for n, workload in enumerate([sc.workload.producers, 6]):
        run = root / sc.name / f"2026-11-2{n}T00-00-00.000Z"
        run.mkdir(parents=True)
        params = sc.model_dump(mode="json")
        params["workload"]["producers"] = workload
        (run / "run.json").write_text(json.dumps({"scenario": sc.name, "id": "R9r", "params": params,
                                                  "status": "completed", "broker": "rabbitmq",
                                                  "brokers": {"rabbitmq": "3.10.8", "nodes": {"rabbit1": {}}}}))
        (run / "check.json").write_text(json.dumps({"prediction": {"held": True, "checks": [{"key": "x"}]}}))
    got = browse.run_rows(root)
    assert {r["digest"] for r in got} == {identity.digest(sc), identity.of_params(
        dict(sc.model_dump(mode="json"), workload=dict(sc.model_dump(mode="json")["workload"], producers=6)))}
    page = browse.write_index(root).read_text()
    assert "superseded (held)" in page and "superseded (digest " in page
    assert rows.reported(got[0]) == "3.10.8"  # each node's record is no version


def test_an_unchanged_text_keeps_its_serialisation_or_is_refused():
    data = [{"a": 1, "é": "ü"}]
    for text in (rows.compact_json(data), json.dumps(data, indent=1) + "\n",
                 json.dumps(data, indent=1, ensure_ascii=False) + "\n"):
        assert identity._dump_like(json.loads(text), text) == text
    with pytest.raises(ValueError):
        identity._dump_like(data, json.dumps(data, indent=4))


def test_no_two_catalogue_files_test_the_same_thing():
    """Two files of one digest are one test under two names (K8d was K8b's twin, issue 52):
    their runs would pool while the tables showed two rows."""
    seen: dict[str, str] = {}
    twins = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        d = identity.digest(load(path))
        if d in seen:
            twins.append((seen[d], path.name))
        seen.setdefault(d, path.name)
    assert twins == []
