"""Maintenance commands: compact, split, manage, status."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from limno.cli._context import DURATION, Context, format_option, pool_option
from limno.cli._output import write_tables
from limno.cli._progress import activity
from limno.errors import InvalidInputError
from limno.lazy import lazy_module
from limno.pools.settings import COMPACTION_STRATEGIES

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api import Engine
else:
    pa = lazy_module("pyarrow")  # status reports are Arrow tables

__all__ = ["COMMANDS"]


@click.command()
@pool_option
@click.option(
    "--strategy",
    type=click.Choice(COMPACTION_STRATEGIES),
    default=None,
    help="Override the pool's.",
)
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local", show_default=True)
@click.argument("ids", nargs=-1)
@click.pass_obj
def compact(
    obj: Context,
    ref: str | None,
    strategy: str | None,
    message: str,
    engine: Engine,
    ids: Sequence[str],
) -> None:
    """Merge objects IDS (or those the strategy picks) into sorted, non-overlapping ones.

    One commit that deletes the inputs and adds the outputs; the compaction works
    per leaf partition, applying the pool's iterators.
    """
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    with activity(f"compacting {pool.name}@{branch}"):
        commit, results = pool.compact(list(ids), branch, strategy, message, engine=engine)
    if commit is None:
        click.echo(f"nothing to compact on {pool.name}@{branch}", err=True)
        return
    click.echo(commit.id)
    rows_in = sum(r.rows_in for r in results)
    rows_out = sum(r.rows_out for r in results)
    inputs = len({i for r in results for i in r.job.inputs})
    outputs = sum(len(r.outputs) for r in results)
    click.echo(
        f"compacted {inputs} object(s) into {outputs} on {pool.name}@{branch}"
        f" ({len(results)} job(s), {rows_in} row(s) in, {rows_out} out)",
        err=True,
    )


@click.command()
@pool_option
@click.option("--at", "at", default=None, help="Split point (default: the partition's median).")
@click.argument("partition")
@click.pass_obj
def split(obj: Context, ref: str | None, at: str | None, partition: str) -> None:
    """Split leaf PARTITION at its median key (or --at a first-field value)."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    commit = pool.split(partition, branch, at)
    if commit is None:
        raise InvalidInputError(f"partition {partition} has no key to split at")
    click.echo(commit.id)
    click.echo(commit.message, err=True)


@click.command()
@click.option("-p", "--pool", "pools", multiple=True, help="Pool to maintain (default: all).")
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option(
    "--interval", type=DURATION, default="60s", show_default=True, help="Pause between passes."
)
@click.option("--grace", type=DURATION, default="15m", show_default=True, help="Vacuum grace.")
@click.pass_obj
def manage(
    obj: Context,
    pools: Sequence[str],
    once: bool,
    interval: dt.timedelta,
    grace: dt.timedelta,
) -> None:
    """Background maintenance: partition splits, compaction jobs, vacuum (until Ctrl-C).

    Each pass runs the ingest batcher's due jobs first. With --once, an ingest job
    that failed in the pass makes it exit 1 (one error line naming the job and the
    reason), once the rest of the pass is done; see 'limno ingest ls --jobs'."""

    def log(message: str) -> None:
        click.echo(message, err=True)

    try:
        passes = obj.lake().manage(
            list(pools),
            once=once,
            interval=interval,
            grace=grace,
            log=log,
        )
    except KeyboardInterrupt:
        click.echo("manage: interrupted", err=True)
        return
    click.echo(f"manage: {passes} pass(es) done", err=True)


@click.command()
@click.argument("pool", required=False)
@format_option
@click.option("-n", "--limit", default=20, show_default=True, help="Jobs shown per report.")
@click.pass_obj
def status(obj: Context, pool: str | None, fmt: str | None, limit: int) -> None:
    """Reports on partitions, files, compaction jobs and ingest jobs (Sleeper style) of
    record pools; of file pools, their branches' files, staged changes and open
    multipart uploads."""
    lake = obj.lake()
    configs = lake.list_pools()
    if pool:
        configs = [c for c in configs if c.name == pool]
        if not configs:
            lake.pool(pool)  # the lake's own "not found"
    out = obj.format(fmt)
    tables = []
    for config in configs:
        p = lake.file_pool(config.name) if config.kind == "files" else lake.pool(config.name)
        reports = p.status(None, limit)
        if out == "table":
            for title, table in reports.items():
                click.echo(f"== {p.name}: {title.replace('_', ' ')} ({table.num_rows})")
                write_tables([table], out)
                click.echo("")
            continue
        # one table of every report's rows, each row naming its pool and report
        for title, table in reports.items():
            n = table.num_rows
            tables.append(
                table.add_column(0, "report", pa.array([title] * n, pa.string())).add_column(
                    0, "pool", pa.array([p.name] * n, pa.string())
                )
            )
    if out != "table":
        write_tables(tables, out)


COMMANDS = [compact, split, manage, status]
