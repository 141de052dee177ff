"""The run loop: cluster up, workload under faults, heal, drain, check, report.

    load scenario -> up -> heal -> declare -> consumers, producers -> nemesis
    -> heal, wait whole -> recovery load -> stop producers -> drain
    -> collect logs -> check (Spark) -> report -> down (unless --keep-cluster)

Whatever happens (crash, Ctrl-C, SIGTERM) the cluster is healed and the
history written so far stays in the run directory.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from checkers.check import check_runs
from checkers.history import convert, open_runs
from checkers.spark import session
from harness import brokers, observe, report, rows, store
from harness.clients.base import Worker
from harness.history import HISTORY_VERSION, JsonlWriter, RunClock
from harness.scenario import Scenario
from harness.util import BACKGROUND_NICE, StopWaiting
from harness.verdicts import EXIT_UNKNOWN, NOT_APPLICABLE, not_applicable_result, run_exit_code
from nemesis import net
from nemesis.core import Nemesis


class Interrupted(BaseException):
    """SIGTERM, handled like Ctrl-C."""


def log(msg: str) -> None:
    print(f"[run] {msg}", file=sys.stderr, flush=True)


class Progress(threading.Thread):
    """The live line: elapsed, ops/s, ok/fail/info, deliveries, active fault."""

    def __init__(self, clock: RunClock, producers, consumers, fault: callable, stop: threading.Event):
        super().__init__(daemon=True, name="progress")
        self.clock, self.producers, self.consumers, self.fault, self.stop = clock, producers, consumers, fault, stop
        self.tty = sys.stderr.isatty()

    def run(self) -> None:
        last, last_t = 0, self.clock.now()
        every = 1.0 if self.tty else 5.0
        while not self.stop.wait(every):
            ok = sum(w.stats.ok for w in self.producers())
            fail = sum(w.stats.fail for w in self.producers())
            info = sum(w.stats.info for w in self.producers())
            dlv = sum(w.stats.delivered for w in self.consumers())
            now = self.clock.now()
            rate = (ok + fail + info - last) / max(now - last_t, 1e-6)
            last, last_t = ok + fail + info, now
            line = (f"t={now:6.1f}s  {rate:7.0f} ops/s  ok={ok} fail={fail} info={info}  "
                    f"delivered={dlv}  fault={self.fault() or '-'}")
            print(("\r" + line + "   ") if self.tty else f"[run] {line}", end="" if self.tty else "\n",
                  file=sys.stderr, flush=True)
        if self.tty:
            print(file=sys.stderr)


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
        self.producers: list[Worker] = []
        self.consumers: list[Worker] = []
        self.cluster = None
        self.nemesis = None
        self.timers: list[threading.Timer] = []
        self.observer = None
        self.probes = None
        self.info: dict = {"scenario": sc.name, "id": sc.id, "broker": sc.broker, "seed": sc.seed,
                           "ordering": sc.ordering, "params": sc.model_dump(mode="json"),
                           # the version asked for and where from (the nodes' own: "brokers")
                           "version": {"version": sc.version, "from": sc.version_source},
                           "history_version": HISTORY_VERSION,
                           "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                           # the clock's origin on the wall clock: a batch's runs on one time axis
                           "t0_unix": round(time.time() - self.clock.now(), 3),
                           "status": "running", "phases": {}}
        self.save_info()

    # -- bookkeeping ----------------------------------------------------------------
    def save_info(self) -> None:
        store.write_run(self.dir, self.info)

    def phase(self, name: str) -> None:
        self.info["phases"][name] = self.clock.now()
        self.save_info()
        # a batch brings a cluster up in a thread while another run ends: say whose
        who = "" if threading.current_thread() is threading.main_thread() else f"{self.sc.name}: "
        log(f"{who}{name} (t={self.clock.now():.1f}s)")

    def count_links(self) -> Callable[[], dict[str, dict[str, int]]]:
        """Start counting the bytes each node receives from each other node (iptables rules
        that only count); returns the reader, which stops counting. Offered to the probes,
        which sit below the nemesis and reach the network through the run."""
        rules = net.count_rules(self.cluster.nodes(), self.cluster.address)
        net.apply_rules(self.cluster, rules)

        def read() -> dict[str, dict[str, int]]:
            got = net.received_bytes(self.cluster, rules)
            net.remove_rules(self.cluster, rules)
            return got
        return read

    def writer(self, kind: str, who: str) -> JsonlWriter:
        return JsonlWriter(self.dir / store.HISTORY / f"{kind}-{who}.jsonl")

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
        self.info["status"] = "abandoned"
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
                if self.info["status"] == "completed" and self.hooks.finish is not None:
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
            log(f"{self.sc.name}: its end failed: {type(e).__name__}: {e}")
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
            self.info["status"] = "completed"
        except (KeyboardInterrupt, Interrupted):
            self.info["status"] = "interrupted"
            log("interrupted: healing the cluster; the history so far is kept")
        except Exception as e:  # noqa: BLE001 - a harness error is reported, never a finding
            self.info["status"] = "harness-error"
            self.info["error"] = f"{type(e).__name__}: {e}"
            log(f"harness error: {self.info['error']}")

    def _end(self) -> int:
        code = EXIT_UNKNOWN
        if self.info["status"] == "completed" and self.do_check:
            code = self._check_and_report()
        self.info["exit_code"] = code
        self.phase("end")
        return code

    def _not_applicable(self, reason: str) -> int:
        """The claim does not exist in this version: no cluster, no history; run.json and
        check.json say why, and the run is undecided (harness.verdicts.NOT_APPLICABLE)."""
        result = not_applicable_result(reason)
        log(f"{self.sc.name} on {self.sc.broker} {self.sc.version}: {result['reason']}")
        self.info.update(status=NOT_APPLICABLE, not_applicable=reason, exit_code=EXIT_UNKNOWN)
        store.write_check(self.dir, result)
        self.info["summary"] = rows.not_applicable_row(self.sc, result, self.dir)
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
        self.broker.declare(self)
        self.probes = self.broker.probes(self)
        self.probes.setup()
        self.observer = observe.Observer(self.broker, self.cluster, self.sc, self.dir, self.clock)
        self.observer.start()
        if self.sc.workload.prefill:
            self.phase("prefill")
            self.info["prefill"] = self.broker.prefill(self)
        self.consumers = self.broker.consumers(self)
        self.producers = self.broker.producers(self)
        for w in self.consumers + self.producers:
            w.start()

    def _load_under_faults(self) -> None:
        sc, t = self.sc, self.sc.timing
        progress = Progress(self.clock, lambda: self.producers, lambda: self.consumers,
                            self.nemesis.active, self.stop_all)
        progress.start()
        self.phase("warmup")
        by_name = {c.name: c for c in self.consumers}
        for crash in sc.workload.crashes:
            timer = threading.Timer(crash.at, by_name[crash.consumer].crash)
            timer.daemon = True
            timer.start()
            self.timers.append(timer)
        self.stop_all.wait(t.warmup)  # a timed phase of the test, not a wait for a condition
        t0 = self.clock.now()
        self.hooks.before_faults()
        if self.clock.now() - t0 >= 0.05:  # the warm-up went on while the previous run went down
            self.info["warmup_extended_s"] = round(self.clock.now() - t0, 2)
        self.probes.before_faults()
        self.phase("faults")
        self.nemesis.run(sc.steps, duration=t.duration, stop=self.stop_all)  # parsed at load
        self.phase("heal")
        try:
            self.nemesis.heal(wait=True, timeout=t.heal_timeout)
        except (TimeoutError, StopWaiting) as e:
            # The broker did not recover by itself once the faults were lifted (or a node
            # died on the way): a finding, not a harness failure. An operator would restart
            # what does not serve; so does the run (an operator event).
            self.info["operator_recovery"] = self._operator_recovery(str(e))
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

    def operator(self, action: str, targets: list[str], details: dict, act: Callable[[], object]) -> object:
        """An action of the harness's own on the cluster (a probe's election): an operator
        event (nemesis.core.Nemesis.operator), never counted as the broker's behaviour."""
        return self.nemesis.operator(action, targets, details, act)

    def _operator_recovery(self, why: str) -> dict:
        log(f"the cluster did not recover by itself ({why}); restarting the nodes that do not serve")
        t0 = self.clock.now()
        try:
            stuck, failed = self.nemesis.restart_stuck(self.sc.timing.heal_timeout, why), None
            self.phase("whole")
        except (TimeoutError, StopWaiting) as e:
            # still not whole: the broker's outcome (the run goes on, its verdict undecided
            # by harness.verdicts.undecided), not the harness's
            stuck, failed = None, str(e)[:1500]
            log(f"the cluster could not be brought back: {failed}")
        return {"reason": why, "restarted": stuck, "t": round(t0, 2), "failed": failed,
                "seconds": round(self.clock.now() - t0, 1)}

    def _drain(self) -> None:
        self.phase("stop-producers")
        for w in self.producers:
            w.stop()
        for w in self.producers:
            w.join(self.sc.workload.outcome_timeout() + 40)
        self.phase("drain")
        self.info["drain"] = self.broker.drain(self)
        self.save_info()

    def _shutdown(self) -> None:
        self.phase("teardown")
        self.stop_all.set()
        for timer in self.timers:
            timer.cancel()
        if self.nemesis is not None:
            try:
                self.nemesis.heal(wait=False)
            except Exception as e:  # noqa: BLE001
                log(f"heal failed: {e}; run `mqchaos heal`")
                self.info["heal_error"] = str(e)
        for w in self.producers + self.consumers:
            w.join(15)
        self.info["consumer_crashes"] = {c.name: c.crashes for c in self.consumers if hasattr(c, "crashes")}
        errors = {w.name: repr(w.error) for w in self.producers + self.consumers if w.error}
        if errors:
            self.info["client_errors"] = errors
        self.save_info()  # the checker reads the run's status from run.json
        if self.info["status"] == "completed":
            # the history is closed: checked while the logs are read and the cluster goes
            # (judged once the run is measured: Checker waits for ``executed``)
            self.hooks.history_closed(self)
        if self.nemesis is not None:
            self.nemesis.close()
        if self.observer is not None:
            self.observer.stop()
        if self.cluster is not None:
            try:
                self.cluster.collect_logs(self.dir)
            except Exception as e:  # noqa: BLE001
                log(f"could not collect broker logs: {e}")
            self._measure()
        self.save_info()
        if self.cluster is not None and not self.keep_cluster:
            self.phase("cluster-down")
            self.cluster.down()

    def _measure(self) -> None:
        try:
            m = observe.measure(self.broker, self.dir, self.sc, self.info)
        except Exception as e:  # noqa: BLE001 - a measurement that fails is unknown, not a crash
            m = {"error": f"{type(e).__name__}: {e}"}
        m.update(self.probes.measurements if self.probes else {})
        if "self_healed" in self.info:
            m["self_healed"] = self.info["self_healed"]
        self.info["measurements"] = m

    def _check_and_report(self) -> int:
        self.phase("check")
        spark = session(None, "mqchaos-run")
        result = self.check(spark)
        code = EXIT_UNKNOWN if result is None else self.finish(result)
        self.keep_copy(spark)
        return code

    def check(self, spark) -> dict | None:
        """The checker's result for this run's closed history, in ``spark``, read from the
        JSONL files, the record itself (None: the history could not be opened)."""
        runs, errors = open_runs([str(self.dir)], prefer_parquet=False)
        if errors:
            log(f"check: {errors}")
            return None
        return check_runs(spark, runs, ordering=self.sc.ordering)[str(self.dir)]

    def draw(self) -> subprocess.Popen:
        """Start drawing the report again, with its pictures (after ``finish(result,
        pictures=False)``), in a process of its own at the lowest CPU priority: plotting
        holds the interpreter's lock, which the run beside it (a batch's next) needs."""
        return subprocess.Popen(["nice", "-n", str(BACKGROUND_NICE), sys.executable, "-m", "harness.report",
                                 str(self.dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def keep_copy(self, spark) -> None:
        """The history's Parquet copy (docs/history.md) for later Spark jobs over results/:
        written after the verdict, off its path; a run without one is read from JSONL."""
        try:
            convert(spark, str(self.dir))
        except Exception as e:  # noqa: BLE001 - the copy is a cache, the JSONL the record
            log(f"no Parquet copy of {self.dir}: {type(e).__name__}: {e}")

    def finish(self, result: dict, pictures: bool = True) -> int:
        """Judge the checked run against its prediction, write check.json and the report
        (without ``pictures``, ``draw`` adds them later)."""
        result["checked_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        report.judge_and_write(self.dir, self.sc, result, self.info, pictures)
        self.info["summary"] = rows.run_row(self.sc, result, self.info, self.dir)
        code = run_exit_code(result)
        self.info["exit_code"] = code
        self.save_info()
        return code


def _raise_interrupted(signum, frame):
    raise Interrupted()


def run_scenario(sc: Scenario, **kw) -> tuple[int, Run]:
    r = Run(sc, **kw)
    return r.execute(), r
