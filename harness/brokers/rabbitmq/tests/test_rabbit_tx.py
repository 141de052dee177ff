"""The RabbitMQ publisher in AMQP transaction mode (seed 001: Tx.CommitOk comes only once the
transaction is on every mirror): messages go in transactions of ``transactions``, one commit
at a time, each CommitOk confirming its messages; a channel lost before the CommitOk leaves
them with no known outcome. pika's connection is faked: this is about the worker's bookkeeping
(the real broker's side is the R29 row)."""
import json
import threading

import pytest

from harness.brokers.rabbitmq import clients as C
from harness.brokers.rabbitmq.model import RabbitWorkload
from harness.history import JsonlWriter, RunClock


class Loop:
    def __init__(self):
        self.q, self.running, self.steps = [], True, 0

    def call_later(self, _delay, f):
        self.q.append(f)

    def start(self):
        while self.running and self.q:
            self.steps += 1
            assert self.steps < 10_000, "the fake loop never ended"
            self.q.pop(0)()

    def stop(self):
        self.running = False


class Channel:
    is_open = True

    def __init__(self, conn):
        self.conn, self.batch, self.awaiting = conn, [], False

    def add_on_close_callback(self, f):
        self.on_close = f

    def add_on_return_callback(self, f):
        pass

    def tx_select(self, callback):
        self.conn.ioloop.call_later(0, lambda: callback(None))

    def confirm_delivery(self, *a, **k):
        raise AssertionError("confirm.select on a channel in tx mode (the broker refuses it)")

    def basic_publish(self, exchange, key, body, props, mandatory):
        assert not self.awaiting, "published while a commit was outstanding"
        self.batch.append(props.message_id)

    def tx_commit(self, callback):
        broker = self.conn.broker
        broker.commits.append(self.batch)
        self.batch, self.awaiting = [], True
        if len(broker.commits) == broker.lose_commit:  # the channel goes before the CommitOk
            self.is_open = False
            self.conn.ioloop.call_later(0, lambda: self.on_close(self, "connection reset"))
            return

        def ok():
            self.awaiting = False
            callback(None)
        self.conn.ioloop.call_later(0, ok)


class Broker:
    def __init__(self, lose_commit):
        self.commits, self.lose_commit, self.connections = [], lose_commit, 0


def fake_connection(broker):
    class Connection:
        def __init__(self, _params, on_open_callback, on_open_error_callback, on_close_callback):
            broker.connections += 1
            self.broker, self.ioloop, self.is_open, self.on_close = broker, Loop(), True, on_close_callback
            self.ioloop.call_later(0, lambda: on_open_callback(self))

        def channel(self, on_open_callback):
            ch = Channel(self)
            self.ioloop.call_later(0, lambda: on_open_callback(ch))

        def close(self):
            self.is_open = False
            self.ioloop.call_later(0, lambda: self.on_close(self, "closed"))
    return Connection


def test_transactions_commit_in_batches_and_a_lost_commit_is_unknown(tmp_path, monkeypatch):
    broker = Broker(lose_commit=2)
    monkeypatch.setattr(C.pika, "SelectConnection", fake_connection(broker))
    out = tmp_path / "produce-p0.jsonl"
    w = C.RabbitPublisher("p0", [C.Endpoint("rabbit1", "127.0.0.1", 1)], "q", JsonlWriter(out), RunClock(),
                          threading.Event(), rate=None, max_messages=10, backoff=0, transactions=4)
    w.run()
    assert w.error is None
    # one commit at a time, never more than 4 messages each; the second lost with its channel
    assert broker.commits == [[f"p0-{i}" for i in range(4)], [f"p0-{i}" for i in range(4, 8)], ["p0-8", "p0-9"]]
    assert broker.connections == 2
    records = [json.loads(x) for x in out.read_text().splitlines()]
    final = {r["msg_id"]: (r["outcome"], r.get("error")) for r in records if r["outcome"] != "invoke"}
    assert {m for m, (o, _) in final.items() if o == "ok"} == {f"p0-{i}" for i in (0, 1, 2, 3, 8, 9)}
    lost_commit = {m: e for m, (o, e) in final.items() if o == "info"}
    assert set(lost_commit) == {f"p0-{i}" for i in range(4, 8)}
    assert all("channel closed" in e for e in lost_commit.values())


def test_transactions_need_an_outcome_and_fit_the_window():
    with pytest.raises(ValueError, match="workload.transactions"):
        RabbitWorkload(transactions=5, confirms=False)
    with pytest.raises(ValueError, match="workload.transactions"):
        RabbitWorkload(transactions=50, window=10)
    assert RabbitWorkload(transactions=10).transactions == 10


def test_a_consumer_outlives_a_handshake_that_timed_out(tmp_path, monkeypatch):
    """pika raises AMQPConnectorStackTimeout (not an AMQPError) when a handshake times out:
    the consumer tries the next node, as with any other connection failure."""
    from pika.adapters.utils.connection_workflow import AMQPConnectorStackTimeout
    stop, tries = threading.Event(), []

    def refuse(params):
        tries.append(params.port)
        if len(tries) >= 3:
            stop.set()
        raise AMQPConnectorStackTimeout("Timeout during AMQP handshake")
    monkeypatch.setattr(C.pika, "BlockingConnection", refuse)
    eps = [C.Endpoint("rabbit1", "127.0.0.1", 1), C.Endpoint("rabbit2", "127.0.0.1", 2)]
    c = C.RabbitConsumer("c0", eps, "q", JsonlWriter(tmp_path / "consume-c0.jsonl"), RunClock(), stop, backoff=0)
    c.run()
    assert c.error is None and tries[:3] == [1, 2, 1]
    assert "AMQPConnectorStackTimeout" in c.stats.last_error
