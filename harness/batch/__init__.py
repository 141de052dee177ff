"""The one batch runner (``mqchaos batch``: the catalogue, a suite, nightly, the version
matrix with ``--matrix``), by concept:

    harness.batch.jobs      which scenarios (and versions, and repeats) run, in what order:
                            ``select``, ``plan``, ``interleave``; ``Bad`` (a file that did not load)
    harness.batch.pipeline  running them: ``run_batch``, ``run_one`` (a job and its retry), the
                            ``Pipeline`` overlapping one run's end with the next one's start
    harness.batch.summary   their rows (``Entry``, ``row``, ``bad_row``), the summary files
                            (``write_outputs``), rows rebuilt from run directories
                            (``rows_from_runs``) or merged from batches (``merge``)
    harness.batch.shard     the catalogue split across machines (``--shard I/N``; ``budget``:
                            its wall time per number of machines)

One workload runs at a time; the rest overlaps it (issue 20). Two CPU classes share the
machine (2 cores): the running workload (its cluster at docker's normal weight, the harness
process) and the background (the next cluster at ``cpu_shares`` 2, ``Cluster.set_background``;
the Spark JVM and the picture processes at nice 19, ``harness.util.background_priority``),
which gets the CPU only when the workload leaves it idle::

    batch start ── CheckQueue: Spark session + warm-up (nice 19) ║ run 1: cluster up
    run i:   setup, warm-up ─ before_faults: wait until run i-1 is down (Pipeline.wait_finished)
                              then run i+1: cluster up at the background weight (Run.prepare)
             faults, heal, recovery, drain
             finish ──► thread: run i's teardown ─ history closed ──► CheckQueue: check (Spark)
                                logs, measurements, cluster down ──► executed ──► CheckQueue: judge;
                                then, on its second lane, pictures and the Parquet copy
    run i+1: its cluster to the normal weight; setup, warm-up (beside run i's teardown) ...

No two runs' loads, drains or teardowns overlap a run's faults: only background work does.
The check starts as soon as the history is closed, but judging waits until the run loop is
done with run.json (``executed``), so the verdict sees the measurements. What a batch uses of
a run is the ``harness.runner.RunHandle`` protocol (``prepare``, ``execute``, ``abandon``,
``check``, ``finish``, ...): ``harness.runner.Run`` is one, and tests/fakes.py's ``FakeRun``
lets the pipeline be tested without Docker. ``harness.runner.Hooks`` (``before_faults``,
``history_closed``, ``finish``) are where a run lets the batch in; ``Run.prepare`` brings a
cluster up in a thread, ``Run.abandon`` takes down one that will not run; a prepared run is
keyed by scenario, version and repeat, and a retried run runs alone (``run_one``).
``make bench-main`` splits a batch's wall time by phase.

The names below are re-exported so that ``from harness.batch import run_batch`` keeps working.
"""
from harness.batch.jobs import SCENARIO_DIR, Bad, Versions, interleave, order_key, plan, select, wanted
from harness.batch.pipeline import Pipeline, run_batch, run_one
from harness.batch.summary import Entry, bad_row, merge, row, rows_from_runs, write_outputs

__all__ = ["SCENARIO_DIR", "Bad", "Versions", "interleave", "order_key", "plan", "select", "wanted",
           "Pipeline", "run_batch", "run_one",
           "Entry", "bad_row", "merge", "row", "rows_from_runs", "write_outputs"]
