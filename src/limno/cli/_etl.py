"""``limno etl CONFIG``: Debezium-aware rules from raw pools to a staging pool, exactly once.

Thin over :mod:`limno.etl`, loaded when the command runs (``limno --help`` stays
fast). Prints the commit id (nothing when there was no new input); a summary on
stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import click

from limno.cli._context import Context

if TYPE_CHECKING:
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
@click.pass_obj
def etl(obj: Context, config_file: str, engine: str | None, author: str | None) -> None:
    """Run the rules of CONFIG.yaml once over the input records not processed yet.

    Output records and the completion records (what was consumed, what waits for a
    join partner) are one commit of the output pool, created when missing (keyed
    on kafka.offset): a rerun after a crash never duplicates nor loses a record,
    and a rerun without new input commits nothing. See README 'limno etl'."""
    cfg = config.load_config(config_file)
    report = run.run_etl(
        obj.lake(),
        cfg,
        engine=obj.engine(cast("Engine | None", engine)),
        author=author,
        log=lambda line: click.echo(line, err=True),
    )
    if report.commit is not None:
        click.echo(report.commit.id)


COMMANDS = [etl]
