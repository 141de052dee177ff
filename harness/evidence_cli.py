"""`mqchaos evidence`: the evidence kept across nights (harness.evidence, docs/nightly.md):
`append` a batch's rows to the store, `report` over the whole store, `backfill` it with every
published run."""
from __future__ import annotations

from pathlib import Path

import click

STORE = click.option("--store", "where", type=click.Path(file_okay=False), default=None,
                     help="The store: a directory of <night>.jsonl files (default results/evidence-store/).")


def _store(where: str | None) -> Path:
    from harness.evidence import store_dir

    return store_dir(where)


@click.group(short_help="The evidence kept across nights: append, report, backfill.")
def evidence() -> None:
    """The evidence store: every night's published rows (a published row, as
    docs/batches/*/summary.json holds it, with its night and batch), one JSONL file per night,
    only appended to; results/evidence-store/ on a machine, the repository's `evidence` branch in CI."""


@evidence.command("append", short_help="Append a batch's rows to the store (a run already there is not).")
@click.argument("batch_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--night", default=None, metavar="YYYY-MM-DD",
              help="The night (UTC date) the rows belong to (default: the date the batch's first run started).")
@STORE
def append_command(batch_dir, night, where):
    """Append BATCH_DIR's rows (its summary.json, e.g. results/nightly/latest) to the store,
    each as its published copy with the night and the batch's name. A run whose id is in the
    store already is left out, so appending twice adds nothing."""
    from harness import evidence as E

    try:
        added = E.append(Path(batch_dir), night, where)
        total = len(E.batch_rows(Path(batch_dir)))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    nights = sorted({r["night"] for r in added})
    click.echo(f"{len(added)} of {total} row(s) added to {_store(where)}"
               + (f" (night {', '.join(nights)})" if nights else "") + f"; {total - len(added)} already there")


@evidence.command("report", short_help="Per row and version over the whole store: k of n, flips, flaky, stale.")
@STORE
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Output directory (default results/evidence-report/<UTC timestamp>/).")
@click.option("--junit", "junit_batch", default=None, type=click.Path(exists=True, file_okay=False),
              help="Also OUT/junit.xml: this batch's JUnit report, its rows the evidence calls flaky marked so.")
def report_command(where, out, junit_batch):
    """Report over every row of the store (evidence.md, evidence.json): per test (digest) and
    broker version, held k of n decided runs with the 95 % Wilson interval and the nights they
    ran; flips between versions (a regression: held at an older version, did not hold at a
    newer one; a fix: the reverse); flaky lines (one version, verdicts that differ); stale
    rows (a scenario file with no run of its current digest). Exit 0 when written, 2 when the
    store holds no row."""
    from harness import evidence as E
    from harness import store

    rows = E.load(where)
    if not rows:
        raise click.ClickException(f"{_store(where)}: no evidence row (mqchaos evidence append / backfill)")
    a = E.analyze(rows)
    target = Path(out) if out else store.new_batch_dir("evidence-report")
    for path in E.write_report(a, target, str(_store(where)), Path(junit_batch) if junit_batch else None):
        click.echo(f"written: {path}")
    if not out:
        store.finish_batch(target)
    click.echo(f"{a['runs']} run(s) over {len(a['nights'])} night(s): {len(a['lines'])} line(s), "
               f"{sum(f['kind'] == E.REGRESSION for f in a['flips'])} regression(s), "
               f"{sum(f['kind'] == E.FIX for f in a['flips'])} fix(es), {len(a['flaky'])} flaky, "
               f"{len(a['stale'])} stale file(s)")


@evidence.command("backfill", short_help="Add every published run (docs/batches) to the store.")
@STORE
@click.option("--batches", default=None, type=click.Path(exists=True, file_okay=False),
              help="The published batches (default the repository's docs/batches).")
def backfill_command(where, batches):
    """Add every published run (docs/batches/*/summary.json) to the store, as published, on
    the night it ran: the store starts with what the repository already holds. Idempotent."""
    from harness import evidence as E
    from harness.rows import DOC_BATCHES

    added = E.backfill(where, Path(batches) if batches else DOC_BATCHES)
    click.echo(f"{len(added)} published row(s) added to {_store(where)}")
