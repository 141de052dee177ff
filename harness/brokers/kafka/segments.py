"""Each replica's own log, read from its segment files: what lost-on-node is checked on.

A reader through a broker reads the leader (or whichever replica the leader picks); only
the files say what one replica holds. After the drain the plug-in copies each node's
partition directories of the run's topic (a tar through ``docker exec``: the node's own
mounts, the lazy file system's too) and reads every record batch of every ``.log``
segment: the message format v2 (KIP-98; Kafka's DefaultRecordBatch / DefaultRecord),
uncompressed as the harness's producers write it. Each data record becomes a line of
history/replica-<node>.jsonl (docs/history.md): the message, the node, its partition and
offset. Control records (transaction markers) are skipped; a batch cut short at the end of
a segment (a crash mid-append) ends that segment's reading, counted as ``truncated``.
"""
from __future__ import annotations

import io
import struct
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from harness.clients import payload

DATA_DIR = "/var/lib/kafka/data"
_HEADER = struct.Struct(">qiiBIhiqqqhii")  # baseOffset .. recordCount: 61 bytes
_CONTROL, _TXN, _CODEC = 0x20, 0x10, 0x07


class SegmentError(ValueError):
    """A segment the reader cannot read (a compressed batch, an unknown magic)."""


@dataclass(frozen=True)
class Record:
    offset: int
    value: bytes | None
    transactional: bool


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint (Kafka's ByteUtils.readVarlong) at ``pos``: (value, next pos)."""
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise SegmentError("varint longer than 10 bytes")


def records(segment: bytes) -> tuple[list[Record], bool]:
    """The data records of one segment file, and whether it ended in a partial batch."""
    buf, pos, out = memoryview(segment), 0, []
    while pos + 12 <= len(buf):
        base, length = struct.unpack_from(">qi", buf, pos)
        end = pos + 12 + length
        if length < _HEADER.size - 12 or end > len(buf):
            return out, True
        (base, _, _, magic, _, attrs, _, _, _, _, _, _, count) = _HEADER.unpack_from(buf, pos)
        if magic != 2:
            raise SegmentError(f"record batch magic {magic} at byte {pos} (only v2 is read)")
        if attrs & _CODEC:
            raise SegmentError(f"compressed record batch (codec {attrs & _CODEC}) at byte {pos}")
        if not attrs & _CONTROL:
            p = pos + _HEADER.size
            for _ in range(count):
                size, p = _varint(buf, p)
                q = p + 1  # the record's attributes
                _, q = _varint(buf, q)           # timestamp delta
                delta, q = _varint(buf, q)       # offset delta
                klen, q = _varint(buf, q)
                q += max(klen, 0)
                vlen, q = _varint(buf, q)
                value = bytes(buf[q:q + vlen]) if vlen >= 0 else None
                out.append(Record(base + delta, value, bool(attrs & _TXN)))
                p += size
        pos = end
    return out, pos != len(buf)


def partition_logs(tar_bytes: bytes, topic: str) -> Iterator[tuple[int, bytes]]:
    """(partition, segment bytes) of ``topic``'s directories in a tar of the data
    directory, segments in offset order (their names are their base offsets)."""
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        found = []
        for m in tar.getmembers():
            path = PurePosixPath(m.name)
            if m.isfile() and path.suffix == ".log" and len(path.parts) >= 2:
                d = path.parts[-2]
                name, _, part = d.rpartition("-")
                if name == topic and part.isdigit():
                    found.append((int(part), int(path.stem), m))
        for part, _, m in sorted(found, key=lambda x: (x[0], x[1])):
            f = tar.extractfile(m)
            yield part, f.read() if f else b""


def replica_lines(node: str, topic: str, tar_bytes: bytes) -> tuple[list[dict], dict]:
    """history/replica-<node>.jsonl's lines from a tar of the node's data directory, and
    what was read (segments, records, truncated segments, foreign values)."""
    lines, stats = [], {"segments": 0, "records": 0, "truncated": 0, "foreign": 0}
    for part, seg in partition_logs(tar_bytes, topic):
        recs, cut = records(seg)
        stats["segments"] += 1
        stats["truncated"] += cut
        for r in recs:
            msg_id, producer, seq = payload.decode(r.value or b"")
            if msg_id is None:
                stats["foreign"] += 1
                continue
            stats["records"] += 1
            lines.append({"msg_id": msg_id, "node": node, "source": f"{topic}:{part}", "offset": r.offset,
                          "producer": producer, "seq": seq})
    return lines, stats
