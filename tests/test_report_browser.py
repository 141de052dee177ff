"""A run's report and a batch's index, opened in headless Chromium (Debian's package, which
`make test` installs): the verdict is visible, the pictures load, no Markdown leaks through,
and nothing is fetched from the network (the pages open with no network at all)."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from checkers import synth
from checkers.check import check_runs
from checkers.history import open_runs
from harness import judge, rows, store
from harness.scenario import parse

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _run(tmp_path: Path, spark) -> Path:
    """A Kafka run's directory as the harness writes it, with a loss planted under a fault."""
    produce, consume, _, _ = synth.build(random.Random(7), producers=2, per_producer=300, lost=25,
                                         duplicated=3, write_ahead=True, late=2, kafka=True)
    sc = parse({"name": "K7-browser", "id": "K7", "broker": "kafka", "workload": {"acks": "1"},
                "nemesis": [{"at": 0, "fault": "partition", "targets": {"isolate_from": ["leader", "zk"]}}],
                "expect": {"lost": ">0", "new_leader_elected": True}})
    d = synth.write_run(tmp_path / "results" / "K7-browser" / "2026-11-23T12-00-00.000Z", produce, consume,
                        meta={"scenario": sc.name, "id": sc.id, "broker": "kafka", "params": sc.model_dump(mode="json"),
                              "status": "completed", "drain": {"complete": True}, "phases": {"faults": 5.0, "drain": 40.0},
                              "brokers": {"kafka": "3.9.1"},
                              "measurements": {"new_leader_elected": True, "leaderless_s": 1.2,
                                               "client_timeouts": {"delivery_timeout_s": 10.0}}})
    store.write_run(d, {**json.loads((d / "run.json").read_text())})
    (d / store.NEMESIS_LOG).write_text(json.dumps(
        {"fault": "partition", "targets": ["kafka1", "zk1", "zk2", "zk3"], "t_start": 5.0, "t_end": 25.0, "id": "f1",
         "details": {"links": [["kafka1", "zk1"], ["kafka1", "zk2"], ["kafka1", "zk3"]], "effective": True,
                     "evidence": {"dropped_packets": {"kafka1": 120, "zk1": 40}}}}) + "\n")
    (d / store.OBSERVATIONS).write_text("".join(json.dumps(
        {"t": t, "nodes": {n: "running" for n in ("zk1", "zk2", "zk3", "kafka1", "kafka2", "kafka3")},
         "leader": "kafka1" if t < 12 else "kafka2", "isr": ["kafka1", "kafka2", "kafka3"] if t < 8 or t > 30
         else ["kafka2", "kafka3"], "controller": "kafka3"}) + "\n" for t in range(0, 45)))
    runs, _ = open_runs([str(d)])
    result = check_runs(spark, runs)[runs[0].dir]
    info = store.read_run(d)
    judge.judge(d, sc, info, result)  # decided there; harness.report renders it
    return d


@pytest.mark.spark
def test_report_and_index_in_a_browser(spark, tmp_path):
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "chromium is not installed (make test installs Debian's package)"
    run_dir = _run(tmp_path, spark)
    batch = tmp_path / "results" / "catalogue" / "2026-11-23T12-10-00Z"
    result, info = store.read_check(run_dir), store.read_run(run_dir)
    sc = parse(info["params"])
    rows.write_all([{**rows.run_row(sc, result, info, run_dir), "harness_error": False, "retried": False,
                     "seconds": 60, "repeat": 0}], batch, "a batch")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        failed, remote = [], []
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
        page.goto((run_dir / store.REPORT_HTML).as_uri())
        page.wait_for_load_state("load")
        banner = page.locator(".banner h1").inner_text()
        assert "prediction held" in banner and page.locator(".banner").is_visible()
        loaded = page.evaluate("Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length")
        assert loaded >= 3
        text = page.locator("body").inner_text()
        for mark in ("**", "](", "|---", "## "):
            assert mark not in text, mark
        assert "120" in page.locator("table").nth(4).inner_text() or "packets dropped" in text
        page.screenshot(path=str(run_dir / "report-screenshot.png"), full_page=True)
        page.goto((batch / "index.html").as_uri())
        page.wait_for_load_state("load")
        link = page.locator("a", has_text="K7-browser")
        assert link.count() == 1
        link.click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/report.html") and "prediction held" in page.locator(".banner h1").inner_text()
        browser.close()
    assert failed == [] and remote == []


def test_the_results_index_lists_batches_and_runs(tmp_path):
    """`mqchaos serve`'s root page: every batch and every run below the results root, with
    the run's verdict and a link to its report (no Spark, no browser needed)."""
    from harness import browse

    root = tmp_path / "results"
    d = synth.write_run(root / "R9" / "2026-11-23T10-00-00.000Z", [], [],
                        meta={"scenario": "R9", "id": "R9", "status": "completed", "params": {"expect": {"lost": 0}}})
    store.write_check(d, {"valid": True, "ok": 10, "attempted": 10, "lost": 0, "duplicated": 0, "unavailable_s": 0,
                          "prediction": {"held": True, "checks": [{"key": "lost"}]}})
    (d / store.REPORT_HTML).write_text("<html></html>")
    killed = synth.write_run(root / "K7" / "2026-11-23T11-00-00.000Z", [], [], meta={"scenario": "K7", "status": "running"})
    batch = root / "catalogue" / "2026-11-23T12-00-00Z"
    rows.write_all([], batch, "empty batch")
    page = browse.write_index(root).read_text()
    assert 'href="catalogue/2026-11-23T12-00-00Z/index.html"' in page
    # R9 here is no file of the catalogue: its run tested nothing a file tests now (harness.identity)
    assert 'href="R9/2026-11-23T10-00-00.000Z/report.html"' in page and ">superseded (held)<" in page
    assert "K7" in page and "harness error" in page and str(killed.name) in page
    # each column says what it holds: "run s" is seconds, the start its own column
    assert "<th>run s</th>" in page and "<th>started (UTC)</th>" in page and "<th>predicted</th>" in page
    assert "run s: the run&#39;s own wall time, in seconds" in page or "run s: the run's own wall time" in page
    # per scenario (and version), held k of n over every stored run, with its Wilson interval
    assert "held 1 of 1 (95 % CI 21–100 %)" in page and "no run decided; also harness error 1" in page


def test_the_console_table_says_the_verdict_in_the_index_words():
    base = {"scenario": "s", "attempted": 1, "confirmed": 1, "lost": 0, "duplicated": 0, "unavailable_s": 0,
            "valid": False, "report": "r"}
    text = rows.text_table([{**base, "prediction": True}, {**base, "scenario": "t", "prediction": False},
                            {**base, "scenario": "u", "prediction": None},
                            {**base, "scenario": "v", "not_applicable": True, "prediction": None}])
    head, *lines = text.splitlines()
    assert "verdict" in head and "valid" not in head and "prediction" not in head
    assert [ln.split("  ")[0].strip() for ln in lines] == ["s", "t", "u", "v"]
    for line, word in zip(lines, ["held", "DID NOT HOLD", "undecided", "not applicable"]):
        assert f"  {word}  " in line and "False" not in line


def test_the_report_reads_the_broker_and_measurements_as_fields():
    from harness import report

    brokers = {"rabbitmq": "3.10.8", "erlang": "25.2.3",
               "nodes": {n: {"image": "mqchaos/rabbitmq:latest", "version": "3.10"} for n in ("rabbit1", "rabbit2")}}
    assert report.brokers_text(brokers) == \
        "rabbitmq 3.10.8, erlang 25.2.3 (rabbit1, rabbit2 on mqchaos/rabbitmq:latest)"
    assert report.brokers_text(None) == "versions not recorded"
    assert report.value_text({"paused_nodes": ["rabbit2"], "self_healed": False, "windows": {"effect": [20.0, 41.5]}}) \
        == "paused_nodes: (rabbit2); self_healed: false; windows: (effect: (20, 41.5))"
    assert report.value_text([]) == "none" and report.value_text(None) == "–" and report.value_text(0.25) == "0.25"


def test_pictures_of_a_damaged_run_leave_the_bad_lines_out(tmp_path):
    """A report is written for any checked run: lines the checker counts malformed (an id
    that is not a string, a time that is text) are left out of the pictures, not a crash."""
    from harness import plots
    (tmp_path / "history").mkdir()
    lines = [{"msg_id": {"x": 1}, "outcome": "ok", "t_invoke": 1, "t_complete": 2},
             {"msg_id": "a", "outcome": {"o": 1}, "t_invoke": 1, "t_complete": 2},
             {"msg_id": "b", "outcome": "ok", "t_invoke": "x", "t_complete": 2},
             {"msg_id": "c", "outcome": "ok", "t_invoke": 1, "t_complete": 2.5}]
    (tmp_path / "history" / "produce-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + "{garbage\n")
    (tmp_path / "history" / "consume-0.jsonl").write_text(json.dumps({"msg_id": [1], "t": "x"}) + "\n"
                                                          + json.dumps({"msg_id": "c", "t": 3.0}) + "\n")
    (tmp_path / store.OBSERVATIONS).write_text("".join(json.dumps(x) + "\n" for x in (
        {"t": "bad", "nodes": {"a": "running"}}, {"t": 1, "nodes": {"a": "running"}}, {"t": 2, "nodes": {"a": "stopped"}})))
    drawn = plots.draw_all(tmp_path, {"samples": {"lost": ["c"]}, "lost": 1}, {})
    assert [p.name for p in drawn] == ["publishes.png", "rates.png", "broker-state.png"]


# ---- `mqchaos serve`'s tally: each cell under its header ----------------------------------------

def _tallied_store(root: Path) -> None:
    """Three runs of one claim (held, held, did not hold) below the results root."""
    for i, held in enumerate((True, True, False)):
        d = synth.write_run(root / "Z-align" / f"2026-11-23T10-0{i}-00.000Z", [], [],
                            meta={"scenario": "Z-align", "id": "Z1", "status": "completed",
                                  "params": {"expect": {"lost": 0}}})
        store.write_check(d, {"valid": held, "ok": 10, "attempted": 10, "lost": 0 if held else 2, "duplicated": 0,
                              "unavailable_s": 0, "prediction": {"held": held, "checks": [{"key": "lost"}]}})


def _column(head: list[str], start: str) -> int:
    (i,) = [i for i, h in enumerate(head) if h.startswith(start)]
    return i


def _assert_tally_aligned(head: list[str], lines: list[list[str]]) -> None:
    """Every line has a cell per header, and each cell holds what its header names."""
    assert lines and all(len(cells) == len(head) for cells in lines), (head, lines)
    (cells,) = lines
    assert cells[_column(head, "id")] == "Z1" and cells[_column(head, "scenario")] == "Z-align"
    assert cells[_column(head, "version")] == "-"
    assert "lost=0" in cells[_column(head, "claim (expect, require)")]
    assert "held 2 of 3 (95 % CI" in cells[_column(head, "held k of n")]
    assert cells[_column(head, "runs")] == "3"


def _tables(html: str) -> list[list[list[str]]]:
    """Each table of a page as its rows of cell texts (th and td alike)."""
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.tables.append([])
            elif tag == "tr":
                self.tables[-1].append([])
            elif tag in ("td", "th"):
                self.cell = ""

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.tables[-1][-1].append(self.cell.strip())
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell += data

    p = Cells()
    p.feed(html)
    return p.tables


def test_the_served_tally_has_a_cell_under_each_header(tmp_path):
    """The store page's "per scenario and version" table: as many cells as headers, the claim
    under "claim (expect, require)", held k of n under its own header, the run count under
    "runs" (no browser needed)."""
    from harness import browse

    root = tmp_path / "results"
    _tallied_store(root)
    (head, *lines) = next(t for t in _tables(browse.write_index(root).read_text())
                          if "claim (expect, require)" in t[0])
    _assert_tally_aligned(head, lines)


def test_the_served_tally_in_a_browser(tmp_path, monkeypatch):
    """`mqchaos serve` on a free port, its page in headless Chromium: each tally cell read by
    its header's column index."""
    import http.server
    import socket
    import threading
    import urllib.request

    from playwright.sync_api import sync_playwright

    from harness import browse
    from harness.util import wait_until

    assert Path(CHROMIUM).exists(), "chromium is not installed (make browser installs Debian's package)"
    root = tmp_path / "results"
    _tallied_store(root)
    servers = []

    class Kept(http.server.ThreadingHTTPServer):  # kept, to be shut down at the end
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            servers.append(self)

    monkeypatch.setattr(browse.http.server, "ThreadingHTTPServer", Kept)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    threading.Thread(target=browse.serve, args=(root, port), daemon=True).start()
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until(lambda: servers and urllib.request.urlopen(url, timeout=2).status == 200, 10, "mqchaos serve")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page()
            page.goto(url)
            page.wait_for_load_state("load")
            table = page.locator("table", has=page.locator("th", has_text="claim (expect, require)"))
            rows_ = table.locator("tr").evaluate_all("rs => rs.map(r => Array.from(r.cells, c => c.innerText.trim()))")
            browser.close()
    finally:
        for s in servers:
            s.shutdown()
    _assert_tally_aligned(rows_[0], rows_[1:])
