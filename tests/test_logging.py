"""Logging: one ``logging`` logger per module (``log = logging.getLogger(__name__)``), no
hand-written ``log()`` functions, and one set-up (harness.util.setup_logging) that prints each
record on stderr with its module's short prefix ("[run]", "[nemesis]", "[cluster]", ...)."""
from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from harness.util import LOGGERS, log_prefix, setup_logging
from helpers import product_sources

ROOT = Path(__file__).resolve().parent.parent
LEVELS = {"debug", "info", "warning", "error", "critical", "exception"}


def _modules() -> list[Path]:
    """The product's modules (a plug-in's own tests, harness/brokers/<broker>/tests/, are tests)."""
    return sorted(product_sources(ROOT, ("harness", "nemesis")))


def _binds_logger(tree: ast.Module) -> bool:
    """``log = logging.getLogger(__name__)`` at module level."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["log"]
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr == "getLogger" and isinstance(node.value.func.value, ast.Name)
                and node.value.func.value.id == "logging"
                and [getattr(a, "id", None) for a in node.value.args] == ["__name__"]):
            return True
    return False


def _logs(tree: ast.Module) -> bool:
    """The module calls ``log.<level>(...)``."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LEVELS
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "log" for n in ast.walk(tree))


def test_no_hand_written_log_functions():
    """No module defines a module-level ``log`` function or imports ``log`` from another."""
    bad = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        rel = path.relative_to(ROOT)
        bad += [f"{rel}:{n.lineno}: def log" for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "log"]
        bad += [f"{rel}:{n.lineno}: imports log from {n.module}" for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and any(a.name == "log" for a in n.names)]
    assert not bad, "\n".join(bad)


def test_every_module_that_logs_has_its_own_logger():
    modules, bad = 0, []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if _logs(tree):
            modules += 1
            if not _binds_logger(tree):
                bad.append(str(path.relative_to(ROOT)))
    assert not bad, f"call log.<level>() without log = logging.getLogger(__name__): {bad}"
    assert modules >= 10  # the scan sees the modules that log (runner, nemesis.core, ...)


@pytest.fixture
def clean_loggers():
    """The "harness" and "nemesis" loggers as they were, after the test."""
    saved = {n: (logging.getLogger(n).level, list(logging.getLogger(n).handlers)) for n in LOGGERS}
    for n in LOGGERS:
        logging.getLogger(n).handlers.clear()
    yield
    for n, (level, handlers) in saved.items():
        logging.getLogger(n).setLevel(level)
        logging.getLogger(n).handlers[:] = handlers


def test_setup_logging_is_idempotent(clean_loggers):
    setup_logging()
    setup_logging()
    for name in LOGGERS:
        logger = logging.getLogger(name)
        assert len(logger.handlers) == 1, logger.handlers
        assert logger.level == logging.INFO
        assert logger.propagate  # pytest's caplog (on the root logger) still sees the records
    setup_logging(logging.WARNING)  # a second call may change the level, not add a handler
    assert logging.getLogger("harness").level == logging.WARNING
    assert len(logging.getLogger("harness").handlers) == 1


def test_prefixes():
    assert log_prefix("harness.runner") == "run"
    assert log_prefix("harness.checking") == "run"
    assert log_prefix("harness.batch.pipeline") == "run"
    assert log_prefix("harness.judge") == "judge"
    assert log_prefix("harness.brokers.containers") == "cluster"
    assert log_prefix("harness.brokers.rabbitmq.recovery") == "cluster"
    assert log_prefix("harness.images") == "images"
    assert log_prefix("harness.engine") == "engine"
    assert log_prefix("nemesis.core") == "nemesis"
    assert log_prefix("harness.report") == "harness.report"  # no short prefix: its own name
    assert log_prefix("harness.runnerx") == "harness.runnerx"  # a whole name only


def test_a_record_reaches_stderr_with_its_prefix(clean_loggers, capfd, caplog):
    from harness import runner
    from nemesis import core

    setup_logging()
    with caplog.at_level(logging.INFO):
        runner.log.info("heal failed: %s; run `mqchaos heal`", "boom")
        core.log.info("%s %s at t=%.1f", "kill", ["rabbit1"], 2.0)
        logging.getLogger("harness.brokers.kafka.cluster").debug("not shown at INFO")
    err = capfd.readouterr().err
    assert "[run] heal failed: boom; run `mqchaos heal`\n" in err
    assert "[nemesis] kill ['rabbit1'] at t=2.0\n" in err
    assert "not shown" not in err
    assert [r.name for r in caplog.records] == ["harness.runner", "nemesis.core"]  # propagated
