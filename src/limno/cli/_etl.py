"""``limno etl CONFIG``: Debezium-aware rules from raw pools to a staging pool, exactly once.

Thin over :mod:`limno.etl`, loaded when the command runs (``limno --help`` stays
fast). Prints the commit id (nothing when there was no new input); a summary on
stderr. ``--follow`` keeps running (:func:`limno.etl.run.follow_etl`), printing each
run's commit id.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, cast

import click

from limno.cli._context import Context
from limno.cli._follow import FollowArgs, err_line, follow_options, print_line, stop_on_signals

if TYPE_CHECKING:
    import datetime as dt

    from limno.api.base import Engine
    from limno.etl import config, run
else:
    from limno.lazy import lazy_module

    config = lazy_module("limno.etl.config")
    run = lazy_module("limno.etl.run")

__all__ = ["COMMANDS"]


@click.command("etl")
@click.argument("config_file", metavar="CONFIG.yaml", type=click.Path(dir_okay=False))
@click.option(
    "--engine",
    type=click.Choice(["local", "spark", "auto"]),
    default=None,
    help="Where the rules run (default: $LIMNO_ENGINE, else the config's engine, else auto:"
    " local below $LIMNO_SPARK_THRESHOLD of input).",
)
@click.option("--author", default=None, help="The commit's author.")
@follow_options("an input branch")
@click.pass_obj
def etl(
    obj: Context,
    config_file: str,
    engine: str | None,
    author: str | None,
    follow: bool,
    exit_after: dt.timedelta | None,
    interval: dt.timedelta | None,
) -> None:
    """Run the rules of CONFIG.yaml once over the input records not processed yet.

    Output records and the completion records (what was consumed, what waits for a
    join partner) are one commit of the output pool, created when missing (keyed
    on kafka.offset): a rerun after a crash never duplicates nor loses a record,
    and a rerun without new input commits nothing. See README 'limno etl'.

    With --follow it keeps running, in one process, and runs again whenever an input
    branch gets a new commit: the same runs, so the same guarantees."""
    following = FollowArgs(follow, exit_after, interval)
    cfg = config.load_config(config_file)
    chosen = obj.engine(cast("Engine | None", engine))
    if not following.on:
        report = run.run_etl(obj.lake(), cfg, engine=chosen, author=author, log=err_line)
        if report.commit is not None:
            click.echo(report.commit.id)
        return
    stop = threading.Event()

    def ran(report: run.RunReport) -> None:
        if report.commit is not None:
            print_line(report.commit.id)

    with stop_on_signals(stop):
        run.follow_etl(
            obj.lake(),
            cfg,
            engine=chosen,
            author=author,
            log=err_line,
            on_run=ran,
            stop=stop,
            interval=following.interval,
            exit_after=following.exit_after,
        )


COMMANDS = [etl]
