"""The one batch runner (``mqchaos catalogue``, ``suite``, ``matrix``), by concept:

    harness.batch.jobs      which scenarios (and versions, and repeats) run, in what order:
                            ``select``, ``plan``, ``interleave``; ``Bad`` (a file that did not load)
    harness.batch.pipeline  running them: ``run_batch``, ``run_one`` (a job and its retry), the
                            ``Pipeline`` overlapping one run's end with the next one's start
    harness.batch.summary   their rows (``Entry``, ``row``, ``bad_row``), the summary files
                            (``write_outputs``), rows rebuilt from run directories
                            (``rows_from_runs``) or merged from batches (``merge``)

The names below are re-exported so that ``from harness.batch import run_batch`` keeps working.
"""
from harness.batch.jobs import SCENARIO_DIR, Bad, Versions, interleave, order_key, plan, select, wanted
from harness.batch.pipeline import Pipeline, run_batch, run_one
from harness.batch.summary import Entry, bad_row, merge, row, rows_from_runs, write_outputs

__all__ = ["SCENARIO_DIR", "Bad", "Versions", "interleave", "order_key", "plan", "select", "wanted",
           "Pipeline", "run_batch", "run_one",
           "Entry", "bad_row", "merge", "row", "rows_from_runs", "write_outputs"]
