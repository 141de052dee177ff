"""Message bodies carry their own identity, so a delivery names its message."""
from __future__ import annotations

import json
from json.encoder import encode_basestring as _q  # the C string encoder: this is the hot path


def encode(msg_id: str, producer: str, seq: int, size: int = 0) -> bytes:
    raw = '{"msg_id":%s,"producer":%s,"seq":%d}' % (_q(msg_id), _q(producer), seq)
    if size > len(raw) + 9:  # exactly `size` bytes: ',"pad":"' + x * k + '"}' adds k + 9
        raw = raw[:-1] + ',"pad":"%s"}' % ("x" * (size - len(raw) - 9))
    return raw.encode()


def decode(body: bytes) -> tuple[str | None, str | None, int | None]:
    """(msg_id, producer, seq) of a harness message; Nones for a foreign one."""
    try:
        d = json.loads(body)
        return str(d["msg_id"]), d.get("producer"), d.get("seq")
    except (ValueError, KeyError, TypeError):
        return None, None, None
