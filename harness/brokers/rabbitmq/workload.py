"""A RabbitMQ scenario's workload as clients: declare the queue, publishers and consumers
that fail over across all nodes, prefill, drain (a stream up to its end; with dead-lettering,
the dead-letter queue too)."""
from __future__ import annotations

import re
import time

import pika

from harness.brokers.rabbitmq.clients import Endpoint, RabbitConsumer, RabbitPublisher, params
from harness.context import Drained, RunContext
from harness.util import wait_until


def _endpoint(node: str, hp: str) -> Endpoint:
    host, port = hp.rsplit(":", 1)
    return Endpoint(node, host, int(port))


def endpoints(cluster) -> list[Endpoint]:
    return [_endpoint(node, hp) for node, hp in cluster.client_endpoints().items()]


def balanced(cluster) -> list[Endpoint]:
    """The load balancer, when the cluster has one: then the workload's only address."""
    hp = cluster.balancer_endpoint()
    return [_endpoint("lb", hp)] if hp else []


def producer_endpoints(cluster, sc) -> list[Endpoint]:
    """The scenario's producing side (RabbitScenario.client_nodes)."""
    return balanced(cluster) or [e for e in endpoints(cluster) if e.node in sc.client_nodes("produce")]


def declare(cluster, sc) -> None:
    ln = sc.link
    if ln and ln.kind == "federated-exchange" and not ln.bidirectional:  # upstream, only the exchange
        _declare_exchange(cluster, sc, sc.queue.declare_on or ln.upstream[0], with_queue=ln.upstream_queue)
    else:
        _declare_queue(cluster, sc, sc.queue.declare_on)
    for home in ln.homes() if ln else ():  # the same queue downstream (of its own type: a migration)
        _declare_queue(cluster, sc, home, ln.downstream_type)
    for home, source in ln.sources() if ln else ():  # then each link
        link(cluster, sc, home, source)


LINK = "mqchaos-link"


def link(cluster, sc, home: str, source: list[str]) -> None:
    """The link from the cluster of ``source``'s nodes, declared on the cluster of ``home``,
    running before the load starts. heartbeat 10 s: the link notices a cut within about
    20 s (the default 60 s is minutes)."""
    q, ln = sc.queue.name, sc.link
    uris = [f"amqp://guest:guest@{n}?heartbeat=10" for n in source]
    if ln.kind == "shovel":
        value = {"src-protocol": "amqp091", "src-uri": uris, "src-queue": q, "dest-protocol": "amqp091",
                 "dest-uri": "amqp://", "dest-queue": q, "ack-mode": ln.ack_mode,
                 "reconnect-delay": ln.reconnect_delay}
        resp = cluster.http(home, "PUT", f"parameters/shovel/%2F/{LINK}", json={"value": value})
        resp.raise_for_status()
    else:  # an upstream, and the policy that federates the queue (or exchange) of that name
        value = {"uri": uris, "ack-mode": ln.ack_mode, "reconnect-delay": ln.reconnect_delay}
        resp = cluster.http(home, "PUT", f"parameters/federation-upstream/%2F/{LINK}", json={"value": value})
        resp.raise_for_status()
        exchange = ln.kind == "federated-exchange"
        name = sc.queue.exchange if exchange else q
        cluster.set_policy("mqchaos-federation", f"^{re.escape(name)}$", {"federation-upstream": LINK},
                           apply_to="exchanges" if exchange else "queues", node=home)
    wait_until(lambda: link_state(cluster, sc, home) == "running", 60, f"{ln.kind} {LINK} running on {home}")


def link_state(cluster, sc, node: str) -> str | None:
    """The link's state as ``node``'s cluster reports it (shovel: its state; federation: its
    link's status)."""
    if sc.link.kind == "shovel":
        rows = cluster.api("shovels/%2F", node=node, timeout=5) or []
        return next((r.get("state") for r in rows if r.get("name") == LINK), None)
    rows = cluster.api("federation-links/%2F", node=node, timeout=5) or []
    return next((r.get("status") for r in rows if r.get("upstream") == LINK), None)


def link_backlog(cluster, sc) -> int | None:
    """Messages a federated exchange's link holds upstream (its queues, named
    ``federation: <exchange> -> ...``): in transit, not lost. 0 for other links."""
    if not sc.link or sc.link.kind != "federated-exchange":
        return 0
    total = 0
    for _, source in sc.link.sources():  # the link's queue sits in the cluster it reads from
        rows = cluster.api("queues/%2F?columns=name,messages", among=source, timeout=10)
        if rows is None:
            return None
        mine = [r for r in rows if str(r.get("name", "")).startswith(f"federation: {sc.queue.exchange} ")]
        if any(r.get("messages") is None for r in mine):
            return None
        total += sum(int(r["messages"]) for r in mine)
    return total


def upstream_queue(sc) -> str:
    """The upstream cluster's own queue on a federated exchange (LinkSpec.upstream_queue)."""
    return f"{sc.queue.name}.upstream"


def _declare_exchange(cluster, sc, on: str, with_queue: bool = False) -> None:
    """The exchange the producers publish to; ``with_queue``: the upstream's own queue too,
    bound to it as the downstream queue is."""
    ep = next(e for e in endpoints(cluster) if e.node == on)
    conn = pika.BlockingConnection(params(ep))
    try:
        ch = conn.channel()
        ch.exchange_declare(sc.queue.exchange, "direct", durable=sc.queue.exchange_durable)
        if with_queue:
            ch.queue_declare(upstream_queue(sc), durable=True)
            ch.queue_bind(upstream_queue(sc), sc.queue.exchange, routing_key=sc.queue.name)
    finally:
        conn.close()


def _declare_queue(cluster, sc, on: str | None, qtype: str | None = None) -> None:
    """The run's queue, on ``on``'s cluster, of ``qtype`` when given (a link's downstream
    queue of another type: mirrored upstream, quorum downstream)."""
    q = sc.queue if qtype in (None, sc.queue.type) else sc.queue.model_copy(update={"type": qtype})
    args = q.declare_arguments()
    if sc.workload.single_active_consumer:
        args["x-single-active-consumer"] = True
    eps = {e.node: e for e in endpoints(cluster) if e.node in (sc.cluster.site(on) if on else sc.client_nodes("produce"))}
    ep = eps[on] if on else next(iter(eps.values()))
    if q.type == "mirrored":  # on the queue's own cluster (a migration's other one has none)
        cluster.set_policy("mqchaos-ha", f"^{q.name}$", q.policy, node=ep.node)
    conn = pika.BlockingConnection(params(ep))
    try:
        ch = conn.channel()
        if q.dead_letter:  # where the queue dead-letters to exists before it does
            dl = q.dead_letter
            ch.exchange_declare(dl.exchange, "fanout", durable=True)
            ch.queue_declare(dl.queue, durable=True, arguments={"x-queue-type": "quorum"})
            ch.queue_bind(dl.queue, dl.exchange)
        ch.queue_declare(q.name, durable=q.durable, arguments=args)
        if q.exchange:
            ch.exchange_declare(q.exchange, "direct", durable=q.exchange_durable)
            ch.queue_bind(q.name, q.exchange, routing_key=q.name)
    finally:
        conn.close()
    if q.type == "mirrored" and q.policy.get("ha-sync-mode") == "automatic":
        want = mirrors_wanted(q.policy, len(sc.cluster.site(ep.node)))  # its own cluster's nodes
        wait_until(lambda: len(cluster.queue_mirrors(q.name, node=ep.node)["synchronised"]) >= want,
                   60, f"queue {q.name} mirrors synchronised")


def mirrors_wanted(policy: dict, nodes: int) -> int:
    """The mirrors a policy asks for, in a cluster of ``nodes``."""
    if policy.get("ha-mode") == "exactly":
        return min(int(policy.get("ha-params", 1)), nodes) - 1
    if policy.get("ha-mode") == "nodes":
        return len(policy.get("ha-params", [])) - 1
    return nodes - 1


def producers(ctx: RunContext) -> list:
    sc, w = ctx.sc, ctx.sc.workload
    out = []
    for i in range(w.producers):
        name = f"p{i}"
        out.append(RabbitPublisher(
            name, producer_endpoints(ctx.cluster, sc), sc.queue.name, ctx.writer("produce", name), ctx.clock,
            ctx.stop, rate=w.rate, max_messages=w.max_messages, window=w.window,
            confirm_timeout=w.confirm_timeout, size=w.message_size, first=i, persistent=w.persistent,
            confirms=w.confirms, exchange=sc.queue.exchange or "", transactions=w.transactions,
            poison_every=w.poison.every if w.poison else None))
    return out


def consumer_endpoints(ctx: RunContext) -> list[Endpoint]:
    """All nodes (with a link, the downstream cluster's), the ones `workload.consumer_nodes`
    names first (Q5: a follower's node; Q5b: a node outside the quorum queue's members)."""
    lb = balanced(ctx.cluster)
    if lb:
        return lb
    eps = [e for e in endpoints(ctx.cluster) if e.node in ctx.sc.client_nodes("consume")]
    want = ctx.sc.workload.consumer_nodes
    if not want:
        return eps
    if want in ("followers", "leader"):
        leader = ctx.cluster.queue_master(ctx.sc.queue.name)
        first = [e for e in eps if (e.node == leader) == (want == "leader")]
    elif want == "outside":  # a node that holds no replica of the quorum queue (Q5b)
        members = ctx.cluster.quorum_members(ctx.sc.queue.name)["members"]
        first = [e for e in eps if e.node not in members]
    else:
        first = [e for e in eps if e.node == want]
    return first + [e for e in eps if e not in first]


def consumers(ctx: RunContext, names: list[str] | None = None, delay: float | None = None) -> list:
    """Consumers run throughout the load, failing over across all nodes."""
    sc, w = ctx.sc, ctx.sc.workload
    eps = consumer_endpoints(ctx)
    pinned = bool(w.consumer_nodes)
    names = names if names is not None else [f"c{i}" for i in range(w.consumers)]
    return [RabbitConsumer(name, eps, sc.queue.name, ctx.writer("consume", name),
                           ctx.clock, ctx.stop, prefetch=w.prefetch, auto_ack=w.auto_ack,
                           cancel_on_failover=w.cancel_on_failover and sc.consumed_type() == "mirrored",
                           first=0 if pinned else i + 1,
                           delay=w.consumer_delay if delay is None else delay,
                           stream=sc.queue.type == "stream",
                           give_up_after=w.poison.give_up_after if w.poison else None,
                           nack=sc.nacks())
            for i, name in enumerate(names)]


def dead_letter_reader(ctx: RunContext) -> RabbitConsumer:
    """A consumer of the dead-letter queue, started: each delivery is recorded as dead-lettered
    (the checker counts it as delivered, by dead-lettering)."""
    dl = ctx.sc.queue.dead_letter
    c = RabbitConsumer("dlq0", consumer_endpoints(ctx), dl.queue, ctx.writer("consume", "dlq0"), ctx.clock,
                       ctx.stop, cancel_on_failover=False,
                       marks={"dead_lettered": True})
    c.start()
    return c


def prefill(ctx: RunContext) -> dict:
    """Publish `workload.prefill` messages as fast as confirms allow, before the load (R6:
    the queue is large when the faults come). Bounded by count and by drain_timeout."""
    sc, n = ctx.sc, ctx.sc.workload.prefill
    if not n:
        return {}
    t0 = time.monotonic()
    w = RabbitPublisher("fill", producer_endpoints(ctx.cluster, sc), sc.queue.name, ctx.writer("produce", "fill"),
                        ctx.clock, ctx.stop, rate=None, max_messages=n, window=500,
                        confirm_timeout=sc.workload.confirm_timeout, size=sc.workload.message_size)
    w.start()
    w.join(sc.timing.drain_timeout * 3)
    w.stop()
    w.join(30)
    return {"messages": n, "ok": w.stats.ok, "seconds": round(time.monotonic() - t0, 1),
            "rate": round(w.stats.ok / max(time.monotonic() - t0, 1e-6), 1)}


def _drainers(ctx: RunContext) -> list:
    """Two fresh consumers (a stream: one, from its first message), started, that read what
    is left at full speed."""
    names = ["drain0"] if ctx.sc.queue.type == "stream" else ["drain0", "drain1"]
    fresh = consumers(ctx, names=names, delay=0)
    for c in fresh:
        c.start()
    return fresh


STUCK_AFTER = 15.0  # seconds without a delivery, messages left: the consumers are stuck
# A stream's length is the management API's: each node's stream writer reports it every 5 s,
# and the statistics are collected every 5 s; a figure read this long after the producers
# stopped includes their last message.
STREAM_STATS_LAG = 11.0


def drain(ctx: RunContext, consumers: list) -> Drained:
    """Consume until the queue/topic is empty and idle; report whether it was."""
    sc, t = ctx.sc, ctx.sc.timing
    t0 = time.monotonic()
    # Scenarios whose story needs the queue to fill (R2-R5: no consumers during the faults)
    # are drained by fresh consumers; slow consumers (R6) stop dawdling.
    readers = list(consumers) or _drainers(ctx)
    if sc.queue.dead_letter:
        readers.append(dead_letter_reader(ctx))
    for c in readers:
        c.delay = 0
    stream = sc.queue.type == "stream"

    gone = []

    def empty_and_idle() -> bool:
        idle = all(ctx.clock.now() - c.last_delivery >= t.drain_idle for c in readers)
        if not idle or (stream and time.monotonic() - t0 < STREAM_STATS_LAG):
            return False
        if messages_left(ctx, readers) == 0:
            return True
        # R4: the queue itself was lost; there is nothing left to drain, and that is the finding
        if queue_gone(ctx.cluster, sc.queue.name, sc.queue_sites()):
            gone.append(True)
            return True
        stuck = all(ctx.clock.now() - c.last_delivery >= STUCK_AFTER for c in readers)
        # a stream's consumer fails over by itself, from its own offset: a fresh one would
        # read the stream again from its start
        if stuck and not stream and not any(c.name.startswith("drain") for c in readers):
            # messages left and every consumer idle for longer than the management API's
            # statistics can lag (5 s): the load's consumers are stuck (seed 001: no
            # x-cancel-on-ha-failover), which the run measures; fresh ones read the rest
            readers.extend(_drainers(ctx))
        return False

    try:
        wait_until(empty_and_idle, t.drain_timeout, f"queue {sc.queue.name} drained", interval=1.0)
        complete, err = True, None
    except TimeoutError as e:
        complete, err = False, str(e)
    try:
        left = messages_left(ctx, readers)
    except Exception:  # noqa: BLE001 - the queue may be gone (R4): that is the finding
        left = None
    return Drained({"complete": complete, "seconds": round(time.monotonic() - t0, 1), "error": err,
                    "queue_messages_left": left, "queue_gone": bool(gone)}, readers)


def messages_left(ctx: RunContext, readers: list) -> int | None:
    """What the drain has still to read (None: unknown): the queue's messages; a stream's,
    past its consumers' offsets; with dead-lettering, also those waiting to be dead-lettered
    (at-least-once) and those in the dead-letter queue."""
    q, cluster = ctx.sc.queue, ctx.cluster
    if q.type == "stream":
        return stream_left(cluster, q.name, readers)
    sites = ctx.sc.queue_sites()
    counts = [queue_depth(cluster, q.name, sites), link_backlog(cluster, ctx.sc)]
    if q.dead_letter:
        counts += [dead_letter_pending(cluster, q.name), queue_depth(cluster, q.dead_letter.queue, sites)]
    return None if None in counts else sum(counts)


def stream_left(cluster, name: str, readers: list) -> int | None:
    """The stream's messages (the management API's ``messages``: its writer's last offset + 1,
    no retention being allowed) beyond the furthest offset a consumer has read."""
    n = (cluster.queue(name) or {}).get("messages")
    if n is None:
        return None
    return max(0, int(n) - max((c.read_up_to() for c in readers if c.stream), default=0))


def dead_letter_pending(cluster, name: str) -> int | None:
    """Messages a quorum queue holds for at-least-once dead-lettering (its ``messages_dlx``);
    None when the queue cannot be read."""
    q = cluster.queue(name)
    return None if q is None else int(q.get("messages_dlx") or 0)


def queue_gone(cluster, name: str, sites: list[list[str]] | None = None) -> bool:
    """The queue no longer exists on any cluster of ``sites`` (default: the whole one): the
    management API says 404 and the queue processes of a running node do not list it."""
    return all(_gone_from(cluster, name, site) for site in (sites or [cluster.nodes()]))


def _gone_from(cluster, name: str, nodes: list[str]) -> bool:
    if cluster.queue(name, among=nodes) is not None:
        return False
    for node in nodes:
        if cluster.running(node):
            rc, out = cluster.rabbitmqctl(node, "-q", "list_queues", "name", "--no-table-headers",
                                          check=False, timeout=30)
            return rc == 0 and name not in out.split()
    return False


def queue_depth(cluster, name: str, sites: list[list[str]] | None = None) -> int | None:
    """Messages in the queue, on every cluster of ``sites`` (default: every one the nodes
    form; a link's two ends: what the shovel has not moved yet counts too)."""
    depths = [_site_depth(cluster, name, site) for site in (sites or cluster.sites())]
    return None if None in depths else sum(depths)


def _site_depth(cluster, name: str, site: list[str]) -> int | None:
    """The management API's figure can be missing for minutes after a partition (seen here
    on 3.10), so rabbitmqctl decides then."""
    q = cluster.queue(name, among=site) or {}
    if q.get("messages") is not None:
        return int(q["messages"])
    for node in site:
        if not cluster.running(node):
            continue
        rc, out = cluster.rabbitmqctl(node, "-q", "list_queues", "name", "messages", "--no-table-headers",
                                      check=False, timeout=30)
        if rc == 0:
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == name and parts[1].isdigit():
                    return int(parts[1])
            return None  # the queue is gone
    return None
