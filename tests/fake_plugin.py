"""A broker plug-in written from docs/plugins.md's checklist ("Adding a broker: the
plug-in checklist") alone: three in-memory nodes, one queue held by the ``leader`` node, no
Docker. ``CHECKLIST`` says which part of it implements which item (P1 ... P28);
tests/test_plugin_checklist.py registers it for a test (``PLUGINS``: the entry P2 adds to
``harness.brokers.PLUGINS``) and runs a partition through the nemesis and the run loop.

The nodes answer the commands nemesis/net.py runs through ``exec`` (``sh -c`` scripts of
``iptables -w 5`` commands, ``-L -v -x -n`` listings, ``ip -o route get``) from a rule table
per node, and the queue honours those rules: a message whose path (client -> node -> leader)
a rule drops is refused, and the rule's packet counter counts it (the partition's evidence).
"""
from __future__ import annotations

import re
import shlex
import threading
import time
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from harness.brokers.generations import Generation, ImageSpec
from harness.brokers.protocol import Broker, Cluster, ClusterError, Role, RoleError, Steady, Recorder
from harness.brokers.settings import Settings
from harness.clients.base import Worker
from harness.context import Drained, RunContext
from harness.history import consume_record, invoke_record, produce_record
from harness.probes import Probes
from harness.spec import BaseScenario, BaseWorkload, Strict
from harness.util import wait_until

NAME = "fake"
NODES = ("fake1", "fake2", "fake3")
ADDRESSES = {n: f"10.99.0.{i}" for i, n in enumerate(NODES, 1)}
GATEWAY = "10.99.0.254"
CLIENT_PORT, REPLICATION_PORT = 5555, 7001

# P2: the entry the registry gets (this module stands for harness.brokers.<name>)
PLUGINS = {NAME: __name__}


# ---- P5: the cluster: block ------------------------------------------------------------------
class FakeSettings(Settings):
    broker: ClassVar[str] = NAME
    keys_file: ClassVar[Path | None] = None
    leader: Literal["fake1", "fake2", "fake3"] = "fake1"  # the node holding the queue


# ---- P25: the scenario model -----------------------------------------------------------------
class FakeWorkload(BaseWorkload):
    pass


class FakeProbeSpec(Strict):
    """No probes of its own (the model still has the field: parse_recorded reads it)."""


MEASUREMENTS = {"refused", "leaders_seen"}


class FakeScenario(BaseScenario):
    target_key: ClassVar[str] = "queue"
    live_consumers: ClassVar[bool] = True

    broker: Literal["fake"]
    cluster: FakeSettings = Field(default_factory=FakeSettings)
    queue: str = "q"
    workload: FakeWorkload = Field(default_factory=FakeWorkload)
    probes: FakeProbeSpec = Field(default_factory=FakeProbeSpec)

    def subject(self) -> str:
        return self.queue

    def measurement_names(self) -> set[str]:
        return set(MEASUREMENTS)


# ---- the nodes' iptables, in memory ------------------------------------------------------------
class Refused(Exception):
    """A rule dropped the message on its way, or a node on its path does not run."""


IPT = r"iptables -w 5"
LINE_COMMANDS = [  # whole lines of net.py's scripts
    ("noop", re.compile(r"^set -e$")),
    ("chain", re.compile(rf"^{IPT} -N (\S+) 2>/dev/null \|\| true$")),
    ("jump", re.compile(rf"^{IPT} -C (\S+) .* 2>/dev/null \|\| {IPT} -I \1 1 .* -j (\S+)$")),
    ("add", re.compile(rf"^{IPT} -A (.+)$")),
    ("delete", re.compile(rf"^{IPT} -D (.+) 2>/dev/null \|\| true$")),
    ("unjump", re.compile(rf"^i=0; while \[ \$i -lt \d+ \] && {IPT} -D (\S+) .* -j (\S+) 2>/dev/null; "
                          r"do i=\$\(\(i\+1\)\); done$")),
    ("flush", re.compile(rf"^{IPT} -F (\S+) 2>/dev/null \|\| true$")),
    ("unchain", re.compile(rf"^{IPT} -X (\S+) 2>/dev/null \|\| true$")),
    ("untbf", re.compile(r"^for d in \$\(tc qdisc show .*\); do tc qdisc del dev \$d root .*; done$")),
    ("true", re.compile(r"^true$")),
]
PART_COMMANDS = [  # the parts of a line joined by ';'
    ("list", re.compile(rf"^{IPT} -L (\S+) -v -x -n 2>/dev/null$")),
    ("count", re.compile(rf"^{IPT} -S 2>/dev/null \| grep -c .* \|\| true$")),
    ("tbfs", re.compile(r"^tc qdisc show \| awk .* \| wc -l$")),
    ("route", re.compile(r"^ip -o route get (\S+)$")),
    ("tcdel", re.compile(r"^tc qdisc del dev \S+ root 2>/dev/null \|\| true$")),
]


class Rule:
    def __init__(self, spec: str):
        self.spec = spec
        words = shlex.split(spec)
        self.chain = words[0]
        self.source = words[words.index("-s") + 1].removesuffix("/32") if "-s" in words else None
        self.dest = words[words.index("-d") + 1].removesuffix("/32") if "-d" in words else None
        self.ports = {int(words[i + 1]) for i, w in enumerate(words) if w in ("--dport", "--sport")}
        self.comment = words[words.index("--comment") + 1] if "--comment" in words else ""
        self.drop = "-j" in words and words[words.index("-j") + 1] == "DROP"
        self.packets = self.bytes = 0

    def matches(self, peer: str, port: int, inbound: bool) -> bool:
        return (self.source if inbound else self.dest) == peer and (not self.ports or port in self.ports)

    def listing(self) -> str:
        """Its line in ``iptables -L CHAIN -v -x -n``."""
        src, dst = (f"{self.source}" if self.source else "0.0.0.0/0"), (self.dest or "0.0.0.0/0")
        target = "DROP" if self.drop else ""
        return (f"{self.packets:>8} {self.bytes:>8} {target:<10} all  --  *      *       {src:<20} {dst:<20} "
                f"/* {self.comment} */")


class NetState:
    """One node's project chains, jumps and rules."""

    def __init__(self) -> None:
        self.chains: set[str] = set()
        self.jumps: set[tuple[str, str]] = set()
        self.rules: list[Rule] = []

    def count(self) -> int:
        return len(self.chains) + len(self.jumps) + len(self.rules)


# ---- P28: one optional ability (restart-app), and not another (membership, data files ...) ---
class FakeRestartApp:
    """The broker application restarted inside its node (``RestartApp``): the node keeps
    running, its queue is held again from its log."""

    def __init__(self, cluster: "FakeCluster") -> None:
        self.cluster = cluster
        self.restarted: list[str] = []

    def restart_app(self, node: str) -> None:
        if not self.cluster.running(node):
            raise ClusterError(f"{node} is not running: no application to restart")
        self.restarted.append(node)
        self.cluster._log(node, "application restarted")


# ---- P16-P23, P27: the cluster ---------------------------------------------------------------
class FakeCluster(Cluster):
    kind: ClassVar[str] = NAME
    components: ClassVar[tuple[type, ...]] = (FakeRestartApp,)
    roles: ClassVar[dict[str, Role]] = {"leader": Role("leader", "the node holding the queue")}
    absent_targets: ClassVar[dict[str, str]] = {"zk": "a fake cluster has no coordinators"}
    ports: ClassVar[dict[str, tuple[int, ...]]] = {"replication": (REPLICATION_PORT,)}
    project: str

    def __init__(self, project: str | None = None, version: str | None = None) -> None:
        # P9: no side effects; the loader builds one to judge targets
        self.project = project or "mqchaos-fake"
        self.version = version
        self.leader = "fake1"
        self.state: dict[str, str] = {}  # node -> running / paused / stopped; {}: down
        self.net = {n: NetState() for n in NODES}
        self.queue: deque[dict] = deque()
        self.lock = threading.RLock()
        self.commands: list[tuple[str, list[str]]] = []  # every exec, as given
        self.unknown: list[tuple[str, str]] = []  # script parts this fake did not understand
        self.log: dict[str, list[str]] = {n: [] for n in NODES}
        self.up_settings: Any = None

    def _log(self, node: str, what: str) -> None:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.log[node].append(f"{stamp} {what}")

    # ---- P17 lifecycle ----
    def up(self, settings: Any = None) -> None:
        self.up_settings = settings
        self.leader = getattr(settings, "leader", None) or "fake1"
        with self.lock:
            self.state = {n: "running" for n in NODES}
            self.net = {n: NetState() for n in NODES}
        for n in NODES:
            self._log(n, f"started ({'leader' if n == self.leader else 'follower'})")
        self.wait_healthy(getattr(settings, "healthy_timeout", 5))

    def down(self) -> None:
        with self.lock:
            self.state = {}
            self.queue.clear()

    def wait_healthy(self, timeout: float) -> None:
        wait_until(self.healthy, timeout, "fake cluster healthy")

    def healthy(self) -> bool:
        return bool(self.state) and all(s == "running" for s in self.state.values())

    def versions(self) -> dict[str, Any]:
        return {NAME: self.version or "1.0"}

    def brokers(self) -> list[str]:
        return list(NODES)

    def client_endpoints(self) -> dict[str, str]:
        return {n: f"{ADDRESSES[n]}:{CLIENT_PORT}" for n in NODES}

    def collect_logs(self, run_dir) -> None:
        d = Path(run_dir) / "logs"
        d.mkdir(parents=True, exist_ok=True)
        for n, lines in self.log.items():
            (d / f"{n}.log").write_text("".join(line + "\n" for line in lines))

    # ---- P18 node access ----
    def nodes(self) -> list[str]:
        return list(NODES)

    def address(self, node: str) -> str:
        return ADDRESSES[node]

    def gateway(self) -> str:
        return GATEWAY

    def exec(self, node: str, cmd: list[str], check: bool = True, timeout: float = 60,
             user: str | None = None) -> tuple[int, str]:
        self.commands.append((node, list(cmd)))
        if node not in NODES:
            raise ClusterError(f"no node {node}")
        if self.state.get(node) != "running":
            code, out = 1, f"{node} is not running"
        elif cmd[:2] == ["sh", "-c"] and len(cmd) == 3:
            code, out = self._script(node, cmd[2])
        elif cmd[:3] == ["tc", "qdisc", "replace"]:
            code, out = 0, ""
        else:
            self.unknown.append((node, shlex.join(cmd)))
            code, out = 127, f"{cmd[0]}: not found"
        if check and code != 0:
            raise ClusterError(f"{node}: {shlex.join(cmd)} exited {code}: {out}")
        return code, out

    def _script(self, node: str, script: str) -> tuple[int, str]:
        out: list[str] = []
        with self.lock:
            net = self.net[node]
            for line in script.splitlines():
                line = line.strip()
                for kind, rx in LINE_COMMANDS:
                    m = rx.match(line)
                    if m:
                        self._line(net, kind, m)
                        break
                else:
                    for part in re.split(r"\s*;\s*", line):
                        for kind, rx in PART_COMMANDS:
                            m = rx.match(part)
                            if m:
                                out.append(self._part(node, net, kind, m))
                                break
                        else:
                            self.unknown.append((node, part))
                            return 1, f"sh: cannot run {part!r}"
        return 0, "".join(out)

    def _line(self, net: NetState, kind: str, m: re.Match) -> None:
        if kind == "chain":
            net.chains.add(m[1])
        elif kind == "jump":
            net.jumps.add((m[1], m[2]))
        elif kind == "add":
            net.rules.append(Rule(m[1]))
        elif kind == "delete":
            net.rules = [r for r in net.rules if r.spec != m[1]]  # gone already: `|| true`
        elif kind == "unjump":
            net.jumps.discard((m[1], m[2]))
        elif kind == "flush":
            net.rules = [r for r in net.rules if r.chain != m[1]]
        elif kind == "unchain":
            net.chains.discard(m[1])

    def _part(self, node: str, net: NetState, kind: str, m: re.Match) -> str:
        if kind == "list":
            rules = [r.listing() for r in net.rules if r.chain == m[1]]
            return "\n".join([f"Chain {m[1]} (1 references)",
                              "    pkts      bytes target     prot opt in     out     source               destination",
                              *rules]) + "\n"
        if kind == "count":
            return f"{net.count()}\n"
        if kind == "tbfs":
            return "0\n"
        if kind == "route":
            return f"{m[1]} dev eth0 src {ADDRESSES[node]} uid 0 \\    cache \n"
        return ""

    # ---- the network as the rules leave it ----
    def send(self, sender: str, receiver: str, port: int, size: int = 100) -> None:
        """One packet ``sender`` -> ``receiver`` (a node or "clients"): Refused when a node on
        the way does not run or a DROP rule takes it (its counters count it, as iptables')."""
        with self.lock:
            for end in (sender, receiver):
                if end != "clients" and self.state.get(end) != "running":
                    raise Refused(f"{end} is {self.state.get(end, 'down')}")
            addr = {**ADDRESSES, "clients": GATEWAY}
            hops = [(sender, "MQCHAOS-OUT", addr[receiver], False), (receiver, "MQCHAOS-IN", addr[sender], True)]
            for node, chain, peer, inbound in hops:
                if node == "clients":
                    continue
                for rule in self.net[node].rules:
                    if rule.chain == chain and rule.matches(peer, port, inbound):
                        rule.packets += 1
                        rule.bytes += size
                        if rule.drop:
                            raise Refused(f"{sender} -> {receiver} dropped by {node} ({rule.comment})")

    def publish(self, via: str, msg: dict) -> None:
        self.send("clients", via, CLIENT_PORT)
        if via != self.leader:
            self.send(via, self.leader, REPLICATION_PORT)
            self.send(self.leader, via, REPLICATION_PORT)
        with self.lock:
            self.queue.append(msg)

    def fetch(self, via: str) -> dict | None:
        self.send("clients", via, CLIENT_PORT)
        if via != self.leader:
            self.send(via, self.leader, REPLICATION_PORT)
            self.send(self.leader, via, REPLICATION_PORT)
        with self.lock:
            return self.queue.popleft() if self.queue else None

    def cut_links(self) -> list[list[str]]:
        """The node pairs some DROP rule separates now."""
        by_addr = {a: n for n, a in ADDRESSES.items()}
        return sorted({tuple(sorted((n, by_addr[r.source or r.dest])))
                       for n, net in self.net.items() for r in net.rules
                       if r.drop and (r.source or r.dest) in by_addr})

    # ---- P19 node control ----
    def _set(self, node: str, state: str) -> None:
        with self.lock:
            if state == "stopped":
                self.net[node] = NetState()  # a fresh network namespace when it starts again
            self.state[node] = state
        self._log(node, state)

    def kill(self, node: str) -> None:
        self._set(node, "stopped")

    def stop(self, node: str, timeout: float = 60) -> None:
        self._set(node, "stopped")

    def start(self, node: str) -> None:
        if self.state.get(node) == "stopped":
            self._set(node, "running")

    def pause(self, node: str) -> None:
        self._set(node, "paused")

    def unpause(self, node: str) -> None:
        if self.state.get(node) == "paused":
            self._set(node, "running")

    def wipe(self, node: str, start: bool = True, **options: Any) -> None:
        self._set(node, "stopped")
        if node == self.leader:
            with self.lock:
                self.queue.clear()
        if start:
            self.start(node)

    def exists(self, node: str) -> bool:
        return node in self.state

    def running(self, node: str) -> bool:
        return self.state.get(node) == "running"

    def paused(self, node: str) -> bool:
        return self.state.get(node) == "paused"

    # ---- P20 roles ----
    def role(self, name: str, arg: str | None) -> list[str]:
        if name != "leader":
            raise RoleError(f"a fake cluster has no role {name!r}")
        return [self.leader] if self.running(self.leader) else []

    # ---- P21-P23 recovery ----
    def whole(self) -> bool:
        return self.healthy() and not self.cut_links()

    def wait_whole(self, timeout: float, steady: Steady, record: Recorder,
                   stale_after: float | None = None) -> None:
        wait_until(steady(self.whole), timeout, "fake cluster whole", interval=0.1)

    def stuck_nodes(self) -> list[str]:
        return [n for n in NODES if not self.running(n)]

    def wait_rejoined(self, node: str, timeout: float) -> None:
        wait_until(lambda: self.running(node), timeout, f"{node} rejoined", interval=0.1)

    # ---- P27 optional ----
    def node_states(self) -> dict[str, str]:
        return dict(self.state)

    def exited(self) -> dict[str, str]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {"healthy": self.healthy(), "leader": self.leader, "queue": len(self.queue)}

    def seen_before(self, fault: str, node: str, params: dict) -> dict | None:
        return {"leader": node == self.leader}

    def close(self) -> None:
        pass


# ---- P24: the workers --------------------------------------------------------------------------
class FakeProducer(Worker):
    def __init__(self, name: str, ctx: RunContext, via: str, rate: float | None, max_messages: int):
        super().__init__(name, ctx.writer("produce", name), ctx.clock, ctx.stop)
        self.cluster, self.via, self.rate, self.max_messages = ctx.cluster, via, rate, max_messages

    def work(self) -> None:
        seq = 0
        while not self.stopping() and seq < self.max_messages:
            seq += 1
            msg_id = f"{self.name}-{seq}"
            t = self.clock.now()
            self.writer.write(invoke_record(msg_id=msg_id, producer=self.name, seq=seq, t_invoke=t, node=self.via))
            try:
                self.cluster.publish(self.via, {"msg_id": msg_id, "producer": self.name, "seq": seq})
                outcome, error = "ok", None
            except Refused as e:
                outcome, error = "fail", str(e)
            self.writer.write(produce_record(msg_id=msg_id, producer=self.name, seq=seq, outcome=outcome,
                                             t_invoke=t, t_complete=self.clock.now(), node=self.via, error=error))
            self.stats.add(outcome, error)
            if self.rate:
                self.stop_me.wait(1 / self.rate)


class FakeConsumer(Worker):
    crashes: int  # how often ``crash()`` was called (run.json consumer_crashes)

    def __init__(self, name: str, ctx: RunContext, via: str, queue: str):
        super().__init__(name, ctx.writer("consume", name), ctx.clock, ctx.stop)
        self.cluster, self.via, self.queue = ctx.cluster, via, queue
        self.crashes = 0
        self.last_delivery = time.monotonic()

    def crash(self) -> None:
        self.crashes += 1

    def work(self) -> None:
        while not self.stopping():
            try:
                msg = self.cluster.fetch(self.via)
            except Refused:
                msg = None
            if msg is None:
                self.stop_me.wait(0.02)
                continue
            self.writer.write(consume_record(msg_id=msg["msg_id"], consumer=self.name, t=self.clock.now(),
                                             redelivered=False, source=self.queue, offset=None, node=self.via,
                                             producer=msg["producer"], seq=msg["seq"]))
            self.stats.add("delivered")
            self.last_delivery = time.monotonic()


# ---- P1, P3-P15, P26: the broker -------------------------------------------------------------------
class FakeBroker(Broker):
    name: ClassVar[str] = NAME
    scenario_model: ClassVar[type] = FakeScenario
    settings_model: ClassVar[type] = FakeSettings
    image: ClassVar[ImageSpec] = ImageSpec(repo="mqchaos/fake", context="fake")
    generations: ClassVar[dict[str, Generation]] = {"1.0": Generation("1.0", default=True)}

    def cluster_class(self, version: str | None = None) -> type[FakeCluster]:
        return FakeCluster

    def cluster(self, project: str | None = None, version: str | None = None) -> FakeCluster:
        return FakeCluster(project, version)

    def declare(self, ctx: RunContext) -> None:
        with ctx.cluster.lock:
            ctx.cluster.queue.clear()
        ctx.cluster._log(ctx.cluster.leader, f"declared {ctx.sc.queue}")

    def producers(self, ctx: RunContext) -> list[Worker]:
        w = ctx.sc.workload
        return [FakeProducer(f"p{i}", ctx, NODES[i % len(NODES)], w.rate, w.max_messages) for i in range(w.producers)]

    def consumers(self, ctx: RunContext) -> list[Worker]:
        return [FakeConsumer(f"c{i}", ctx, NODES[i % len(NODES)], ctx.sc.queue)
                for i in range(ctx.sc.workload.consumers)]

    def drain(self, ctx: RunContext, consumers: list[Worker]) -> Drained:
        t = ctx.sc.timing
        t0 = time.monotonic()
        readers = list(consumers) or [FakeConsumer("drain0", ctx, ctx.cluster.leader, ctx.sc.queue)]
        for r in readers:
            if not r.is_alive() and r.ident is None:
                r.start()

        def empty_and_idle() -> bool:
            last = max(r.last_delivery for r in readers)
            return not ctx.cluster.queue and time.monotonic() - last >= t.drain_idle
        try:
            wait_until(empty_and_idle, t.drain_timeout, "drained", interval=0.05)
            complete = True
        except TimeoutError:
            complete = False
        for r in readers:
            r.stop()
        for r in readers:
            r.join(10)
        return Drained({"complete": complete, "seconds": round(time.monotonic() - t0, 2),
                        "left": len(ctx.cluster.queue)}, readers)

    def sample(self, cluster: Any, sc: Any) -> dict:
        return {"leader": cluster.leader, "queue_length": len(cluster.queue), "cut": cluster.cut_links()}

    def measure(self, sc, samples, logs, produce, consume, fault_start) -> dict:
        since = fault_start if fault_start is not None else float("-inf")
        return {"refused": sum(1 for r in produce if r.get("outcome") == "fail" and r["t_invoke"] >= since),
                "leaders_seen": sorted({s["leader"] for s in samples if s.get("leader")})}

    # ---- P26 optional ----
    def prefill(self, ctx: RunContext) -> dict:
        n = ctx.sc.workload.prefill
        if not n:
            return {}
        t0 = time.monotonic()
        w = FakeProducer("fill", ctx, ctx.cluster.leader, None, n)
        w.start()
        w.join(ctx.sc.timing.drain_timeout)
        w.stop()
        seconds = max(time.monotonic() - t0, 1e-6)
        return {"messages": n, "ok": w.stats.ok, "seconds": round(seconds, 2), "rate": round(w.stats.ok / seconds, 1)}

    def probes(self, ctx: RunContext) -> Probes:
        return Probes(ctx)


PLUGIN = FakeBroker()

# Which part of this plug-in implements each item of the checklist (docs/plugins.md):
# "Owner.attribute" (Owner: a class here, or "module" for this module's own names).
CHECKLIST: dict[str, tuple[str, ...]] = {
    "P1": ("module.PLUGIN",),
    "P2": ("module.PLUGINS",),
    "P3": ("FakeBroker.name",),
    "P4": ("FakeBroker.scenario_model",),
    "P5": ("FakeBroker.settings_model", "FakeSettings.broker", "FakeSettings.keys_file"),
    "P6": ("FakeBroker.image",),
    "P7": ("FakeBroker.generations",),
    "P8": ("FakeBroker.cluster_class",),
    "P9": ("FakeBroker.cluster",),
    "P10": ("FakeBroker.declare",),
    "P11": ("FakeBroker.producers",),
    "P12": ("FakeBroker.consumers", "FakeConsumer.crash", "FakeConsumer.crashes"),
    "P13": ("FakeBroker.drain",),
    "P14": ("FakeBroker.sample",),
    "P15": ("FakeBroker.measure",),
    "P16": ("FakeCluster.kind", "FakeCluster.roles", "FakeCluster.absent_targets", "FakeCluster.ports"),
    "P17": ("FakeCluster.up", "FakeCluster.down", "FakeCluster.wait_healthy", "FakeCluster.healthy",
            "FakeCluster.versions", "FakeCluster.brokers", "FakeCluster.client_endpoints", "FakeCluster.collect_logs"),
    "P18": ("FakeCluster.project", "FakeCluster.nodes", "FakeCluster.address", "FakeCluster.gateway",
            "FakeCluster.exec"),
    "P19": ("FakeCluster.kill", "FakeCluster.stop", "FakeCluster.start", "FakeCluster.pause", "FakeCluster.unpause",
            "FakeCluster.wipe", "FakeCluster.exists", "FakeCluster.running", "FakeCluster.paused"),
    "P20": ("FakeCluster.role",),
    "P21": ("FakeCluster.wait_whole",),
    "P22": ("FakeCluster.stuck_nodes",),
    "P23": ("FakeCluster.wait_rejoined",),
    "P24": ("FakeProducer.work", "FakeConsumer.work"),
    "P25": ("FakeScenario.broker", "FakeScenario.cluster", "FakeScenario.workload", "FakeScenario.probes",
            "FakeScenario.target_key", "FakeScenario.live_consumers", "FakeScenario.subject",
            "FakeScenario.measurement_names"),
    "P26": ("FakeBroker.prefill", "FakeBroker.probes"),
    "P27": ("FakeCluster.node_states", "FakeCluster.exited", "FakeCluster.describe", "FakeCluster.seen_before",
            "FakeCluster.close"),
    "P28": ("FakeCluster.components", "FakeCluster.capabilities", "FakeRestartApp.restart_app"),
}
