"""``mqchaos serve``: the results store in a browser, on 127.0.0.1 only. The root page lists
every batch (its index.html), each test and version's verdicts over every stored run (held
k of n, with a Wilson interval; a test is a scenario's digest, harness.identity: runs of an
older encoding of a file are superseded, tallied apart), and every run (its verdict and
report), newest first."""
from __future__ import annotations

import functools
import http.server
from pathlib import Path

from harness import identity, rows, store
from harness.verdicts import NOT_APPLICABLE, RunStatus


def run_rows(root: Path) -> list[dict]:
    """One row per run below ``root``, newest first: the row its batch kept (run.json's
    ``summary``), else one rebuilt from its run.json and check.json; with when it started
    (its directory's name) and its own wall time in seconds."""
    out = []
    for d in store.find_runs([str(root)])[0]:
        info, check = store.read_run(d) or {}, store.read_check(d) or {}
        row = dict(info.get("summary") or _row(d, info, check))
        row["digest"] = row.get("digest") or identity.of_record(info)  # a run from before: from its params
        phases = info.get("phases") or {}
        version = info.get("version")
        row.update(started=d.name, run=rows.run_name(d), retried=False,
                   seconds=round(max(phases.values()), 1) if phases else None,
                   version=row.get("version") or (version.get("version") if isinstance(version, dict) else None),
                   report=str(d / store.REPORT_MD) if (d / store.REPORT_HTML).exists() else None)
        out.append(row)
    return sorted(out, key=lambda r: r["started"], reverse=True)


def _row(d: Path, info: dict, check: dict) -> dict:
    """A row from a run's files, for a run that ended before its batch kept one."""
    pred = check.get("prediction") or {}
    row = {"id": info.get("id"), "scenario": info.get("scenario") or d.parent.name,
           "broker": info.get("broker"), "brokers": info.get("brokers"),
           "not_applicable": info.get("status") == NOT_APPLICABLE,
           "harness_error": info.get("status") not in (None, RunStatus.COMPLETED, NOT_APPLICABLE),
           "prediction": pred.get("held") if pred.get("checks") else check.get("valid"),
           "expect": (info.get("params") or {}).get("expect")}
    row.update({k: check.get(k) for k in ("attempted", "lost", "duplicated", "unavailable_s")})
    row["confirmed"] = check.get("ok")
    return row


def write_index(root: Path) -> Path:
    """The store's page: its batches, then per scenario and version "held k of n" over every
    stored run (a Wilson interval: one run's verdict is a sample), then every run."""
    batches = sorted((p.parent for p in root.glob("*/*/index.html")), key=lambda p: p.name, reverse=True)
    every, cat = run_rows(root), identity.catalogue()
    page = rows.index_html(every, root, f"mqchaos results: {root}", started=True, tallied=rows.tally(every, cat),
                           cat=cat)
    links = "".join(f'<li><a href="{b.relative_to(root)}/index.html">{b.parent.name} {b.name}</a></li>'
                    for b in batches)
    page = page.replace("<h1>", f"<h2>Batches</h2><ul>{links or '<li>none</li>'}</ul><h1>", 1)
    if (root / "atlas" / "index.html").is_file():  # harness.atlas: a page per seed claim and row x version
        page = page.replace("<h2>Batches</h2>", '<p><a href="atlas/index.html">The atlas</a>: what the runs found, '
                            "claim by claim (the published runs and the runs here)</p><h2>Batches</h2>", 1)
    (root / "index.html").write_text(page)
    return root / "index.html"


def serve(root: Path, port: int = 8000) -> None:
    from harness import atlas

    atlas.write_served(root, run_rows(root))
    write_index(root)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving {root} on http://127.0.0.1:{port}/ (Ctrl-C to stop)", flush=True)
        httpd.serve_forever()
