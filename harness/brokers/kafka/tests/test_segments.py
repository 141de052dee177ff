"""Each replica's log read from its segment files (harness/brokers/kafka/segments.py) and
lost-on-node (checkers/logs.py) against planted gaps and the independent reference."""
import io
import json
import random
import struct
import tarfile
import zlib

import pytest

import reference
from checkers import synth
from checkers.check import check_runs
from checkers.history import open_runs
from harness.brokers.kafka import segments
from harness.clients import payload


def _zigzag(v: int) -> bytes:
    u, out = (v << 1) ^ (v >> 63), bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def batch(base: int, values: list[bytes | None], *, control=False, txn=False, codec=0) -> bytes:
    """A v2 record batch as Kafka's DefaultRecordBatch writes it (the spec, written here
    independently of the reader): header, then each record length-prefixed."""
    recs = b""
    for i, v in enumerate(values):
        body = (b"\x00" + _zigzag(0) + _zigzag(i) + _zigzag(1) + b"k"
                + (_zigzag(-1) if v is None else _zigzag(len(v)) + v) + _zigzag(0))
        recs += _zigzag(len(body)) + body
    attrs = codec | (0x10 if txn else 0) | (0x20 if control else 0)
    after_crc = struct.pack(">hiqqqhii", attrs, len(values) - 1, 0, 0, 7, 0, 0, len(values)) + recs
    head = struct.pack(">iBI", 0, 2, zlib.crc32(after_crc))  # partitionLeaderEpoch, magic, crc
    return struct.pack(">qi", base, len(head) + len(after_crc)) + head + after_crc


def test_records_read_offsets_values_and_skip_control_batches():
    vals = [payload.encode(f"p0-{i}", "p0", i) for i in range(5)]
    seg = batch(0, vals[:3], txn=True) + batch(3, [b"\x00\x00\x00\x00\x00\x00"], control=True) + batch(4, vals[3:])
    recs, cut = segments.records(seg)
    assert [(r.offset, r.value) for r in recs] == [(0, vals[0]), (1, vals[1]), (2, vals[2]), (4, vals[3]), (5, vals[4])]
    assert [r.transactional for r in recs] == [True, True, True, False, False] and not cut
    recs, cut = segments.records(seg[:-7])  # a crash mid-append: the last batch cut short
    assert [r.offset for r in recs] == [0, 1, 2] and cut
    with pytest.raises(segments.SegmentError, match="compressed"):
        segments.records(batch(0, vals, codec=1))


def test_replica_lines_from_a_tar_of_the_data_directory():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("./mqchaos-1/00000000000000000002.log", batch(2, [payload.encode("p1-9", "p1", 9)]))
        add("./mqchaos-1/00000000000000000000.log", batch(0, [payload.encode("p1-7", "p1", 7), b"foreign"]))
        add("./mqchaos-1/00000000000000000000.index", b"\x00" * 8)
        add("./other-0/00000000000000000000.log", batch(0, [payload.encode("x-1", "x", 1)]))
    lines, stats = segments.replica_lines("kafka2", "mqchaos", buf.getvalue())
    assert [(x["msg_id"], x["offset"], x["source"]) for x in lines] == [
        ("p1-7", 0, "mqchaos:1"), ("p1-9", 2, "mqchaos:1")]
    assert stats == {"segments": 2, "records": 2, "truncated": 0, "foreign": 1}


def checked(spark, d):
    runs, errors = open_runs([str(d)], prefer_parquet=False)
    assert not errors
    return check_runs(spark, runs)[str(d)]


@pytest.mark.spark
def test_lost_on_node_counts_a_replicas_gap_and_not_its_lag(spark, tmp_path):
    produce, consume, _ = synth.build_log(random.Random(4), producers=3, per_producer=60, partitions=3)
    d = synth.write_run(tmp_path / "r", produce, consume, meta={"history_version": 3})
    res = checked(spark, d)
    assert res["lost_on_node"] is None and res["replica_records"] is None  # no replica logs
    synth.write_replicas(d, synth.replicas_of(produce, lose={"kafka2": 4}, short={"kafka3": 6}))
    res, ref = checked(spark, d), reference.check(d)
    assert res["lost_on_node"] == ref["lost_on_node"] == 4
    assert res["replica_records"] == ref["replica_records"] == 3 * 180 - 4 - 18
    assert all(s.startswith("kafka2 ") for s in res["log_samples"]["lost_on_node"])
    assert res["lost"] == 0 and res["valid"] is True  # the readers read everything: a node's loss alone
