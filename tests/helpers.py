"""What several test modules share that is no fake (those are in tests/fakes.py): the figures
the Spark checker and the independent reference (tests/reference.py) must agree on, a results
tree written as the run loop leaves it, a command's exit code as CliRunner gives it
(``exit_of``), and the product's source files the scans of the code read (``product_sources``).
Tests import it (``import helpers``), never each other."""
from __future__ import annotations

import json
import traceback
from pathlib import Path

from checkers import synth

# The checker's figures the reference computes too: test_checker's property tests, the
# dead-letter accounting (test_rmq4_rows) and the batch's one-run-at-a-time check
# (test_pipeline) compare these.
COMPARED = ("attempted", "ok", "fail", "info", "produce_records", "delivered", "deliveries", "lost",
            "duplicated", "duplicate_deliveries", "unexpected", "recovered", "recovered_fail",
            "id_conflicts", "malformed_lines", "ordering_violations", "unavailable", "lost_window",
            "unavailable_by_producer", "read_gaps", "lost_by_node", "lost_by_producer",
            "kept_before_lost_last", "poison", "lost_poison", "lost_other", "dead_lettered", "gave_up",
            "rejections")


def exit_of(res) -> int:
    """A CliRunner result's exit code, asserting the command ended by its own exit: CliRunner
    turns an exception the command let through into exit code 1, EXIT_INVALID, which a test
    expecting anomalies would read as found (the real entry point makes it 2:
    harness.util.entry_point)."""
    assert res.exception is None or isinstance(res.exception, SystemExit), \
        "".join(traceback.format_exception(*res.exc_info)) + res.output
    return res.exit_code


def agree(got: dict, ref: dict):
    for k in COMPARED:
        if k == "read_gaps" and got[k] is None:  # not computed on the large-input path
            continue
        assert got[k] == ref[k], (k, got[k], ref[k])
    for k, ids in ref["samples"].items():
        assert got["samples"][k] == ids, k


def product_sources(root: Path, packages) -> list[Path]:
    """The Python files of ``packages`` under ``root``, sorted, without the tests kept beside a
    broker plug-in (harness/brokers/<broker>/tests/, issue 53): what the scans of the product's
    code read (the size rules, the store's file names, who parses a schedule, the loggers, the
    entry points, the statuses and orderings spelled out)."""
    return [p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))
            if "tests" not in p.relative_to(root).parts]


def write_results_run(results: Path, scenario: str, started_at: str, produce, consume, *,
                      broker: str = "rabbitmq", version: str = "3.10.8", status: str = "completed",
                      held="absent", ordering: str = "none", error: str | None = None,
                      history: bool = True, link_latest: bool = True, **write_kw) -> Path:
    """A run directory as the harness's run loop leaves it (harness/runner.py):
    results/<scenario>/<UTC timestamp>/ with run.json (scenario, broker, brokers,
    started_at, status, ordering), the history, check.json with `prediction.held`
    (held="absent": no prediction), and the `latest` links."""
    stamp = started_at.replace(":", "-").replace("+00-00", "") + ".000Z"
    run_dir = Path(results) / scenario / stamp
    brokers = ({"rabbitmq": version, "erlang": "25.2.3"} if broker == "rabbitmq"
               else {"kafka": f"kafka_2.13-{version}.jar"})
    meta = {"scenario": scenario, "id": scenario.split("-")[0], "broker": broker, "seed": 0,
            "ordering": ordering, "params": {"name": scenario}, "started_at": started_at,
            "status": status, "phases": {}, "brokers": brokers}
    if error:
        meta["error"] = error
    if history:
        synth.write_run(run_dir, produce, consume, meta=meta, **write_kw)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "run.json").write_text(json.dumps(meta))
    if held != "absent":
        check = {"valid": None, "prediction": {"held": held, "reason": f"planted: {held}", "checks": []}}
        (run_dir / "check.json").write_text(json.dumps(check))
    if link_latest:
        for link, target in ((run_dir.parent / "latest", stamp),
                             (Path(results) / "latest", f"{scenario}/{stamp}")):
            if link.is_symlink():
                link.unlink()
            link.symlink_to(target)
    return run_dir
