import json

import pytest

from harness.clients import payload
from harness.clients.base import RateLimiter


@pytest.mark.parametrize("msg_id,producer", [("p0-1", "p0"), ('we"ird\\id', "生产者"), ("", "x")])
def test_payload_round_trip(msg_id, producer):
    body = payload.encode(msg_id, producer, 42)
    assert json.loads(body) == {"msg_id": msg_id, "producer": producer, "seq": 42}
    assert payload.decode(body) == (msg_id, producer, 42)


def test_payload_size_is_exact():
    for size in (60, 100, 4096):
        assert len(payload.encode("p0-1", "p0", 1, size)) == size
    assert len(payload.encode("p0-1", "p0", 1, 5)) > 5  # never truncated


def test_foreign_bodies_decode_to_nothing():
    assert payload.decode(b"not json") == (None, None, None)
    assert payload.decode(b'{"other": 1}') == (None, None, None)


def test_rate_limiter_allows_no_catch_up_burst():
    r = RateLimiter(100, t0=0.0)
    assert r.budget(1.0, 0) == 100
    assert r.budget(1.0, 100) == 0
    # Stalled for 10 s: one second's worth at most, then the rate again.
    assert r.budget(11.0, 100) == 100
    assert r.budget(11.5, 200) == pytest.approx(50)
    assert RateLimiter(None, 0).budget(5, 10**9) == float("inf")
