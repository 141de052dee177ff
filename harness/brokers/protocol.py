"""What a broker plug-in provides, as small protocols (Jepsen's db / client split).

A plug-in is one package under ``harness/brokers/`` exposing ``PLUGIN``, a ``Broker``:

=================  =========================================================================
lifecycle          ``Cluster``: up(settings), down, wait_healthy, collect_logs, versions
node access        ``NodeAccess`` (which every ``Cluster`` is): project, nodes, address,
                   gateway, exec: how the nemesis reaches a node from outside (iptables,
                   tc, the power-loss file system's control socket)
node control       kill / stop / start / pause / unpause / wipe: every cluster's
optional abilities ``Cluster.components``: one component per operation family, each satisfying
                   a protocol of ``harness.brokers.capabilities`` (restart-app, power loss, data
                   files, membership, quorum membership, versions, features, migration, sync,
                   placement); ``Cluster.capabilities`` derives from them, a generation may lack
                   one, the nemesis asks ``ability(cluster, Protocol)``; a scenario needing a
                   capability the cluster lacks is refused at validation
roles              ``Cluster.roles`` and ``Cluster.role(name, arg) -> nodes`` (leader, followers,
                   controller, queue_master, zk, ...): what nemesis targets resolve against
recovery           ``Cluster.wait_whole``, ``stuck_nodes``, ``wait_rejoined``
                   (``SaysWhole``: what ``wait_whole`` waited for, in words)
typed settings     ``Broker.settings_model``: the scenario's ``cluster:`` block
                   (``harness.brokers.settings.Settings``)
scenario model     ``Broker.scenario_model``: a ``harness.spec.BaseScenario`` subclass
clients            ``Broker.declare / producers / consumers / prefill / drain``, each given
                   the run's frozen ``harness.context.RunContext``; they return workers
observation        ``Broker.sample`` (each second, during the run) and ``Broker.measure``
                   (pure, afterwards); the scenario model's ``measurement_names`` (what
                   ``expect:`` may name)
probes             ``Broker.probes(ctx)``: extra measurements some rows need
image              ``Broker.image``: how ``mqchaos cluster images`` builds it
                   (``harness.brokers.generations``)
=================  =========================================================================

Everything the nemesis and the run loop call on a cluster is declared here, so a plug-in
written from this module alone survives its first partition; the Docker Compose cluster
most plug-ins build on is ``harness.brokers.compose.ComposeCluster``.
"""
from __future__ import annotations

import abc
import os
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, TypeVar, runtime_checkable

# The capability names (node control, and the optional families: harness.brokers.capabilities).
from harness.brokers.capabilities import (CAPABILITIES, CORRUPT, FEATURES, KILL, MEMBERSHIP,  # noqa: F401 (re-exported)
                                          MIGRATION, NODE_CONTROL, PAUSE, PLACEMENT, POWER_LOSS,
                                          QUORUM_MEMBERSHIP, RESTART_APP, START, STOP, SYNC, UPGRADE, WIPE,
                                          offered)
from harness.brokers.generations import Generation, ImageSpec, choose_version, named_generation
from harness.clients.base import Worker
from harness.context import Drained, RunContext
from harness.probes import Probes
from harness.util import StopWaiting

T = TypeVar("T")


class ClusterError(RuntimeError):
    """A cluster did not reach the state asked for; the message carries the nodes' logs."""


class NodeExitedError(ClusterError, StopWaiting):
    """A node that had to stay up exited while waiting (fails a health wait at once)."""


class RoleError(ValueError):
    """A role name the broker does not have, or an argument it cannot use."""


@dataclass(frozen=True)
class Role:
    """A role nemesis targets may name. ``arg`` says what its argument is (None: it takes
    none); a bare role with an argument refers to the run's own queue / topic."""
    name: str
    help: str
    arg: str | None = None


# Runs a recovery step the broker needed after a heal (the callable) and records it, with
# the finding that made it necessary, in nemesis.jsonl and findings.jsonl.
Recorder = Callable[[dict, Callable[[], None]], None]
# Makes a condition hold for the nemesis's settle time in a row before it counts.
Steady = Callable[[Callable[[], Any]], Callable[[], bool]]


@runtime_checkable
class SaysWhole(Protocol):
    """A cluster that says what its ``wait_whole`` waits for, in words: run.json's
    ``whole_waited_for``, which the effect window (harness.windows) ends at."""

    def whole_condition(self) -> str: ...


class NodeAccess(Protocol):
    """How the harness reaches a cluster's nodes from outside (Jepsen's control ``Remote``):
    a structural protocol, so what only needs to run commands on nodes (nemesis/net.py's rule writers, a
    test's fake) can ask for this and no more. Every ``Cluster`` is one."""

    # the cluster's name among others of its kind (compose's project): a run's nemesis
    # state file records it, so ``mqchaos heal`` finds the same cluster again
    project: str

    @abc.abstractmethod
    def nodes(self) -> list[str]:
        """Every node's name (brokers and their coordinators: ZooKeeper ...)."""

    @abc.abstractmethod
    def address(self, node: str) -> str:
        """The node's address on the cluster's network (what iptables rules name)."""

    @abc.abstractmethod
    def gateway(self) -> str:
        """The address the harness's clients reach the nodes from (a partition may cut it)."""

    @abc.abstractmethod
    def exec(self, node: str, cmd: list[str], check: bool = True, timeout: float = 60,
             user: str | None = None) -> tuple[int, str]:
        """Run ``cmd`` on ``node``: (exit code, stdout + stderr); ``check``: ClusterError
        unless it exits 0."""


class Cluster(NodeAccess, abc.ABC):
    """Lifecycle, node access and control, roles and recovery of one broker's cluster: what
    the run loop and the nemesis call on it (the nemesis asks ``capabilities`` first)."""

    kind: ClassVar[str]
    # the optional abilities (harness.brokers.capabilities): component classes, each built
    # from the cluster and satisfying one capability protocol; ``capabilities`` derives from them
    components: ClassVar[tuple[type, ...]] = ()
    capabilities: ClassVar[frozenset[str]] = NODE_CONTROL

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "capabilities" in cls.__dict__:
            raise TypeError(f"{cls.__name__}: capabilities derive from components, never declared")
        cls.capabilities = NODE_CONTROL | offered(cls.components)

    def ability(self, proto: type[T]) -> T | None:
        """This cluster's component satisfying capability protocol ``proto`` (None: it has
        none), built from the cluster on first use and kept."""
        built = self.__dict__.setdefault("_components", {})
        for comp in self.components:
            if issubclass(comp, proto):
                if comp not in built:
                    built[comp] = comp(self)
                return built[comp]
        return None
    roles: ClassVar[dict[str, Role]] = {}
    # target names this topology lacks though another of the broker's has them, with why
    # (Kafka in KRaft mode: no ZooKeeper): a scenario naming one is refused at load time
    absent_targets: ClassVar[dict[str, str]] = {}
    # traffic a partition may cut alone (a step's params.ports): name -> TCP ports
    ports: ClassVar[dict[str, tuple[int, ...]]] = {}

    # ---- lifecycle ----------------------------------------------------------------------
    @abc.abstractmethod
    def up(self, settings: Any = None) -> None:
        """Bring the cluster up with ``settings`` (the plug-in's settings model); wait until healthy."""

    @abc.abstractmethod
    def down(self) -> None:
        """Remove the containers, networks and volumes."""

    @abc.abstractmethod
    def wait_healthy(self, timeout: float) -> None: ...

    @abc.abstractmethod
    def healthy(self) -> bool: ...

    @abc.abstractmethod
    def versions(self) -> dict[str, Any]:
        """What the nodes report they run ({"<broker>": version, ...}), for run.json."""

    def seen_before(self, fault: str, node: str, params: dict) -> dict | None:
        """What the plug-in reads from ``node`` before ``fault`` acts on it (recorded in the
        fault's details as evidence of the state it acted on); None: nothing to read."""
        return None

    def describe(self) -> dict[str, Any]:
        """The broker's own view of the cluster, for ``mqchaos status``."""
        return {"healthy": self.healthy()}

    @abc.abstractmethod
    def brokers(self) -> list[str]: ...

    @abc.abstractmethod
    def client_endpoints(self) -> dict[str, str]: ...

    @abc.abstractmethod
    def collect_logs(self, run_dir: str | os.PathLike) -> None:
        """Write each node's log to ``run_dir``/logs/<node>.log."""

    def close(self) -> None:
        """Release client resources held by this object."""

    def set_background(self, on: bool) -> None:
        """Start (or keep) the nodes at a CPU weight that yields to any other run's work (a
        batch brings the next cluster up while a run's load goes on), or give them back
        the normal weight. A broker that cannot does nothing: its next cluster then starts
        at the normal weight."""

    def cpu_weights(self) -> dict[str, int]:
        """Each node's CPU weight as set now (run.json's evidence of ``set_background``); {}
        for a broker that cannot set one."""
        return {}

    @classmethod
    def recorded_version(cls) -> str | None:
        """The version the last ``up`` here brought up, None if unknown."""
        return None

    # ---- node control (``capabilities`` says which of these work) ------------------------
    @abc.abstractmethod
    def kill(self, node: str) -> None: ...

    @abc.abstractmethod
    def stop(self, node: str, timeout: float = 60) -> None: ...

    @abc.abstractmethod
    def start(self, node: str) -> None: ...

    @abc.abstractmethod
    def pause(self, node: str) -> None: ...

    @abc.abstractmethod
    def unpause(self, node: str) -> None: ...

    @abc.abstractmethod
    def wipe(self, node: str, start: bool = True, **options: Any) -> None: ...

    @abc.abstractmethod
    def exists(self, node: str) -> bool: ...

    @abc.abstractmethod
    def running(self, node: str) -> bool: ...

    @abc.abstractmethod
    def paused(self, node: str) -> bool: ...

    def node_states(self) -> dict[str, str]:
        """Each existing node's state: "running", "paused" or "stopped" (a heal's sweep reads
        them all at once)."""
        return {n: "paused" if self.paused(n) else "running" if self.running(n) else "stopped"
                for n in self.nodes() if self.exists(n)}

    def status(self) -> dict[str, str]:
        """Every node's state for ``mqchaos status``, "absent" for one that does not exist."""
        states = self.node_states()
        return {n: states.get(n, "absent") for n in self.nodes()}

    # ---- roles --------------------------------------------------------------------------
    def role(self, name: str, arg: str | None) -> list[str]:
        """The nodes holding role ``name`` now (``arg``: the queue / topic it is about)."""
        raise RoleError(f"a {self.kind} cluster has no role {name!r}")

    # ---- recovery -----------------------------------------------------------------------
    @abc.abstractmethod
    def wait_whole(self, timeout: float, steady: Steady, record: Recorder,
                   stale_after: float | None = None) -> None:
        """Wait until the cluster serves again after the faults were lifted (TimeoutError).
        ``stale_after``: how long the broker may take to become whole by itself before the
        plug-in repairs what it still reports broken (a stale partition) through ``record``
        (None: the plug-in's own patience; a plug-in that repairs nothing ignores it)."""

    def exited(self) -> dict[str, str]:
        """Nodes that died by themselves (e.g. did not boot), each with what it died of."""
        return {}

    @abc.abstractmethod
    def stuck_nodes(self) -> list[str]:
        """Nodes that do not serve (what an operator would restart)."""

    @abc.abstractmethod
    def wait_rejoined(self, node: str, timeout: float) -> None:
        """Wait until ``node``, started again, is back in the cluster."""


class Broker(abc.ABC):
    """One broker plug-in: its models, its cluster, its clients, its observation."""

    name: ClassVar[str]
    scenario_model: ClassVar[type]          # a harness.spec.BaseScenario subclass
    settings_model: ClassVar[type]          # the ``cluster:`` block
    image: ClassVar[ImageSpec]
    # the versions it runs, by name (one of them ``default``)
    generations: ClassVar[dict[str, Generation]] = {"default": Generation("default", default=True)}

    def generation(self, version: str | None = None) -> Generation:
        """The generation named ``version`` (None: the default one)."""
        if version is not None and version not in self.generations:
            raise ValueError(f"{version!r} is not a {self.name} version (one of {', '.join(self.generations)})")
        return named_generation(self.generations, version)

    def version(self, cli: Any = None, scenario: Any = None, env: dict[str, str] | None = None) -> tuple[str, str]:
        """The version to run and where it came from (``choose_version``: the one rule)."""
        return choose_version(self.name, self.generations, cli, scenario, env)

    def capabilities_of(self, version: str | None = None) -> frozenset[str]:
        """What the nodes of this version can do: its topology's cluster class's, less what
        the generation lacks (no FUSE)."""
        return self.cluster_class(version).capabilities - self.generation(version).lacks

    @abc.abstractmethod
    def cluster(self, project: str | None = None, version: str | None = None) -> Cluster:
        """The cluster of ``version`` (None: the default one); its topology may depend on it."""

    def dump_config_keys(self, image_ref: str) -> dict[str, Any]:
        """The configuration names the broker in ``image_ref`` accepts ({"version": ...,
        "broker": [...], ...}), read from the broker itself: what config-keys.json holds."""
        return {}

    @property
    def capabilities(self) -> frozenset[str]:
        """What some version's cluster can do (one lacking it then lacks it for its version)."""
        return frozenset().union(*(self.cluster_class(v).capabilities for v in self.generations))

    @abc.abstractmethod
    def cluster_class(self, version: str | None = None) -> type[Cluster]:
        """The class of ``version``'s cluster (None: the default version's)."""

    def settings(self, values: dict[str, Any]) -> Any:
        """The settings model from ``key: value`` pairs (a scenario's ``cluster:``, ``--set``)."""
        return self.settings_model.model_validate(values)

    # ---- clients (Jepsen's client): each takes the run's frozen context, returns workers --
    @abc.abstractmethod
    def declare(self, ctx: RunContext) -> None:
        """Create what the clients use (queue, topic, policies)."""

    @abc.abstractmethod
    def producers(self, ctx: RunContext) -> list[Worker]:
        """The load's producers, not started (the run loop starts them)."""

    @abc.abstractmethod
    def consumers(self, ctx: RunContext) -> list[Worker]:
        """Consumers that run during the load, not started ([] if the broker is read in
        the drain only)."""

    def prefill(self, ctx: RunContext) -> dict:
        """Publish ``workload.prefill`` messages before the load; what it took."""
        return {}

    @abc.abstractmethod
    def drain(self, ctx: RunContext, consumers: list[Worker]) -> Drained:
        """Consume until empty and idle, with the load's ``consumers`` (still running) and
        any readers of its own: its record ({"complete": bool, "seconds": ...}) and every
        reader that read."""

    # ---- observation ----------------------------------------------------------------------
    @abc.abstractmethod
    def sample(self, cluster: Cluster, sc: Any) -> dict:
        """One observation of the broker's state (leader, ISR, master, ...), each second."""

    @abc.abstractmethod
    def measure(self, sc: Any, samples: list[dict], logs: dict[str, str], produce: list[dict],
                consume: list[dict], fault_start: float | None) -> dict:
        """Measurements from the run's artefacts (pure: a run can be re-measured offline)."""

    def probes(self, ctx: RunContext) -> Probes:
        """The scenario's probes (hooks setup / before_faults / after_heal, .measurements)."""
        return Probes(ctx)
