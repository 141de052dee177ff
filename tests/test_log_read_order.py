"""The log checks (checkers/logs.py) on a reader's own order and on reads without an offset:
minimal histories, one partition, every anomaly placed by hand."""
import shutil

import pyarrow.parquet as pq
import pytest

from checkers import schema as S
from checkers import synth
from checkers.check import check_runs
from checkers.history import convert, open_runs

pytestmark = pytest.mark.spark

SRC = "t:0"


def _writes(n: int) -> list[dict]:
    """p0 writes m0..m{n-1}, acknowledged at offsets 0..n-1 of t:0."""
    return [{"msg_id": f"m{i}", "producer": "p0", "seq": i, "outcome": "ok", "t_invoke": i * 0.1,
             "t_complete": i * 0.1 + 0.05, "node": "kafka1", "error": None, "source": SRC, "offset": i}
            for i in range(n)]


def _read(i: int, t: float, offset: int | None = -1, consumer: str = "c0") -> dict:
    """A delivery of m{i}, at offset i unless given (None: the broker gave no offset)."""
    return {"msg_id": f"m{i}", "consumer": consumer, "t": t, "redelivered": False, "source": SRC,
            "offset": i if offset == -1 else offset, "node": None, "producer": "p0", "seq": i}


def _check(spark, d, parquet=False):
    runs, errors = open_runs([str(d)], prefer_parquet=parquet)
    assert not errors and (runs[0].parquet_malformed is not None) == parquet
    return check_runs(spark, runs)[str(d)]


def _figures(res) -> dict:
    return {k: res[k] for k in ("lost", "lost_writes", "unseen", "poll_skips", "nonmonotonic_polls", "read_offsets")}


def test_a_read_without_an_offset_reads_its_message(spark, tmp_path):
    """m2 read mid-partition with a null offset: not a lost write, and the step 1 -> (m2) -> 3
    is no skip: the run is valid, as its `lost: 0` says."""
    consume = [_read(0, 1.0), _read(1, 1.1), _read(2, 1.2, offset=None), _read(3, 1.3), _read(4, 1.4)]
    res = _check(spark, synth.write_run(tmp_path / "null", _writes(5), consume))
    assert _figures(res) == {"lost": 0, "lost_writes": 0, "unseen": 0, "poll_skips": 0, "nonmonotonic_polls": 0,
                             "read_offsets": 4}
    assert res["valid"] is True, res["reason"]


def test_a_step_back_across_a_read_without_an_offset_is_still_one(spark, tmp_path):
    """0, 2, (m3, no offset), 1: the skip 0 -> 2 and the step back 2 -> 1 (whatever m3's read
    held, the reader stepped back once); m3 is read, not unseen."""
    consume = [_read(0, 1.0), _read(2, 1.1), _read(3, 1.2, offset=None), _read(1, 1.3)]
    res = _check(spark, synth.write_run(tmp_path / "back", _writes(4), consume))
    assert _figures(res) == {"lost": 0, "lost_writes": 0, "unseen": 0, "poll_skips": 1, "nonmonotonic_polls": 1,
                             "read_offsets": 3}
    assert res["log_samples"]["nonmonotonic_polls"] == [f"c0 {SRC} 2->1"]
    assert res["log_samples"]["poll_skips"] == [f"c0 {SRC} 0->2"]


def _one_t(order: list[int]) -> list[dict]:
    return [_read(i, 2.0) for i in order]


def test_reads_at_one_t_are_in_the_readers_order(spark, tmp_path):
    """A batch delivered 0, 1, 3, 2, 4 at one t: the step over 2 (1 -> 3), the step back
    (3 -> 2), and, pair by pair as Jepsen's int-poll-skip counts, 2 -> 4 over 3's position."""
    d = synth.write_run(tmp_path / "batch", _writes(5), _one_t([0, 1, 3, 2, 4]))
    res = _check(spark, d)
    assert (res["poll_skips"], res["nonmonotonic_polls"], res["lost"]) == (2, 1, 0)
    assert res["log_samples"]["nonmonotonic_polls"] == [f"c0 {SRC} 3->2"]
    assert sorted(res["log_samples"]["poll_skips"]) == [f"c0 {SRC} 1->3", f"c0 {SRC} 2->4"]
    assert res["valid"] is False


def test_a_rewind_at_one_t_counts_once(spark, tmp_path):
    """0, 1, 2, then back to 1, 2, 3, all at one t: one step back (2 -> 1), no skip (in offset
    order it was two: 1 -> 1 and 2 -> 2)."""
    d = synth.write_run(tmp_path / "rewind", _writes(4), _one_t([0, 1, 2, 1, 2, 3]))
    res = _check(spark, d)
    assert (res["nonmonotonic_polls"], res["poll_skips"]) == (1, 0)
    assert res["log_samples"]["nonmonotonic_polls"] == [f"c0 {SRC} 2->1"]


def test_the_parquet_copy_keeps_the_readers_order(spark, tmp_path):
    """The copy is bucketed and sorted by msg_id: it keeps each read's place in the JSONL
    (`_pos`), so the copy's figures are the JSONL's. A copy without it (written before) is
    still read: its reads at one t fall back to offset order."""
    d = synth.write_run(tmp_path / "copy", _writes(5), _one_t([0, 1, 3, 2, 4]))
    meta = convert(spark, str(d))
    assert meta["malformed"] == {"produce": 0, "consume": 0}
    res = _check(spark, d, parquet=True)
    assert (res["poll_skips"], res["nonmonotonic_polls"]) == (2, 1)

    # a copy from before: its consume files without the column (in another directory: Spark
    # keeps the sizes of the files it listed)
    old = shutil.copytree(d, tmp_path / "old")
    for f in (old / "history" / "parquet" / "consume").glob("*.parquet"):
        table = pq.read_table(f)
        pq.write_table(table.drop_columns([c for c in table.column_names if c == S.POS]), f)
        (f.parent / f".{f.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the file's old bytes
    (old / "history" / "parquet" / "_meta.json").touch()
    res = _check(spark, old, parquet=True)
    assert (res["poll_skips"], res["nonmonotonic_polls"], res["lost"]) == (0, 0, 0)


def test_a_read_without_an_offset_is_no_fifo_violation(spark, tmp_path):
    """Under fifo the reads of a partition are judged in offset order: m2, read with no
    offset, is no step back after 3 and 4 (it had sorted last: one violation, valid false
    beside lost 0); m4 read before m3 at their offsets still is one."""
    consume = [_read(0, 1.0), _read(1, 1.1), _read(2, 1.2, offset=None), _read(3, 1.3), _read(4, 1.4)]
    d = synth.write_run(tmp_path / "fifo", _writes(5), consume, meta={"scenario": "synthetic", "ordering": "fifo"})
    runs, _ = open_runs([str(d)])
    res = check_runs(spark, runs, ordering="fifo")[str(d)]
    assert (res["ordering"], res["ordering_violations"], res["lost"]) == ("fifo", 0, 0)
    assert res["valid"] is True, res["reason"]
    swapped = [_read(0, 1.0), _read(1, 1.1), _read(2, 1.2, offset=None), _read(4, 1.3, offset=3),
               _read(3, 1.4, offset=4)]
    d2 = synth.write_run(tmp_path / "fifo2", _writes(5), swapped, meta={"scenario": "synthetic", "ordering": "fifo"})
    runs, _ = open_runs([str(d2)])
    assert check_runs(spark, runs, ordering="fifo")[str(d2)]["ordering_violations"] == 1
