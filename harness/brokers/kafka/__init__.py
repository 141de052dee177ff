"""The Kafka plug-in: three brokers (kafka1..3) with a ZooKeeper ensemble (zk1..3, 3.9) or in
KRaft mode (3.9-kraft, 4.1: each node also a controller voter, or the controllers apart), from
the jars on Maven Central; confluent-kafka clients (a producer per scenario's acks, a reader in
the drain). Each version's topology is a cluster class of its own (``cluster_class``), whose
components give its operation families (``operations``).

The plug-in checklist's items (docs/plugins.md), module by module:

    P1-P4, P9-P15     this module (``Kafka``): declare, clients, the drain (a live reader's gaps
                      are the checker's ``read_gaps``; then ``final_read``: ``read_then_gone``;
                      each replica's log from its segments, ``capture_replicas``), sample, measure
    P5                config.py (``KafkaConfig``), values.py (ConfigDef's values)
    P6-P7             generations.py (3.9, 3.9-kraft, 4.1); the jars (pom.xml / pom-4.xml) from
                      Maven Central; kraft.py (KRaft's pure parts, compose/kafka-kraft.yml)
    P8, P16-P17       cluster.py (``KafkaCluster``, ``ZooKeeperCluster``: compose/kafka.yml),
                      kraft_cluster.py (``KRaftCluster``), services.py, zookeeper.py, quorum.py,
                      controllers.py, migration.py; nodes.py (ids, ports)
    P18-P19           harness.brokers.containers / compose (every ``ComposeCluster``)
    P20               roles.py (what needs ZooKeeper is refused on KRaft at load: ``absent_targets``)
    P21-P23           whole.py (replication restored), cluster.py (the readers by mode)
    P24               clients.py (a producer per acks, ``KafkaReader``), txn.py (transactions,
                      the consume-transform-produce processors)
    P25               model.py (``KafkaScenario``: a claim about one metadata mode, ``metadata:``,
                      is not applicable on the other)
    P26               probes.py (leaders' spread, K11; ``fetches``, K17), observe.py, adminclient.py
    P28               operations.py
"""
from __future__ import annotations

import logging
import re
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any

from harness.brokers.compose import COMPOSE_DIR
from harness.brokers.containers import docker
from harness.brokers.generations import Generation, ImageSpec
from harness.brokers.protocol import Broker, ClusterError
from harness.clients.base import Worker
from harness.context import Drained, RunContext
from harness.history import JsonlWriter
from harness.brokers.kafka import observe, segments
from harness.brokers.kafka.clients import KafkaProducerWorker, KafkaReader
from harness.brokers.kafka.cluster import KafkaCluster, ZooKeeperCluster
from harness.brokers.kafka.config import KafkaConfig
from harness.brokers.kafka.generations import GENERATIONS, ZOOKEEPER, has, pom
from harness.brokers.kafka.kraft_cluster import KRaftCluster
from harness.brokers.kafka.model import KafkaScenario
from harness.brokers.kafka.nodes import is_broker
from harness.brokers.kafka.probes import KafkaProbes
from harness.brokers.kafka.txn import KafkaTxnProcessor, KafkaTxnProducer
from harness.util import run as run_cmd

log = logging.getLogger(__name__)


def _jars(ctx: Path, generation: Generation) -> None:
    """The generation's Kafka jars (and ZooKeeper's, for 3.x), resolved from Maven Central
    into the build context."""
    libs = ctx / "libs"
    if libs.exists():
        shutil.rmtree(libs)
    libs.mkdir()
    version = generation.args()["KAFKA_VERSION"]
    log.info("resolving the Kafka %s jars from Maven Central (mvn dependency:copy-dependencies)", version)
    run_cmd(mvn_command(generation, libs), timeout=1200)
    wanted = ["kafka_2.13-*.jar"] + (["zookeeper-*.jar"] if version.startswith("3.") else ["log4j-slf4j-impl-*.jar"])
    missing = [w for w in wanted if not any(libs.glob(w))]
    if missing:
        raise RuntimeError(f"maven did not resolve {', '.join(missing)} into {libs}")


def mvn_command(generation: Generation, libs: Path) -> list[str]:
    return ["mvn", "-q", "-B", "-f", str(COMPOSE_DIR / "kafka" / pom(generation)), "dependency:copy-dependencies",
            f"-Dkafka.version={generation.args()['KAFKA_VERSION']}", "-DincludeScope=runtime",
            f"-DoutputDirectory={libs}"]


def placement(brokers: list[str], controller: str | None, leader: str, rf: int) -> list[str] | None:
    """A partition's replicas, preferred leader first: on the controller, or on a broker that
    is not (the controller then a follower whenever the replicas leave room for it: second,
    or with ``not_controller_last`` last, after the other brokers). None (Kafka's own
    placement) when the controller is a node apart from the brokers (KRaft's dedicated
    controllers): no broker is the controller, every one reaches it apart from the others."""
    if controller is not None and not is_broker(controller):
        return None
    if controller not in brokers:
        raise RuntimeError(f"no controller to place the leader by (controller: {controller})")
    others = [b for b in brokers if b != controller]
    last = others[:max(rf - 1, 1)] + [controller]
    order = {"controller": [controller, *others], "not_controller_last": last}.get(
        leader, [others[0], controller, *others[1:]])
    return order[:rf]


def final_read(ctx: RunContext, live: KafkaReader) -> dict:
    """The topic read once more from the beginning, after the live reader's drain, by a
    reader of its own (its records below probes/, not the history: they would all count as
    duplicates): ``read_then_gone``, the messages the live reader read that the final log no
    longer holds (seed 002: a reader sees only up to the high watermark, what every ISR
    member has, so nothing it read is truncated later; None when either read was
    incomplete), and ``final_read``, what the final log holds."""
    t = ctx.sc.timing
    out = Path(ctx.dir) / "probes"
    out.mkdir(parents=True, exist_ok=True)
    final = KafkaReader("final", ctx.cluster.bootstrap_servers(), ctx.sc.topic.name,
                        JsonlWriter(out / "final-read.jsonl"), ctx.clock, ctx.stop,
                        timeout_s=t.drain_timeout, remember=True)
    final.start()
    final.join(t.drain_timeout + 30)
    done = live.complete and final.complete
    return {"read_then_gone": len(live.ids - final.ids) if done else None, "final_read": len(final.ids)}


def capture_replicas(ctx: RunContext) -> dict:
    """Each running broker's log of the run's topic, from its segment files, as
    history/replica-<node>.jsonl (harness/brokers/kafka/segments.py): per node what was
    read, or why not (a node down at the drain has no replica to read)."""
    out = {}
    for node in ctx.cluster.brokers():
        try:
            tar = ctx.cluster.archive(node, segments.DATA_DIR, f"{ctx.sc.topic.name}-*")
            lines, stats = segments.replica_lines(node, ctx.sc.topic.name, tar)
        except (ClusterError, segments.SegmentError, tarfile.TarError, OSError) as e:
            out[node] = {"error": str(e)[:300]}
            continue
        w = ctx.writer("replica", node)
        try:
            for line in lines:
                w.write(line)
        finally:
            w.close()
        out[node] = stats
    return out


class Kafka(Broker):
    name = "kafka"
    scenario_model = KafkaScenario
    settings_model = KafkaConfig
    image = ImageSpec(repo="mqchaos/kafka", context="kafka", inputs=("Dockerfile", "pom.xml", "pom-4.xml"),
                      tools=(("mvn", "maven"),), prepare=_jars)
    generations = GENERATIONS

    def cluster_class(self, version: str | None = None) -> type[KafkaCluster]:
        """The version's topology: with a ZooKeeper ensemble (3.9) or in KRaft mode (its
        controller quorum combined with the brokers or apart: the settings')."""
        return ZooKeeperCluster if has(self.generation(version).name, ZOOKEEPER) else KRaftCluster

    def cluster(self, project: str | None = None, version: str | None = None) -> KafkaCluster:
        version = self.generation(version).name
        return self.cluster_class(version)(project, version)

    def dump_config_keys(self, image_ref: str) -> dict[str, Any]:
        """server.properties' and topic configs' names, from Kafka's own ConfigDefs (the
        documentation its classes print: KafkaConfig, LogConfig)."""
        def names(cls: str) -> list[str]:
            out = docker("run", "--rm", "--network", "none", "--entrypoint", "java", image_ref,
                         "-cp", "/opt/kafka/libs/*", cls, timeout=180).stdout
            return sorted(set(re.findall(r'<h4><a id="([^"]+)"></a>', out)))
        out = docker("run", "--rm", "--network", "none", "--entrypoint", "sh", image_ref, "-c",
                     "ls /opt/kafka/libs | grep -m1 '^kafka_'", timeout=60).stdout
        version = re.search(r"kafka_[0-9.]+-(.+?)\.jar", out)
        return {"version": version.group(1) if version else None,
                "broker": names("kafka.server.KafkaConfig"),
                "topic": names("org.apache.kafka.storage.internals.log.LogConfig")}

    def declare(self, ctx: RunContext) -> None:
        t, c = ctx.sc.topic, ctx.cluster
        replicas = None
        if t.leader != "any":
            placed = placement(c.brokers(), c.controller(), t.leader, t.replication_factor)
            replicas = [placed] * t.partitions if placed else None
        c.create_topic(t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                       config={k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in t.config.items()},
                       replicas=replicas)

    def producers(self, ctx: RunContext) -> list[Worker]:
        sc, w = ctx.sc, ctx.sc.workload
        if w.transactions:
            x = w.transactions
            return [KafkaTxnProducer(
                f"p{i}", ctx.cluster.bootstrap_servers(), sc.topic.name, ctx.writer("produce", f"p{i}"), ctx.clock,
                ctx.stop, rate=w.rate, max_messages=w.max_messages, txn_size=x.size, abort_every=x.abort_every,
                transaction_timeout_ms=x.transaction_timeout_ms, request_timeout_ms=w.request_timeout_ms,
                delivery_timeout_ms=w.delivery_timeout_ms, size=w.message_size, spread=x.spread)
                for i in range(w.producers)]
        return [KafkaProducerWorker(
            f"p{i}", ctx.cluster.bootstrap_servers(), sc.topic.name, ctx.writer("produce", f"p{i}"), ctx.clock,
            ctx.stop, rate=w.rate, max_messages=w.max_messages, acks=w.acks,
            idempotence=w.idempotence, retries=w.retries, max_in_flight=w.max_in_flight,
            delivery_timeout_ms=w.delivery_timeout_ms, request_timeout_ms=w.request_timeout_ms,
            size=w.message_size) for i in range(w.producers)]

    def consumers(self, ctx: RunContext) -> list[Worker]:
        w, bootstrap = ctx.sc.workload, ctx.cluster.bootstrap_servers()
        if w.transactions:  # read_committed, during the load: a read before a commit shows
            x = w.transactions
            return [KafkaReader("c0", bootstrap, ctx.sc.topic.name, ctx.writer("consume", "c0"),
                                ctx.clock, ctx.stop, timeout_s=ctx.sc.timing.drain_timeout,
                                isolation="read_committed", follow=True),
                    *[KafkaTxnProcessor(
                        f"x{i}", bootstrap, ctx.sc.topic.name, ctx.writer("produce", f"x{i}"), ctx.clock, ctx.stop,
                        group="mqchaos-processors", txn_size=x.size, abort_every=x.abort_every,
                        transaction_timeout_ms=x.transaction_timeout_ms, request_timeout_ms=w.request_timeout_ms,
                        delivery_timeout_ms=w.delivery_timeout_ms, size=w.message_size, spread=x.spread,
                        reads=ctx.writer("consume", f"x{i}")) for i in range(x.processors)]]
        if w.live_reader:
            return [KafkaReader("c0", bootstrap, ctx.sc.topic.name, ctx.writer("consume", "c0"), ctx.clock,
                                ctx.stop, timeout_s=ctx.sc.timing.drain_timeout, follow=True, remember=True)]
        return []  # the topic is read after the heal, from the beginning (drain)

    def drain(self, ctx: RunContext, consumers: list[Worker]) -> Drained:
        t = ctx.sc.timing
        t0 = time.monotonic()
        processors = [c for c in consumers if isinstance(c, KafkaTxnProcessor)]
        for x in processors:  # every input processed before the reader's last pass
            x.finish()
        for x in processors:
            x.join(max(1.0, t.drain_timeout - (time.monotonic() - t0)))
        stuck = [x.name for x in processors if not x.caught_up.is_set()]
        following = [c for c in consumers if isinstance(c, KafkaReader) and c.following.is_set()]
        if following:  # the load's own reader reads on to the end
            reader = following[0]
            reader.finish(t.drain_timeout)
        else:
            reader = KafkaReader("reader", ctx.cluster.bootstrap_servers(), ctx.sc.topic.name,
                                 ctx.writer("consume", "reader"), ctx.clock, ctx.stop,
                                 timeout_s=t.drain_timeout)
            reader.start()
        reader.join(t.drain_timeout + 30)
        figures = final_read(ctx, reader) if reader.ids is not None else {}
        readers = consumers if following else [*consumers, reader]
        error = reader.error or next((x.error for x in processors if x.error), None)
        replicas = capture_replicas(ctx)
        return Drained({"complete": reader.complete and not stuck, "seconds": round(time.monotonic() - t0, 1),
                        "error": repr(error) if error else None, "replicas": replicas,
                        **({"figures": figures} if figures else {}),
                        **({"processors_not_caught_up": stuck} if stuck else {})}, readers)

    def sample(self, cluster: Any, sc: Any) -> dict:
        return observe.sample(cluster, sc)

    def measure(self, sc, samples, logs, produce, consume, fault_start) -> dict:
        return observe.measure(sc, samples, logs, fault_start, produce)

    def probes(self, ctx: RunContext) -> KafkaProbes:
        return KafkaProbes(ctx)


PLUGIN = Kafka()
