"""One schema for check results, rows and statuses (harness.results, harness.verdicts): every
key table derives from it and says what it said before, the checker's result has exactly
its keys and types, every row the batch builds uses only the Row's keys, and the statuses
and ordering names are written once."""
from __future__ import annotations

import ast
import json
import re
import types
import typing
from pathlib import Path

import pytest

from harness import expect, results, rows as R
from harness.results import CheckResult, Row
from harness.verdicts import RUN_STATUSES, UNDRAINED_LOSS, RunStatus, undecided
from helpers import product_sources

ROOT = Path(__file__).resolve().parent.parent

# The tables as they were written by hand before they derived from the schema: the same
# names, in the same order (summary.json, check.json and the analysis table keep theirs).
OLD_COUNT_FIELDS = ("attempted", "ok", "fail", "info", "produce_records", "delivered", "deliveries", "lost",
                    "duplicated", "duplicate_deliveries", "unexpected", "recovered", "recovered_fail",
                    "id_conflicts", "malformed_lines", "poison", "lost_poison", "lost_other", "dead_lettered",
                    "gave_up", "rejections")
OLD_CHECKER_KEYS = {"attempted", "ok", "fail", "info", "produce_records", "delivered", "deliveries", "lost",
                    "duplicated", "duplicate_deliveries", "unexpected", "recovered", "recovered_fail",
                    "id_conflicts", "ordering_violations", "malformed_lines", "unavailable_s", "valid",
                    "unavailable_intervals", "drain_complete", "unavailable_s_producer_max", "read_gap_max_s",
                    "lost_window", "unavailable_window", "lost_by_node", "lost_by_producer", "lost_nodes",
                    "kept_before_lost_last", "poison", "lost_poison", "lost_other", "dead_lettered", "gave_up",
                    "rejections"}
# issue 36: where each message sits in the log (checkers.logs) and what a read_committed
# reader saw of each transaction (checkers.txn)
LOG_AND_TXN_KEYS = {"write_offsets", "read_offsets", "inconsistent_offsets", "duplicate_offsets", "lost_writes",
                    "unseen", "lost_prefix", "lost_middle", "lost_postfix", "poll_skips", "poll_skips_subscribe",
                    "nonmonotonic_polls",
                    "nonmonotonic_polls_subscribe", "nonmonotonic_sends", "replica_records", "lost_on_node",
                    "transactions_committed",
                    "transactions_aborted", "transactions_unknown", "aborted_reads", "uncommitted_reads",
                    "torn_transactions", "lost_transactions", "cycles_g0", "cycles_g1c", "cycles_g1c_wr",
                    "processed_twice", "unprocessed"}
OLD_RUN_FIELDS = [
    ("run_dir", "string"), ("scenario", "string"), ("scenario_id", "string"), ("broker", "string"),
    ("broker_version", "string"), ("brokers", "string"), ("started_at", "timestamp"),
    ("run_date", "date"), ("status", "string"), ("category", "string"), ("error", "string"),
    ("source", "string"), ("ordering", "string"),
    ("attempted", "bigint"), ("ok", "bigint"), ("fail", "bigint"), ("info", "bigint"),
    ("delivered", "bigint"), ("lost", "bigint"), ("duplicated", "bigint"), ("unexpected", "bigint"),
    ("recovered", "bigint"), ("ordering_violations", "bigint"), ("malformed_lines", "bigint"),
    ("unavailable_s", "double"), ("unavailable_intervals", "int"), ("longest_unavailable_s", "double"),
    ("valid", "boolean"), ("prediction", "string"), ("prediction_reason", "string"),
]
OLD_COMPACT_KEYS = ("id", "scenario", "broker", "version", "repeat", "status", "exit", "seconds", "retried",
                    "not_applicable", "harness_error", "attempted", "confirmed", "failed", "unknown", "lost",
                    "duplicated", "ordering_violations", "ordering", "unavailable_s", "blocked_s", "measurement",
                    "expect", "require", "valid", "prediction", "reason", "decided_by", "brokers")
ORDERINGS = ("none", "fifo", "monotonic", "strict")


def test_the_key_tables_derive_from_the_schema_unchanged():
    from checkers import analysis as A
    from checkers import trend as analyze

    assert results.COUNT_FIELDS == A.COUNT_FIELDS == OLD_COUNT_FIELDS
    assert expect.CHECKER_KEYS == OLD_CHECKER_KEYS | LOG_AND_TXN_KEYS
    assert analyze.RUN_FIELDS == OLD_RUN_FIELDS
    assert R.COMPACT_KEYS == OLD_COMPACT_KEYS + ("digest", "setup_digest", "digest_from")  # the run's identity (issue 52)
    assert set(expect.WINDOWED_CHECKER_KEYS) <= expect.CHECKER_KEYS


def test_the_ordering_names_are_one_definition():
    from checkers import analysis as A
    from harness import spec
    from harness.cli import main

    assert results.ORDERINGS == A.ORDERINGS == ORDERINGS
    assert typing.get_args(spec.BaseScenario.model_fields["ordering"].annotation) == ORDERINGS
    for cmd in (main.commands["check"].commands["runs"], main.commands["summarize"]):
        opt = next(p for p in cmd.params if p.name == "ordering")
        assert tuple(opt.type.choices) == ORDERINGS
    # nowhere else in the code are they spelled out
    literal = re.compile(r"""["']none["'],\s*["']fifo["'],\s*["']monotonic["'],\s*["']strict["']""")
    spelled = [str(p.relative_to(ROOT)) for p in product_sources(ROOT, ("harness", "checkers", "nemesis"))
               if literal.search(p.read_text())]
    assert spelled == ["harness/results.py"]


def _write_run(d: Path, meta: dict) -> Path:
    """A tiny history: three messages written, one lost, one delivered twice."""
    (d / "history").mkdir(parents=True)
    produce = [{"msg_id": f"p0-{i}", "producer": "p0", "seq": i, "outcome": "ok", "t_invoke": i + 0.0,
                "t_complete": i + 0.1, "node": "n1"} for i in range(3)]
    consume = [{"msg_id": f"p0-{i}", "consumer": "c0", "t": 10.0 + i, "redelivered": False, "producer": "p0",
                "seq": i} for i in (0, 1, 1)]
    (d / "history" / "produce-p0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in produce))
    (d / "history" / "consume-c0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in consume))
    (d / "run.json").write_text(json.dumps(meta))
    return d


def _conforms(value, t) -> bool:
    """Whether a JSON-like value has the schema's type (containers checked one level deep)."""
    if t is typing.Any:
        return True
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if t is type(None):
        return value is None
    if origin in (list, dict):
        return isinstance(value, origin)
    if t is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, t) and not (t is int and isinstance(value, bool))


@pytest.mark.spark
def test_the_checker_returns_exactly_the_schemas_keys_and_types(spark, tmp_path):
    from checkers.check import check_runs
    from checkers.history import open_runs

    d = _write_run(tmp_path / "r", {"scenario": "s", "status": "completed", "ordering": "fifo",
                                    "drain": {"complete": True}})
    runs, errors = open_runs([str(d)], prefer_parquet=False)
    assert not errors
    res = check_runs(spark, runs)[str(d)]
    assert set(res) == CheckResult.__required_keys__
    hints = typing.get_type_hints(CheckResult)
    wrong = {k: v for k, v in res.items() if not _conforms(v, hints[k])}
    assert not wrong, wrong
    assert res["lost"] == 1 and res["duplicated"] == 1 and res["ordering"] == "fifo"


class _Sc:
    """The parts of a scenario a row reads."""
    name, id, broker, version = "R9-x", "R9", "rabbitmq", "3.10"
    expect = {"lost": 0, "blocked_s": ">1"}
    require: dict = {}

    def measurement_names(self) -> set[str]:
        return set()

    def model_dump(self, **_kw) -> dict:  # what harness.identity digests
        return {"broker": self.broker, "expect": self.expect, "require": self.require}

    def prefill_names(self) -> set[str]:
        return set()


def _check_result() -> dict:
    res = {k: 0 for k in results.COUNT_FIELDS}
    res.update(ordering="fifo", ordering_violations=0, unavailable=[], unavailable_s=0.0, valid=True,
               prediction={"held": True, "reason": "prediction held", "checks": []})
    return res


def test_every_row_the_batch_builds_uses_the_rows_keys(tmp_path):
    from harness import batch

    made = {
        "run_row": R.run_row(_Sc(), _check_result(), {"measurements": {"blocked_s": 2.0}}, tmp_path),
        "not_applicable_row": R.not_applicable_row(_Sc(), {"reason": "not applicable: x"}, tmp_path),
        "invalid file": batch.bad_row(batch.Bad("x.yaml", "bad")),
        "refused": batch.bad_row(batch.Bad("x.yaml", "x.yaml:\nno", "R9-x", "R9", "rabbitmq", "4.3")),
    }
    for name, r in made.items():
        assert set(r) <= set(results.ROW_KEYS), (name, set(r) - set(results.ROW_KEYS))
    # the figures under the row's names, in the row's order (summary.json as before)
    assert list(made["run_row"])[:11] == ["scenario", "id", "attempted", "confirmed", "failed", "unknown", "lost",
                                          "duplicated", "ordering_violations", "ordering", "unavailable_s"]
    assert made["run_row"]["measurement"] == {"blocked_s": 2.0}
    assert list(made["invalid file"]) == ["scenario", "id", "repeat", "seconds", "status", "retried",
                                          "harness_error", "reason", "expect", "exit", "valid"]
    assert json.loads(json.dumps(made["invalid file"]))["status"] == "invalid scenario file"
    assert list(made["refused"]) == ["scenario", "id", "broker", "version", "repeat", "seconds", "status",
                                     "retried", "harness_error", "prediction", "valid", "reason", "decided_by",
                                     "expect", "exit", "file"]
    assert R.verdict_word(made["refused"]) == R.REFUSED_TEXT


def test_the_reporters_columns_are_row_keys():
    from harness import matrix

    keys = set(results.ROW_KEYS)
    assert set(matrix.RUN_KEYS) <= keys
    assert set(R.TEXT_COLUMNS) - {"verdict"} <= keys
    assert set(R.EVIDENCE_KEYS) <= keys
    assert set(results.ROW_FIGURES.values()) <= set(results.COUNT_FIELDS) | set(typing.get_type_hints(CheckResult))


def _status_literals(path: Path) -> set[str]:
    """The strings a module assigns to a ``status`` (``x["status"] = "..."``, ``"status": "..."``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and getattr(t.slice, "value", None) == "status":
                    out.add(node.value.value)
        if isinstance(node, ast.Dict):
            out |= {v.value for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)
                    and k.value == "status" and isinstance(v, ast.Constant)}
    return out


def test_every_status_written_is_a_run_status():
    written = set().union(*(_status_literals(p) for p in product_sources(ROOT, ("harness", "checkers"))))
    assert written <= RUN_STATUSES, written - RUN_STATUSES
    assert {s.value for s in RunStatus} == set(RUN_STATUSES)
    assert json.dumps([RunStatus.COMPLETED]) == '["completed"]' and f"{RunStatus.NOT_RUN}" == "not run"


@pytest.mark.parametrize("drain,lost,undrained", [
    ({"complete": True}, 3, False), ({"complete": False}, 3, True), (None, 3, True), ({}, 3, True),
    ({"complete": False}, 0, False), (None, None, False)])
def test_a_loss_before_a_finished_drain_is_undecided_by_the_one_rule(drain, lost, undrained):
    info = {"status": "completed", **({"drain": drain} if drain is not None else {})}
    assert (UNDRAINED_LOSS in undecided(info, [], lost=lost)) is undrained
    # the checker's validity asks without the loss: a missing drain record leaves it decided
    assert UNDRAINED_LOSS not in undecided(info, [])


def test_a_prediction_on_an_undrained_loss_is_undecided():
    class Sc(_Sc):
        expect = {"lost": ">0"}

    res = {**_check_result(), "lost": 2, "undecided": []}
    out = expect.verdict(Sc(), res, {"status": "completed"})
    assert out["held"] is None and out["reason"] == "could not decide: " + UNDRAINED_LOSS
    out = expect.verdict(Sc(), res, {"status": "completed", "drain": {"complete": True}})
    assert out["held"] is True


def test_rows_are_plain_dicts():
    r = Row(scenario="s", status=RunStatus.COMPLETED)
    assert type(r) is dict and json.loads(json.dumps(r)) == {"scenario": "s", "status": "completed"}
