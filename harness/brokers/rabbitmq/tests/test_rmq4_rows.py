"""Issue 16's new RabbitMQ rows: streams (S1) and poison messages under a delivery limit
(D1, D1b, D2). The model's validation, the clients' pure parts (poison marking, the stream
consumer's resume offset), the consumer and the drain against fakes, and the checker's
dead-letter / poison accounting against the reference. No Docker."""
from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pika
import pytest

import reference
from checkers import synth
from fakes import FakeChannel, FakeRabbitApi, FakeWriter
from harness import brokers, expect
from harness.brokers.rabbitmq import clients, observe, workload
from harness.brokers.rabbitmq.cluster import RabbitCluster
from harness.history import RunClock
from harness.scenario import ScenarioError, load, parse

ROOT = Path(__file__).resolve().parents[4]  # the repository (this file: harness/brokers/<broker>/tests/)
RABBIT = brokers.get("rabbitmq")


def scenario(queue=None, workload=None, version="4.0", **kw):
    data = {"name": "x", "broker": "rabbitmq", "queue": queue or {"type": "quorum"},
            "workload": workload or {}, **kw}
    return parse(data, "s.yaml", version=version, env={})


def stream(**workload):
    return scenario({"type": "stream"}, {"consumers": 1, **workload})


# ---- the model --------------------------------------------------------------------------

@pytest.mark.parametrize("queue,load_,needle", [
    ({"type": "stream"}, {"consumers": 1, "single_active_consumer": True}, "workload.single_active_consumer"),
    ({"type": "stream"}, {"consumers": 1, "auto_ack": True}, "workload.auto_ack"),
    ({"type": "stream"}, {"consumers": 1, "prefetch": 0}, "workload.prefetch"),
    ({"type": "stream"}, {"consumers": 2}, "workload.consumers: at most 1 for a stream"),
    ({"type": "stream"}, {"consumers": 1, "consumer_nodes": "outside"}, "workload.consumer_nodes"),
    ({"type": "stream", "policy": {"ha-mode": "all"}}, {"consumers": 1}, "policy applies to mirrored queues only"),
    ({"type": "stream", "arguments": {"x-delivery-limit": 5}}, {"consumers": 1},
     "arguments.x-delivery-limit: quorum queues only"),
    ({"type": "stream", "arguments": {"x-max-age": "1h"}}, {"consumers": 1}, "arguments.x-max-age: not for a stream"),
    ({"type": "stream", "arguments": {"x-initial-cluster-size": 2}}, {"consumers": 1},
     "arguments.x-initial-cluster-size: 3"),
    ({"type": "stream"}, {"consumers": 1, "poison": {"every": 10}}, "workload.poison: quorum queues only"),
    ({"type": "classic"}, {"poison": {"every": 10}}, "workload.poison: quorum queues only"),
    ({"type": "quorum"}, {"poison": {"every": 10}, "auto_ack": True}, "workload.poison: consumers reject"),
    ({"type": "quorum"}, {"poison": {"every": 1}}, "workload.poison.every"),
    ({"type": "classic", "dead_letter": {}}, {}, "dead_letter: quorum queues only"),
    ({"type": "quorum", "dead_letter": {"queue": "mqchaos"}}, {}, "dead_letter.queue"),
    ({"type": "quorum", "arguments": {"x-dead-letter-exchange": "dlx"}}, {}, "arguments.x-dead-letter-exchange: use dead_letter"),
    ({"type": "quorum", "arguments": {"x-overflow": "drop-head"}, "dead_letter": {}}, {},
     "arguments.x-overflow: at-least-once dead-lettering needs reject-publish"),
])
def test_what_a_stream_or_poison_cannot_take_is_refused_naming_the_field(queue, load_, needle):
    with pytest.raises(ScenarioError) as e:
        scenario(queue, load_)
    assert needle in str(e.value) and str(e.value).startswith("s.yaml")


def test_a_link_takes_neither_a_stream_nor_poison():
    link = {"link": {"kind": "shovel"}}
    with pytest.raises(ScenarioError, match="link: a shovel does not read a stream"):
        scenario({"type": "stream"}, {"consumers": 1}, **link)
    with pytest.raises(ScenarioError, match="workload.poison / queue.dead_letter: not across a link"):
        scenario({"type": "quorum"}, {"poison": {"every": 10}}, **link)


def test_declare_arguments():
    assert stream().queue.declare_arguments() == {"x-queue-type": "stream"}
    sc = scenario({"type": "quorum", "arguments": {"x-delivery-limit": 20}, "dead_letter": {}})
    assert sc.queue.declare_arguments() == {
        "x-delivery-limit": 20, "x-queue-type": "quorum", "x-dead-letter-exchange": "mqchaos.dlx",
        "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}
    most = scenario({"type": "quorum", "dead_letter": {"strategy": "at-most-once", "queue": "dl"}})
    assert most.queue.declare_arguments()["x-dead-letter-strategy"] == "at-most-once"
    assert "x-overflow" not in most.queue.declare_arguments()
    assert scenario({"type": "classic"}).queue.declare_arguments() == {}


@pytest.mark.parametrize("version,args,limit", [
    ("3.10", {}, -1), ("3.10", {"x-delivery-limit": 20}, 20), ("4.0", {}, 20), ("4.0", {"x-delivery-limit": -1}, -1),
    ("4.3", {}, 20), ("4.3", {"x-delivery-limit": 5}, 5)])
def test_reject_limit_by_version(version, args, limit):
    sc = scenario({"type": "quorum", "arguments": args}, version=version)
    assert sc.reject_limit() == limit
    assert "reject_limit" in sc.measurement_names()
    assert RABBIT.measure(sc, [], {}, [], [], None)["reject_limit"] == limit
    assert stream().reject_limit() is None


@pytest.mark.parametrize("version,args,limit", [
    ("3.10", {}, -1), ("3.10", {"x-delivery-limit": 20}, 20), ("4.0", {}, 20), ("4.3", {}, -1),
    ("4.3", {"x-delivery-limit": 5}, -1)])
def test_a_nack_counts_everywhere_but_on_4_3(version, args, limit):
    nack = {"poison": {"every": 10, "give_up_after": 50, "method": "nack"}}
    assert scenario({"type": "quorum", "arguments": args}, version=version, workload=nack).reject_limit() == limit


def test_the_consumer_must_not_give_up_before_the_broker_acts():
    with pytest.raises(ScenarioError, match="workload.poison.give_up_after: 21, but RabbitMQ 4.0 takes 21 requeues"):
        scenario(workload={"poison": {"every": 10, "give_up_after": 21}})
    assert scenario(workload={"poison": {"every": 10, "give_up_after": 22}}).workload.poison.give_up_after == 22
    # nothing drops it: any bound ends the drain
    assert scenario(workload={"poison": {"every": 10, "give_up_after": 2, "method": "nack"}}, version="4.3")
    with pytest.raises(ScenarioError, match="RabbitMQ 4.3 takes 21 requeues"):
        scenario(workload={"poison": {"every": 10, "give_up_after": 2}}, version="4.3")


def test_a_requirement_the_version_decides_makes_the_row_not_applicable():
    need = {"require": {"reject_limit": 20}, "expect": {"lost": 0}}
    assert scenario(**need).not_applicable() is None
    assert "no delivery limit" in scenario(version="3.10", **need).not_applicable()
    assert scenario(version="4.3", **need).not_applicable() is None
    nack = {"poison": {"every": 10, "give_up_after": 50, "method": "nack"}}
    assert "a basic.nack with requeue is free" in scenario(version="4.3", workload=nack, **need).not_applicable()
    assert scenario({"type": "quorum", "arguments": {"x-delivery-limit": 20}}, version="3.10",
                    **need).not_applicable() is None


ROWS = {"S1": {"3.10": None, "4.0": None, "4.3": None},
        "D1": {"3.10": "no delivery limit", "4.0": None, "4.3": None},
        "D1b": {"3.10": None, "4.0": "gives 20", "4.3": None},
        "D2": {"3.10": None, "4.0": None, "4.3": None}}


@pytest.mark.parametrize("rid", sorted(ROWS))
def test_the_new_rows_load_and_apply_where_their_claim_exists(rid):
    (path,) = [p for p in (ROOT / "scenarios").glob(f"{rid}-*.yaml")]
    for version, why in ROWS[rid].items():
        sc = load(path, version)
        assert sc.id == rid
        na = sc.not_applicable()
        assert (na is None) if why is None else (why in na), (version, na)
        assert set(expect.expectations(sc)) <= expect.decidable(sc)
    assert load(path).version == ("4.0" if rid == "D1" else "3.10")


# ---- the clients' pure parts --------------------------------------------------------------

def test_poison_marks_every_nth_message_of_a_producer():
    assert [s for s in range(20) if clients.is_poison(s, 5)] == [4, 9, 14, 19]
    assert not any(clients.is_poison(s, None) for s in range(20))


def test_a_consumer_rejects_poison_a_bounded_number_of_times():
    assert [clients.poison_action(n, 3) for n in (1, 2, 3, 4)] == ["reject", "reject", "give_up", "give_up"]


def test_a_stream_consumer_resumes_after_its_last_offset():
    assert clients.resume_offset(None) == "first"
    assert clients.resume_offset(0) == 1
    assert clients.resume_offset(41) == 42


# ---- the clients against fakes -----------------------------------------------------------

def deliver(consumer, ch, tag, msg_id, seq, headers, redelivered=False):
    method = SimpleNamespace(delivery_tag=tag, redelivered=redelivered)
    props = pika.BasicProperties(message_id=msg_id, headers=headers)
    consumer._on_message(ch, method, props, json.dumps({"msg_id": msg_id, "producer": "p0", "seq": seq}).encode())


def consumer(**kw):
    return clients.RabbitConsumer("c0", [], "q", FakeWriter(), RunClock(), threading.Event(), **kw)


def test_the_consumer_rejects_poison_until_it_gives_up_and_takes_the_rest():
    c, ch = consumer(give_up_after=3), FakeChannel()
    deliver(c, ch, 1, "p0-0", 0, {"producer": "p0", "seq": 0})
    for tag in (2, 3, 4):
        deliver(c, ch, tag, "p0-4", 4, {"poison": True}, redelivered=tag > 2)
    assert ch.rejected == [2, 3] and ch.acked == [1, 4]
    marks = [{k for k in ("rejected", "gave_up", "dead_lettered") if r.get(k)} for r in c.writer.records]
    assert marks == [set(), {"rejected"}, {"rejected"}, {"gave_up"}]
    assert c.stats.delivered == 2
    # without a poison option a poison header means nothing
    plain, ch2 = consumer(), FakeChannel()
    deliver(plain, ch2, 1, "p0-4", 4, {"poison": True})
    assert ch2.acked == [1] and not plain.writer.records[0].get("rejected")
    # poison.method nack: handed back by basic.nack (4.3 does not count it), recorded the same
    n, ch3 = consumer(give_up_after=2, nack=True), FakeChannel()
    for tag in (1, 2):
        deliver(n, ch3, tag, "p0-4", 4, {"poison": True}, redelivered=tag > 1)
    assert ch3.nacked == [1] and ch3.rejected == [] and ch3.acked == [2]
    assert [bool(r.get("rejected")) for r in n.writer.records] == [True, False]


def test_the_stream_consumer_keeps_its_offset_and_consumes_from_after_it():
    c, ch = consumer(stream=True, cancel_on_failover=False), FakeChannel()
    assert c._arguments() == {"x-stream-offset": "first"} and c.read_up_to() == 0
    for off in (0, 1, 2):
        deliver(c, ch, off + 1, f"p0-{off}", off, {"x-stream-offset": off})
    assert [r["offset"] for r in c.writer.records] == [0, 1, 2] and ch.acked == [1, 2, 3]
    assert c._arguments() == {"x-stream-offset": 3} and c.read_up_to() == 3
    deliver(c, ch, 9, "p0-1", 1, {"x-stream-offset": 1})  # read again: recorded (a duplicate), offset kept
    assert c.read_up_to() == 3 and len(c.writer.records) == 4
    # a queue's consumer records no offset
    q = consumer()
    deliver(q, FakeChannel(), 1, "p0-0", 0, {"x-stream-offset": 7})
    assert q.writer.records[0]["offset"] is None and "x-stream-offset" not in q._arguments()


def test_the_dead_letter_reader_marks_its_deliveries():
    c, ch = consumer(marks={"dead_lettered": True}), FakeChannel()
    deliver(c, ch, 1, "p0-4", 4, {"poison": True})
    assert c.writer.records[0]["dead_lettered"] is True and ch.acked == [1]


def test_the_publisher_marks_poison_in_every_record():
    p = clients.RabbitPublisher("p0", [], "q", FakeWriter(), RunClock(), threading.Event(), poison_every=5)
    p._record("p0-4", 4, "ok", 0.0)
    p._late("p0-4", 4, 0.0, "ok")
    p._record("p0-3", 3, "ok", 0.0)
    assert [r.get("poison") for r in p.writer.records] == [True, True, None]


STREAM_ENTRY = {"type": "stream", "leader": "rabbit@rabbit2", "node": "rabbit@rabbit2",
                "members": ["rabbit@rabbit1", "rabbit@rabbit2", "rabbit@rabbit3"],
                "online": ["rabbit@rabbit2", "rabbit@rabbit3"], "messages": 10}


def test_a_streams_leader_and_members_are_observed_and_are_roles():
    s = observe.sample(FakeRabbitApi({"s": STREAM_ENTRY}), SimpleNamespace(queue=SimpleNamespace(name="s")))
    assert s["master"] == "rabbit2" and s["members"] == ["rabbit1", "rabbit2", "rabbit3"]
    assert s["online"] == ["rabbit2", "rabbit3"] and set(s["views"].values()) == {"rabbit2"}
    c = RabbitCluster()
    c.queue = lambda name, *a, **kw: STREAM_ENTRY
    assert c.role("quorum_leader", "s") == ["rabbit2"] and c.role("queue_master", "s") == ["rabbit2"]
    assert c.role("queue_mirrors", "s") == ["rabbit1", "rabbit3"]


def test_what_the_drain_has_left():
    reader = consumer(stream=True)
    reader.last_offset = 6
    ctx = SimpleNamespace(sc=stream(), cluster=FakeRabbitApi({"mqchaos": dict(STREAM_ENTRY)}))
    assert workload.messages_left(ctx, [reader]) == 3
    reader.last_offset = 9
    assert workload.messages_left(ctx, [reader]) == 0
    ctx.cluster.queues["mqchaos"].pop("messages")
    assert workload.messages_left(ctx, [reader]) is None  # unknown: the drain goes on
    dl = scenario({"type": "quorum", "dead_letter": {}})
    ctx = SimpleNamespace(sc=dl, cluster=FakeRabbitApi({
        "mqchaos": {"type": "quorum", "messages": 0, "messages_dlx": 2}, "mqchaos.dlq": {"messages": 1}}))
    assert workload.messages_left(ctx, []) == 3
    ctx.cluster.queues["mqchaos"]["messages_dlx"] = 0
    ctx.cluster.queues["mqchaos.dlq"]["messages"] = 0
    assert workload.messages_left(ctx, []) == 0


# ---- the checker: poison and dead-letter accounting against the reference ------------------

def poison_history(write_ahead=True):
    """Two producers, 60 messages each, every 10th poison; planted: poison messages dropped
    (only rejected lines: lost), one of them unconfirmed (not lost), dead-lettered (one twice),
    given up; two other messages lost, one duplicated, one unexpected, one malformed flag, a
    rejected line out of order (no violation: it is no delivery). Returns (produce, consume,
    expected figures)."""
    produce, consume = [], []
    for p in ("p0", "p1"):
        for seq in range(60):
            mid, poison = f"{p}-{seq}", (seq + 1) % 10 == 0
            mark = {"poison": True} if poison else {}
            outcome = "info" if mid == "p1-59" else "ok"
            if write_ahead:
                produce.append({"msg_id": mid, "producer": p, "seq": seq, "outcome": "invoke",
                                "t_invoke": seq * 0.1, "node": "n1", **mark})
            produce.append({"msg_id": mid, "producer": p, "seq": seq, "outcome": outcome, "t_invoke": seq * 0.1,
                            "t_complete": seq * 0.1 + 0.05, "node": "n1", "error": None, **mark})
    line = (lambda mid, t, **kw: {"msg_id": mid, "consumer": "c0", "t": t, "redelivered": False, "source": "q",
                                  "offset": None, "node": "n1", "producer": mid.split("-")[0],
                                  "seq": int(mid.split("-")[1]), **kw})
    fate = {"p0-9": "dropped", "p0-19": "dropped", "p0-29": "dead", "p0-39": "dead", "p0-49": "gave_up",
            "p0-59": "dropped", "p1-9": "dead", "p1-19": "gave_up", "p1-29": "dropped", "p1-39": "dead",
            "p1-49": "dead", "p1-59": "dropped"}
    for p in ("p0", "p1"):
        for seq in range(60):
            mid = f"{p}-{seq}"
            t = 10 + seq * 0.1 + (0.01 if p == "p1" else 0)
            if mid in ("p0-5", "p1-6"):
                continue  # lost
            if mid not in fate:
                consume.append(line(mid, t))
                continue
            for k in range(3):  # handed back, each time later; the first out of order (before seq - 1)
                consume.append(line(mid, t - 0.15 if k == 0 else t + k, rejected=True, redelivered=k > 0))
            if fate[mid] == "dead":
                consume.append(line(mid, 50 + seq, dead_lettered=True, consumer="dlq0", source="q.dlq"))
            elif fate[mid] == "gave_up":
                consume.append(line(mid, t + 4, gave_up=True, redelivered=True))
    consume.append(dict(line("p0-12", 40.0), redelivered=True))           # a duplicate
    consume.append(line("p0-29", 70.0, dead_lettered=True, consumer="dlq0", source="q.dlq"))  # twice
    consume.append({"msg_id": "ghost", "consumer": "c0", "t": 41.0, "redelivered": False})
    consume.append(line("p0-2", 42.0, rejected="yes"))                    # malformed: not a boolean
    expected = {"poison": 12, "lost_poison": 4, "lost_other": 2, "lost": 6, "dead_lettered": 5, "gave_up": 2,
                "rejections": 36, "unexpected": 1, "duplicated": 2, "malformed_lines": 1, "ordering_violations": 0}
    return produce, consume, expected


@pytest.mark.spark
@pytest.mark.parametrize("write_ahead", [True, False])
def test_dead_letter_and_poison_accounting_agree_with_the_reference(spark, tmp_path, write_ahead):
    from checkers.check import check_runs
    from checkers.history import convert, open_runs

    from helpers import agree
    produce, consume, expected = poison_history(write_ahead)
    d = synth.write_run(tmp_path / "r", produce, consume, files=2)
    ref = reference.check(d, "fifo")
    for parquet in (False, True):
        if parquet:
            convert(spark, str(d))
        runs, errors = open_runs([str(d)], prefer_parquet=parquet)
        assert not errors and (runs[0].parquet_malformed is not None) == parquet
        got = check_runs(spark, runs, ordering="fifo")[str(d)]
        agree(got, ref)
        assert {k: got[k] for k in expected} == expected, parquet
        assert got["valid"] is False
        assert set(got["samples"]["lost"]) == {"p0-5", "p1-6", "p0-9", "p0-19", "p0-59", "p1-29"}


@pytest.mark.spark
def test_a_copy_written_before_the_flags_reads_them_as_absent(spark, tmp_path):
    """A Parquet copy from before these fields (no such columns) is still checked: no
    poison, nothing rejected, dead-lettered or given up."""
    import pyarrow.parquet as pq

    from checkers.check import check_runs
    from checkers.history import PARQUET_DIR, convert, open_runs
    produce, consume, _, _ = synth.build(__import__("random").Random(3), producers=2, per_producer=40, lost=2)
    d = synth.write_run(tmp_path / "old", produce, consume)
    convert(spark, str(d))
    for kind, cols in (("produce", ["poison"]), ("consume", ["rejected", "dead_lettered", "gave_up"])):
        for f in sorted((d / PARQUET_DIR / kind).glob("*.parquet")):
            pq.write_table(pq.read_table(f).drop_columns(cols), f)
            f.with_name(f".{f.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the old file
    runs, _ = open_runs([str(d)])
    got = check_runs(spark, runs)[str(d)]
    ref = reference.check(d)
    assert got["lost"] == ref["lost"] == 2 and got["delivered"] == ref["delivered"]
    assert all(got[k] == 0 for k in ("poison", "lost_poison", "dead_lettered", "gave_up", "rejections"))
    assert got["lost_other"] == 2


def test_the_observer_reads_a_stream_leader_on_every_version():
    from harness.brokers.rabbitmq.cluster import master_of
    # 3.10's management API gives a stream no "leader"; its "node" moved with the writer
    # (S1 on 3.10, 2026-11-24: the kill's target rabbit1, the next fault's rabbit2)
    assert master_of({"type": "stream", "node": "rabbit@rabbit2"}) == "rabbit2"
    assert master_of({"type": "stream", "leader": "rabbit@rabbit3", "node": "rabbit@rabbit1"}) == "rabbit3"
    # a quorum queue electing a leader has none, whatever node the record names
    assert master_of({"type": "quorum", "leader": None, "node": "rabbit@rabbit1"}) is None
    assert master_of({"type": "classic", "node": "rabbit@rabbit1"}) == "rabbit1"
