"""The run loop: cluster up, workload under faults, heal, drain, check, report.

    load scenario -> up -> heal -> declare -> consumers, producers -> nemesis
    -> heal, wait whole -> recovery load -> stop producers -> drain
    -> collect logs -> check (Spark) -> report -> down (unless --keep-cluster)

Whatever happens (crash, Ctrl-C, SIGTERM) the cluster is healed and the
history written so far stays in the run directory.
"""
from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from functools import partial
from datetime import datetime, timezone
from pathlib import Path

from checkers.spark import session
from harness import brokers, identity, judge, observe, rows, store
from harness.brokers.protocol import SaysWhole
from harness.clients.base import Worker
from harness.context import RunContext
from harness.history import HISTORY_VERSION, JsonlWriter, RunClock
from harness.scenario import Scenario
from harness.store import RunRecord
from harness.util import StopWaiting
from harness.verdicts import EXIT_UNKNOWN, NOT_APPLICABLE, RunStatus, not_applicable_result
from nemesis import net
from nemesis.core import Nemesis


class Interrupted(BaseException):
    """SIGTERM, handled like Ctrl-C."""


log = logging.getLogger(__name__)


class Progress(threading.Thread):
    """The live line: elapsed, ops/s, ok/fail/info, deliveries, active fault."""

    def __init__(self, clock: RunClock, clients: "Clients", fault: callable, stop: threading.Event):
        super().__init__(daemon=True, name="progress")
        self.clock, self.clients, self.fault, self.stop = clock, clients, fault, stop
        self.tty = sys.stderr.isatty()

    def run(self) -> None:
        last, last_t = 0, self.clock.now()
        every = 1.0 if self.tty else 5.0
        while not self.stop.wait(every):
            producers = self.clients.producers
            ok = sum(w.stats.ok for w in producers)
            fail = sum(w.stats.fail for w in producers)
            info = sum(w.stats.info for w in producers)
            dlv = sum(w.stats.delivered for w in self.clients.consumers)
            now = self.clock.now()
            rate = (ok + fail + info - last) / max(now - last_t, 1e-6)
            last, last_t = ok + fail + info, now
            line = (f"t={now:6.1f}s  {rate:7.0f} ops/s  ok={ok} fail={fail} info={info}  "
                    f"delivered={dlv}  fault={self.fault() or '-'}")
            print(("\r" + line + "   ") if self.tty else f"[run] {line}", end="" if self.tty else "\n",
                  file=sys.stderr, flush=True)
        if self.tty:
            print(file=sys.stderr)


class Clients:
    """A run's clients (harness.clients.base.Worker): the plug-in's consumers and producers,
    started once the setup is done, the scenario's consumer crashes on timers; the producers
    stopped before the drain (its readers then replace the consumers), every worker joined
    at the teardown, and what they went through, for run.json."""

    def __init__(self) -> None:
        self.producers: list[Worker] = []
        self.consumers: list[Worker] = []
        self.timers: list[threading.Timer] = []

    def start(self, broker, ctx: RunContext) -> None:
        self.consumers = broker.consumers(ctx)
        self.producers = broker.producers(ctx)
        for w in self.consumers + self.producers:
            w.start()

    def crash_on_time(self, crashes) -> None:
        """The scenario's consumer crashes (``workload.crashes``), each on its timer."""
        self.timers = crash_timers(self.consumers, crashes)

    def stop_producers(self, timeout: float) -> None:
        for w in self.producers:
            w.stop()
        for w in self.producers:
            w.join(timeout)

    def cancel_crashes(self) -> None:
        """The crashes not yet due, cancelled (the run is ending)."""
        for timer in self.timers:
            timer.cancel()

    def join(self, timeout: float = 15) -> None:
        for w in self.producers + self.consumers:
            w.join(timeout)

    def record(self) -> dict:
        """run.json's part: the consumers' crashes and cancels, the workers' errors and the
        client-library failures they survived (their producer replaced)."""
        workers = self.producers + self.consumers
        out: dict = {"consumer_crashes": {c.name: c.crashes for c in self.consumers if hasattr(c, "crashes")},
                     "consumer_cancels": {c.name: c.cancels for c in self.consumers if hasattr(c, "cancels")}}
        errors = {w.name: repr(w.error) + (f" at {w.where}" if w.where else "") for w in workers if w.error}
        if errors:
            out["client_errors"] = errors
        events = {w.name: w.events for w in workers if w.events}
        if events:
            out["client_events"] = events
        return out


def _nothing(*_args) -> None:
    return None


@dataclass
class Hooks:
    """What a batch (harness.batch) overlaps with a run. ``before_faults``: after the
    warm-up, before the first fault (the batch waits there until the previous run is down,
    then starts the next cluster at the background weight); ``history_closed``: the workers
    joined and the run measured (it may be checked); ``finish``: given the rest of a run
    whose load completed (teardown, check, cluster down), runs it in the background so that
    the next run can start, else None (the run loop does it itself)."""
    before_faults: Callable[[], None] = _nothing
    history_closed: Callable[["Run"], None] = _nothing
    finish: Callable[[Callable[[], None]], None] | None = None


class RunHandle(Protocol):
    """What a batch (harness.batch) and its check queue (harness.checking) use of a run:
    ``Run`` is one; so are the tests' fakes (tests/fakes.py)."""
    sc: Scenario
    dir: Path
    info: RunRecord
    hooks: Hooks
    executed: threading.Event  # the run loop is done with run.json

    def prepare(self, background: bool = False) -> None: ...

    def execute(self) -> int: ...

    def abandon(self) -> None: ...

    def check(self, spark) -> dict | None: ...

    def finish(self, result: dict, pictures: bool = True) -> int: ...

    def keep_copy(self, spark) -> None: ...

    def draw(self) -> subprocess.Popen | None: ...

    def save_info(self) -> None: ...


class Run:
    """One run of one scenario. `execute()` returns the exit code."""

    def __init__(self, sc: Scenario, *, keep_cluster: bool = False, results: Path | None = None,
                 check: bool = True, hooks: Hooks | None = None):
        self.sc, self.keep_cluster, self.do_check = sc, keep_cluster, check
        self.hooks = hooks or Hooks()
        self.broker = brokers.get(sc.broker)
        self.dir = store.new_run_dir(sc.name, results)
        self.clock = RunClock(time.monotonic())  # a new origin per run, even in a suite
        self.executed = threading.Event()  # execute() returned: run.json is the run loop's no more
        self._prepared: threading.Thread | None = None
        self._prepare_error: Exception | None = None
        self._background = False  # its cluster came up at the background CPU weight
        self.stop_all = threading.Event()
        self.clients = Clients()
        self.cluster = None
        self.ctx: RunContext | None = None  # what the plug-in sees of this run, once up
        self.nemesis = None
        self.observer = None
        self.probes = None
        self.info: RunRecord = new_record(sc, self.clock)
        self.save_info()

    # -- bookkeeping ----------------------------------------------------------------
    def save_info(self) -> None:
        bad = store.undeclared(self.info)
        if bad:  # a key run.json's schema does not know: a harness bug, caught where written
            raise ValueError(f"run.json: undeclared key(s) {bad} (harness.store.RunRecord)")
        store.write_run(self.dir, self.info)

    def phase(self, name: str) -> None:
        self.info["phases"][name] = self.clock.now()
        self.save_info()
        # a batch brings a cluster up in a thread while another run ends: say whose
        who = "" if threading.current_thread() is threading.main_thread() else f"{self.sc.name}: "
        log.info("%s%s (t=%.1fs)", who, name, self.clock.now())

    def writer(self, kind: str, who: str) -> JsonlWriter:
        return JsonlWriter(self.dir / store.HISTORY / f"{kind}-{who}.jsonl")

    def context(self) -> RunContext:
        """What the plug-in sees of this run (harness.context), once the cluster is up."""
        return RunContext(sc=self.sc, cluster=self.cluster, clock=self.clock, stop=self.stop_all, dir=self.dir,
                          writer=self.writer, count_links=partial(count_links, self.cluster),
                          operator=self.nemesis.operator, consumers=lambda: list(self.clients.consumers))

    # -- the loop -----------------------------------------------------------------------
    def prepare(self, background: bool = False) -> None:
        """Bring the cluster up in a thread (a batch does while another run's load goes on,
        with ``background``: at a CPU weight that yields to that run, raised when this one
        starts); ``execute`` waits for it and raises its error inside its own clean-up."""
        if self.sc.not_applicable():
            return  # no cluster for a claim the version does not have
        self._background = background

        def up() -> None:
            try:
                self._up()
            except Exception as e:  # noqa: BLE001 - execute raises it, then heals and tears down
                self._prepare_error = e
        self._prepared = threading.Thread(target=up, name=f"up-{self.sc.name}", daemon=True)
        self._prepared.start()

    def abandon(self) -> None:
        """A prepared run that will not run (its batch ended first): its cluster goes down
        and its directory says it never ran."""
        if self._prepared is not None:
            self._prepared.join()
        self.info["status"] = RunStatus.ABANDONED
        try:
            if self.nemesis is not None:
                self.nemesis.close()
            if self.cluster is not None and not self.keep_cluster:
                self.cluster.down()
        finally:
            self.save_info()
            self.executed.set()

    def execute(self) -> int:
        """The run; its exit code (EXIT_UNKNOWN without a check of its own). Under a batch's
        ``hooks.finish`` a run whose load completed returns once drained, before its teardown,
        check and cluster down, which the batch runs beside the next run (``executed`` is set
        once they are done)."""
        detached = False
        try:
            reason = self.sc.not_applicable()
            if reason:
                return self._not_applicable(reason)
            prev = signal.signal(signal.SIGTERM, _raise_interrupted)
            try:
                self._load()
                if self.info["status"] == RunStatus.COMPLETED and self.hooks.finish is not None:
                    self.hooks.finish(self._finish_in_background)
                    detached = True
                    return EXIT_UNKNOWN
            finally:
                try:
                    if not detached:
                        self._shutdown()
                finally:
                    signal.signal(signal.SIGTERM, prev)
            return self._end()
        finally:
            if not detached:
                self.executed.set()

    def _finish_in_background(self) -> None:
        try:
            self._shutdown()
            self._end()
        except BaseException as e:  # noqa: BLE001 - a thread's error would go unseen
            log.error("%s: its end failed: %s: %s", self.sc.name, type(e).__name__, e)
        finally:
            self.executed.set()

    def _load(self) -> None:
        """Up (or the prepared cluster), setup, load under faults, drain: ``info["status"]``."""
        self.clock.export()
        try:
            if self._prepared is None:
                self._up()
            else:
                self._prepared.join()
                if self._prepare_error is not None:
                    raise self._prepare_error
                if self._background:
                    self.cluster.set_background(False)
                    self.info["background_start"]["cpu_shares_from_setup"] = self.cluster.cpu_weights()
            self._setup()
            self._load_under_faults()
            self._drain()
            self.info["status"] = RunStatus.COMPLETED
        except (KeyboardInterrupt, Interrupted):
            self.info["status"] = RunStatus.INTERRUPTED
            log.warning("interrupted: healing the cluster; the history so far is kept")
        except Exception as e:  # noqa: BLE001 - a harness error is reported, never a finding
            self.info["status"] = RunStatus.HARNESS_ERROR
            self.info["error"] = f"{type(e).__name__}: {e}"
            log.error("harness error: %s", self.info["error"])

    def _end(self) -> int:
        code = EXIT_UNKNOWN
        if self.info["status"] == RunStatus.COMPLETED and self.do_check:
            code = self._check_and_report()
        self.info["exit_code"] = code
        self.phase("end")
        return code

    def _not_applicable(self, reason: str) -> int:
        self.info.update(not_applicable(self.sc, self.dir, reason))
        self.phase("end")
        return EXIT_UNKNOWN

    def _up(self) -> None:
        self.phase("cluster-up")
        self.cluster = self.broker.cluster(version=self.sc.version)
        self.cluster.set_background(self._background)  # also undoes a crashed batch's
        self.cluster.up(self.sc.cluster)
        if self._background:  # evidence of the weight it came up with
            self.info["background_start"] = {"cpu_shares_while_starting": self.cluster.cpu_weights()}
        self.phase("cluster-ready")
        try:
            self.info["brokers"] = self.cluster.versions()
        except Exception as e:  # noqa: BLE001 - versions are informative only
            self.info["brokers"] = {"error": str(e)}
        # The run loop owns the signals: it heals in its own `finally`.
        self.nemesis = Nemesis(self.cluster, self.dir, self.clock, seed=self.sc.seed,
                               subject=self.sc.subject(), handle_signals=False,
                               heal_timeout=self.sc.timing.heal_timeout)
        self.nemesis.heal()

    def _setup(self) -> None:
        self.phase("setup")
        self.ctx = ctx = self.context()
        self.broker.declare(ctx)
        self.probes = self.broker.probes(ctx)
        self.probes.setup()
        self.observer = observe.Observer(self.broker, self.cluster, self.sc, self.dir, self.clock)
        self.observer.start()
        if self.sc.workload.prefill:
            self.phase("prefill")
            self.info["prefill"] = self.broker.prefill(ctx)
        self.clients.start(self.broker, ctx)
        self.nemesis.producers = lambda: self.clients.producers

    def _load_under_faults(self) -> None:
        sc, t = self.sc, self.sc.timing
        Progress(self.clock, self.clients, self.nemesis.active, self.stop_all).start()
        self.phase("warmup")
        self.clients.crash_on_time(sc.workload.crashes)
        self.stop_all.wait(t.warmup)  # a timed phase of the test, not a wait for a condition
        t0 = self.clock.now()
        self.hooks.before_faults()
        if self.clock.now() - t0 >= 0.05:  # the warm-up went on while the previous run went down
            self.info["warmup_extended_s"] = round(self.clock.now() - t0, 2)
        self.probes.before_faults()
        self.phase("faults")
        self.nemesis.run(sc.steps, duration=t.duration, stop=self.stop_all)  # parsed at load
        self.phase("heal")
        self.info.update(whole_waited_for(self.cluster))  # the effect window ends at "whole": what it is
        try:
            self.nemesis.heal(wait=True, timeout=t.heal_timeout)
        except (TimeoutError, StopWaiting) as e:
            # The broker did not recover by itself once the faults were lifted (or a node
            # died on the way): a finding, not a harness failure. An operator would restart
            # what does not serve; so does the run (an operator event).
            self.info["operator_recovery"] = rec = operator_recovery(self.nemesis, t.heal_timeout, str(e), self.clock)
            if rec["failed"] is None:
                self.phase("whole")
        else:
            self.phase("whole")
        # any hand the harness lent since the faults began (a stale partition's repair, a
        # restart): not self-healed, whatever the cluster looks like now; a probe's own
        # action after the heal (an election) is recorded, but is no part of the heal
        self.info["self_healed"] = not self._operator_events()
        self.probes.after_heal()
        self.info["operator_events"] = self._operator_events()
        self.phase("recovery")
        self.stop_all.wait(t.recovery)

    def _operator_events(self) -> list[dict]:
        """The harness's own actions on the cluster since the faults began."""
        return [e for e in self.nemesis.operator_events if e["t_start"] >= self.info["phases"]["faults"]]

    def _drain(self) -> None:
        self.phase("stop-producers")
        self.clients.stop_producers(self.sc.workload.outcome_timeout() + 40)
        self.phase("drain")
        drained = self.broker.drain(self.ctx, self.clients.consumers)
        self.clients.consumers = drained.readers
        self.info["drain"] = drained.record
        self.save_info()

    def _shutdown(self) -> None:
        self.phase("teardown")
        self.stop_all.set()
        self.clients.cancel_crashes()
        if self.nemesis is not None:
            try:
                self.nemesis.heal(wait=False)
            except Exception as e:  # noqa: BLE001
                log.error("heal failed: %s; run `mqchaos cluster heal`", e)
                self.info["heal_error"] = str(e)
        self.clients.join()
        self.info.update(self.clients.record())
        self.save_info()  # the checker reads the run's status from run.json
        if self.info["status"] == RunStatus.COMPLETED:
            # the history is closed: checked while the logs are read and the cluster goes
            # (judged once the run is measured: CheckQueue waits for ``executed``)
            self.hooks.history_closed(self)
        if self.nemesis is not None:
            self.nemesis.close()
        if self.observer is not None:
            self.observer.stop()
        if self.cluster is not None:
            try:
                self.cluster.collect_logs(self.dir)
            except Exception as e:  # noqa: BLE001
                log.warning("could not collect broker logs: %s", e)
            self.info["measurements"] = measure(self.broker, self.dir, self.sc, self.info, self.probes)
        self.save_info()
        if self.cluster is not None and not self.keep_cluster:
            self.phase("cluster-down")
            self.cluster.down()

    def _check_and_report(self) -> int:
        self.phase("check")
        t0 = time.monotonic()
        spark = session(None, "mqchaos-run")
        t1 = time.monotonic()
        result = self.check(spark)
        # the report shows it beside the history's size (issue 38: long runs)
        self.info["check_timing"] = {"session_s": round(t1 - t0, 2), "check_s": round(time.monotonic() - t1, 2)}
        code = EXIT_UNKNOWN if result is None else self.finish(result)
        self.keep_copy(spark)
        return code

    # -- judging (harness.judge: a function of the run directory, scenario and record) -----
    def check(self, spark) -> dict | None:
        return judge.check_history(spark, self.dir, self.sc.ordering)

    def finish(self, result: dict, pictures: bool = True) -> int:
        return judge.judge(self.dir, self.sc, self.info, result, pictures)

    def keep_copy(self, spark) -> None:
        judge.keep_copy(spark, self.dir)

    def draw(self) -> subprocess.Popen:
        return judge.draw(self.dir)


def not_applicable(sc: Scenario, run_dir: Path, reason: str) -> dict:
    """The claim does not exist in this version: no cluster, no history; check.json says
    why, and the run is undecided (harness.verdicts.NOT_APPLICABLE). Returns run.json's part."""
    result = not_applicable_result(reason)
    log.info("%s on %s %s: %s", sc.name, sc.broker, sc.version, result["reason"])
    store.write_check(run_dir, result)
    return {"status": NOT_APPLICABLE, "not_applicable": reason, "exit_code": EXIT_UNKNOWN,
            "summary": rows.not_applicable_row(sc, result, run_dir)}


def crash_timers(consumers: list[Worker], crashes) -> list[threading.Timer]:
    """The scenario's consumer crashes, each started on a timer (``workload.crashes``)."""
    by_name = {c.name: c for c in consumers}
    timers = []
    for crash in crashes:
        timer = threading.Timer(crash.at, by_name[crash.consumer].crash)
        timer.daemon = True
        timer.start()
        timers.append(timer)
    return timers


def new_record(sc: Scenario, clock: RunClock) -> RunRecord:
    """run.json as a run starts (harness.store.RunRecord)."""
    return {"scenario": sc.name, "id": sc.id, "broker": sc.broker, "seed": sc.seed,
            "ordering": sc.ordering, "params": sc.model_dump(mode="json"), "digest": identity.digest(sc),
            # the version asked for and where from (the nodes' own: "brokers")
            "version": {"version": sc.version, "from": sc.version_source},
            "history_version": HISTORY_VERSION,
            "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            # the clock's origin on the wall clock: a batch's runs on one time axis
            "t0_unix": round(time.time() - clock.now(), 3),
            "status": RunStatus.RUNNING, "phases": {}}


def whole_waited_for(cluster) -> dict:
    """run.json's ``whole_waited_for``: what the cluster's "whole" waits for, if it says."""
    return {"whole_waited_for": cluster.whole_condition()} if isinstance(cluster, SaysWhole) else {}


def operator_recovery(nemesis: Nemesis, timeout: float, why: str, clock: RunClock) -> dict:
    """The nodes that do not serve restarted, as an operator would (an operator event): what
    was restarted, when, how long it took, and why it failed if the cluster is still not
    whole (the broker's outcome, the run goes on: undecided by harness.verdicts.undecided)."""
    log.warning("the cluster did not recover by itself (%s); restarting the nodes that do not serve", why)
    t0 = clock.now()
    try:
        stuck, failed = nemesis.restart_stuck(timeout, why), None
    except (TimeoutError, StopWaiting) as e:
        stuck, failed = None, str(e)[:1500]
        log.error("the cluster could not be brought back: %s", failed)
    return {"reason": why, "restarted": stuck, "t": round(t0, 2), "failed": failed,
            "seconds": round(clock.now() - t0, 1)}


def measure(broker, run_dir: Path, sc: Scenario, info: dict, probes) -> dict:
    """run.json's measurements: the plug-in's figures by window (harness.observe), the
    probes', whether the cluster healed by itself; an error's text if measuring failed (the
    figures are then unknown, the run not crashed)."""
    try:
        m = observe.measure(broker, run_dir, sc, info)
    except Exception as e:  # noqa: BLE001 - a measurement that fails is unknown, not a crash
        m = {"error": f"{type(e).__name__}: {e}"}
    m.update(probes.measurements if probes else {})
    if "self_healed" in info:
        m["self_healed"] = info["self_healed"]
    return m


def count_links(cluster) -> Callable[[], dict[str, dict[str, int]]]:
    """Start counting the bytes each node receives from each other node (iptables rules
    that only count); returns the reader, which stops counting. Offered to the probes
    (RunContext.count_links), which sit below the nemesis."""
    rules = net.count_rules(cluster.nodes(), cluster.address)
    net.apply_rules(cluster, rules)

    def read() -> dict[str, dict[str, int]]:
        got = net.received_bytes(cluster, rules)
        net.remove_rules(cluster, rules)
        return got
    return read


def _raise_interrupted(signum, frame):
    raise Interrupted()


def run_scenario(sc: Scenario, **kw) -> tuple[int, Run]:
    r = Run(sc, **kw)
    return r.execute(), r
