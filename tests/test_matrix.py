"""The version matrix (`mqchaos matrix`, issue 16): the --versions option, the jobs (scenarios x
versions, in the order they run), the comparison table built from a batch's rows (one run,
several runs, not applicable, refused, undecided), Wilson's interval against reference values,
and the command end to end with a fake run loop writing synthetic run directories. No Docker:
a not-applicable run is the real run loop (it brings nothing up), every other run is faked."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fakes import StoredRun
from helpers import exit_of
from harness import batch, brokers, rows, store
from harness import matrix as M
from harness.cli import main
from harness.measures import Z95, percentile, wilson
from harness.scenario import matrix_versions_option
from harness.verdicts import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, NOT_APPLICABLE, REFUSED

ROOT = Path(__file__).resolve().parent.parent
ALL = {k: list(brokers.get(k).generations) for k in brokers.KINDS}


# ---- Wilson's score interval and the percentile -------------------------------------------------

def _wilson_by_roots(k: int, n: int, z: float) -> tuple[float, float]:
    """Another formulation: the p with (k/n - p)^2 = z^2 p (1 - p) / n, i.e. the roots of
    (1 + z^2/n) p^2 - (2 k/n + z^2/n) p + (k/n)^2 = 0."""
    ph = k / n
    a, b, c = 1 + z * z / n, -(2 * ph + z * z / n), ph * ph
    d = math.sqrt(b * b - 4 * a * c)
    return (-b - d) / (2 * a), (-b + d) / (2 * a)


def test_the_95_quantile():
    assert Z95 == pytest.approx(1.959963984540054, abs=1e-12)


def test_wilson_at_the_edges_by_hand():
    z2 = 1.959963984540054 ** 2                      # 3.8414588...
    lo, hi = wilson(0, 5)                            # k = 0: [0, z^2 / (n + z^2)]
    assert lo == 0.0 and hi == pytest.approx(z2 / (5 + z2), abs=1e-12) and hi == pytest.approx(0.434482, abs=1e-6)
    lo, hi = wilson(5, 5)                            # k = n: [n / (n + z^2), 1]
    assert hi == 1.0 and lo == pytest.approx(5 / (5 + z2), abs=1e-12) and lo == pytest.approx(0.565518, abs=1e-6)


@pytest.mark.parametrize("k, n, expected", [
    (3, 10, (0.1078, 0.6032)),
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", the score
    # method without continuity correction
    (81, 263, (0.2553, 0.3662)),
    (15, 148, (0.0624, 0.1605)),
    (0, 20, (0.0, 0.1611)),
    (1, 29, (0.0061, 0.1718)),
])
def test_wilson_against_published_values_and_the_quadratic(k, n, expected):
    lo, hi = wilson(k, n)
    assert (round(lo, 4), round(hi, 4)) == expected
    rlo, rhi = _wilson_by_roots(k, n, 1.959963984540054)
    assert lo == pytest.approx(max(0.0, rlo), abs=1e-9) and hi == pytest.approx(rhi, abs=1e-9)


def test_wilson_is_symmetric_and_empty_without_runs():
    for n in range(1, 12):
        for k in range(n + 1):
            lo, hi = wilson(k, n)
            lo2, hi2 = wilson(n - k, n)
            assert 0 <= lo <= k / n <= hi <= 1
            assert lo == pytest.approx(1 - hi2, abs=1e-12) and hi == pytest.approx(1 - lo2, abs=1e-12)
    assert wilson(0, 0) is None
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_percentile_is_numpys_linear_interpolation():
    rng = np.random.default_rng(7)
    for size in (1, 2, 3, 5, 10, 37):
        xs = list(rng.uniform(0, 60, size))
        for q in (0.0, 0.5, 0.9, 0.99, 1.0):
            assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q * 100)), abs=1e-9)
    assert percentile([], 0.5) is None


# ---- --versions ------------------------------------------------------------------------------

@pytest.mark.parametrize("values, expected", [
    (["rabbitmq=3.10,4.0,4.3", "kafka=3.9,3.9-kraft,4.1"], {"rabbitmq": ["3.10", "4.0", "4.3"],
                                                            "kafka": ["3.9", "3.9-kraft", "4.1"]}),
    (["rabbitmq=3.10,4.0"], {"rabbitmq": ["3.10", "4.0"], "kafka": ALL["kafka"]}),  # unnamed: every version
    (["rabbitmq=4.0", "rabbitmq=3.10,4.0"], {"rabbitmq": ["4.0", "3.10"], "kafka": ALL["kafka"]}),  # merged
    (["rabbitmq=3.10,kafka=4.1,3.9"], {"rabbitmq": ["3.10"], "kafka": ["4.1", "3.9"]}),  # one value, two brokers
    (["4.0,3.9"], {"rabbitmq": ["4.0"], "kafka": ["3.9"]}),    # bare: every broker that has it
    (["rabbitmq=all"], ALL), (["all"], ALL), ([], ALL),
    (["kafka=3.9, 4.1,"], {"rabbitmq": ALL["rabbitmq"], "kafka": ["3.9", "4.1"]}),
])
def test_versions_option(values, expected):
    assert matrix_versions_option(values) == expected


@pytest.mark.parametrize("values, message", [
    (["rabbitmq=3.11"], r"--versions rabbitmq=3\.11: '3\.11' is not a rabbitmq version the harness runs "
                        r"\(one of 3\.10, 4\.0, 4\.3\)"),
    (["rabbitmq=3.10,3.9"], r"'3\.9' is not a rabbitmq version .*one of 3\.10, 4\.0, 4\.3"),  # 3.9 is Kafka's
    (["9.9"], r"--versions 9\.9: no broker has version '9\.9' \(rabbitmq: 3\.10, 4\.0, 4\.3; kafka: 3\.9, "
              r"3\.9-kraft, 4\.1\)"),
    (["rabit=3.10"], r"no broker 'rabit' \(one of rabbitmq, kafka\)"),
])
def test_an_unknown_version_names_it_and_the_brokers_versions(values, message):
    with pytest.raises(ValueError, match=message):
        matrix_versions_option(values)


def test_the_command_refuses_an_unknown_version_before_anything(tmp_path, monkeypatch):
    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path))
    res = CliRunner().invoke(main, ["batch", "--matrix", "--version", "kafka=3.8", "--plan"])
    assert res.exit_code == 2 and "'3.8' is not a kafka version the harness runs (one of 3.9, 3.9-kraft, 4.1)" \
        in res.output
    assert not list(tmp_path.iterdir())


# ---- jobs ------------------------------------------------------------------------------------

def _write(d: Path, name: str, text: str) -> Path:
    p = d / f"{name}.yaml"
    p.write_text(f"name: {name}\n{text}")
    return p


@pytest.fixture
def files(tmp_path):
    d = tmp_path / "scenarios"
    d.mkdir()
    return [
        # a ZooKeeper setting: refused at load on a KRaft version
        _write(d, "K90-kafka", "id: K90\nbroker: kafka\ncluster: {zookeeper.session.timeout.ms: 9000}\n"
                               "expect: {lost: 0}\n"),
        _write(d, "R90-mirrored", "id: R90\nbroker: rabbitmq\nqueue: {type: mirrored, policy: {ha-mode: all}}\n"
                                  "expect: {lost: 0}\n"),
        # pins 4.3: the matrix's versions override it (--version > the scenario's version:)
        _write(d, "Q90-quorum", "id: Q90\nbroker: rabbitmq\nversion: \"4.3\"\nqueue: {type: quorum}\n"
                                "expect: {lost: 0}\n"),
    ]


MATRIX = {"rabbitmq": ["3.10", "4.0"], "kafka": ["3.9", "4.1"]}


def test_jobs_are_scenarios_times_their_brokers_versions(files):
    jobs, bad = batch.plan(None, 2, files, versions=MATRIX)
    got = [(sc.name, sc.version, rep) for sc, rep, _ in jobs]
    assert sorted(got) == sorted((n, v, r) for r in range(2) for n, v in [
        ("R90-mirrored", "3.10"), ("R90-mirrored", "4.0"), ("Q90-quorum", "3.10"), ("Q90-quorum", "4.0"),
        ("K90-kafka", "3.9")])
    # the matrix's versions win over the scenario's own version: (the one rule)
    assert {(sc.version, sc.version_source) for sc, _, _ in jobs if sc.name == "Q90-quorum"} == \
        {("3.10", "cli"), ("4.0", "cli")}
    # Kafka 4.1 (KRaft) refuses the scenario's ZooKeeper setting at load: a cell, named, not a run
    assert [(b.scenario, b.id, b.broker, b.version) for b in bad] == [("K90-kafka", "K90", "kafka", "4.1")]
    assert "KRaft" in bad[0].reason and "\n" not in bad[0].reason.strip()


def test_the_order_not_applicable_first_then_brokers_interleaved(files):
    jobs, _ = batch.plan(None, 2, files, versions=MATRIX)
    na = [j for j in jobs if j[0].not_applicable()]
    assert jobs[:len(na)] == na and {(sc.name, sc.version) for sc, _, _ in na} == {("R90-mirrored", "4.0")}
    real = [sc.broker for sc, _, _ in jobs[len(na):]]
    # 6 RabbitMQ runs and 2 Kafka ones: Kafka's go between RabbitMQ's, never next to each other
    assert real.count("kafka") == 2 and "kafka,kafka" not in ",".join(real)
    assert real[0] == "rabbitmq" and real[1] == "kafka"
    # each broker's own order kept: by repeat, then scenario (catalogue order), then version
    rabbit = [(sc.name, sc.version, rep) for sc, rep, _ in jobs[len(na):] if sc.broker == "rabbitmq"]
    assert rabbit == [("R90-mirrored", "3.10", 0), ("Q90-quorum", "3.10", 0), ("Q90-quorum", "4.0", 0),
                      ("R90-mirrored", "3.10", 1), ("Q90-quorum", "3.10", 1), ("Q90-quorum", "4.0", 1)]
    # the table's order (positions): by repeat, then scenario, then version
    by_pos = [(sc.name, sc.version, rep) for sc, rep, _ in sorted(jobs, key=lambda j: j[2])]
    assert by_pos[:5] == [("R90-mirrored", "3.10", 0), ("R90-mirrored", "4.0", 0), ("Q90-quorum", "3.10", 0),
                          ("Q90-quorum", "4.0", 0), ("K90-kafka", "3.9", 0)]


def test_only_picks_cells_too(files):
    jobs, bad = batch.plan(["K90"], 1, files, versions=MATRIX)
    assert [(sc.name, sc.version) for sc, _, _ in jobs] == [("K90-kafka", "3.9")] and len(bad) == 1
    jobs, bad = batch.plan(["Q90"], 1, files, versions=MATRIX)
    assert len(jobs) == 2 and bad == []


def test_a_single_version_is_still_the_catalogue(files):
    jobs, bad = batch.plan(None, 1, files, versions={"rabbitmq": "4.0"})
    assert sorted((sc.name, sc.version) for sc, _, _ in jobs) == [
        ("K90-kafka", "3.9"), ("Q90-quorum", "4.0"), ("R90-mirrored", "4.0")]
    assert bad == []


def test_dry_run_lists_the_jobs_and_runs_nothing(files, tmp_path, monkeypatch):
    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path / "results"))
    monkeypatch.setattr(batch.pipeline, "Run", lambda *a, **k: pytest.fail("a dry run runs nothing"))
    res = CliRunner().invoke(main, ["batch", "--matrix", "--plan", "--version", "rabbitmq=3.10,4.0",
                                    "--version", "kafka=3.9,4.1", *map(str, files)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "5 run(s), in the order they would run (1 per scenario and version):"
    assert "R90-mirrored  rabbitmq 4.0  repeat 1/1  not applicable: classic mirrored queues were removed" in lines[1]
    assert [line.split()[1:4] for line in lines[2:6]] == [
        ["R90-mirrored", "rabbitmq", "3.10"], ["K90-kafka", "kafka", "3.9"], ["Q90-quorum", "rabbitmq", "3.10"],
        ["Q90-quorum", "rabbitmq", "4.0"]]
    assert lines[6].startswith("   -  K90-kafka  kafka 4.1  refused at load: cluster.zookeeper_session_timeout_ms: Kafka 4.1 runs in KRaft")
    assert not (tmp_path / "results").exists()


# ---- the table from rows ---------------------------------------------------------------------

def _row(name, version, repeat=0, *, broker="rabbitmq", lost=0, held=True, exit=None, unavailable=1.5, **kw):
    code = exit if exit is not None else {True: EXIT_VALID, False: EXIT_INVALID, None: EXIT_UNKNOWN}[held]
    r = {"scenario": name, "id": name.split("-")[0], "broker": broker, "version": version, "repeat": repeat,
         "status": "completed", "harness_error": False, "retried": False, "exit": code, "attempted": 110,
         "confirmed": 100, "lost": lost, "duplicated": 1, "unavailable_s": unavailable, "prediction": held,
         "reason": "lost=0 vs 0" if held else "undecided: fault partition had no effect",
         "report": f"/r/{name}/{version}-{repeat}/report.md"}
    r.update(kw)
    return r


def _na(name, version, repeat=0):
    return {"scenario": name, "id": name.split("-")[0], "broker": "rabbitmq", "version": version, "repeat": repeat,
            "status": NOT_APPLICABLE, "not_applicable": True, "harness_error": False, "retried": False, "prediction": None,
            "valid": None, "exit": EXIT_UNKNOWN, "reason": "not applicable: classic mirrored queues were removed in 4.0",
            "report": f"/r/{name}/x/check.json"}


def _refused(name, version):
    return {"scenario": name, "id": name.split("-")[0], "broker": "kafka", "version": version, "repeat": 0,
            "status": REFUSED, "harness_error": False, "retried": False, "prediction": None, "exit": EXIT_UNKNOWN,
            "reason": "version: Kafka 4.1 runs in KRaft mode"}


def test_one_run_per_cell():
    rs = [_row("R9-p", "3.10", brokers={"rabbitmq": "3.10.8", "erlang": "25"}), _na("R9-p", "4.0"),
          _row("Q1-q", "3.10", lost=0), _row("Q1-q", "4.0", lost=4, held=False, unavailable=7.25),
          _row("K7-k", "3.9", broker="kafka", lost=10, held=True, brokers={"kafka": "kafka_2.13-3.9.1.jar"}),
          _refused("K7-k", "4.1"),
          {"scenario": "/x/bad.yaml", "id": None, "status": "invalid scenario file", "harness_error": True,
           "exit": EXIT_UNKNOWN, "reason": "broker: Field required"}]
    m = M.build(rs, {"rabbitmq": ["3.10", "4.0"], "kafka": ["3.9", "4.1"]}, "t")
    assert m["exit"] == EXIT_INVALID and m["repeat"] == 1
    rabbit, kafka = m["tables"]
    assert rabbit["broker"] == "rabbitmq" and rabbit["versions"] == ["3.10", "4.0"]
    assert rabbit["running"] == {"3.10": "3.10.8", "4.0": None} and kafka["running"]["3.9"] == "3.9.1"
    assert [r["scenario"] for r in rabbit["rows"]] == ["R9-p", "Q1-q"]          # catalogue order: R, Q, K
    r9, q1 = rabbit["rows"]
    assert r9["cells"]["3.10"]["state"] == "held" and r9["cells"]["4.0"]["state"] == "not-applicable"
    assert r9["cells"]["4.0"]["exit"] == EXIT_UNKNOWN and r9["cells"]["4.0"]["decided"] == 0
    assert q1["cells"]["4.0"]["state"] == "failed" and q1["cells"]["4.0"]["runs"][0]["lost"] == 4
    assert kafka["rows"][0]["cells"]["4.1"]["state"] == REFUSED
    assert m["invalid"] == [{"file": "/x/bad.yaml", "reason": "broker: Field required"}]
    text = "\n".join(M.markdown_lines(m))
    assert "| id | scenario | rabbitmq 3.10 (3.10.8) | rabbitmq 4.0 |" in text
    assert "| R9 | R9-p | held: ok 100, lost 0, dup 1, unavail. 1.5 s | not applicable |" in text
    assert "| Q1 | Q1-q | held: ok 100, lost 0, dup 1, unavail. 1.5 s | DID NOT HOLD: ok 100, lost 4, dup 1, " \
           "unavail. 7.25 s |" in text
    assert "| K7 | K7-k | held: ok 100, lost 10, dup 1, unavail. 1.5 s | refused at load |" in text
    assert "- R9 on rabbitmq 4.0: not applicable: classic mirrored queues were removed in 4.0" in text
    assert "- K7 on kafka 4.1: version: Kafka 4.1 runs in KRaft mode" in text
    assert "- /x/bad.yaml: invalid scenario file: broker: Field required" in text
    assert "](" not in text                                                   # no links in documents
    linked = "\n".join(M.markdown_lines(m, Path("/r")))
    assert "[held](R9-p/3.10-0/report.md): ok 100" in linked and "[not applicable](R9-p/x/check.json)" in linked
    assert "[refused" not in linked                                           # nothing ran: nothing to link


def test_several_runs_per_cell_share_with_loss_over_decided_runs():
    rs = [_row("Q1-q", "4.0", 0, lost=0, unavailable=2.0), _row("Q1-q", "4.0", 1, lost=3, held=False, unavailable=4.0),
          _row("Q1-q", "4.0", 2, lost=0, unavailable=6.0),
          _row("Q1-q", "4.0", 3, lost=0, held=None, unavailable=99.0),       # undecided: never "no loss"
          {**_row("Q1-q", "4.0", 4), "status": "harness-error", "harness_error": True, "exit": EXIT_UNKNOWN,
           "confirmed": None, "lost": None, "unavailable_s": None, "reason": "ClusterError: never healthy"},
          *[_na("R9-p", "4.0", i) for i in range(5)],
          *[_row("R9-p", "3.10", i, lost=i % 2, held=True, unavailable=float(i)) for i in range(5)]]
    m = M.build(rs, {"rabbitmq": ["3.10", "4.0"]}, "t")
    q1 = next(r for r in m["tables"][0]["rows"] if r["scenario"] == "Q1-q")["cells"]["4.0"]
    assert (q1["total"], q1["decided"], q1["with_loss"]) == (5, 3, 1)
    assert q1["loss_share"] == pytest.approx(1 / 3, abs=1e-4)
    assert q1["loss_ci95"] == [pytest.approx(x, abs=1e-4) for x in wilson(1, 3)]
    assert q1["unavailable_p50"] == 4.0 and q1["unavailable_p99"] == pytest.approx(5.96)  # decided runs only
    assert q1["verdicts"] == {"held": 2, "DID NOT HOLD": 1, "undecided": 1, "harness error": 1}
    assert q1["state"] == "failed" and q1["exit"] == EXIT_INVALID
    r9 = next(r for r in m["tables"][0]["rows"] if r["scenario"] == "R9-p")["cells"]
    assert r9["4.0"]["state"] == "not-applicable" and r9["4.0"]["total"] == 5 and r9["4.0"]["loss_share"] is None
    assert (r9["3.10"]["decided"], r9["3.10"]["with_loss"], r9["3.10"]["state"]) == (5, 2, "held")
    text = M.cell_text(q1)
    lo, hi = wilson(1, 3)
    assert text.startswith(f"loss in 1/3 (33 %, 95 % CI {lo * 100:.0f}–{hi * 100:.0f} %); decided 3/5; "
                           "unavail. s p50 4, p99 5.96; held 2, ")
    assert "DID NOT HOLD 1" in text and "undecided 1" in text and "harness error 1" in text
    assert M.cell_text(r9["4.0"]) == "not applicable"
    why = M.notes(m)
    assert "- Q1 on rabbitmq 4.0 (1 of 5 runs): undecided: fault partition had no effect" in why
    assert "- Q1 on rabbitmq 4.0 (1 of 5 runs): ClusterError: never healthy" in why
    assert "- R9 on rabbitmq 4.0 (5 of 5 runs): not applicable: classic mirrored queues were removed in 4.0" in why


def test_a_cell_without_a_decided_run_says_so():
    c = M.cell([_row("Q1-q", "4.0", i, held=None) for i in range(3)])
    assert c["state"] == "undecided" and c["loss_share"] is None and c["loss_ci95"] is None
    assert M.cell_text(c).startswith("no run decided; decided 0/3; undecided 3")
    assert M.cell_text(M.cell([])) == "not run"


def test_not_applicable_makes_the_matrix_undecided_as_in_the_catalogue():
    m = M.build([_row("R9-p", "3.10"), _na("R9-p", "4.0")])
    assert m["exit"] == EXIT_UNKNOWN
    assert m["versions"] == {"rabbitmq": ["3.10", "4.0"]}           # without versions: the plug-in's order
    m = M.build([_row("R9-p", "3.10"), _row("Q1-q", "4.0")])
    assert m["exit"] == EXIT_VALID


def test_the_batchs_tables_name_each_rows_version_when_there_are_several():
    rs = [_row("R9-p", "3.10"), _na("R9-p", "4.0")]
    assert rows.several_versions(rs) and not rows.several_versions(rs[:1])
    text = "\n".join(rows.table_lines(rs))
    assert "R9-p @ 3.10" in text and "R9-p @ 4.0" in text
    assert 'name="R9-p @ 4.0"' in rows.junit(rs)
    assert "R9-p @ 3.10" not in "\n".join(rows.table_lines(rs[:1]))  # one version: as before


# ---- end to end, with a fake run loop ------------------------------------------------------------

ARGS = ["--version", "rabbitmq=3.10,4.0", "--version", "kafka=3.9,4.1"]


def test_the_command_end_to_end(fake_runs, files, tmp_path):
    StoredRun.plan = {("Q90-quorum", "4.0", 0): {"lost": 4, "unavailable": 7.5}}
    res = CliRunner().invoke(main, ["batch", "--matrix", *ARGS, *map(str, files)])
    assert exit_of(res) == EXIT_INVALID, res.output              # Q90 on 4.0 lost: a finding
    assert sorted(StoredRun.ran) == [("K90-kafka", "3.9", 0), ("Q90-quorum", "3.10", 0), ("Q90-quorum", "4.0", 0),
                                   ("R90-mirrored", "3.10", 0)]
    out = fake_runs / "matrix" / "latest"
    for f in ("matrix.json", "matrix.md", "matrix.html", "summary.json", "summary.md", "junit.xml", "index.html"):
        assert (out / f).is_file(), f
    m = json.loads((out / "matrix.json").read_text())
    assert m["exit"] == EXIT_INVALID and m["versions"] == {"rabbitmq": ["3.10", "4.0"], "kafka": ["3.9", "4.1"]}
    cells = {(t["broker"], r["scenario"], v): c for t in m["tables"] for r in t["rows"] for v, c in r["cells"].items()}
    assert cells[("rabbitmq", "R90-mirrored", "3.10")]["state"] == "held"
    assert cells[("rabbitmq", "R90-mirrored", "4.0")]["state"] == "not-applicable"
    q = cells[("rabbitmq", "Q90-quorum", "4.0")]
    assert q["state"] == "failed" and q["runs"][0]["lost"] == 4 and q["runs"][0]["unavailable_s"] == 7.5
    assert cells[("kafka", "K90-kafka", "4.1")]["state"] == REFUSED
    assert m["tables"][0]["running"]["3.10"] == "3.10.1"
    # the run directories say which version ran, and where it came from (Q90 pins 4.3)
    info = {(i["scenario"], i["version"]["version"]): i for i in
            (json.loads(p.read_text()) for p in fake_runs.glob("*/2*/run.json"))}
    assert info[("Q90-quorum", "3.10")]["version"]["from"] == "cli" and ("Q90-quorum", "4.3") not in info
    assert info[("R90-mirrored", "4.0")]["status"] == NOT_APPLICABLE
    md = (out / "matrix.md").read_text()
    assert "DID NOT HOLD](" in md and "| R90 | R90-mirrored |" in md and "refused at load" in md
    assert md in res.output                                          # the table is what the command prints
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary) == 6 and {(r["scenario"], r["version"]) for r in summary if r["status"] == REFUSED} == \
        {("K90-kafka", "4.1")}
    assert 'href="matrix.html"' in (out / "index.html").read_text()
    html = (out / "matrix.html").read_text()
    assert 'class="failed"' in html and 'class="na"' in html and "report.html" in html
    assert "/check.json\">#1</a>" in html                               # a not-applicable run has no report

    # the table into a document, and the same cells rebuilt from the run directories
    doc = tmp_path / "doc.md"
    doc.write_text("# x\n<!-- table:versions -->\n<!-- /table:versions -->\ntail\n")
    pub = tmp_path / "published"
    res = CliRunner().invoke(main, ["docs", "table", "matrix", str(out), "--into", str(doc), "--name", "versions",
                                    "--only", "Q90,R90", "--batches", str(pub)])
    assert res.exit_code == 0, res.output
    text = doc.read_text()
    copy = pub / out.resolve().name  # the committed copy the table names (the batch, not its link), runs by id
    # the present scenario files are a source too: they say which runs are superseded (harness.identity)
    assert (f"`mqchaos docs table matrix {copy} --only Q90,R90` from {copy / 'matrix.json'} scenarios/*.yaml; "
            "do not edit -->") in text
    assert "/report.md" not in (copy / "matrix.json").read_text() and (copy / "summary.json").is_file()
    assert "| Q90 | Q90-quorum |" in text and "K90" not in text
    assert "](" not in text and text.endswith("<!-- /table:versions -->\ntail\n")
    res = CliRunner().invoke(main, ["docs", "table", "matrix", str(fake_runs), "--into", str(doc),
                                    "--name", "versions"])
    assert exit_of(res) != 0 and "not a matrix batch" in res.output
    dirs = [str(p.parent) for p in fake_runs.glob("*/2*/run.json")]
    res = CliRunner().invoke(main, ["batch", "--matrix", "--from-runs", *dirs])
    assert res.exit_code == 0, res.output
    again = json.loads((fake_runs / "matrix" / "latest" / "matrix.json").read_text())
    states = {(t["broker"], r["scenario"], v): c["state"] for t in again["tables"] for r in t["rows"]
              for v, c in r["cells"].items()}
    assert states == {k: c["state"] for k, c in cells.items() if c["state"] != REFUSED}  # refusals left no run


def test_all_held_but_a_not_applicable_cell_exits_2(fake_runs, files):
    res = CliRunner().invoke(main, ["batch", "--matrix", "--version", "rabbitmq=3.10,4.0", "--only", "R90",
                                    *map(str, files)])
    assert res.exit_code == EXIT_UNKNOWN, res.output
    m = json.loads((fake_runs / "matrix" / "latest" / "matrix.json").read_text())
    assert [t["broker"] for t in m["tables"]] == ["rabbitmq"]
    res = CliRunner().invoke(main, ["batch", "--matrix", "--version", "rabbitmq=3.10", "--only", "R90",
                                    *map(str, files)])
    assert res.exit_code == EXIT_VALID, res.output


def test_repeats_aggregate_and_a_harness_error_is_not_a_decided_run(fake_runs, files):
    StoredRun.plan = {("Q90-quorum", "4.0", 1): {"lost": 2, "held": False, "unavailable": 9.0},
                    ("Q90-quorum", "4.0", 2): {"harness_error": True},
                    ("Q90-quorum", "3.10", 1): {"unavailable": 4.5}}
    res = CliRunner().invoke(main, ["batch", "--matrix", "--version", "rabbitmq=3.10,4.0", "--only", "Q90",
                                    "--repeat", "3", "--retries", "0", *map(str, files)])
    assert exit_of(res) == EXIT_INVALID, res.output
    m = json.loads((fake_runs / "matrix" / "latest" / "matrix.json").read_text())
    assert m["repeat"] == 3
    cells = m["tables"][0]["rows"][0]["cells"]
    new, old = cells["4.0"], cells["3.10"]
    assert (new["total"], new["decided"], new["with_loss"]) == (3, 2, 1)
    assert new["loss_ci95"] == [round(x, 4) for x in wilson(1, 2)]
    assert new["verdicts"] == {"held": 1, "DID NOT HOLD": 1, "harness error": 1}
    assert (old["decided"], old["with_loss"], old["unavailable_p50"]) == (3, 0, 2.5)
    assert old["unavailable_p99"] == pytest.approx(percentile([2.5, 4.5, 2.5], 0.99), abs=1e-3)
    md = (fake_runs / "matrix" / "latest" / "matrix.md").read_text()
    assert "loss in 0/3 (0 %, 95 % CI 0–56 %); decided 3/3" in md and "decided 2/3" in md
    assert "(1 of 3 runs): ClusterError: planted" in md
