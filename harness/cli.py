"""The `mqchaos` command line. Each subcommand is a thin shell over one module."""
from __future__ import annotations

import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Jepsen-style fault injection against real RabbitMQ and Kafka clusters."""


@main.command()
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--ordering", type=click.Choice(["none", "fifo", "monotonic", "strict"]),
              default=None, help="Ordering rule; default: the run's own (run.json), else none.")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--unavailable-threshold", type=float, default=1.0, show_default=True,
              help="Shortest unavailable interval reported, in seconds.")
@click.option("--json-only", is_flag=True, help="Ignore Parquet copies; read the JSONL histories.")
def check(run_dirs, ordering, master, unavailable_threshold, json_only):
    """Check one or many run directories in one Spark job; write check.json into each."""
    from checkers.check import main as check_main

    sys.exit(check_main(list(run_dirs), ordering=ordering, master=master,
                        threshold=unavailable_threshold, prefer_parquet=not json_only))


@main.command()
@click.argument("run_dirs", nargs=-1, required=True)
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
def convert(run_dirs, master):
    """Convert runs' JSONL histories to Parquet (the JSONL stays: it is the record)."""
    from checkers.check import convert_main

    sys.exit(convert_main(list(run_dirs), master=master))


if __name__ == "__main__":
    main()
