"""The fakes the tests share: clusters as the nemesis and the target resolver see them, a KRaft
cluster over a fake ``docker exec`` and AdminClient, RabbitMQ's client-side objects, and one
fake of the run loop (``FakeRun``: harness.runner.Run as a batch and its checker use it) with
the kinds of run the batch and checker tests need. Tests import it (``import fakes``), never
each other; a change to an interface a fake stands for is made here once."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import brokers, rows, runner, store
from harness.batch import pipeline
from harness.brokers.protocol import Cluster
from harness.brokers.kafka import kraft
from harness.brokers.kafka.cluster import ZooKeeperCluster
from harness.brokers.kafka.kraft_cluster import KRaftCluster
from harness.brokers.rabbitmq.cluster import RabbitCluster
from harness.checking import CheckQueue
from harness.runner import Hooks
from harness.util import wait_until
from harness.verdicts import EXIT_UNKNOWN, EXIT_VALID, run_exit_code

KRAFT_NODES = ["kafka1", "kafka2", "kafka3"]


# ---- clusters as the nemesis sees them (tests/test_grudge.py, test_faithful.py, test_one_way.py)

class FakeKafka:
    """Kafka's roles (the plug-in's own table) over a fixed topology."""
    kind = "kafka"
    project = "fake"
    roles = ZooKeeperCluster.roles
    seen_before, node_states = Cluster.seen_before, Cluster.node_states

    def role(self, name, arg):
        if name in ("zk", "controller"):
            return self.zk_nodes() if name == "zk" else [self.controller()]
        topic, _, part = arg.partition("/")
        found = getattr(self, name)(topic, int(part or 0))
        return found if isinstance(found, list) else [found]

    def nodes(self):
        return ["zk1", "zk2", "zk3", "kafka1", "kafka2", "kafka3"]

    def brokers(self):
        return ["kafka1", "kafka2", "kafka3"]

    def zk_nodes(self):
        return ["zk1", "zk2", "zk3"]

    def leader(self, topic, p=0):
        return {"t": "kafka2"}[topic]

    def followers(self, topic, p=0):
        return ["kafka1", "kafka3"]

    def isr(self, topic, p=0):
        return ["kafka2", "kafka1", "kafka3"]

    def controller(self):
        return "kafka3"


class FakeRabbit:
    """Records what would be done; every node answers; addresses are fixed."""
    kind = "rabbitmq"
    project = "fake"
    roles, ports = RabbitCluster.roles, RabbitCluster.ports
    seen_before, node_states = Cluster.seen_before, Cluster.node_states

    def role(self, name, arg):
        return ["rabbit2"]  # the queue's master

    def wait_whole(self, timeout, steady, record, stale_after=None):
        wait_until(steady(self.healthy), timeout, "fake cluster whole", 0.05)

    def close(self):
        pass

    def ability(self, proto):
        """A double that has a family's methods itself is its own component."""
        return self if isinstance(self, proto) else None

    def __init__(self, tmp_path):
        self.calls: list[tuple] = []
        self.state = {n: "running" for n in self.nodes()}
        self.tmp = tmp_path

    def nodes(self):
        return ["rabbit1", "rabbit2", "rabbit3"]

    brokers = nodes

    def conf_dir(self):
        return self.tmp

    def address(self, n):
        return f"10.0.0.{n[-1]}"

    def gateway(self):
        return "10.0.0.254"

    def exists(self, n):
        return True

    def running(self, n):
        return self.state[n] == "running"

    def paused(self, n):
        return self.state[n] == "paused"

    def exec(self, node, cmd, check=True, timeout=60):
        self.calls.append(("exec", node, cmd[-1]))
        return 0, ""

    def kill(self, n):
        self.calls.append(("kill", n))
        self.state[n] = "exited"

    def start(self, n):
        self.calls.append(("start", n))
        self.state[n] = "running"

    def pause(self, n):
        self.calls.append(("pause", n))
        self.state[n] = "paused"

    def unpause(self, n):
        self.calls.append(("unpause", n))
        self.state[n] = "running"

    def healthy(self):
        return all(s == "running" for s in self.state.values())

    def exited(self):
        return {n: "exit 1: BOOT FAILED" for n, s in self.state.items() if s == "dead"}


# ---- a KRaft cluster over a fake docker exec and a fake AdminClient (harness/brokers/kafka/tests/test_kraft.py)

class FakeAdmin:
    """list_topics as confluent-kafka answers it: brokers by id, partitions by id, and the
    broker that answered (every broker with the same view here:
    harness/brokers/kafka/tests/test_kafka_views.py gives them different ones)."""

    def __init__(self, brokers: list[int], partitions: dict[str, list[tuple[int, int, list[int], list[int]]]]):
        self.brokers, self.parts = brokers, partitions

    def list_topics(self, topic=None, timeout=None, answering: int = -1):
        topics = {t: SimpleNamespace(error=None, partitions={
            pid: SimpleNamespace(id=pid, leader=leader, replicas=reps, isrs=isr) for pid, leader, reps, isr in ps})
            for t, ps in self.parts.items() if topic in (None, t)}
        return SimpleNamespace(brokers={b: SimpleNamespace(id=b) for b in self.brokers}, topics=topics,
                               orig_broker_id=answering, orig_broker_name=f"127.0.0.1:{9091 + answering}/{answering}")

    def pinned(self, node: str) -> SimpleNamespace:
        """The client pinned to ``node``: its broker answers."""
        bid = int(node.removeprefix("kafka"))
        return SimpleNamespace(list_topics=lambda topic=None, timeout=None: self.list_topics(topic, timeout, bid))


def fake_kraft(monkeypatch, states: dict[str, str | None], admin: FakeAdmin, version: str = "4.1",
               logs: str = "", running: tuple[str, ...] = tuple(KRAFT_NODES)) -> KRaftCluster:
    c = brokers.get("kafka").cluster(version=version)
    calls: list[tuple[str, list[str]]] = []

    def exec_(node, cmd, check=True, timeout=60, user=None):
        calls.append((node, cmd))
        if cmd[:1] == ["cat"] and cmd[1] == kraft.QUORUM_STATE:
            text = states.get(node)
            return (0, text) if text is not None else (1, f"Error response from daemon: {node} is paused")
        raise AssertionError(f"unexpected exec {cmd}")
    monkeypatch.setattr(c, "exec", exec_)
    monkeypatch.setattr(c, "admin", lambda: admin)
    monkeypatch.setattr(c, "node_admin", admin.pinned)
    monkeypatch.setattr(c, "state", lambda n: {"Running": n in running, "Paused": False,
                                               "StartedAt": "2026-11-24T10:00:00.5Z"})
    monkeypatch.setattr(c, "logs", lambda n, tail=None, since=None: logs)
    c.calls = calls
    return c


# ---- RabbitMQ's clients and observation against fakes (harness/brokers/rabbitmq/tests/test_rmq4_rows.py)

class FakeWriter:
    """A history writer keeping its records in memory."""

    def __init__(self):
        self.records = []

    def write(self, record):
        self.records.append(record)

    def close(self):
        pass


class FakeChannel:
    """A pika channel recording acks, rejects and nacks (always requeued)."""

    def __init__(self):
        self.acked, self.rejected, self.nacked = [], [], []

    def basic_ack(self, tag):
        self.acked.append(tag)

    def basic_reject(self, tag, requeue):
        assert requeue is True
        self.rejected.append(tag)

    def basic_nack(self, tag, requeue):
        assert requeue is True
        self.nacked.append(tag)


class FakeRabbitApi:
    """A RabbitMQ cluster as observation and the drain see it: queues by name from the
    management API, every node down."""

    def __init__(self, queues):
        self.queues = queues

    def nodes(self):
        return ["rabbit1", "rabbit2", "rabbit3"]

    def queue(self, name, *a, **kw):
        return self.queues.get(name)

    def sites(self):
        return [self.nodes()]

    def running(self, node):
        return False

    def api(self, path, node=None, timeout=None):
        return self.queues.get(path.rsplit("/", 1)[-1])


# ---- the run loop as a batch and its checker see it ---------------------------------------------

class FakeRun:
    """harness.runner.Run's interface to a batch (harness.batch) and its checker
    (harness.checking.CheckQueue): prepare, execute (calling the hooks where Run does), check,
    finish, keep_copy, draw, abandon, save_info. Nothing is brought up; the subclasses say
    what their runs do, so Run's interface is re-implemented once."""

    def __init__(self, sc, *, results=None, check=False, keep_cluster=False, hooks=None):
        self.sc, self.hooks = sc, hooks or Hooks()
        self.dir = self.new_dir(results)
        self.info = {"status": "running"}
        self.executed = threading.Event()

    def new_dir(self, results) -> Path:
        raise NotImplementedError

    def prepare(self, background=False):
        pass

    def abandon(self):
        self.info["status"] = "abandoned"
        self.save_info()
        self.executed.set()

    def execute(self) -> int:
        raise NotImplementedError

    def check(self, spark) -> dict:
        return {}

    def keep_copy(self, spark):
        pass

    def draw(self):
        pass

    def finish(self, result, pictures=True) -> int:
        return run_exit_code(result)

    def save_info(self):
        pass


class StoredRun(FakeRun):
    """A run writing a synthetic run directory through the store: run.json, check.json
    with the figures planted for (scenario, version, repeat) in ``plan`` (test_matrix)."""
    plan: dict = {}
    ran: list = []

    def __init__(self, sc, **kw):
        super().__init__(sc, **kw)
        self.info = {"scenario": sc.name, "id": sc.id, "broker": sc.broker, "params": sc.model_dump(mode="json"),
                     "version": {"version": sc.version, "from": sc.version_source}, "status": "running",
                     "phases": {}}
        self.save_info()

    def new_dir(self, results) -> Path:
        return store.new_run_dir(self.sc.name, results)

    def planted(self) -> dict:
        rep = self.info.get("catalogue", {}).get("repeat", 0)
        return StoredRun.plan.get((self.sc.name, self.sc.version, rep), {})

    def execute(self):
        try:
            StoredRun.ran.append((self.sc.name, self.sc.version, self.info["catalogue"]["repeat"]))
            self.hooks.before_faults()
            if self.planted().get("harness_error"):
                self.info.update(status="harness-error", error="ClusterError: planted")
            else:
                self.info.update(status="completed", brokers={self.sc.broker: f"{self.sc.version}.1"})
                self.hooks.history_closed(self)
            self.info["phases"]["end"] = 1.0
            self.save_info()
            return EXIT_UNKNOWN
        finally:
            self.executed.set()

    def check(self, spark):
        p = self.planted()
        lost = p.get("lost", 0)
        return {"attempted": 120, "ok": 100, "fail": 15, "info": 5, "lost": lost, "duplicated": p.get("dup", 0),
                "ordering_violations": 0, "ordering": "none", "unavailable_s": p.get("unavailable", 2.5),
                "valid": lost == 0}

    def finish(self, result, pictures=True):
        p = self.planted()
        held = p["held"] if "held" in p else result["lost"] == 0
        result["prediction"] = {"held": held, "reason": f"lost={result['lost']} vs 0",
                                "checks": [{"key": "lost", "expected": 0, "actual": result["lost"], "held": held}]}
        store.write_check(self.dir, result)
        self.info["summary"] = rows.run_row(self.sc, result, self.info, self.dir)
        code = run_exit_code(result)
        self.info["exit_code"] = code
        self.save_info()
        return code

    def save_info(self):
        store.write_run(self.dir, self.info)


@pytest.fixture
def fake_runs(monkeypatch, tmp_path):
    """A batch whose runs are StoredRuns (a claim the version lacks: the real run loop, which
    brings nothing up) and whose checker starts no Spark; the results root under tmp_path."""
    StoredRun.plan, StoredRun.ran = {}, []

    def make(sc, **kw):
        return runner.Run(sc, **kw) if sc.not_applicable() else StoredRun(sc, **kw)

    monkeypatch.setattr(pipeline, "Run", make)
    monkeypatch.setattr(pipeline, "CheckQueue", lambda master: CheckQueue(spark_factory=object))
    monkeypatch.setenv(store.RESULTS_ENV, str(tmp_path / "results"))
    return tmp_path / "results"


class Timeline:
    def __init__(self):
        self.events: list[tuple[float, str, str, str]] = []  # (t, what, start|end, run)
        self.lock = threading.Lock()

    def mark(self, what, edge, who):
        with self.lock:
            self.events.append((time.monotonic(), what, edge, who))

    def intervals(self, what):
        starts, out = {}, []
        for t, w, edge, who in self.events:
            if w != what:
                continue
            if edge == "start":
                starts[who] = t
            else:
                out.append((starts.pop(who), t, who))
        return out


class TimedRun(FakeRun):
    """A run that only records on ``timeline`` when it brings its cluster up, loads, faults,
    drains, goes down, is checked and drawn (test_pipeline)."""
    timeline: Timeline
    fail: set = set()          # scenario names whose first attempt is a harness error
    bad_check: set = set()     # scenario names whose check raises
    made: list = []

    def __init__(self, sc, **kw):
        super().__init__(sc, **kw)
        self._up = None
        self.background = False
        TimedRun.made.append(self)

    def new_dir(self, results) -> Path:
        d = Path(results) / self.sc.name / f"{len(TimedRun.made):03d}"
        d.mkdir(parents=True)
        return d

    def who(self):
        return f"{self.sc.name}#{TimedRun.made.index(self)}"

    def _bring_up(self):
        what = "up-background" if self.background else "up"
        self.timeline.mark(what, "start", self.who())
        time.sleep(0.05)
        self.timeline.mark(what, "end", self.who())

    def prepare(self, background=False):
        self.background = background
        self._up = threading.Thread(target=self._bring_up)
        self._up.start()

    def abandon(self):
        self._up.join()
        self.timeline.mark("abandon", "start", self.who())
        super().abandon()

    def execute(self):
        detached = False
        try:
            if self._up is None:
                self._bring_up()
            else:
                self._up.join()
            self._load_faults_drain()
            if self.sc.name in TimedRun.fail:  # e.g. the drain failed
                TimedRun.fail.discard(self.sc.name)
                self.info["status"] = "harness-error"
                self.info["error"] = "planted"
            else:
                self.info["status"] = "completed"
            if self.info["status"] == "completed" and self.hooks.finish is not None:
                self.hooks.finish(self._end)
                detached = True
            else:
                self._end()
            return EXIT_UNKNOWN
        finally:
            if not detached:
                self.executed.set()

    def _load_faults_drain(self):
        self.timeline.mark("load", "start", self.who())
        time.sleep(0.02)  # warm-up
        self.hooks.before_faults()
        self.timeline.mark("faults", "start", self.who())
        time.sleep(0.05)
        self.timeline.mark("faults", "end", self.who())
        time.sleep(0.01)  # recovery
        self.timeline.mark("load", "end", self.who())
        self.timeline.mark("drain", "start", self.who())
        time.sleep(0.02)
        self.timeline.mark("drain", "end", self.who())

    def _end(self):
        self.timeline.mark("down", "start", self.who())
        if self.info["status"] == "completed":
            self.hooks.history_closed(self)
        time.sleep(0.03)
        self.timeline.mark("down", "end", self.who())
        self.executed.set()

    def check(self, spark):
        self.timeline.mark("check", "start", self.who())
        time.sleep(0.04)
        self.timeline.mark("check", "end", self.who())
        if self.sc.name in TimedRun.bad_check:
            raise RuntimeError("planted")
        return {"planted": True}

    def keep_copy(self, spark):
        self.timeline.mark("later", "start", self.who() + "copy")
        time.sleep(0.03)
        self.timeline.mark("later", "end", self.who() + "copy")

    def draw(self):
        self.timeline.mark("later", "start", self.who() + "draw")
        time.sleep(0.03)
        self.timeline.mark("later", "end", self.who() + "draw")

    def finish(self, result, pictures=True):
        assert not pictures  # a batch draws them in a process of their own
        self.info["summary"] = {"prediction": True, "valid": True, "scenario": self.sc.name}
        return EXIT_VALID


@pytest.fixture
def fake_batch(monkeypatch, tmp_path):
    """A batch whose runs are TimedRuns on a fresh timeline and whose checker starts no Spark."""
    TimedRun.timeline, TimedRun.made, TimedRun.fail, TimedRun.bad_check = Timeline(), [], set(), set()
    monkeypatch.setattr(pipeline, "Run", TimedRun)
    monkeypatch.setattr(pipeline, "CheckQueue", lambda master: CheckQueue(spark_factory=object))
    return tmp_path


class CheckedRun(FakeRun):
    """A run already executed, as the checker alone receives it: its check does
    ``behaviour(spark)``, its exit code is the result's ``code``. No scenario: the checker
    reads none, so the base's constructor is not used."""

    def __init__(self, name, behaviour):
        self.dir, self.behaviour = name, behaviour
        self.info = {}
        self.executed = threading.Event()
        self.executed.set()

    def check(self, spark):
        return self.behaviour(spark)

    def finish(self, result, pictures=True):
        return result["code"]


class FakeSpark:
    """A Spark session whose context a check can stop (as a JVM that went away does)."""

    def __init__(self):
        self.stopped = False
        outer = self

        class SC:
            class _jsc:  # noqa: N801 - py4j's name
                @staticmethod
                def sc():
                    return type("J", (), {"isStopped": lambda self: outer.stopped})()
        self.sparkContext = SC()
