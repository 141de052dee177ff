"""One schema for what a check yields (check.json) and what a batch's row holds.

Two typed dicts, declared once, from which every key table derives:

- ``CheckResult``: the checker's result for one run (``checkers.check.check_runs``, written as
  check.json). ``COUNT_FIELDS`` (its ``Counts``), the quantities an ``expect:`` may name
  (``judged``: ``harness.expect.CHECKER_KEYS``) and ``mqchaos summarize``'s per-run figures
  (``checkers.trend.RUN_FIELDS``, by each key's type) are read off it.
- ``Row``: one run of a batch (summary.json, the tables, JUnit, matrix.json). The keys a
  published copy keeps (``harness.rows.COMPACT_KEYS``) are those marked ``Published``, in
  this order; the row's figures are the check result's under ``ROW_FIGURES``' names.

They are typed dicts, not dataclasses, because what they describe is JSON already on disk
and read as dicts by every reporter: a key's absence (a row with no figures prints "-"),
its order (summary.json, check.json) and the dict's own copy-and-update use all stay as
they were. This module sits in the lowest layer (stdlib only), so the checkers, which may
not import the scenario model or the prediction language, share it with both.
"""
from typing import Annotated, Any, Literal, NotRequired, TypedDict, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")
# Markers on a key's type (read by ``keys``): an ``expect:`` may name the quantity; a
# published row (docs/batches/*/summary.json) keeps the column.
JUDGED, PUBLISHED = "judged", "published"
Judged = Annotated[T, JUDGED]
Published = Annotated[T, PUBLISHED]

# The ordering rules a scenario may ask the checker for (``ordering:``, ``--ordering``).
Ordering = Literal["none", "fifo", "monotonic", "strict"]
ORDERINGS: tuple[str, ...] = get_args(Ordering)

Interval = list[float]  # [start, end] on the run's clock, seconds


class Counts(TypedDict):
    """Per run, each message counted once (checkers.analysis: one job); docs/history.md."""
    attempted: Judged[int]
    ok: Judged[int]
    fail: Judged[int]
    info: Judged[int]
    produce_records: Judged[int]
    delivered: Judged[int]
    deliveries: Judged[int]
    lost: Judged[int]
    duplicated: Judged[int]
    duplicate_deliveries: Judged[int]
    unexpected: Judged[int]
    recovered: Judged[int]
    recovered_fail: Judged[int]
    id_conflicts: Judged[int]
    malformed_lines: Judged[int]
    poison: Judged[int]
    lost_poison: Judged[int]
    lost_other: Judged[int]
    dead_lettered: Judged[int]
    gave_up: Judged[int]
    rejections: Judged[int]


class CheckResult(Counts):
    """check.json: the counts, then what ``checkers.check`` adds to them."""
    samples: dict[str, list[str]]  # the first ids per anomaly kind (and "ordering")
    lost_window: Judged[Interval | None]  # when the lost messages were confirmed
    lost_by_node: Judged[dict[str, int]]
    lost_by_producer: Judged[dict[str, int]]
    kept_before_lost_last: Judged[int | None]
    ordering: Ordering
    ordering_violations: Judged[int]
    unavailable: list[Interval]
    unavailable_s: Judged[float]
    unavailable_threshold_s: float
    unavailable_by_producer: dict[str, list[Interval]]
    unavailable_s_producer_max: Judged[float]
    read_gaps: dict[str, list[Interval]] | None  # None: not computed (millions of records)
    read_gap_max_s: Judged[float | None]
    # where each message sits in the log (checkers.logs; docs/history.md version 3): zero
    # where nothing is positioned, the write-position figures None without write positions
    write_offsets: Judged[int]
    read_offsets: Judged[int]
    inconsistent_offsets: Judged[int]
    duplicate_offsets: Judged[int]
    lost_writes: Judged[int | None]
    unseen: Judged[int | None]
    lost_prefix: Judged[int | None]
    lost_middle: Judged[int | None]
    lost_postfix: Judged[int | None]
    poll_skips: Judged[int]
    poll_skips_subscribe: Judged[int]
    nonmonotonic_polls: Judged[int]
    nonmonotonic_polls_subscribe: Judged[int]
    nonmonotonic_sends: Judged[int]
    # each replica's own log (history/replica-*.jsonl): None without replica logs
    replica_records: Judged[int | None]
    lost_on_node: Judged[int | None]
    log_samples: dict[str, list[str]]  # the first offenders per log figure
    # what a read_committed reader saw of each producer transaction (checkers.txn): None
    # where the run wrote no transaction
    transactions_committed: Judged[int | None]
    transactions_aborted: Judged[int | None]
    transactions_unknown: Judged[int | None]
    aborted_reads: Judged[int | None]
    uncommitted_reads: Judged[int | None]
    torn_transactions: Judged[int | None]
    lost_transactions: Judged[int | None]
    txn_samples: dict[str, list[str]]
    # dependency cycles between committed transactions and exactly-once processing
    # (checkers.cycles): None without transactions; the last two None without a processor
    cycles_g0: Judged[int | None]
    cycles_g1c: Judged[int | None]
    cycles_g1c_wr: Judged[int | None]
    processed_twice: Judged[int | None]
    unprocessed: Judged[int | None]
    cycle_samples: dict[str, list[str]]
    valid: Judged[bool | None]
    reason: str
    undecided: list[str]  # harness.verdicts.undecided
    run_dir: str
    source: Literal["parquet", "jsonl"]
    # written by `mqchaos check` and by the run loop, not by check_runs
    checked_at: NotRequired[str]
    check_seconds: NotRequired[float]
    prediction: NotRequired[dict[str, Any]]  # harness.expect.verdict


class Row(TypedDict, total=False):
    """One run of a batch (harness.rows, harness.batch): its identity, figures and verdict.
    Absent keys are meaningful (a row that never ran has no figures), hence total=False."""
    id: Published[str | None]
    scenario: Published[str]  # the scenario's name (an invalid file's path)
    broker: Published[str | None]
    version: Published[str | None]
    repeat: Published[int]
    status: Published[str]  # harness.verdicts.RunStatus
    exit: Published[int]  # harness.verdicts' exit code
    seconds: Published[float]
    retried: Published[bool]
    not_applicable: Published[bool]
    harness_error: Published[bool]
    attempted: Published[int]
    confirmed: Published[int]
    failed: Published[int]
    unknown: Published[int]
    lost: Published[int]
    duplicated: Published[int]
    ordering_violations: Published[int]
    ordering: Published[Ordering | None]
    unavailable_s: Published[float]
    blocked_s: Published[float | None]
    measurement: Published[dict[str, Any]]  # what the prediction names beyond the counts
    expect: Published[dict[str, Any] | None]
    require: Published[dict[str, Any]]
    # the checker's validity; a run that never finished carries its status here
    valid: Published[bool | str | None]
    prediction: Published[bool | None]  # held
    reason: Published[str | None]
    decided_by: Published[str]
    brokers: Published[dict[str, Any] | None]  # what each node reported it runs
    # what the run tested (harness.identity): the scenario's digest, with ``brokers`` the key
    # a tally counts runs by; its set-up alone (another prediction of the same runs' situation);
    # ``digest_from`` where a backfilled row's digests were taken
    digest: Published[str | None]
    setup_digest: Published[str | None]
    digest_from: Published[str]
    earlier_attempts: list[dict[str, Any]]  # the harness errors retried before
    report: str | None  # a path on this machine: its report.md (or the run's directory)
    file: str  # a matrix version's refused scenario file
    run: str  # <scenario>/<timestamp>, in a published row
    started: str  # the store's page (harness.browse)
    # what decided the verdict, kept in a published row (harness.rows.EVIDENCE_KEYS)
    checks: list[dict[str, Any]]
    requirements: list[dict[str, Any]]
    window: dict[str, Any]
    operator_events: list[dict[str, Any]]
    operations: list[dict[str, Any]]  # the scenario's operator changes and their evidence (issue 39)
    faults: list[dict[str, Any]]  # beside operations: the other faults' times (which phase each hit)


# The row's figures from the check result: row column -> check result key (a batch's
# reader says "confirmed" where the checker says "ok").
ROW_FIGURES: dict[str, str] = {"attempted": "attempted", "confirmed": "ok", "failed": "fail",
                               "unknown": "info", "lost": "lost", "duplicated": "duplicated",
                               "ordering_violations": "ordering_violations"}


def keys(td: type, marker: str | None = None) -> tuple[str, ...]:
    """A typed dict's keys in declaration order; with ``marker``, those whose type carries it."""
    hints = get_type_hints(td, include_extras=True)
    return tuple(k for k, t in hints.items() if marker is None or marker in getattr(t, "__metadata__", ()))


def value_type(td: type, key: str) -> type:
    """The plain type of one key's values: markers, ``NotRequired`` and ``None`` taken off; a
    literal's by its values' (``ordering`` is a str)."""
    t = get_type_hints(td)[key]
    args = [a for a in get_args(t) if a is not type(None)] or [t]
    if get_origin(t) is Literal:
        return type(args[0])
    return args[0] if len(args) == 1 and isinstance(args[0], type) else t


COUNT_FIELDS: tuple[str, ...] = keys(Counts)
JUDGED_KEYS: tuple[str, ...] = keys(CheckResult, JUDGED)
ROW_KEYS: tuple[str, ...] = keys(Row)
PUBLISHED_KEYS: tuple[str, ...] = keys(Row, PUBLISHED)


# check.json's figures of where messages sit in a log, of transactions and of their cycles
# (checkers.logs, checkers.txn, checkers.cycles), in schema order, each group with its
# samples' key: a report lists those a run has (not None)
_PLACE = {k: i for i, k in enumerate(CheckResult.__annotations__)}
DETAIL_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (samples, tuple(k for k in JUDGED_KEYS if _PLACE[first] <= _PLACE[k] < _PLACE[samples]))
    for first, samples in (("write_offsets", "log_samples"), ("transactions_committed", "txn_samples"),
                           ("cycles_g0", "cycle_samples")))
