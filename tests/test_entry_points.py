"""Issue 52: every command exits 2 on an uncaught exception (harness.util.entry_point), never
Python's 1, which reads as "anomalies found"; the traceback goes to the results root's
harness-errors.log (harness.store.log_harness_error), one line on stderr names both. What
click decides itself (a usage error) and a command's own exit keep their codes."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness import check_service, store
from harness.cli import main
from harness.util import entry_point
from harness.verdicts import EXIT_INVALID, EXIT_UNKNOWN
from helpers import product_sources

ROOT = Path(__file__).resolve().parent.parent
# runs inside the broker containers on their python3 (stdlib and fusepy only): no harness there
NOT_GUARDED = {"nemesis/lazyfs.py"}


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path / "results"))
    return tmp_path / "results"


def test_a_command_that_raises_exits_2_with_its_traceback_logged(results, monkeypatch):
    def crash(*a, **kw):
        raise RuntimeError("planted\nsecond line")
    monkeypatch.setattr(check_service, "run_check", crash)
    res = CliRunner().invoke(main, ["check", "some/run"])  # standalone, as the console script runs it
    assert res.exit_code == EXIT_UNKNOWN, res.output
    log = results / store.HARNESS_ERRORS
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "RuntimeError: planted" in text and "in crash" in text
    line = f"harness error (exit 2): RuntimeError: planted; traceback in {log}"
    assert line in res.output.splitlines() and "second line" not in res.output


def test_a_usage_error_and_a_command_s_own_exit_keep_their_codes(results, monkeypatch):
    res = CliRunner().invoke(main, ["check", "--no-such-option", "r"])
    assert res.exit_code == 2 and "No such option" in res.output
    monkeypatch.setattr(check_service, "run_check", lambda *a, **kw: EXIT_INVALID)
    res = CliRunner().invoke(main, ["check", "r"])
    assert res.exit_code == EXIT_INVALID
    assert not (results / store.HARNESS_ERRORS).exists()  # neither is a harness error


def test_the_helper_passes_exits_and_interrupts_and_turns_an_exception_into_2(results):
    for raised in (SystemExit(EXIT_INVALID), KeyboardInterrupt()):
        with pytest.raises(type(raised)) as got, entry_point():
            raise raised
        assert got.value is raised
    with pytest.raises(SystemExit) as got, entry_point():
        raise click.ClickException("not a usage error: raised past a command")
    assert got.value.code == EXIT_UNKNOWN
    assert (results / store.HARNESS_ERRORS).read_text().count("==== ") == 1


def test_an_unwritable_results_root_logs_to_the_temporary_directory(tmp_path, monkeypatch):
    root = tmp_path / "a-file"
    root.write_text("")  # the root cannot be made a directory
    monkeypatch.setattr(store.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    assert store.log_harness_error("Traceback: planted", root) == tmp_path / "tmp" / store.HARNESS_ERRORS
    assert "Traceback: planted" in (tmp_path / "tmp" / store.HARNESS_ERRORS).read_text()


def test_the_console_entry_exits_2_on_an_uncaught_exception(tmp_path):
    """The real entry in a process of its own: `mqchaos serve` on a port no socket takes
    raises OverflowError from the bind (click's int option has no range)."""
    env = {**os.environ, store.RESULTS_ENV: str(tmp_path / "results")}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "serve", str(tmp_path), "--port", "70000"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    log = tmp_path / "results" / store.HARNESS_ERRORS
    assert proc.returncode == EXIT_UNKNOWN, proc.stdout + proc.stderr
    assert f"harness error (exit 2): OverflowError: bind(): port must be 0-65535.; traceback in {log}" in proc.stderr
    assert "Traceback" not in proc.stderr and "OverflowError" in log.read_text()


def main_blocks() -> dict[str, ast.If]:
    """Every `if __name__ == "__main__":` block of the project's Python (not its tests), by file."""
    found = {}
    for p in product_sources(ROOT, ("harness", "checkers", "nemesis", "bench")):
        for node in ast.parse(p.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                found[str(p.relative_to(ROOT))] = node
    return found


def test_every_entry_point_runs_inside_the_helper():
    blocks = main_blocks()
    assert "harness/cli.py" in blocks and "bench/recheck.py" in blocks  # the scan finds them
    unguarded = [f for f, node in blocks.items() if f not in NOT_GUARDED and not (
        len(node.body) == 1 and isinstance(node.body[0], ast.With)
        and ast.unparse(node.body[0].items[0].context_expr) == "entry_point()")]
    assert unguarded == ["harness/cli.py"]  # its `main()` is the group, guarded by its class
    assert type(main).main is not click.Group.main  # the console script `mqchaos = harness.cli:main`


def test_a_refusal_and_a_ctrl_c_outside_a_run_exit_2_not_1():
    """click says 1 for a ClickException and for Ctrl-C ("Aborted!"), the code for "anomalies
    found": the group says 2; a usage error keeps click's 2, --help its 0."""
    import click as _click

    @_click.command()
    def refuses():
        raise _click.ClickException("not a matrix batch")

    @_click.command()
    def interrupted():
        raise KeyboardInterrupt

    for cmd in (refuses, interrupted):
        main.add_command(cmd)
    try:
        for name in ("refuses", "interrupted"):
            res = CliRunner().invoke(main, [name])
            assert res.exit_code == 2, (name, res.output)
        assert CliRunner().invoke(main, ["check", "--no-such-flag"]).exit_code == 2
        assert CliRunner().invoke(main, ["--help"]).exit_code == 0
    finally:
        for name in ("refuses", "interrupted"):
            main.commands.pop(name, None)
