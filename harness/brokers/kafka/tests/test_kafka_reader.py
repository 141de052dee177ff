"""The Kafka drain right after a heal: a partition without a leader yet (NOT_LEADER) is asked
again within the drain's time, not taken as the end of the drain (CI saw this after a power
cut of every broker); a high watermark that rises once the first end is reached (a follower
catching up) is read to its new end."""
from __future__ import annotations

import threading
from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException

from harness.brokers.kafka import clients
from harness.clients import payload
from harness.history import JsonlWriter, RunClock
from harness.store import read_jsonl


class _Msg:
    def __init__(self, offset: int, body: bytes) -> None:
        self._o, self._b = offset, body

    def error(self):
        return None

    def partition(self):
        return 0

    def offset(self):
        return self._o

    def value(self):
        return self._b


class _Consumer:
    not_leader = 2  # the first two asks find no leader
    visible = [2]   # the high watermark each ask after those returns (the last one then on)

    def __init__(self, conf):
        self.msgs = [_Msg(i, payload.encode(f"p0-{i}", "p0", i)) for i in range(max(_Consumer.visible))]
        self.asks = 0

    def list_topics(self, topic, timeout):
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None})})

    def assign(self, parts):
        pass

    def get_watermark_offsets(self, tp, timeout):
        if _Consumer.not_leader:
            _Consumer.not_leader -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
        self.asks += 1
        return 0, _Consumer.visible[min(self.asks, len(_Consumer.visible)) - 1]

    def poll(self, timeout):
        hw = _Consumer.visible[min(max(self.asks, 1), len(_Consumer.visible)) - 1]
        return self.msgs.pop(0) if self.msgs and self.msgs[0].offset() < hw else None

    def close(self):
        pass


def _drain(tmp_path, monkeypatch):
    monkeypatch.setattr(clients, "Consumer", _Consumer)
    out = tmp_path / "consume-reader.jsonl"
    with JsonlWriter(out) as w:
        r = clients.KafkaReader("reader", "127.0.0.1:1", "t", w, RunClock(), threading.Event(), timeout_s=30)
        r.work()
    return r, [x["msg_id"] for x in read_jsonl(out)]


def test_the_drain_waits_for_a_leader(tmp_path, monkeypatch):
    _Consumer.not_leader, _Consumer.visible = 2, [2]
    r, got = _drain(tmp_path, monkeypatch)
    assert r.complete and _Consumer.not_leader == 0
    assert got == ["p0-0", "p0-1"]


def test_the_drain_reads_on_while_the_high_watermark_rises(tmp_path, monkeypatch):
    _Consumer.not_leader, _Consumer.visible = 0, [2, 5, 5]
    r, got = _drain(tmp_path, monkeypatch)
    assert r.complete
    assert got == [f"p0-{i}" for i in range(5)]
