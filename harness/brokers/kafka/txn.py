"""A transactional Kafka producer (KIP-98: transactional.id, init / begin / send / commit or
abort), recording each message as the outcome of its transaction.

A message is sent inside a transaction and its delivery report only says where it was
appended; whether it exists for a read_committed reader is the transaction's outcome:
  ok    commit_transaction returned: the whole transaction is committed
  fail  the transaction was aborted (on purpose, every ``abort_every``-th, or because the
        commit failed with an error that requires an abort and the abort succeeded):
        ``aborted: true``, a read_committed reader must never see it
  info  the commit's outcome is unknown (a timeout, a fatal error, the producer fenced)
Every record of a message carries its transaction (``txn``); each completion carries when
the commit (or abort) was asked for (``t_commit``), so a read before it is an uncommitted
read (checkers.txn). Invoke records are written before each send (history version 2).
"""
from __future__ import annotations

import threading

from confluent_kafka import KafkaException, Producer

from harness.brokers.kafka.roles import transactional_id
from harness.clients import payload
from harness.clients.base import RateLimiter, Worker
from harness.history import JsonlWriter, RunClock, invoke_record, produce_record

ABORTED_ON_PURPOSE = "aborted on purpose"


class KafkaTxnProducer(Worker):
    def __init__(self, name: str, bootstrap: str, topic: str, writer: JsonlWriter, clock: RunClock,
                 stop_all: threading.Event, *, rate: float | None = None, max_messages: int = 10_000,
                 txn_size: int = 5, abort_every: int = 0, transaction_timeout_ms: int = 10_000,
                 request_timeout_ms: int = 3_000, delivery_timeout_ms: int = 10_000, size: int = 0):
        super().__init__(name, writer, clock, stop_all)
        self.topic, self.rate, self.max_messages, self.size = topic, rate, max_messages, size
        self.txn_size, self.abort_every = txn_size, abort_every
        self.op_timeout = max(delivery_timeout_ms, transaction_timeout_ms) / 1000 + 5
        self.conf = {
            "bootstrap.servers": bootstrap, "client.id": name, "transactional.id": transactional_id(name),
            "enable.idempotence": True, "acks": "all", "transaction.timeout.ms": transaction_timeout_ms,
            "delivery.timeout.ms": delivery_timeout_ms, "request.timeout.ms": request_timeout_ms,
            "linger.ms": 1, "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000,
            "socket.connection.setup.timeout.ms": 3000}
        self.positions: dict[str, tuple[int, int]] = {}  # msg_id -> (partition, offset) from its report
        self.transactions = 0

    def work(self) -> None:
        p = self._start()
        limiter = RateLimiter(self.rate, self.clock.now())
        seq = 0
        while not self.stopping() and seq < self.max_messages and p is not None:
            if limiter.budget(self.clock.now(), seq) < self.txn_size:
                self.stop_me.wait(0.005)  # paced by the rate, a transaction at a time
                continue
            self.transactions += 1
            txn = f"{self.name}-t{self.transactions}"
            n = min(self.txn_size, self.max_messages - seq)
            ids = [(f"{self.name}-{s}", s) for s in range(seq, seq + n)]
            seq += n
            p = self._one(p, txn, ids, abort=bool(self.abort_every) and self.transactions % self.abort_every == 0)

    def _start(self) -> Producer | None:
        """A producer with its transactional id initialised (fencing any earlier one and
        finishing its open transaction); asked again each second while the coordinator
        moves or cannot be reached, until the run stops (then None)."""
        while not self.stopping():
            p = Producer(self.conf)
            try:
                p.init_transactions(self.op_timeout)
                return p
            except KafkaException as e:
                self.stats.last_error = f"init_transactions: {e}"
                self.stop_me.wait(1.0)
        return None

    def _one(self, p: Producer, txn: str, ids: list[tuple[str, int]], abort: bool) -> Producer | None:
        """One transaction: its messages sent, then committed or aborted; the producer to go
        on with (a fresh one after a fatal error, None if none could be made)."""
        t_sent = {}
        try:
            p.begin_transaction()
            for msg_id, s in ids:
                t = self.clock.now()
                self.writer.write(invoke_record(msg_id=msg_id, producer=self.name, seq=s, t_invoke=t, node=None,
                                                txn=txn))
                t_sent[msg_id] = t
                p.produce(self.topic, payload.encode(msg_id, self.name, s, self.size), key=self.name,
                          on_delivery=self._report(msg_id))
        except (KafkaException, BufferError) as e:
            return self._ended(p, txn, ids, t_sent, self.clock.now(), *self._abort(p, f"send: {e}"))
        t_commit = self.clock.now()
        if abort:
            return self._ended(p, txn, ids, t_sent, t_commit, *self._abort(p, ABORTED_ON_PURPOSE))
        try:
            p.commit_transaction(self.op_timeout)
            return self._ended(p, txn, ids, t_sent, t_commit, "ok", None, False)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                return self._ended(p, txn, ids, t_sent, t_commit, *self._abort(p, f"commit: {err.str()}"))
            return self._ended(p, txn, ids, t_sent, t_commit, "info", f"commit: {err.str()}", False,
                               fatal=err.fatal() or not err.retriable())

    def _abort(self, p: Producer, why: str) -> tuple[str, str, bool]:
        try:
            p.abort_transaction(self.op_timeout)
            return "fail", why, True
        except KafkaException as e:  # the abort's own outcome unknown: so is the transaction's
            return "info", f"{why}; abort: {e}", False

    def _ended(self, p, txn, ids, t_sent, t_commit, outcome, error, aborted, fatal=False) -> Producer | None:
        for msg_id, s in ids:
            if msg_id not in t_sent:  # never handed to the client: not sent at all
                continue
            part_off = self.positions.pop(msg_id, None)
            position = ({"source": f"{self.topic}:{part_off[0]}", "offset": part_off[1]}
                        if outcome == "ok" and part_off else {})
            self.writer.write(produce_record(
                msg_id=msg_id, producer=self.name, seq=s, outcome=outcome, t_invoke=t_sent[msg_id],
                t_complete=self.clock.now(), node=None, error=error, txn=txn, t_commit=t_commit,
                **({"aborted": True} if aborted else {}), **position))
            self.stats.add(outcome, error)
        if fatal or outcome == "info":
            # a fatal error, or a commit whose outcome is unknown: the producer may not go on
            # with this transactional.id's state; a fresh one fences the old and recovers it
            return self._start()
        return p

    def _report(self, msg_id: str):
        def cb(err, msg):
            if err is None and msg is not None and msg.offset() >= 0:
                self.positions[msg_id] = (msg.partition(), msg.offset())
        return cb
