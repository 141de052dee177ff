"""RabbitMQ workload clients (pika): a confirming publisher and a consumer.

Both hold the list of all nodes and fail over to the next on connection
errors, as the sources recommend. Outcomes: `ok` basic.ack; `fail` basic.nack,
unroutable (mandatory), or no connection to publish on; `info` the
connection or channel closed, or no confirm within `confirm_timeout`.
The publisher writes each message's invoke record before it sends it; a confirm
that arrives after `confirm_timeout` is written as a later completion (history
version 2, docs/history.md).

Poison messages (every Nth of a producer, marked in a header and in the produce
records) are rejected with requeue by the consumers until their delivery limit
drops or dead-letters them, or a consumer gives up and takes one. A stream's
consumer reads from an offset it keeps itself (AMQP 0.9.1 has no server-side
offset store) and resumes after it on every new session.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import pika
from pika.adapters.utils.connection_workflow import AMQPConnectorException
from pika.exceptions import AMQPError

from harness.clients import payload
from harness.clients.base import RateLimiter, Worker
from harness.history import JsonlWriter, RunClock, consume_record, invoke_record, produce_record

logging.getLogger("pika").setLevel(logging.CRITICAL)  # failover noise is expected, recorded in the history


def is_poison(seq: int, every: int | None) -> bool:
    """Is a producer's message ``seq`` poison (every ``every``-th: seq every-1, 2*every-1...)?"""
    return bool(every) and (seq + 1) % every == 0


def poison_action(seen: int, give_up_after: int) -> str:
    """What a consumer does with the ``seen``-th delivery to it of a poison message:
    ``reject`` (requeue) until the ``give_up_after``-th, which it takes (``give_up``): the
    number of rejects is bounded even where the broker never drops the message."""
    return "give_up" if seen >= give_up_after else "reject"


def resume_offset(last: int | None) -> int | str:
    """Where a stream consumer's session starts: just after the last offset it recorded, or at
    the stream's first message in its first session (the server's default is "next")."""
    return "first" if last is None else last + 1


@dataclass(frozen=True)
class Endpoint:
    node: str
    host: str
    port: int


def params(ep: Endpoint, heartbeat: int = 5, timeout: float = 3.0) -> pika.ConnectionParameters:
    return pika.ConnectionParameters(
        host=ep.host, port=ep.port, credentials=pika.PlainCredentials("guest", "guest"),
        heartbeat=heartbeat, socket_timeout=timeout, stack_timeout=2 * timeout,
        blocked_connection_timeout=30, connection_attempts=1, retry_delay=0)


UNCONFIRMED = "published without confirms"  # a publish's error text when none was asked


class RabbitPublisher(Worker):
    """Publishes `max_messages` at `rate`/s with a bounded window of unconfirmed messages."""

    def __init__(self, name: str, endpoints: list[Endpoint], queue: str, writer: JsonlWriter,
                 clock: RunClock, stop_all: threading.Event, *, rate: float | None = None,
                 max_messages: int = 10_000, window: int = 100, confirm_timeout: float = 10.0,
                 persistent: bool = True, size: int = 0, first: int = 0, backoff: float = 0.5,
                 poison_every: int | None = None, confirms: bool = True, exchange: str = "",
                 transactions: int = 0):
        super().__init__(name, writer, clock, stop_all)
        # without confirms (seed 000's "Без них есть вероятность потери сообщений") a publish
        # has no known outcome: recorded info once basic.publish returns
        self.confirms, self.exchange = confirms, exchange
        # AMQP transactions (seed 001: Tx.CommitOk only once every mirror has the messages):
        # ``transactions`` messages per tx.commit, its CommitOk their confirmation; a channel
        # in tx mode refuses confirm.select, so one replaces the other
        self.transactions = transactions
        self.poison_every = poison_every
        self.endpoints, self.queue = endpoints, queue
        self.rate, self.max_messages, self.window = rate, max_messages, window
        self.confirm_timeout, self.persistent, self.size = confirm_timeout, persistent, size
        self.first, self.backoff = first, backoff
        self.seq = 0
        self.limiter: RateLimiter | None = None
        self.node: str | None = None
        self.ch = None
        # an application's redeploy against other nodes (move_to): the endpoints it goes on with
        self._moving: list[Endpoint] | None = None
        self.moves: list[dict] = []

    # -- the failover loop ------------------------------------------------------------
    def work(self) -> None:
        self.limiter = RateLimiter(self.rate, self.clock.now())
        i = self.first
        while not self.done():
            if self._moving is not None:  # the old session closed: go on with the new nodes
                self.endpoints, self._moving, i = self._moving, None, 0
                self.moves[-1]["t_closed"] = self.clock.now()
            ep = self.endpoints[i % len(self.endpoints)]
            self._session(ep)
            i += 1
            if not self.done() and self._moving is None:
                self.stop_all.wait(self.backoff)  # interruptible pause between reconnects

    def move_to(self, nodes: list[str]) -> None:
        """Go on publishing to ``nodes`` alone, as an application redeployed against them
        would (a blue-green switch): publish nothing more here, let the window's confirms come
        (each waits ``confirm_timeout`` at most), close, connect there. Called from another
        thread: the session's next tick acts."""
        eps = [e for e in self.endpoints if e.node in nodes]
        if not eps:
            raise ValueError(f"{self.name} has no endpoint on {nodes} (it knows "
                             f"{[e.node for e in self.endpoints]})")
        self.moves.append({"to": sorted(nodes), "t_asked": self.clock.now(), "from": self.node})
        self._moving = eps

    def serving_on(self) -> str | None:
        """The node of the session publishing now (None between sessions or while moving)."""
        return self.node if self._moving is None and self.ch is not None and self.ch.is_open else None

    def done(self) -> bool:
        return self.stopping() or self.seq >= self.max_messages

    def _marks(self, seq: int) -> dict:
        """What every record of message ``seq`` says beside the basics."""
        return {"poison": True} if is_poison(seq, self.poison_every) else {}

    def _record(self, msg_id: str, seq: int, outcome: str, t_invoke: float, error: str | None = None):
        self.writer.write(produce_record(msg_id=msg_id, producer=self.name, seq=seq, outcome=outcome,
                                         t_invoke=t_invoke, t_complete=self.clock.now(), node=self.node,
                                         error=error, **self._marks(seq)))
        self.stats.add(outcome, error)

    def _late(self, msg_id: str, seq: int, t_invoke: float, outcome: str) -> None:
        """A confirm (or nack) for a message already recorded as timed out."""
        late = round(self.clock.now() - t_invoke, 3)
        self.writer.write(produce_record(msg_id=msg_id, producer=self.name, seq=seq, outcome=outcome,
                                         t_invoke=t_invoke, t_complete=self.clock.now(), node=self.node,
                                         error=f"late {'nack' if outcome == 'fail' else 'confirm'} after {late}s",
                                         late=True, **self._marks(seq)))
        if outcome == "ok":  # the checker takes the best word (ok > info > fail): a late nack stays info
            self.stats.revise("info", outcome)

    def _next(self) -> tuple[str, int]:
        seq = self.seq
        self.seq += 1
        return f"{self.name}-{seq}", seq

    # -- one connection ---------------------------------------------------------------
    def _session(self, ep: Endpoint) -> None:
        self._begin(ep)
        pika.SelectConnection(params(ep), on_open_callback=self._on_open,
                              on_open_error_callback=self._on_open_error,
                              on_close_callback=self._on_closed).ioloop.start()

    def _begin(self, ep: Endpoint) -> None:
        """A connection's state, fresh: delivery tags are the channel's."""
        # timed_out: messages recorded as info whose confirm may still come on this channel
        self.node, self.inflight, self.timed_out, self.returned, self.tag = ep.node, {}, {}, set(), 0
        self.committing: list[int] | None = None  # the delivery tags a tx.commit awaits
        self.conn = self.ch = None
        self.t_connect = self.clock.now()

    def _on_open_error(self, conn, err) -> None:
        # No broker to publish to: one definite failure, so the outage is in the history.
        msg_id, seq = self._next()
        self._record(msg_id, seq, "fail", self.t_connect, f"connect: {err!r}"[:300])
        conn.ioloop.stop()

    def _on_open(self, conn) -> None:
        self.conn = conn
        conn.channel(on_open_callback=self._on_channel)

    def _on_channel(self, ch) -> None:
        self.ch = ch
        ch.add_on_close_callback(self._on_channel_closed)
        ch.add_on_return_callback(self._on_return)
        if self.transactions:
            ch.tx_select(callback=lambda _frame: self._tick())
        elif self.confirms:
            ch.confirm_delivery(self._on_confirm, callback=lambda _frame: self._tick())
        else:
            self._tick()

    def _on_channel_closed(self, ch, reason) -> None:
        self._fail_inflight(f"channel closed: {reason!r}"[:300])
        if self.conn and self.conn.is_open:
            self.conn.close()

    def _on_closed(self, conn, reason) -> None:
        self._fail_inflight(f"connection closed: {reason!r}"[:300])
        conn.ioloop.stop()

    def _fail_inflight(self, error: str) -> None:
        for msg_id, seq, t in self.inflight.values():
            self._record(msg_id, seq, "info", t, error)
        self.inflight.clear()
        self.timed_out.clear()  # delivery tags are the channel's: no confirm can come now

    def _on_return(self, ch, method, props, body) -> None:
        self.returned.add(props.message_id)

    def _on_confirm(self, frame) -> None:
        m = frame.method
        tags = [t for t in self.inflight if t <= m.delivery_tag] if m.multiple else [m.delivery_tag]
        nack = isinstance(m, pika.spec.Basic.Nack)
        if m.multiple:
            tags += [t for t in self.timed_out if t <= m.delivery_tag]
        for tag in tags:
            self._settle(tag, nack)

    def _on_commit(self, _frame) -> None:
        """Tx.CommitOk: every message of the transaction is confirmed at once."""
        for tag in self.committing or []:
            self._settle(tag, False)
        self.committing = None  # the next _tick (every 5 ms) begins the next transaction

    def _settle(self, tag: int, nack: bool) -> None:
        """The broker's word on one delivery tag: a confirm, a nack or a commit."""
        if tag in self.timed_out:  # the broker's word came after we gave up: it still counts
            msg_id, seq, t = self.timed_out.pop(tag)
            unroutable = msg_id in self.returned  # basic.return comes before the ack
            self.returned.discard(msg_id)
            self._late(msg_id, seq, t, "fail" if nack or unroutable else "ok")
            return
        if tag not in self.inflight:
            return
        msg_id, seq, t = self.inflight.pop(tag)
        if nack:
            self._record(msg_id, seq, "fail", t, "nack")
        elif msg_id in self.returned:
            self.returned.discard(msg_id)
            self._record(msg_id, seq, "fail", t, "unroutable")
        else:
            self._record(msg_id, seq, "ok", t)

    def _tick(self) -> None:
        if not (self.ch and self.ch.is_open):
            return
        now = self.clock.now()
        for tag, (msg_id, seq, t) in list(self.inflight.items()):
            if now - t > self.confirm_timeout:
                del self.inflight[tag]
                self.timed_out[tag] = (msg_id, seq, t)
                self._record(msg_id, seq, "info", t, "confirm timeout")
        if self.committing is not None:
            pass  # one transaction at a time: the ticks go on, publishing nothing until its CommitOk
        elif self.done() or self._moving is not None:
            if not self.inflight:
                self.conn.close()
                return
        else:
            budget = min(self.window - len(self.inflight), self.limiter.budget(now, self.seq),
                         self.max_messages - self.seq)
            if self.transactions:
                budget = min(budget, self.transactions)
            for _ in range(int(max(0, budget))):
                msg_id, seq = self._next()
                marks = self._marks(seq)
                props = pika.BasicProperties(message_id=msg_id, delivery_mode=2 if self.persistent else 1,
                                             headers={"producer": self.name, "seq": seq, **marks})
                t = self.clock.now()
                self.writer.write(invoke_record(msg_id=msg_id, producer=self.name, seq=seq, t_invoke=t,
                                                node=self.node, **marks))
                try:
                    self.ch.basic_publish(self.exchange, self.queue, payload.encode(msg_id, self.name, seq, self.size),
                                          props, mandatory=True)
                except AMQPError as e:
                    self._record(msg_id, seq, "fail", t, f"publish: {e!r}"[:300])
                    return
                if not self.confirms:
                    self._record(msg_id, seq, "info", t, UNCONFIRMED)
                    continue
                self.tag += 1
                self.inflight[self.tag] = (msg_id, seq, t)
            if self.transactions and self.inflight:
                self.committing = list(self.inflight)
                self.ch.tx_commit(callback=self._on_commit)
        self.conn.ioloop.call_later(0.005, self._tick)


class _Crash(Exception):
    """A simulated consumer crash: drop everything not yet processed."""


class RabbitConsumer(Worker):
    """Consumes with manual acks (or auto-ack), re-consuming after a broker cancel.

    `crash()` simulates the consumer process dying mid-delivery: deliveries
    buffered but not yet processed are dropped, unacked ones go back to the
    queue (redelivered), auto-acked ones are gone. It then reconnects, as a
    supervisor would restart it. `delay` (s per message) builds that buffer.

    `stream`: the queue is a stream; each session consumes from `resume_offset`
    (x-stream-offset) and acks only for flow control. `give_up_after`: poison
    messages are rejected with requeue (recorded `rejected`) until `poison_action`
    says take them (`gave_up`). `marks`: added to every record (a dead-letter
    queue's reader: `dead_lettered`).
    """

    def __init__(self, name: str, endpoints: list[Endpoint], queue: str, writer: JsonlWriter,
                 clock: RunClock, stop_all: threading.Event, *, prefetch: int = 50,
                 auto_ack: bool = False, cancel_on_failover: bool = True, first: int = 0,
                 backoff: float = 0.5, arguments: dict | None = None, delay: float = 0.0,
                 stream: bool = False, give_up_after: int | None = None, marks: dict | None = None,
                 nack: bool = False):
        super().__init__(name, writer, clock, stop_all)
        self.stream, self.give_up_after, self.marks = stream, give_up_after, dict(marks or {})
        self.nack = nack  # hand poison back with basic.nack, not basic.reject (4.3 counts only the latter)
        self.last_offset: int | None = None    # a stream's: the highest offset recorded
        self.poison_seen: dict[str, int] = {}  # poison msg_id -> its deliveries to this consumer
        self.delay = delay
        self._crash = threading.Event()
        self.crashes = 0
        self.endpoints, self.queue, self.prefetch, self.auto_ack = endpoints, queue, prefetch, auto_ack
        self.cancel_on_failover, self.first, self.backoff = cancel_on_failover, first, backoff
        self.arguments = arguments or {}
        self.last_delivery = clock.now()
        self.node: str | None = None
        self.cancels = 0

    def work(self) -> None:
        i = self.first
        while not self.stopping():
            ep = self.endpoints[i % len(self.endpoints)]
            try:
                self._session(ep)
            except _Crash:
                self.crashes += 1
                continue  # restarted at once, on the same node
            # AMQPConnectorException: pika's connection workflow lets a handshake that timed out
            # out as itself (AMQPConnectorStackTimeout), not as an AMQPError: seen killing a
            # stream's only consumer mid-exploration, leaving its drain unfinished
            except (AMQPError, AMQPConnectorException, OSError) as e:
                self.stats.last_error = f"{ep.node}: {e!r}"[:300]
            i += 1
            if not self.stopping():
                self.stop_all.wait(self.backoff)

    def _session(self, ep: Endpoint) -> None:
        self.node = ep.node
        conn = pika.BlockingConnection(params(ep))
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=self.prefetch)
            cancelled = threading.Event()
            ch.add_on_cancel_callback(lambda _frame: cancelled.set())
            ch.basic_consume(self.queue, self._on_message, auto_ack=self.auto_ack, arguments=self._arguments())
            while not self.stopping():
                conn.process_data_events(time_limit=0.2)
                if cancelled.is_set():  # the queue failed over: consume again from the new master
                    cancelled.clear()
                    self.cancels += 1
                    ch.basic_consume(self.queue, self._on_message, auto_ack=self.auto_ack,
                                     arguments=self._arguments())
        finally:
            if conn.is_open:
                try:
                    conn.close()
                except (AMQPError, _Crash):
                    pass

    def _arguments(self) -> dict:
        """basic.consume's arguments, for this consume (a stream's resumes where it left)."""
        args = dict(self.arguments)
        if self.cancel_on_failover:
            args["x-cancel-on-ha-failover"] = True
        if self.stream:
            args["x-stream-offset"] = resume_offset(self.last_offset)
        return args

    def read_up_to(self) -> int:
        """A stream consumer's next offset: how many of the stream's messages it has read
        (offsets start at 0)."""
        return 0 if self.last_offset is None else self.last_offset + 1

    def crash(self) -> None:
        self._crash.set()

    def _on_message(self, ch, method, props, body) -> None:
        if self._crash.is_set():
            self._crash.clear()
            raise _Crash()
        if self.delay:
            self.stop_all.wait(self.delay)  # a slow consumer: its client-side buffer grows
        msg_id, producer, seq = payload.decode(body)
        if msg_id is None:
            msg_id = props.message_id
        headers = props.headers or {}
        offset = headers.get("x-stream-offset") if self.stream else None
        marks = dict(self.marks)
        if self.give_up_after and headers.get("poison") is True:
            self.poison_seen[msg_id] = seen = self.poison_seen.get(msg_id, 0) + 1
            marks["rejected" if poison_action(seen, self.give_up_after) == "reject" else "gave_up"] = True
        self.last_delivery = self.clock.now()
        # Recorded before the ack: a crash in between shows as a redelivery, never as a gap.
        self.writer.write(consume_record(msg_id=msg_id, consumer=self.name, t=self.last_delivery,
                                         redelivered=bool(method.redelivered), source=self.queue,
                                         offset=offset, node=self.node, producer=producer, seq=seq, **marks))
        if isinstance(offset, int):
            self.last_offset = offset if self.last_offset is None else max(self.last_offset, offset)
        if marks.get("rejected"):  # handed back: the queue may count it toward its delivery limit
            if self.nack:
                ch.basic_nack(method.delivery_tag, requeue=True)
            else:
                ch.basic_reject(method.delivery_tag, requeue=True)
            return
        self.stats.add("delivered")
        if not self.auto_ack:
            ch.basic_ack(method.delivery_tag)
