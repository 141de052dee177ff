"""A one-off `mqchaos check` of a small history starts its JVM with C1 alone (checkers.spark,
COLD_OPTIONS: its time goes in warming up); a large one, and every other session, keep C2."""
from __future__ import annotations

import json

import pytest

from checkers import analysis as A
from checkers import check
from checkers.spark import COLD_OPTIONS, JVM_OPTIONS, _java_options


def test_only_a_small_check_drops_c2():
    assert COLD_OPTIONS in _java_options(small=True)
    assert COLD_OPTIONS not in _java_options() and _java_options().startswith(JVM_OPTIONS)


class _Stop(Exception):
    pass


def _run(tmp_path, lines: int):
    d = tmp_path / "run"
    (d / "history").mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"scenario": "x", "ordering": "none"}))
    rec = json.dumps({"msg_id": "p0-1", "producer": "p0", "seq": 1, "outcome": "ok", "t_invoke": 0.0,
                      "t_complete": 0.1})
    (d / "history" / "produce-p0.jsonl").write_text((rec + "\n") * lines)
    return d


@pytest.fixture
def asked(monkeypatch):
    """The keyword arguments check.main gives its session (which is never started)."""
    seen = {}

    def fake_session(master, app, **kw):
        seen.update(kw)
        raise _Stop()
    monkeypatch.setattr(check, "session", fake_session)
    return seen


def test_check_asks_for_a_small_session_below_the_large_input(tmp_path, asked):
    with pytest.raises(_Stop):
        check.main([str(_run(tmp_path, 10))])
    assert asked.get("small") is True


def test_a_large_input_keeps_c2(tmp_path, asked, monkeypatch):
    monkeypatch.setattr(check, "records_estimate", lambda runs: A.LARGE_INPUT)
    with pytest.raises(_Stop):
        check.main([str(_run(tmp_path, 10))])
    assert asked.get("small") is False
