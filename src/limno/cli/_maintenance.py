"""Maintenance commands: compact, split, manage, status."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from limno.cli._data import _fmt_opt, _pool_opt, parse_duration
from limno.cli._main import Context
from limno.cli._output import to_json, write_tables
from limno.errors import InvalidInputError
from limno.pools.records.compaction import STRATEGIES

__all__ = ["COMMANDS"]


@click.command()
@_pool_opt
@click.option(
    "--strategy", type=click.Choice(STRATEGIES), default=None, help="Override the pool's."
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
    engine: str,
    ids: Sequence[str],
) -> None:
    """Merge objects IDS (or those the strategy picks) into sorted, non-overlapping ones.

    One commit that deletes the inputs and adds the outputs; the compaction works
    per leaf partition, applying the pool's iterators.
    """
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
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
@_pool_opt
@click.option("--at", "at", default=None, help="Split point (default: the partition's median).")
@click.argument("partition")
@click.pass_obj
def split(obj: Context, ref: str | None, at: str | None, partition: str) -> None:
    """Split leaf PARTITION at its median key (or --at a first-field value)."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    value = None
    if at is not None:
        objs = pool.objects(branch)
        value = pool._bound(at, pool.key_types(objs))
        value = None if value is None else value[0]
    commit = pool.split(partition, branch, value)
    if commit is None:
        raise InvalidInputError(f"partition {partition} has no key to split at")
    click.echo(commit.id)
    click.echo(commit.message, err=True)


@click.command()
@click.option("-p", "--pool", "pools", multiple=True, help="Pool to maintain (default: all).")
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option("--interval", default="60s", show_default=True, help="Pause between passes.")
@click.option("--grace", default="15m", show_default=True, help="Vacuum grace period.")
@click.pass_obj
def manage(obj: Context, pools: Sequence[str], once: bool, interval: str, grace: str) -> None:
    """Background maintenance: partition splits, compaction jobs, vacuum (until Ctrl-C)."""
    from limno.pools.records.manage import manage as run

    def log(message: str) -> None:
        click.echo(message, err=True)

    try:
        passes = run(
            obj.lake(),
            list(pools),
            once=once,
            interval=parse_duration(interval),
            grace=parse_duration(grace),
            log=log,
        )
    except KeyboardInterrupt:
        click.echo("manage: interrupted", err=True)
        return
    click.echo(f"manage: {passes} pass(es) done", err=True)


@click.command()
@click.argument("pool", required=False)
@_fmt_opt
@click.option("-n", "--limit", default=20, show_default=True, help="Jobs shown per report.")
@click.pass_obj
def status(obj: Context, pool: str | None, fmt: str | None, limit: int) -> None:
    """Reports on partitions, files, compaction jobs and ingest jobs (Sleeper style)."""
    from limno.pools.records.manage import status_tables

    lake = obj.lake()
    names = [pool] if pool else [c.name for c in lake.pools() if c.kind == "records"]
    out = obj.format(fmt)
    for name in names:
        p = lake.pool(name)
        reports = status_tables(p, None, limit)
        if out == "table":
            for title, table in reports.items():
                click.echo(f"== {p.name}: {title.replace('_', ' ')} ({table.num_rows})")
                write_tables([table], out)
                click.echo("")
            continue
        if out != "ndjson":
            raise InvalidInputError("status prints -f table or -f ndjson")
        for title, table in reports.items():
            for row in table.to_pylist():
                sys.stdout.write(to_json({"pool": p.name, "report": title, **row}) + "\n")
        sys.stdout.flush()


COMMANDS = [compact, split, manage, status]
