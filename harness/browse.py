"""``mqchaos serve``: the results store in a browser, on 127.0.0.1 only. The root page lists
every batch (its index.html) and every run (its verdict and report), newest first."""
from __future__ import annotations

import functools
import http.server
from pathlib import Path

from harness import rows, store


def run_rows(root: Path) -> list[dict]:
    """One row per run below ``root``, from its run.json and check.json (as a batch's rows)."""
    out = []
    for d in store.find_runs([str(root)])[0]:
        info, check = store.read_run(d) or {}, store.read_check(d) or {}
        pred = check.get("prediction") or {}
        row = {"id": info.get("id"), "scenario": info.get("scenario") or d.parent.name,
               "seconds": d.name, "report": str(d / store.REPORT_MD) if (d / store.REPORT_HTML).exists() else None,
               "harness_error": info.get("status") not in (None, "completed"), "retried": False,
               "prediction": pred.get("held") if pred.get("checks") else check.get("valid"),
               "expect": (info.get("params") or {}).get("expect")}
        row.update({k: check.get(k) for k in ("attempted", "lost", "duplicated", "unavailable_s")})
        row["confirmed"] = check.get("ok")
        out.append(row)
    return sorted(out, key=lambda r: r["seconds"], reverse=True)


def write_index(root: Path) -> Path:
    batches = sorted((p.parent for p in root.glob("*/*/index.html")), key=lambda p: p.name, reverse=True)
    page = rows.index_html(run_rows(root), root, f"mqchaos results: {root}")
    links = "".join(f'<li><a href="{b.relative_to(root)}/index.html">{b.parent.name} {b.name}</a></li>'
                    for b in batches)
    page = page.replace("<h1>", f"<h2>Batches</h2><ul>{links or '<li>none</li>'}</ul><h1>", 1)
    (root / "index.html").write_text(page)
    return root / "index.html"


def serve(root: Path, port: int = 8000) -> None:
    write_index(root)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving {root} on http://127.0.0.1:{port}/ (Ctrl-C to stop)", flush=True)
        httpd.serve_forever()
