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

A processor (consume-transform-produce, KIP-98 / KIP-447) reads the topic read_committed in
a consumer group and writes each producer's message back transformed (producer ``p0`` ->
``p0.x``, same seq: one output identity per input however often it is processed), in a
transaction that also commits its read offsets (send_offsets_to_transaction). Its reads
carry the transaction they were made in (``txn``) and its outputs the input they came
from (``from_msg``): checkers.cycles builds the transactions' dependency graph from them
and counts inputs processed twice or never. After an abort it rewinds to the group's
committed offsets, as the client's exactly-once example does.
"""
from __future__ import annotations

import threading
from typing import NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer

from harness.brokers.kafka.clients import dispose
from harness.brokers.kafka.roles import transactional_id
from harness.clients import payload
from harness.clients.base import RateLimiter, Worker
from harness.history import JsonlWriter, RunClock, consume_record, invoke_record, produce_record

ABORTED_ON_PURPOSE = "aborted on purpose"
OUTPUT = ".x"  # a processor's output is its input's producer with this suffix


class Out(NamedTuple):
    """One message a transaction writes: its identity, key and extra history fields."""
    msg_id: str
    producer: str
    seq: int
    key: str
    extra: dict


class KafkaTxnProducer(Worker):
    def __init__(self, name: str, bootstrap: str, topic: str, writer: JsonlWriter, clock: RunClock,
                 stop_all: threading.Event, *, rate: float | None = None, max_messages: int = 10_000,
                 txn_size: int = 5, abort_every: int = 0, transaction_timeout_ms: int = 10_000,
                 request_timeout_ms: int = 3_000, delivery_timeout_ms: int = 10_000, size: int = 0,
                 spread: bool = False):
        super().__init__(name, writer, clock, stop_all)
        self.topic, self.rate, self.max_messages, self.size = topic, rate, max_messages, size
        self.txn_size, self.abort_every, self.spread = txn_size, abort_every, spread
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
            n = min(self.txn_size, self.max_messages - seq)
            outs = [self._out(f"{self.name}-{s}", self.name, s, {}) for s in range(seq, seq + n)]
            seq += n
            p, _ = self._one(p, self._next_txn(), outs)
        dispose(p)

    def _next_txn(self) -> str:
        self.transactions += 1
        return f"{self.name}-t{self.transactions}"

    def _abort_now(self) -> bool:
        return bool(self.abort_every) and self.transactions % self.abort_every == 0

    def _out(self, msg_id: str, producer: str, seq: int, extra: dict) -> Out:
        return Out(msg_id, producer, seq, msg_id if self.spread else producer, extra)

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
                dispose(p)
                self.stop_me.wait(1.0)
        return None

    def _one(self, p: Producer, txn: str, outs: list[Out], offsets=None) -> tuple[Producer | None, str]:
        """One transaction: its messages sent (and, for a processor, its read offsets added
        by ``offsets(p)``), then committed or aborted; the producer to go on with (a fresh
        one after a fatal error, None if none could be made) and the transaction's outcome."""
        t_sent = {}
        try:
            p.begin_transaction()
            for o in outs:
                t = self.clock.now()
                self.writer.write(invoke_record(msg_id=o.msg_id, producer=o.producer, seq=o.seq, t_invoke=t,
                                                node=None, txn=txn, **o.extra))
                t_sent[o.msg_id] = t
                p.produce(self.topic, payload.encode(o.msg_id, o.producer, o.seq, self.size), key=o.key,
                          on_delivery=self._report(o.msg_id))
            if offsets is not None:
                offsets(p)
        except (KafkaException, BufferError) as e:
            return self._ended(p, txn, outs, t_sent, self.clock.now(), *self._abort(p, f"send: {e}"))
        t_commit = self.clock.now()
        if self._abort_now():
            return self._ended(p, txn, outs, t_sent, t_commit, *self._abort(p, ABORTED_ON_PURPOSE))
        try:
            p.commit_transaction(self.op_timeout)
            return self._ended(p, txn, outs, t_sent, t_commit, "ok", None, False)
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                return self._ended(p, txn, outs, t_sent, t_commit, *self._abort(p, f"commit: {err.str()}"))
            return self._ended(p, txn, outs, t_sent, t_commit, "info", f"commit: {err.str()}", False,
                               fatal=err.fatal() or not err.retriable())

    def _abort(self, p: Producer, why: str) -> tuple[str, str, bool]:
        try:
            p.abort_transaction(self.op_timeout)
            return "fail", why, True
        except KafkaException as e:  # the abort's own outcome unknown: so is the transaction's
            return "info", f"{why}; abort: {e}", False

    def _ended(self, p, txn, outs, t_sent, t_commit, outcome, error, aborted,
               fatal=False) -> tuple[Producer | None, str]:
        for o in outs:
            if o.msg_id not in t_sent:  # never handed to the client: not sent at all
                continue
            part_off = self.positions.pop(o.msg_id, None)
            position = ({"source": f"{self.topic}:{part_off[0]}", "offset": part_off[1]}
                        if outcome == "ok" and part_off else {})
            self.writer.write(produce_record(
                msg_id=o.msg_id, producer=o.producer, seq=o.seq, outcome=outcome, t_invoke=t_sent[o.msg_id],
                t_complete=self.clock.now(), node=None, error=error, txn=txn, t_commit=t_commit,
                **({"aborted": True} if aborted else {}), **o.extra, **position))
            self.stats.add(outcome, error)
        if fatal or outcome == "info":
            # a fatal error, or a commit whose outcome is unknown: the producer may not go on
            # with this transactional.id's state; a fresh one fences the old and recovers it
            dispose(p)
            return self._start(), outcome
        return p, outcome

    def _report(self, msg_id: str):
        def cb(err, msg):
            if err is None and msg is not None and msg.offset() >= 0:
                self.positions[msg_id] = (msg.partition(), msg.offset())
        return cb


class KafkaTxnProcessor(KafkaTxnProducer):
    """Consume-transform-produce: see the module's docstring. ``finish()`` (the drain) lets
    it run until it has read nothing for ``idle_s`` with no transaction open: ``caught_up``."""

    def __init__(self, name: str, bootstrap: str, topic: str, writer: JsonlWriter, clock: RunClock,
                 stop_all: threading.Event, *, group: str, reads: JsonlWriter, idle_s: float = 5.0, **kw):
        kw.pop("rate", None)
        kw.pop("max_messages", None)
        super().__init__(name, bootstrap, topic, writer, clock, stop_all, **kw)
        self.cconf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "enable.partition.eof": False,
                      "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000,
                      "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000}
        self.idle_s, self.reads = idle_s, reads  # its reads go to the consume log
        self.finishing = threading.Event()
        self.caught_up = threading.Event()

    def finish(self) -> None:
        self.finishing.set()

    def work(self) -> None:
        c = Consumer(self.cconf)
        p = self._start()
        try:
            c.subscribe([self.topic])
            last = self.clock.now()
            while not self.stop_all.is_set() and p is not None:
                msgs = [m for m in c.consume(num_messages=4 * self.txn_size, timeout=0.5) if not m.error()]
                if not msgs:
                    if self.finishing.is_set() and self.clock.now() - last >= self.idle_s:
                        self.caught_up.set()
                        return
                    continue
                last = self.clock.now()
                p = self._batch(c, p, msgs)
        finally:
            dispose(p)
            c.close()
            self.reads.close()

    def _batch(self, c: Consumer, p: Producer, msgs) -> Producer | None:
        """A poll's records: read in one transaction that writes the inputs' outputs and
        commits the offsets; a batch of outputs only is read outside any transaction (its
        offsets go with the next one's)."""
        decoded = [(m, *payload.decode(m.value())) for m in msgs]
        inputs = [d for d in decoded if d[1] is not None and d[2] and not d[2].endswith(OUTPUT)]
        txn = self._next_txn() if inputs else None
        for m, msg_id, producer, seq in decoded:
            if msg_id is None:
                continue
            self.reads.write(consume_record(
                msg_id=msg_id, consumer=self.name, t=self.clock.now(), redelivered=False,
                source=f"{self.topic}:{m.partition()}", offset=m.offset(), node=None, producer=producer,
                seq=seq, assigned=False, **({"txn": txn} if txn else {})))
            self.stats.add("delivered")
        if not inputs:
            return p
        outs = [self._out(f"{producer}{OUTPUT}-{seq}", f"{producer}{OUTPUT}", seq, {"from_msg": msg_id})
                for _, msg_id, producer, seq in inputs]

        def offsets(prod: Producer) -> None:
            prod.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(),
                                             self.op_timeout)
        p, outcome = self._one(p, txn, outs, offsets)
        if outcome != "ok":
            self._rewind(c)
        return p

    def _rewind(self, c: Consumer) -> None:
        """Back to the group's committed offsets: what an aborted (or unknown) transaction
        read is read again, by whichever processor owns the partition now."""
        try:
            for tp in c.committed(c.assignment(), timeout=10):
                if tp.offset < 0:
                    tp.offset = OFFSET_BEGINNING
                c.seek(tp)
        except KafkaException as e:
            self.stats.last_error = f"rewind: {e}"
