"""The `mqchaos` command line, in a few verbs composed of the project's parts, as Jepsen's cli
composes `test`, `analyze`, `test-all` and `serve` (issue 53):

    running          run, batch, explore, validate
    reading results  check (`check runs`, `check server start|status|stop`), recheck,
                     summarize, evidence append | report | backfill (harness.evidence_cli), serve, convert
    the cluster      cluster engine | images | up | down | status | logs | heal | nemesis
                     (harness.cluster_cli, nemesis.cli)
    the documents    docs table batch | matrix | tally | claims | compare | budget | explore
                     (harness.docs_cli over harness.doctables)

Jepsen's `analyze` (judge a stored run again) is `check`; its `test-all` summary of many
runs is `summarize`. Each command is a thin shell over one module, imported when the command
runs (`mqchaos cluster heal` need not start pyspark); every group is a click group that its
commands are added to (``add_command`` or the group's decorator). The old verbs (`suite`,
`catalogue`, `matrix`, `analyze`, `check-server`, `doc-table`, `up`, `heal`, ...) still work
for a while, each saying its new spelling first (harness.old_verbs)."""
from __future__ import annotations

import os
import sys

import click

from harness import old_verbs
from harness.cluster_cli import cluster_group
from harness.docs_cli import docs
from harness.evidence_cli import evidence
from harness.results import ORDERINGS  # stdlib only: no cost to a command that does not check
from harness.util import entry_point, setup_logging
from harness.verdicts import EXIT_UNKNOWN, EXIT_VALID


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

# `mqchaos --help` lists the commands by what they are for
SECTIONS = {"Running": ("run", "batch", "explore", "validate"),
            "Reading results": ("check", "recheck", "summarize", "evidence", "serve", "convert"),
            "The cluster and the documents": ("cluster", "docs")}


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

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands by ``SECTIONS``; any other visible one (a plug-in's) after them."""
        shown = {name: cmd for name in self.list_commands(ctx)
                 if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden}
        pad = max(map(len, shown), default=0)  # one column across the sections
        sections = {**SECTIONS, "Other": tuple(n for n in shown if not any(n in s for s in SECTIONS.values()))}
        for title, names in sections.items():
            rows = [(n.ljust(pad), shown[n].get_short_help_str(formatter.width - 6 - pad)) for n in names if n in shown]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class _RunsOrCommand(click.Group):
    """A group whose first argument is one of its commands or else the start of its default
    command's arguments: `mqchaos check RUN_DIR...` is `mqchaos check runs RUN_DIR...`, and
    `mqchaos check server status` the server's (a run directory named like a command:
    ./server)."""

    def __init__(self, *args, default: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.default = default

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = [self.default, *args]
        return super().parse_args(ctx, args)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=f"The old verbs ({', '.join(c.name for c in old_verbs.COMMANDS)}) still work for now: "
                    "each says its new spelling.")
def main() -> None:
    """Jepsen-style fault injection against real RabbitMQ and Kafka clusters."""
    setup_logging()  # every subcommand's progress lines on stderr ([run], [nemesis], ...)


# ---- running ------------------------------------------------------------------------------------------
@main.command(short_help="Run one scenario against a real cluster.")
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

    try:
        sc = load(scenario_file, versions)
    except ScenarioError as e:
        click.echo(str(e), err=True)
        sys.exit(EXIT_UNKNOWN)
    code, r = run_scenario(sc, keep_cluster=keep_cluster, check=not no_check)
    click.echo(f"{sc.name}: exit {code}; results in {r.dir}")
    sys.exit(code)


def _shard(ctx, param, value):
    """batch --shard: (I, N), or None."""
    from harness.batch.shard import parse

    try:
        return parse(value) if value else None
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _batch_versions(values: tuple[str, ...], as_matrix: bool):
    """batch --version: {broker: version} by the one rule; with --matrix {broker: [versions]}
    for every broker (harness.scenario)."""
    from harness.scenario import matrix_versions_option, versions_option

    try:
        return matrix_versions_option(values) if as_matrix else versions_option(values)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--version") from None


@main.command(short_help="Run many scenarios: the catalogue, a suite, a version matrix.")
@click.argument("scenario_files", nargs=-1)
@click.option("--only", default=None, help="Comma-separated ids or names, e.g. R2,K7 (R5 picks R5a, R5b).")
@click.option("--version", "--versions", "versions", multiple=True, metavar="[BROKER=]V[,V2,...|all]",
              help="The broker's version, repeatable, as run's --version (rabbitmq=4.0, or 4.0 for every broker "
                   "that has it). With --matrix, the versions to run: rabbitmq=3.10,4.0,4.3 (one broker's), 4.0, "
                   "rabbitmq=all; a broker named in none runs at every version it has. They override each "
                   "scenario's own version: and $MQCHAOS_<BROKER>_VERSION (the one rule).")
@click.option("--matrix", "as_matrix", is_flag=True,
              help="A version matrix: each scenario at every --version, one comparison table per broker, "
                   "scenario by version (matrix.{md,html,json} beside the summary).")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Runs per scenario (and version); in a matrix, above 1 each cell gives the share of runs "
                   "with loss (95 % Wilson interval), the median and p99 of unavailable seconds and the verdicts.")
@click.option("--retries", type=click.IntRange(0, 3), default=1, show_default=True,
              help="Retries of a run whose harness failed (never of a finding).")
@click.option("--in-order", is_flag=True,
              help="The files in the order given, not in the catalogue's (R, Q, K; by id).")
@click.option("--keep-cluster", is_flag=True, help="Leave the last cluster running.")
@click.option("--kind", default=None, help="results/<kind>/<timestamp>/ (default catalogue; with --matrix, matrix).")
@click.option("--master", default=None, help="Spark master URL for the check (default local[*]).")
@click.option("--text", is_flag=True, help="Print the plain-text table (summary.txt), not the Markdown one.")
@click.option("--shard", default=None, metavar="I/N", callback=_shard,
              help="Run shard I of N: the rows split N ways by their last published wall time "
                   "(harness/batch/shard.py); merge the shards' directories with --merge.")
@click.option("--plan", "show_plan", is_flag=True, help="Run nothing: list the runs in the order they would run.")
@click.option("--from-runs", is_flag=True,
              help="Run nothing: the arguments are run directories (already checked); summarise them "
                   "(with --matrix: tabulate them).")
@click.option("--merge", "merge_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Run nothing: merge these batch directories (later ones win) into one summary.")
@click.option("--until-decided", is_flag=True,
              help="Repeat the rows until each is decided (harness/decided.py) or --cap / --budget ends: "
                   "undecided rows first, then mixed ones, fewest decided runs first (harness/batch/until.py); "
                   "decisions.json and a decisions section in the summary.")
@click.option("--cap", type=click.IntRange(1, 1000), default=None,
              help="With --until-decided: runs per row and version at most (default 10).")
@click.option("--budget", type=click.FloatRange(0), default=None, metavar="SECONDS",
              help="With --until-decided: wall time; a run is not started when less is left than its row's "
                   "published wall time.")
@click.option("--evidence", type=click.Path(file_okay=False), default=None,
              help="With --until-decided: published batches whose decided runs count (default docs/batches).")
@click.option("--resume", type=click.Path(exists=True, file_okay=False), default=None, metavar="BATCH_DIR",
              help="Continue a stopped --until-decided batch where it stopped (its own files, rows and options).")
def batch(scenario_files, only, versions, as_matrix, repeat, retries, in_order, keep_cluster, kind, master, text,
          shard, show_plan, from_runs, merge_dirs, until_decided, cap, budget, evidence, resume):
    """Run many scenarios (default the catalogue, scenarios/*.yaml) as one batch: one run's
    workload at a time, the next cluster coming up and the last one's check beside it,
    brokers interleaved; summary.{md,json,txt} and junit.xml under results/<kind>/<timestamp>/.
    A claim a version lacks is a "not applicable" row (no cluster), a scenario a version
    refuses at load a "refused at load" one. Without running: --plan, --from-runs, --merge.
    --until-decided (--cap, --budget, --evidence; --resume DIR): the rows again and again until
    each is decided (harness/batch/until.py, harness/decided.py).
    Exit 0 every run held / valid, 1 a prediction did not hold or anomalies, else 2: a run
    undecided, a harness error, a not-applicable or refused row (merged by
    harness/verdicts.py: any 1 makes 1, else any 2 makes 2)."""
    from pathlib import Path

    from harness.batch import run_batch

    kind = kind or ("matrix" if as_matrix else "catalogue")
    table = "summary.txt" if text else "matrix.md" if as_matrix else "summary.md"
    chosen = _batch_versions(versions, as_matrix)
    files = [Path(f) for f in scenario_files] or None
    selected = only.split(",") if only else None
    if merge_dirs or from_runs:
        _summarise_stored([Path(d) for d in merge_dirs or scenario_files], kind, table, as_matrix, bool(merge_dirs))
        sys.exit(0)
    if show_plan:
        _print_plan(selected, repeat, files, not in_order, chosen, shard)
        sys.exit(0)
    if until_decided or resume:
        from harness.batch.until import Ask, run_until_decided

        ask = Ask([str(f) for f in files] if files else None, selected, chosen or None, not in_order,
                  evidence=evidence or Ask.evidence, retries=retries)
        sys.exit(run_until_decided(None if resume else ask, resume and Path(resume), master=master,
                                   keep_cluster=keep_cluster, cap=cap, budget_s=budget))
    sys.exit(run_batch(selected, repeat, files, kind=kind, retries=retries, master=master, keep_cluster=keep_cluster,
                       sort=not in_order, table=table, versions=chosen, matrix=as_matrix, shard=shard))


def _summarise_stored(dirs: list, kind: str, table: str, as_matrix: bool, merging: bool) -> None:
    """batch --merge (batch directories, later ones win) or --from-runs (run directories, with
    --matrix tabulated): a new batch directory of stored runs, its table echoed."""
    from harness import store
    from harness.batch import merge, rows_from_runs, write_outputs

    if merging:
        out = merge(dirs, kind=kind)
    else:
        out = store.new_batch_dir(kind)
        how = "tabulated" if as_matrix else "summarised"
        title = f"mqchaos {kind}, {out.name}, {how} from {len(dirs)} run directories"
        write_outputs(rows_from_runs(dirs), [], out, title, **({"matrix": {}} if as_matrix else {}))
    click.echo((out / table).read_text())


def _print_plan(selected, repeat, files, sort, versions, shard) -> None:
    """batch --plan: the runs in the order they would run (harness.batch.jobs reads only the
    scenario files), and the files or versions that would not load."""
    from harness.batch import plan

    jobs, bad = plan(selected, repeat, files, sort, versions, shard)
    click.echo(f"{len(jobs)} run(s), in the order they would run ({repeat} per scenario and version):")
    for k, (sc, rep, _) in enumerate(jobs):
        na = sc.not_applicable()
        click.echo(f"{k + 1:4d}. {sc.name}  {sc.broker} {sc.version}  repeat {rep + 1}/{repeat}"
                   + (f"  not applicable: {na} (no cluster)" if na else ""))
    for b in bad:
        what = f"{b.scenario}  {b.broker} {b.version}" if b.version else b.path
        click.echo(f"   -  {what}  {'refused at load' if b.version else 'invalid'}: {' '.join(b.reason.split())}")


@main.command(short_help="Draw fault schedules from a scenario; shrink what fails.")
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
@click.argument("scenario_files", nargs=-1, required=True)
@VERSION
def validate(scenario_files, versions):
    """Validate scenario files; every error names its field."""
    from harness.scenario import ScenarioError, load

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


# ---- reading results ----------------------------------------------------------------------------------
@main.group(cls=_RunsOrCommand, default="runs", short_help="Check stored runs (Jepsen's analyze); the check server.")
def check() -> None:
    """Check stored runs: `mqchaos check RUN_DIR...` (short for `mqchaos check runs`) writes
    check.json into each, by a running check server when one answers (`mqchaos check server
    start`). Jepsen's `analyze`: a run judged again from its directory alone."""


@check.command("runs", short_help="Check run directories (the default: `mqchaos check RUN...`).")
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--ordering", type=click.Choice(ORDERINGS),
              default=None, help="Ordering rule; default: the run's own (run.json), else none.")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--unavailable-threshold", type=float, default=1.0, show_default=True,
              help="Shortest unavailable interval reported, in seconds.")
@click.option("--json-only", is_flag=True, help="Ignore Parquet copies; read the JSONL histories.")
@click.option("--no-server", is_flag=True,
              help="Check in this process even when a check server (mqchaos check server start) is up.")
def check_runs(run_dirs, ordering, master, unavailable_threshold, json_only, no_server):
    """Check one or many run directories in one Spark job; write check.json into each.
    A running check server of the same code does it in its warm session. Exit 0 valid, 1
    anomalies, 2 undecided (merged over the runs: harness/verdicts.py)."""
    from harness.check_service import run_check

    sys.exit(run_check(list(run_dirs), ordering=ordering, master=master, threshold=unavailable_threshold,
                       json_only=json_only, use_server=not no_server))


@check.group("server", short_help="A warm Spark session for `mqchaos check`: start, status, stop.")
def check_server() -> None:
    """One warm Spark session that answers `mqchaos check` (same code, same master) over a
    Unix socket ($MQCHAOS_CHECK_SOCKET, default /tmp/mqchaos-check-UID.sock)."""


@check_server.command("start")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--idle-timeout", type=float, default=3600, show_default=True,
              help="Stop after this many seconds without a request.")
def server_start(master, idle_timeout):
    """Run the check server in the foreground until stopped or idle."""
    from harness import check_service

    check_service.serve(master=master, idle_timeout=idle_timeout)


def _server(stop: bool) -> None:
    """What the server says of itself, and with ``stop`` stop it: exit 0, or 2 when none answers."""
    import json

    from harness import check_service

    found = check_service.status()
    if found is None:
        click.echo(f"no check server answers at {check_service.socket_path()}")
        sys.exit(EXIT_UNKNOWN)
    click.echo(json.dumps(found))
    if stop:
        check_service.stop()
        click.echo("stopped")
    sys.exit(EXIT_VALID)


@check_server.command("status")
def server_status():
    """Say whether a check server answers (its code, master, requests): exit 0, or 2 when none does."""
    _server(stop=False)


@check_server.command("stop")
def server_stop():
    """Stop the running check server: exit 0, or 2 when none answers."""
    _server(stop=True)


@main.command(short_help="Check stored runs again; compare with their check.json.")
@click.argument("paths", nargs=-1)
def recheck(paths):
    """Check stored runs (default results/) again from their JSONL and compare the figures
    with each check.json: after a change to the checker. Exit 0 all identical, 1 some
    differ (each printed), 2 nothing to compare."""
    from checkers.recheck import recheck as recheck_runs

    sys.exit(recheck_runs(list(paths) or ["results"], echo=click.echo))


@main.command(short_help="Many runs in one Spark job (Jepsen's test-all summary).")
@click.argument("results", nargs=-1, required=True)
@click.option("--master", default=None,
              help="Spark master URL (default local[*]; under spark-submit, its --master).")
@click.option("--out", default=None, help="Output directory (default results/analysis/<UTC timestamp>/).")
@click.option("--ordering", type=click.Choice(ORDERINGS),
              default=None, help="Ordering rule; default: each run's own (run.json).")
@click.option("--unavailable-threshold", type=float, default=1.0, show_default=True,
              help="Shortest unavailable interval counted, in seconds.")
@click.option("--json-only", is_flag=True, help="Ignore Parquet copies; read the JSONL histories.")
def summarize(results, master, out, ordering, unavailable_threshold, json_only):
    """Summarize many runs (directories, globs, or directories with runs below) in one
    Spark job: a Parquet table (one row per run) and a Markdown/HTML summary per scenario and
    broker version, with the trend by day (Jepsen's test-all summary; harness/trend_report.py)."""
    from harness.trend_report import main as summary_main

    sys.exit(summary_main(list(results), master=master, out=out, ordering=ordering,
                          threshold=unavailable_threshold, prefer_parquet=not json_only))


@main.command(short_help="Browse the results store and the runs' reports.")
@click.argument("results", required=False)
@click.option("--port", type=int, default=8000, show_default=True)
def serve(results, port):
    """Serve the results store (default results/) on 127.0.0.1: every batch; per scenario and
    version, held k of n over every stored run with a 95 % Wilson interval; every run, with
    its report."""
    from harness import store
    from harness.browse import serve as serve_results

    serve_results(store.results_root(results), port)


@main.command(short_help="Convert runs' JSONL histories to Parquet.")
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
def convert(run_dirs, master):
    """Convert runs' JSONL histories to Parquet (the JSONL stays: it is the record)."""
    from checkers.check import convert_main

    sys.exit(convert_main(list(run_dirs), master=master))


# ---- the cluster, the documents, the old spellings ---------------------------------------------------
main.add_command(cluster_group)
main.add_command(docs)
main.add_command(evidence)
for command in old_verbs.COMMANDS:
    main.add_command(command)

if __name__ == "__main__":
    main()
