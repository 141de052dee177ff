"""Message bodies carry their own identity, so a delivery names its message."""
from __future__ import annotations

import json


def encode(msg_id: str, producer: str, seq: int, size: int = 0) -> bytes:
    body = {"msg_id": msg_id, "producer": producer, "seq": seq}
    raw = json.dumps(body, separators=(",", ":"))
    if size > len(raw) + 10:
        body["pad"] = "x" * (size - len(raw) - 10)
        raw = json.dumps(body, separators=(",", ":"))
    return raw.encode()


def decode(body: bytes) -> tuple[str | None, str | None, int | None]:
    """(msg_id, producer, seq) of a harness message; Nones for a foreign one."""
    try:
        d = json.loads(body)
        return str(d["msg_id"]), d.get("producer"), d.get("seq")
    except (ValueError, KeyError, TypeError):
        return None, None, None
