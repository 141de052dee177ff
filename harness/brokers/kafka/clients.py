"""Kafka workload clients (confluent-kafka): a producer and a draining reader.

Outcomes from the delivery report: `ok` no error; `fail` an error that says
the write was not appended (NotEnoughReplicas, too large, ...); `info`
anything else (timeouts, NotEnoughReplicasAfterAppend: appended but not
replicated, connection loss): the write may or may not be in the log.
Each message's invoke record is written before it is handed to the client
(history version 2, docs/history.md).
"""
from __future__ import annotations

import threading

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from harness.clients import payload
from harness.clients.base import RateLimiter, Worker, frames
from harness.history import JsonlWriter, RunClock, consume_record, invoke_record, produce_record
from harness.util import wait_until

MAX_REPLACEMENTS = 50  # a producer that keeps failing is a crash after all (client_errors)


def dispose(p: Producer | None) -> None:
    """Let a producer go without waiting on it: its queue purged, closed in the background
    (a client left to the garbage collector keeps reconnecting after the run's cluster is
    gone; close() aborts an open transaction, which may wait on an unreachable broker)."""
    if p is None:
        return

    def close():
        try:
            p.purge(blocking=False)
            p.close()
        except (KafkaException, RuntimeError, SystemError):
            pass
    threading.Thread(target=close, name="producer-close", daemon=True).start()


DEFINITE = {KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.MSG_SIZE_TOO_LARGE,
            KafkaError.INVALID_REQUIRED_ACKS, KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD}


def outcome_of(err: KafkaError | None) -> str:
    if err is None:
        return "ok"
    return "fail" if err.code() in DEFINITE else "info"


class KafkaProducerWorker(Worker):
    def __init__(self, name: str, bootstrap: str, topic: str, writer: JsonlWriter, clock: RunClock,
                 stop_all: threading.Event, *, rate: float | None = None, max_messages: int = 10_000,
                 acks: str = "all", idempotence: bool = False, retries: int = 2147483647,
                 max_in_flight: int = 5, delivery_timeout_ms: int = 10_000, request_timeout_ms: int = 3_000,
                 linger_ms: int = 1, size: int = 0, extra: dict | None = None):
        super().__init__(name, writer, clock, stop_all)
        self.topic, self.rate, self.max_messages, self.size = topic, rate, max_messages, size
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.conf = {
            "bootstrap.servers": bootstrap, "client.id": name, "acks": str(acks),
            "enable.idempotence": idempotence, "retries": retries,
            "max.in.flight.requests.per.connection": max_in_flight,
            "delivery.timeout.ms": delivery_timeout_ms, "request.timeout.ms": request_timeout_ms,
            "linger.ms": linger_ms, "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 1000, "socket.connection.setup.timeout.ms": 3000,
            **(extra or {})}
        self.pending: dict[str, tuple[int, float]] = {}

    def work(self) -> None:
        p = Producer(self.conf)
        limiter = RateLimiter(self.rate, self.clock.now())
        seq, invoked = 0, -1
        while not self.stopping() and seq < self.max_messages:
            budget = min(limiter.budget(self.clock.now(), seq), self.max_messages - seq, 1000)
            try:
                for _ in range(int(max(0, budget))):
                    msg_id = f"{self.name}-{seq}"
                    t = self.clock.now()
                    if invoked != seq:  # once per message, also when a full local queue makes us retry it
                        self.writer.write(invoke_record(msg_id=msg_id, producer=self.name, seq=seq, t_invoke=t,
                                                        node=None))
                        invoked = seq
                    try:
                        p.produce(self.topic, payload.encode(msg_id, self.name, seq, self.size), key=self.name,
                                  on_delivery=self._report(msg_id, seq, t))
                    except BufferError:
                        break  # local queue full: let poll() drain it, retry this seq
                    self.pending[msg_id] = (seq, t)
                    seq += 1
                p.poll(0.005)
            except (SystemError, KafkaException) as e:  # the client library failed, not the broker
                p = self._replace(p, e)
        if invoked == seq:  # written ahead, then the local queue was full and we stopped: never sent
            self._write(f"{self.name}-{seq}", seq, self.clock.now(), "fail",
                        "not sent: stopped with the local queue full",
                        None)
        # Everything still queued gets its definitive report within the delivery timeout.
        p.flush(self.delivery_timeout_s + 5)
        for msg_id, (s, t) in list(self.pending.items()):
            self._write(msg_id, s, t, "info", "no delivery report before shutdown", None)

    def _replace(self, p: Producer, e: BaseException) -> Producer:
        """A producer whose library raised (confluent-kafka's SystemError under faults with
        idempotence, a fatal error) is let go and a new one (a new producer id) takes over, as
        an application would; what the old one still held has no known outcome (info). The
        event, with where it was raised, goes to run.json (client_events)."""
        if len(self.events) >= MAX_REPLACEMENTS:
            raise e
        self.events.append({"t": round(self.clock.now(), 3), "error": repr(e)[:300], "where": frames(e),
                            "pending": len(self.pending), "replaced": True})
        for msg_id, (s, t) in list(self.pending.items()):
            self._write(msg_id, s, t, "info", f"producer replaced after a client error: {type(e).__name__}", None)
        self.pending.clear()
        dispose(p)
        return Producer(self.conf)

    def _report(self, msg_id: str, seq: int, t: float):
        def cb(err, msg):
            self.pending.pop(msg_id, None)
            partition = msg.partition() if msg is not None else None
            # where the write went (history version 3): an acknowledged write's offset; none
            # for acks=0 (the client reports -1) or an error
            offset = msg.offset() if err is None and msg is not None and msg.offset() >= 0 else None
            self._write(msg_id, seq, t, outcome_of(err), None if err is None else err.str(), partition, offset)
        return cb

    def _write(self, msg_id, seq, t, outcome, error, partition, offset=None) -> None:
        position = {} if offset is None else {"source": f"{self.topic}:{partition}", "offset": offset}
        self.writer.write(produce_record(msg_id=msg_id, producer=self.name, seq=seq, outcome=outcome,
                                         t_invoke=t, t_complete=self.clock.now(), node=None, error=error,
                                         partition=partition, **position))
        self.stats.add(outcome, error)


class KafkaReader(Worker):
    """Reads every partition of the topic from the beginning to its end offset (the high
    watermark; for a read_committed reader, the last stable offset), read again once
    reached: complete when it has not moved. A reader that ``follow``s reads during the
    load too, and starts towards the end once ``finish()`` is called (the drain)."""

    def __init__(self, name: str, bootstrap: str, topic: str, writer: JsonlWriter, clock: RunClock,
                 stop_all: threading.Event, *, timeout_s: float = 120.0, isolation: str = "read_uncommitted",
                 follow: bool = False, remember: bool = False):
        super().__init__(name, writer, clock, stop_all)
        self.bootstrap, self.topic, self.timeout_s, self.isolation = bootstrap, topic, timeout_s, isolation
        # the ids read, kept when asked (the drain compares a live reader's with the final log's)
        self.ids: set[str] | None = set() if remember else None
        self.last_delivery = clock.now()
        self.complete = False
        self.following = threading.Event()
        if follow:
            self.following.set()

    def finish(self, timeout_s: float) -> None:
        """Read on to the end within ``timeout_s`` and stop there (a following reader's drain)."""
        self.timeout_s = timeout_s
        self.following.clear()

    def work(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"mqchaos-{self.name}",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": self.isolation, "enable.partition.eof": False})
        try:
            parts = self._partitions(c)
            c.assign([TopicPartition(self.topic, p, 0) for p in parts])
            pos = {p: 0 for p in parts}
            while self.following.is_set() and not self.stop_all.is_set():  # during the load
                self._take(c.poll(0.5), pos)
            deadline = self.clock.now() + self.timeout_s

            def end_offsets() -> dict[int, int]:
                # Right after a heal a partition may still be without a leader (NOT_LEADER):
                # asked again, within the drain's own time, rather than giving the drain up.
                return wait_until(lambda: {p: c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                                           for p in parts},
                                  max(1.0, deadline - self.clock.now()), f"the end offsets of {self.topic}", 1.0)
            ends = end_offsets()
            while not self.stop_all.is_set() and self.clock.now() < deadline:
                at_end = all(pos[p] >= ends[p] for p in parts)
                msg = c.poll(0.5)
                if msg is None and not at_end:
                    # past what no message holds (a transaction's commit marker, an aborted
                    # transaction's records, which read_committed skips): the consumer's position
                    for tp in c.position([TopicPartition(self.topic, p) for p in parts]):
                        pos[tp.partition] = max(pos[tp.partition], tp.offset)
                    at_end = all(pos[p] >= ends[p] for p in parts)
                if msg is None and at_end:
                    # nothing more for a poll's time: done if the end offsets have not moved
                    # (a high watermark still rising as a follower catches up reads on)
                    fresh = end_offsets()
                    if fresh == ends:
                        self.complete = True
                        break
                    ends = fresh
                    continue
                self._take(msg, pos)
        finally:
            c.close()

    def _partitions(self, c: Consumer) -> list[int]:
        """The topic's partitions, once its metadata names them without error: just after
        the topic's creation a KRaft broker may answer without them (a reader assigned none
        would read nothing, and its drain would never end)."""
        def named() -> list[int] | None:
            t = c.list_topics(self.topic, timeout=10).topics.get(self.topic)
            return sorted(t.partitions) if t is not None and getattr(t, "error", None) is None and t.partitions \
                else None
        return wait_until(named, self.timeout_s, f"the partitions of {self.topic}", 1.0)

    def _take(self, msg, pos: dict[int, int]) -> None:
        if msg is None or msg.error():
            return
        self.last_delivery = self.clock.now()
        pos[msg.partition()] = msg.offset() + 1
        msg_id, producer, seq = payload.decode(msg.value())
        if self.ids is not None:
            self.ids.add(msg_id)
        self.writer.write(consume_record(
            msg_id=msg_id, consumer=self.name, t=self.last_delivery, redelivered=False,
            source=f"{self.topic}:{msg.partition()}", offset=msg.offset(), node=None,
            producer=producer, seq=seq))
        self.stats.add("delivered")
