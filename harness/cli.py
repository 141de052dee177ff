"""The `mqchaos` command line. Each subcommand is a thin shell over one module (imported
when the command runs: `mqchaos heal` need not start pyspark)."""
from __future__ import annotations

import os
import sys

import click

from harness.cluster_cli import COMMANDS as CLUSTER_COMMANDS
from harness.results import ORDERINGS  # stdlib only: no cost to a command that does not check
from harness.util import entry_point, setup_logging
from harness.verdicts import EXIT_UNKNOWN, EXIT_VALID
from nemesis.cli import register as register_nemesis


def _versions(ctx, param, values) -> dict[str, str]:
    """--version [BROKER=]V, repeatable: checked by the one rule (harness.scenario)."""
    from harness.scenario import versions_option

    try:
        return versions_option(values)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


VERSION = click.option(
    "--version", "versions", multiple=True, callback=_versions, metavar="[BROKER=]VERSION",
    help="The broker's version (over the scenario's version: and $MQCHAOS_<BROKER>_VERSION), e.g. 4.0 "
         "or rabbitmq=4.0; a bare version applies to every broker that has it.")


class _Main(click.Group):
    """The ``mqchaos`` group: what click handles itself (usage errors: 2) as click does; an
    exception a command lets through exits 2 with its traceback logged
    (``harness.util.entry_point``), not Python's 1, which would read as "anomalies found"."""

    def main(self, *args, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:  # the caller takes whatever is raised
            return super().main(*args, standalone_mode=False, **kwargs)
        with entry_point():
            try:
                code = super().main(*args, standalone_mode=False, **kwargs)
            except click.exceptions.Abort:  # Ctrl-C outside a run (a run heals, then exits 2 itself)
                click.echo("Aborted!", err=True)
                sys.exit(EXIT_UNKNOWN)
            except click.ClickException as e:  # a command's refusal is no finding: click says 1
                e.show()
                sys.exit(e.exit_code if isinstance(e, click.UsageError) else EXIT_UNKNOWN)
            sys.exit(code if isinstance(code, int) else EXIT_VALID)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Jepsen-style fault injection against real RabbitMQ and Kafka clusters."""
    setup_logging()  # every subcommand's progress lines on stderr ([run], [nemesis], ...)


@main.command()
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--ordering", type=click.Choice(ORDERINGS),
              default=None, help="Ordering rule; default: the run's own (run.json), else none.")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--unavailable-threshold", type=float, default=1.0, show_default=True,
              help="Shortest unavailable interval reported, in seconds.")
@click.option("--json-only", is_flag=True, help="Ignore Parquet copies; read the JSONL histories.")
@click.option("--no-server", is_flag=True,
              help="Check in this process even when a check server (mqchaos check-server) is up.")
def check(run_dirs, ordering, master, unavailable_threshold, json_only, no_server):
    """Check one or many run directories in one Spark job; write check.json into each.
    A running check server of the same code does it in its warm session."""
    from harness.check_service import run_check

    sys.exit(run_check(list(run_dirs), ordering=ordering, master=master, threshold=unavailable_threshold,
                       json_only=json_only, use_server=not no_server))


@main.command("check-server")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--idle-timeout", type=float, default=3600, show_default=True,
              help="Stop after this many seconds without a request.")
@click.option("--status", "show_status", is_flag=True, help="Say whether a server answers, and stop.")
@click.option("--stop", "stop_it", is_flag=True, help="Stop the running server.")
def check_server(master, idle_timeout, show_status, stop_it):
    """Keep one warm Spark session that answers `mqchaos check` (same code, same master) over
    a Unix socket ($MQCHAOS_CHECK_SOCKET, default /tmp/mqchaos-check-UID.sock); runs in the
    foreground until stopped or idle. Exit 0, or 2 when --status/--stop found none."""
    import json

    from harness import check_service

    if show_status or stop_it:
        found = check_service.status()
        if found is None:
            click.echo(f"no check server answers at {check_service.socket_path()}")
            sys.exit(EXIT_UNKNOWN)
        click.echo(json.dumps(found))
        if stop_it:
            check_service.stop()
            click.echo("stopped")
        sys.exit(EXIT_VALID)
    check_service.serve(master=master, idle_timeout=idle_timeout)


@main.command()
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
def convert(run_dirs, master):
    """Convert runs' JSONL histories to Parquet (the JSONL stays: it is the record)."""
    from checkers.check import convert_main

    sys.exit(convert_main(list(run_dirs), master=master))


@main.command()
@click.argument("results", nargs=-1, required=True)
@click.option("--master", default=None,
              help="Spark master URL (default local[*]; under spark-submit, its --master).")
@click.option("--out", default=None, help="Output directory (default results/analysis/<UTC timestamp>/).")
@click.option("--ordering", type=click.Choice(ORDERINGS),
              default=None, help="Ordering rule; default: each run's own (run.json).")
@click.option("--unavailable-threshold", type=float, default=1.0, show_default=True,
              help="Shortest unavailable interval counted, in seconds.")
@click.option("--json-only", is_flag=True, help="Ignore Parquet copies; read the JSONL histories.")
def analyze(results, master, out, ordering, unavailable_threshold, json_only):
    """Analyze many runs (directories, globs, or directories with runs below) in one
    Spark job: a Parquet table (one row per run) and a Markdown/HTML summary."""
    from harness.trend_report import main as analyze_main

    sys.exit(analyze_main(list(results), master=master, out=out, ordering=ordering,
                          threshold=unavailable_threshold, prefer_parquet=not json_only))


@main.command()
@click.argument("paths", nargs=-1)
def recheck(paths):
    """Check stored runs (default results/) again from their JSONL and compare the figures
    with each check.json: after a change to the checker. Exit 0 all identical, 1 some
    differ (each printed), 2 nothing to compare."""
    from checkers.recheck import recheck as recheck_runs

    sys.exit(recheck_runs(list(paths) or ["results"], echo=click.echo))


@main.command()
@click.argument("scenario_files", nargs=-1, required=True)
@VERSION
def validate(scenario_files, versions):
    """Validate scenario files; every error names its field."""
    from harness.scenario import ScenarioError, load
    from harness.verdicts import EXIT_UNKNOWN, EXIT_VALID

    bad = 0
    for f in scenario_files:
        try:
            sc = load(f, versions)
            na = sc.not_applicable()
            click.echo(f"ok  {f}: {sc.name} ({sc.broker} {sc.version})" + (f": not applicable: {na}" if na else ""))
        except ScenarioError as e:
            bad += 1
            click.echo(str(e), err=True)
    sys.exit(EXIT_UNKNOWN if bad else EXIT_VALID)


def _shard(ctx, param, value):
    """catalogue --shard: (I, N), or None."""
    from harness.batch.shard import parse

    try:
        return parse(value) if value else None
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@main.command()
@click.option("--only", default=None, help="Comma-separated ids or names, e.g. R2,K7 (R5 picks R5a, R5b).")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True)
@click.option("--retries", type=click.IntRange(0, 3), default=1, show_default=True,
              help="Retries of a run whose harness failed (never of a finding).")
@click.option("--kind", default="catalogue", show_default=True, help="results/<kind>/<timestamp>/")
@click.option("--master", default=None, help="Spark master URL for the check (default local[*]).")
@click.option("--merge", "merge_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Run nothing: merge these catalogue result directories (later ones win) into one summary.")
@click.option("--from-runs", is_flag=True,
              help="Run nothing: the arguments are run directories (already checked); summarise them.")
@click.option("--shard", default=None, metavar="I/N", callback=_shard,
              help="Run shard I of N: the rows split N ways by their last published wall time "
                   "(harness/batch/shard.py); merge the shards' directories with --merge.")
@VERSION
@click.argument("scenario_files", nargs=-1)
def catalogue(only, repeat, retries, kind, master, merge_dirs, from_runs, shard, versions, scenario_files):
    """Run the scenario catalogue (default scenarios/*.yaml); summary.md/json and junit.xml
    under results/<kind>/<timestamp>/. Exit 0 all valid, 1 anomalies, 2 undecided or harness
    errors (merged by harness/verdicts.py: any 1 makes 1, else any 2 makes 2)."""
    from pathlib import Path

    from harness import store
    from harness.batch import merge, rows_from_runs, run_batch, write_outputs

    if merge_dirs:
        out = merge([Path(d) for d in merge_dirs], kind=kind)
        click.echo((out / "summary.md").read_text())
        sys.exit(0)
    if from_runs:
        out = store.new_batch_dir(kind)
        write_outputs(rows_from_runs([Path(d) for d in scenario_files]), [], out,
                      f"mqchaos {kind}, {out.name}, summarised from {len(scenario_files)} run directories")
        click.echo((out / "summary.md").read_text())
        sys.exit(0)

    sys.exit(run_batch(only.split(",") if only else None, repeat,
                       [Path(f) for f in scenario_files] or None, kind=kind, retries=retries,
                       master=master, versions=versions, shard=shard))


def _matrix_versions(ctx, param, values) -> dict[str, list[str]]:
    """matrix --versions: {broker: [versions]} for every broker (harness.scenario)."""
    from harness.scenario import matrix_versions_option

    try:
        return matrix_versions_option(values)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@main.command()
@click.option("--only", default=None, help="Comma-separated ids or names, e.g. R9,Q1,K7,K8b (R5 picks R5a, R5b).")
@click.option("--versions", "--version", "versions", multiple=True, callback=_matrix_versions,
              metavar="[BROKER=]V1,V2,...|all",
              help="The versions to run, repeatable: rabbitmq=3.10,4.0,4.3 (one broker's), 4.0 (every broker "
                   "that has it, as --version), rabbitmq=all; a broker named in none runs at every version it "
                   "has. They override each scenario's own version: and $MQCHAOS_<BROKER>_VERSION (the one "
                   "rule: --version > the scenario's version: > the environment > the default).")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Runs per scenario and version; above 1 each cell gives the share of runs with loss "
                   "(95 % Wilson interval), the median and p99 of unavailable seconds and the verdicts.")
@click.option("--retries", type=click.IntRange(0, 3), default=1, show_default=True,
              help="Retries of a run whose harness failed (never of a finding).")
@click.option("--kind", default="matrix", show_default=True, help="results/<kind>/<timestamp>/")
@click.option("--master", default=None, help="Spark master URL for the check (default local[*]).")
@click.option("--dry-run", is_flag=True, help="Run nothing: list the jobs in the order they would run.")
@click.option("--from-runs", is_flag=True,
              help="Run nothing: the arguments are run directories (already checked); tabulate them.")
@click.argument("scenario_files", nargs=-1)
def matrix(only, versions, repeat, retries, kind, master, dry_run, from_runs, scenario_files):
    """Run the same scenarios (default scenarios/*.yaml) at several broker versions and write
    one comparison table per broker, scenario by version: results/<kind>/<timestamp>/
    matrix.{md,html,json} beside the batch's summary.* and junit.xml. The catalogue's runner:
    one run's workload at a time, brokers interleaved; a claim a version lacks is a "not
    applicable" cell (no cluster), a scenario a version refuses at load a "refused at load"
    one. Exit 0 every run held / valid, 1 a prediction did not hold or anomalies, else 2:
    any run undecided, a harness error, and, as in the catalogue, a not-applicable or
    refused cell (merged by harness/verdicts.py: any 1 makes 1, else any 2 makes 2)."""
    from pathlib import Path

    from harness import store
    from harness.batch import plan, rows_from_runs, run_batch, write_outputs

    if from_runs:
        out = store.new_batch_dir(kind)
        write_outputs(rows_from_runs([Path(d) for d in scenario_files]), [], out,
                      f"mqchaos {kind}, {out.name}, tabulated from {len(scenario_files)} run directories", matrix={})
        click.echo((out / "matrix.md").read_text())
        sys.exit(0)
    files = [Path(f) for f in scenario_files] or None
    selected = only.split(",") if only else None
    if dry_run:
        jobs, bad = plan(selected, repeat, files, versions=versions)
        click.echo(f"{len(jobs)} run(s), in the order they would run ({repeat} per scenario and version):")
        for k, (sc, rep, _) in enumerate(jobs):
            na = sc.not_applicable()
            click.echo(f"{k + 1:4d}. {sc.name}  {sc.broker} {sc.version}  repeat {rep + 1}/{repeat}"
                       + (f"  not applicable: {na} (no cluster)" if na else ""))
        for b in bad:
            what = f"{b.scenario}  {b.broker} {b.version}" if b.version else b.path
            click.echo(f"   -  {what}  {'refused at load' if b.version else 'invalid'}: {' '.join(b.reason.split())}")
        sys.exit(0)
    sys.exit(run_batch(selected, repeat, files, kind=kind, retries=retries, master=master, versions=versions,
                       matrix=True, table="matrix.md"))


@main.command("doc-table")
@click.argument("batch_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--into", "doc", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The document (README.md, docs/findings.md) holding the table's markers.")
@click.option("--name", required=True, help="The table's marker: <!-- table:NAME --> ... <!-- /table:NAME -->.")
@click.option("--only", default=None, help="Comma-separated scenario names or ids: those rows only.")
@click.option("--matrix", "as_matrix", is_flag=True,
              help="The batch's version matrix (its matrix.json, `mqchaos matrix`), not its rows.")
@click.option("--tally", is_flag=True,
              help="BATCH_DIR holds published batches (docs/batches): per scenario and version, held k of n "
                   "over every run in their summaries, with a 95 % Wilson interval.")
@click.option("--claims", "as_claims", is_flag=True,
              help="BATCH_DIR holds published batches: the seed claims (SEED-CLAIMS.md items) one by one, the "
                   "rows whose claims: name each (scenarios/*.yaml) and their runs' tally.")
@click.option("--explore", "as_explore", is_flag=True,
              help="BATCH_DIR holds explore records (docs/batches/explore-*.json): one row per explored run.")
@click.option("--compare", "as_compare", is_flag=True,
              help="BATCH_DIR holds published batches: every comparison (scenarios/comparisons/*.yaml), one "
                   "line per pair of its sides' runs.")
@click.option("--budget", "as_budget", is_flag=True,
              help="BATCH_DIR holds published batches: the catalogue's wall time (each row's newest published "
                   "run, its declared load) and per number of machines its longest shard (harness/batch/shard.py).")
@click.option("--as", "as_name", default=None,
              help="The published copy's directory under docs/batches (default: the batch's own name).")
@click.option("--batches", type=click.Path(file_okay=False), default=None,
              help="Where published copies go (default: the repository's docs/batches).")
def doc_table(batch_dir, doc, name, only, as_matrix, tally, as_claims, as_explore, as_compare, as_budget, as_name,
              batches):
    """Write a batch's table (its summary.json, or with --matrix its matrix.json) into a
    document between its markers, so the figures in README.md and docs/ come from the runs,
    never typed. A batch under results/ (not committed) is first copied, compact, to
    docs/batches/<name>/ (figures, the prediction's checks, window, operator events, run id),
    and the table is written from that copy, which its "generated by" line names: anyone can
    derive the table again from the repository (tests/test_doc_sources.py does)."""
    from pathlib import Path

    from harness import rows as R

    wanted = set(only.split(",")) if only else None
    try:
        if as_explore:
            lines, source, count = _explore_source(Path(batch_dir))
        elif as_claims:
            lines, source, count = _claims_source(Path(batch_dir))
        elif as_compare:
            lines, source, count = _compare_source(Path(batch_dir))
        elif as_budget:
            lines, source, count = _budget_source(Path(batch_dir))
        else:
            lines, source, count = _doc_source(Path(batch_dir), wanted, as_matrix, tally,
                                               Path(batches) if batches else R.DOC_BATCHES, as_name)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    flags = (" --matrix" if as_matrix else "") + (" --tally" if tally else "") + (f" --only {only}" if only else "")
    flags += (" --explore" if as_explore else "") + (" --claims" if as_claims else "")
    flags += (" --compare" if as_compare else "") + (" --budget" if as_budget else "")
    # a pattern over the directory, not one batch's file
    whole = tally or as_explore or as_claims or as_compare or as_budget
    by = f"mqchaos doc-table {R.repo_path(source.parent if not whole else Path(batch_dir))}{flags}"
    shown = (R.repo_path(source) if not whole else
             f"{R.repo_path(Path(batch_dir))}/{EXPLORE_RECORDS if as_explore else '*/' + R.SUMMARY_JSON}")
    if not as_explore:  # the present scenario files: which runs are superseded (harness.identity)
        shown += f" {SCENARIO_FILES}"
    if as_claims or as_compare:
        from harness.compare import COMPARISON_FILES
        shown += f" {COMPARISON_FILES}"
    path = Path(doc)
    try:
        path.write_text(R.splice(path.read_text(), name, lines, shown, by=by))
    except ValueError as e:
        raise click.ClickException(f"{doc}: {e}") from None
    click.echo(f"{doc}: table {name}, {count} rows from {shown}")


EXPLORE_RECORDS = "explore-*.json"  # published explore records (`mqchaos explore`'s explore.json)


SCENARIO_FILES = "scenarios/*.yaml"  # the catalogue, named from the repository's root


def _published_batches(batch_dir):
    """Each published batch below ``batch_dir`` (docs/batches): its name and its run rows."""
    import json

    from harness import rows as R

    files = sorted(batch_dir.glob(f"*/{R.SUMMARY_JSON}"))
    if not files:
        raise ValueError(f"{batch_dir}: no published batch (*/{R.SUMMARY_JSON}) below it")
    return [(f.parent.name, json.loads(f.read_text())) for f in files]


def _published_rows(batch_dir):
    """Every run row of the published batches below ``batch_dir``."""
    return [r for _, rows in _published_batches(batch_dir) for r in rows]


def _comparisons(batches):
    """Every comparison file (scenarios/comparisons) with its samples over the published
    ``batches``, and the present catalogue (harness.identity) with the comparisons in it; a
    side naming no row of the catalogue is refused."""
    from harness import compare as C
    from harness import identity

    cat = identity.catalogue()
    out = []
    for c in C.load_all():
        bad = C.unknown_rows(c, set(cat.by_id))
        if bad:
            raise ValueError(f"{c.name}: " + "; ".join(bad))
        out.append((c, C.pairs(c, batches, cat)))
    return out, cat.with_entries([C.entry(c, cat) for c, _ in out])


def _claims_source(batch_dir):
    """The seed-claim table: every scenario's ``claims:``, every published batch's runs."""
    from harness import compare as C
    from harness import rows as R
    from harness.spec import SEED_CLAIMS

    batches = _published_batches(batch_dir)  # read once: the rows and the comparisons' pairs
    rows = [r for _, batch in batches for r in batch]
    comparisons, cat = _comparisons(batches)
    for c, samples in comparisons:  # a comparison's samples count as its runs
        rows += C.sample_rows(c, samples)
    claimed = [(e.name, list(e.claims)) for e in cat.entries if e.claims]
    return R.claim_lines(claimed, rows, SEED_CLAIMS, cat), batch_dir, SEED_CLAIMS


def _budget_source(batch_dir):
    """The catalogue's wall time: what the published batches say of each row, and its shards."""
    from harness.batch import shard
    from harness.batch.jobs import select
    from harness.store import ROOT

    scenarios, _ = select(sorted(ROOT.glob(SCENARIO_FILES)), None)
    load = {sc.name: sc.timing.warmup + sc.timing.duration + sc.timing.recovery for sc in scenarios}
    b = shard.budget(load, shard.wall_times(p for p in batch_dir.iterdir() if p.is_dir()))
    rest = b["published_s"] - b["published_load_s"]
    lines = ["| the catalogue (scenarios/*.yaml) | rows | s |", "|---|---|---|",
             f"| every row | {b['rows']} | |",
             f"| published: each row's newest batch (the median of its runs there) | {b['published']} | "
             f"{b['published_s']:,.0f} |",
             f"| of that, the rows' own load (warmup + duration + recovery, as declared) | {b['published']} | "
             f"{b['published_load_s']:,.0f} |",
             f"| of that, the rest (cluster start and set-up, probes, drain, heal, teardown) | {b['published']} | "
             f"{rest:,.0f} |",
             f"| never published (each counted as the published median, {b['guess_s']:,.0f} s) | {b['unpublished']} | "
             f"{b['unpublished'] * b['guess_s']:,.0f} |",
             f"| the declared load of every row | {b['rows']} | {b['load_s']:,.0f} |",
             "", "| machines (shards) | expected wall s (the longest shard) | floor s (the declared load alone) |",
             "|---|---|---|"]
    lines += [f"| {n} | {m['expected_s']:,.0f} | {m['floor_s']:,.0f} |" for n, m in b["machines"].items()]
    return lines, batch_dir, b["rows"]


def _compare_source(batch_dir):
    """The comparison table: every comparison's samples over the published batches."""
    from harness import compare as C
    from harness import rows as R

    lines, n = [], 0
    comparisons, cat = _comparisons(_published_batches(batch_dir))
    for c, samples in comparisons:
        left, factor, op, right = c.relation()
        times = f" × {factor:g}" if factor != 1 else ""
        for s, row in zip(samples, C.sample_rows(c, samples)):
            n += 1
            lines.append([c.id, s["version"] or "-", s["batch"], R.md_cell(" + ".join(c.figure)),
                          f"{left} ({c.sides[left]}) {R.fmt(s['values'][left])}{times} {op} "
                          f"{right} ({c.sides[right]}) {R.fmt(s['values'][right])}",
                          R.shown_verdict(row, cat)])
    return R.md_table(["id", "version", "batch", "figure", "relation predicted, figures measured", "verdict"],
                      lines), batch_dir, n


def _explore_source(batch_dir):
    """The exploration table: every published explore record below ``batch_dir``."""
    import json

    from harness import explore as X

    files = sorted(batch_dir.glob(EXPLORE_RECORDS))
    if not files:
        raise ValueError(f"{batch_dir}: no explore record ({EXPLORE_RECORDS})")
    records = [json.loads(f.read_text()) for f in files]
    return X.table_lines(records), batch_dir, len(records)


def _doc_source(batch_dir, wanted, as_matrix, tally, batches, as_name):
    """A document table's lines, the committed file they come from and how many rows: the
    batch published first (harness.rows.publish) unless it is a published copy already."""
    import json

    from harness import identity
    from harness import matrix as M
    from harness import rows as R

    cat = identity.catalogue()  # the present scenario files: a superseded run is marked
    if tally:
        rows = [r for r in _published_rows(batch_dir) if not wanted or r["scenario"] in wanted or r.get("id") in wanted]
        return R.tally_lines(rows, cat), batch_dir, len(rows)
    if as_matrix:
        M.read(batch_dir)  # ValueError when it is no matrix batch
        pub = R.published_dir(batch_dir, batches, as_name)
        if pub != batch_dir:
            _publish_matrix(batch_dir, pub)
        m = M.read(pub)
        m = M.only(m, wanted) if wanted else m
        return M.markdown_lines(m, cat=cat), pub / M.MATRIX_JSON, sum(len(t["rows"]) for t in m["tables"])
    pub = R.publish(batch_dir, batches, as_name)
    rows = json.loads((pub / R.SUMMARY_JSON).read_text())
    rows = [r for r in rows if not wanted or r["scenario"] in wanted or r.get("id") in wanted]
    return R.table_lines(rows, cat=cat), pub / R.SUMMARY_JSON, len(rows)


def _publish_matrix(batch_dir, pub) -> None:
    """A matrix batch's matrix.json, compact, with each run's id for its path on this machine,
    beside its rows' compact copy (harness.rows.publish)."""
    import json

    from harness import matrix as M
    from harness import rows as R

    m = M.read(batch_dir)
    for t in m["tables"]:
        for row in t["rows"]:
            for c in row["cells"].values():
                for r in c["runs"]:
                    r["run"] = R.run_id(r.pop("report", None))
    pub.mkdir(parents=True, exist_ok=True)
    (pub / M.MATRIX_JSON).write_text(json.dumps(m, separators=(",", ":")) + "\n")
    if (batch_dir / R.SUMMARY_JSON).is_file():
        R.publish(batch_dir, pub.parent, pub.name)


@main.command()
@click.argument("scenario_file")
@click.option("--keep-cluster", is_flag=True, help="Leave the cluster running after the run.")
@click.option("--no-check", is_flag=True, help="Skip the Spark check and the report.")
@VERSION
def run(scenario_file, keep_cluster, no_check, versions):
    """Run one scenario against a real cluster; results under results/<scenario>/<timestamp>/.

    \b
    Exit codes (harness/verdicts.py), for a scenario with a prediction (expect:):
      0  the prediction held
      1  it did not hold
      2  undecided: the run did not complete, its drain did not finish, a fault
         failed or left no evidence, a harness error, or the claim does not exist
         in the version (not applicable); also an invalid scenario file
    Without a prediction, by the checker: 0 valid, 1 anomalies, 2 undecided."""
    from harness.runner import run_scenario
    from harness.scenario import ScenarioError, load
    from harness.verdicts import EXIT_UNKNOWN

    try:
        sc = load(scenario_file, versions)
    except ScenarioError as e:
        click.echo(str(e), err=True)
        sys.exit(EXIT_UNKNOWN)
    code, r = run_scenario(sc, keep_cluster=keep_cluster, check=not no_check)
    click.echo(f"{sc.name}: exit {code}; results in {r.dir}")
    sys.exit(code)


@main.command()
@click.argument("base", required=False)
@click.option("--faults", default="kill,pause,partition", show_default=True,
              help="What to draw from: kill, pause, stop, partition, power_loss, corrupt, pause_kill, part_kill.")
@click.option("--seed", type=int, default=None, help="The draw's seed (default: a random one, printed).")
@click.option("--duration", type=float, default=60.0, show_default=True, help="Seconds of faults and stable periods.")
@click.option("--replay", type=click.Path(exists=True, file_okay=False),
              help="A run directory: run its recorded scenario (schedule and seed) again.")
@click.option("--shrink/--no-shrink", default=True, show_default=True,
              help="When a run finds anomalies, look for a shorter schedule that still does.")
@click.option("--shrink-budget", type=int, default=6, show_default=True, help="Runs the shrink may spend.")
@VERSION
def explore(base, faults, seed, duration, replay, shrink, shrink_budget, versions):
    """Seeded exploration (harness/explore.py): a fault schedule drawn from --faults against
    BASE's queue / topic and settings, no prediction (the checker decides: 0 valid, 1
    anomalies, 2 undecided), shrunk when it finds something; the record (seed, groups,
    runs, shortest schedule) in results/explore/<timestamp>/explore.json."""
    import random as _random

    from harness import explore as X, store
    from harness.runner import run_scenario
    from harness.scenario import ScenarioError, parse, read
    from harness.verdicts import EXIT_UNKNOWN

    def run_one(data: dict) -> tuple[int, str]:
        try:
            sc = parse(data, data.get("name", "explore"), version=versions)
        except ScenarioError as e:
            click.echo(str(e), err=True)
            return EXIT_UNKNOWN, ""
        code, r = run_scenario(sc)
        click.echo(f"{sc.name}: exit {code}; results in {r.dir}")
        return code, os.path.relpath(r.dir, store.results_root())  # the record names it below the root

    if replay:
        try:
            data = X.replay_scenario(__import__("pathlib").Path(replay))
        except ValueError as e:
            raise click.ClickException(str(e)) from None
        sys.exit(run_one(data)[0])
    if not base:
        raise click.UsageError("BASE (a scenario file) or --replay RUN is needed")
    seed = seed if seed is not None else _random.SystemRandom().randrange(1, 10**6)
    click.echo(f"explore: seed {seed}")
    data = read(base)
    out = store.new_batch_dir("explore")
    try:
        code, record = X.explore(data, [f.strip() for f in faults.split(",") if f.strip()], seed, duration,
                                 run_one, out, shrink_budget if shrink else 0)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    store.finish_batch(out)
    click.echo(f"explore: seed {seed}, {len(record['groups'])} fault group(s), exit {code}; "
               f"{out / 'explore.json'}")
    sys.exit(code)


@main.command()
@click.argument("results", required=False)
@click.option("--port", type=int, default=8000, show_default=True)
def serve(results, port):
    """Serve the results store (default results/) on 127.0.0.1: every batch; per scenario and
    version, held k of n over every stored run with a 95 % Wilson interval; every run, with
    its report."""
    from harness import store
    from harness.browse import serve as serve_results

    serve_results(store.results_root(results), port)


@main.command("suite")
@click.argument("scenario_files", nargs=-1, required=True)
@click.option("--keep-cluster", is_flag=True)
@click.option("--retries", type=click.IntRange(0, 3), default=0, show_default=True,
              help="Retries of a run whose harness failed (never of a finding).")
@VERSION
def suite(scenario_files, keep_cluster, retries, versions):
    """Run the given scenarios in order and print one table (what `make test-partition`
    calls): the catalogue's runner on a selection, summary under results/suites/."""
    from pathlib import Path

    from harness.batch import run_batch

    sys.exit(run_batch(files=[Path(f) for f in scenario_files], kind="suites", retries=retries,
                       keep_cluster=keep_cluster, sort=False, table="summary.txt", versions=versions))


for command in CLUSTER_COMMANDS:
    main.add_command(command)
register_nemesis(main)

if __name__ == "__main__":
    main()
