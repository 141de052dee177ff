"""The Kafka producer worker survives a failure of its client library (confluent-kafka raised
SystemError under faults with idempotence on, killing every producer of an hour-long run): the
producer is replaced, what it still held is recorded with no known outcome, and the event (with
where it was raised) is kept for run.json. The broker is faked: this is about the worker."""
import json
import threading

from harness.brokers.kafka import clients as K
from harness.history import JsonlWriter, RunClock


class FlakyProducer:
    """Delivers every message at once, except that the ``fail_at``-th produce of the first
    instance raises as confluent-kafka did."""
    made = 0

    def __init__(self, conf):
        FlakyProducer.made += 1
        self.first, self.queue, self.n = FlakyProducer.made == 1, [], 0

    def produce(self, topic, value, key=None, on_delivery=None):
        self.n += 1
        if self.first and self.n == 5:
            self.queue.clear()  # the failed instance's queue never reports
            raise SystemError("_PyErr_SetObject: exception <class 'str'> is not a BaseException subclass")
        self.queue.append(on_delivery)

    def poll(self, timeout):
        if self.first and self.n >= 3:
            return 0  # the first instance holds its messages (in flight when it fails)
        while self.queue:
            self.queue.pop(0)(None, type("M", (), {"partition": lambda s: 0, "offset": lambda s: 7})())
        return 0

    def flush(self, timeout):
        self.poll(0)
        return 0

    def purge(self, blocking=False):
        pass

    def close(self):
        pass


def test_a_client_library_failure_replaces_the_producer_and_keeps_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(K, "Producer", FlakyProducer)
    FlakyProducer.made = 0
    w = K.KafkaProducerWorker("p0", "127.0.0.1:1", "t", JsonlWriter(tmp_path / "produce-p0.jsonl"), RunClock(),
                              threading.Event(), rate=None, max_messages=10)
    w.run()
    assert w.error is None and FlakyProducer.made == 2
    (event,) = w.events
    assert event["replaced"] and "SystemError" in event["error"] and "test_kafka_producer.py" in event["where"]
    records = [json.loads(x) for x in (tmp_path / "produce-p0.jsonl").read_text().splitlines()]
    final = {r["msg_id"]: r["outcome"] for r in records if r["outcome"] != "invoke"}
    # every message has its last word: the four the failed producer held unknown, the rest ok
    held = ["p0-0", "p0-1", "p0-2", "p0-3"]
    assert event["pending"] == 4 and len(final) == 10 and [m for m, o in final.items() if o == "info"] == held
    assert all(o == "ok" for m, o in final.items() if m not in held)
