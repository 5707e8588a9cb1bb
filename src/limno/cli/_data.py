"""Data commands: load, add, commit, stage, log, scan, get, query, delete, revert, vacuum.

Commands that make a commit print its id alone on stdout and a summary on stderr.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import click

from limno.cli._context import (
    DURATION,
    SIZE,
    TIME,
    Context,
    engine_options,
    format_option,
    meta_option,
    pool_option,
)
from limno.cli._output import write_dicts, write_rows, write_tables
from limno.cli._progress import activity, reading
from limno.cli._sql_args import SqlCommand, read_sql, sql_file_option
from limno.cli._state import working_ref
from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    from limno import api
    from limno.api import Engine
    from limno.core.commits import Commit
    from limno.data import objects, sql_safety
    from limno.data.objects import DataObject
    from limno.engines import query_limits
    from limno.pools import inspect
    from limno.pools.records import key_ranges
else:
    api = lazy_module("limno.api")
    key_ranges = lazy_module("limno.pools.records.key_ranges")
    objects = lazy_module("limno.data.objects")
    sql_safety = lazy_module("limno.data.sql_safety")  # DuckDB: only for SQL
    query_limits = lazy_module("limno.engines.query_limits")
    inspect = lazy_module("limno.pools.inspect")

__all__ = ["COMMANDS"]

F = TypeVar("F", bound=Callable[..., object])

INPUT_FORMATS = ("ndjson", "json", "csv", "tsv", "parquet", "arrow", "avro", "orc")


def _done(commit: Commit, summary: str) -> None:
    click.echo(commit.id)
    click.echo(summary, err=True)


def _as_of_option(help_text: str) -> Callable[[F], F]:
    """``--as-of TIME`` of a reading command (ISO 8601; naive times are UTC)."""
    return click.option("--as-of", "as_of", type=TIME, default=None, help=help_text)


def _summary(objs: Sequence[DataObject]) -> str:
    rows = sum(o.rows for o in objs)
    return f"{len(objs)} object(s), {rows} record(s)"


def _keyless_note(objs: Sequence[DataObject]) -> None:
    """Say so when written records lack the pool key: kept (as the spec wants), but
    most often the sign of a misnamed column or of a file read as the wrong format."""
    keyless = sum(o.keyless for o in objs)
    if keyless:
        click.echo(
            f"note: {keyless} of these record(s) lack the key: kept as keyless (they sort"
            " after every key; scan ':' shows them)",
            err=True,
        )


@click.command()
@pool_option
@click.option("-i", "--input-format", "ifmt", type=click.Choice(INPUT_FORMATS), default=None)
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--author", default=None, help="Commit author (default: the current user).")
@meta_option
@engine_options
@click.argument("files", nargs=-1, required=True)
@click.pass_obj
def load(
    obj: Context,
    ref: str | None,
    ifmt: str | None,
    message: str,
    author: str | None,
    meta: Sequence[tuple[str, str]],
    engine: Engine | None,
    spark_master: str | None,
    spark_conf: Sequence[tuple[str, str]],
    files: Sequence[str],
) -> None:
    """Load FILES (or - for stdin) into a branch as one commit."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    master, conf = obj.lake_spark(spark_master, spark_conf)
    with reading(f"loading into {pool.name}@{branch}", files):
        commit = pool.load(
            list(files),
            ifmt,
            branch,
            message,
            author,
            dict(meta),
            engine=obj.engine(engine),
            spark_master=master,
            spark_conf=conf,
        )
    objs = [objects.DataObject.from_json(a.value) for a in commit.actions]
    _done(commit, f"committed {_summary(objs)} to {pool.name}@{branch}")
    _keyless_note(objs)


@click.command()
@pool_option
@click.option("-i", "--input-format", "ifmt", type=click.Choice(INPUT_FORMATS), default=None)
@click.argument("files", nargs=-1, required=True)
@click.pass_obj
def add(obj: Context, ref: str | None, ifmt: str | None, files: Sequence[str]) -> None:
    """Write FILES as objects and stage them on the branch (commit later)."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    objs = pool.add(list(files), ifmt, branch=branch)
    for o in objs:
        click.echo(o.id)
    click.echo(f"staged {_summary(objs)} on {pool.name}@{branch}", err=True)
    _keyless_note(objs)


@click.command()
@pool_option
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--author", default=None)
@meta_option
@click.option("--prefix", default=None, help="File pools: only the changes under this prefix.")
@click.argument("ids", nargs=-1)
@click.pass_obj
def commit(
    obj: Context,
    ref: str | None,
    message: str,
    author: str | None,
    meta: Sequence[tuple[str, str]],
    prefix: str | None,
    ids: Sequence[str],
) -> None:
    """Commit staged objects (all, or the given IDs) as one commit; on a file pool, its
    staged changes (all, or those under --prefix)."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().versioned_pool(name)
    if isinstance(pool, api.FilePool):
        if ids:
            raise InvalidInputError("a file pool commits its staged paths: give no IDs")
        made = pool.commit(branch, message, author, dict(meta), prefix)
        removed = sum(a.op == "delete" for a in made.actions)
        _done(
            made,
            f"committed {len(made.actions)} path(s) ({len(made.actions) - removed} written,"
            f" {removed} removed) to {pool.name}@{branch}",
        )
        return
    if prefix is not None:
        raise InvalidInputError("--prefix is for file pools; commit IDs of a record pool")
    assert isinstance(pool, api.Pool)
    made = pool.commit(list(ids) or None, branch, message, author, dict(meta))
    objs = [objects.DataObject.from_json(a.value) for a in made.actions]
    _done(made, f"committed {_summary(objs)} to {pool.name}@{branch}")


@click.command()
@pool_option
@format_option
@click.option("--drop", "drop_ids", multiple=True, help="Unstage this object (repeatable).")
@click.pass_obj
def stage(obj: Context, ref: str | None, fmt: str | None, drop_ids: Sequence[str]) -> None:
    """Show the staged objects of a branch, or drop some with --drop."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    if drop_ids:
        pool.unstage(list(drop_ids), branch)
        click.echo(f"unstaged {len(drop_ids)} object(s) on {pool.name}@{branch}", err=True)
        return
    write_rows(inspect.objects_rows(pool.staged(branch)), obj.format(fmt))


@click.command()
@pool_option
@format_option
@click.option("-n", "--max-count", "limit", type=int, default=None, help="Show at most N.")
@click.option("--first-parent", is_flag=True, help="Follow only first parents.")
@_as_of_option("Start where the branch pointed at this time.")
@click.pass_obj
def log(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    limit: int | None,
    first_parent: bool,
    as_of: dt.datetime | None,
) -> None:
    """Commits reachable from a ref, newest first, with their actions."""
    name, at = obj.pool_ref(ref)
    commits = obj.lake().versioned_pool(name).log(at, limit, first_parent, as_of=as_of)
    fmt = obj.format(fmt)
    if fmt == "table":
        for c in commits:
            click.echo(f"commit {c.id}")
            if len(c.parents) > 1:
                click.echo(f"Merge: {' '.join(c.parents)}")
            click.echo(f"Author: {c.author}")
            click.echo(f"Date:   {c.date}")
            if c.meta:
                click.echo(f"Meta:   {json.dumps(dict(c.meta), sort_keys=True)}")
            if c.retries:
                click.echo(f"Retries: {c.retries}")
            click.echo(f"\n    {c.message}\n")
            for a in c.actions:
                rows = a.value.get("rows")
                click.echo(
                    f"    {a.op:<6} {a.key}" + (f" ({rows} rows)" if rows is not None else "")
                )
            click.echo("")
        return
    write_rows(inspect.commits_rows(commits), fmt)


@click.command()
@pool_option
@format_option
@click.option("--from", "start", default=None, help="First key (inclusive).")
@click.option("--to", "end", default=None, help="Last key (exclusive).")
@click.option("--order", type=click.Choice(["asc", "desc"]), default="asc")
@click.option(
    "--range",
    "ranges",
    multiple=True,
    metavar="FROM:TO",
    help="A key range instead of --from/--to (repeatable: their union, in one pass); a side"
    " may be empty, a JSON array, or a JSON string holding ':'.",
)
@click.option("--limit", type=int, default=None)
@_as_of_option("Read the branch as it was at this time.")
@click.pass_obj
def scan(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    start: str | None,
    end: str | None,
    order: str,
    ranges: Sequence[str],
    limit: int | None,
    as_of: dt.datetime | None,
) -> None:
    """Records in key order (merge-on-read of overlapping objects)."""
    if limit is not None and limit < 0:
        raise InvalidInputError("--limit must not be negative")
    if ranges and (start is not None or end is not None):
        raise InvalidInputError("--range cannot be combined with --from/--to")
    several = [key_ranges.parse_range(r) for r in ranges] if ranges else None
    name, at = obj.pool_ref(ref)
    pool = obj.lake().pool(name)
    tables = pool.iter_scan(
        at, start=start, end=end, order=order, limit=limit, as_of=as_of, ranges=several
    )
    write_tables(tables, obj.format(fmt))


@click.command()
@pool_option
@format_option
@_as_of_option("Read the branch as it was at this time.")
@click.option(
    "--field",
    default=None,
    metavar="F",
    help="Match field F instead of the key (a search index on F reads only what may match).",
)
@click.argument("keys", nargs=-1, required=True)
@click.pass_obj
def get(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    as_of: dt.datetime | None,
    field: str | None,
    keys: Sequence[str],
) -> None:
    """Records whose key (or --field F) equals one of KEYS (point lookup)."""
    name, at = obj.pool_ref(ref)
    pool = obj.lake().pool(name)
    if field is not None:
        found = pool.search(field, list(keys), at, as_of=as_of)
    else:
        found = pool.get(list(keys), at, as_of=as_of)
    write_tables([found], obj.format(fmt))


@click.command(cls=SqlCommand)
@format_option
@engine_options
@sql_file_option
@click.option(
    "--safe",
    is_flag=True,
    help="One read-only query; no file, network or settings access (also $LIMNO_SQL_SAFE=1).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop the query after this long (local engine).",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Refuse a longer answer.",
)
@click.option(
    "--max-bytes", type=SIZE, default=None, metavar="SIZE", help="Refuse a larger answer (64MiB)."
)
@_as_of_option("Read every branch the SQL names as it was at this time.")
@click.argument("sql", required=False)
@click.pass_obj
def query(
    obj: Context,
    fmt: str | None,
    engine: Engine | None,
    spark_master: str | None,
    spark_conf: Sequence[tuple[str, str]],
    sql_file: str | None,
    safe: bool,
    timeout: float | None,
    max_rows: int | None,
    max_bytes: int | None,
    as_of: dt.datetime | None,
    sql: str | None,
) -> None:
    """SQL over pools: FROM logs, FROM "logs@dev", FROM "logs:objects", FROM ":pools".

    SQL is the argument, - for stdin, or --file PATH.
    """
    master, conf = obj.lake_spark(spark_master, spark_conf)
    table = obj.lake().query(
        read_sql(sql, sql_file),
        engine=obj.engine(engine),
        safe=safe or sql_safety.safe_from_env(),
        spark_master=master,
        spark_conf=conf,
        limits=query_limits.QueryLimits(timeout, max_rows, max_bytes),
        as_of=as_of,
    )
    write_tables([table], obj.format(fmt))


@click.command()
@pool_option
@click.option(
    "--where",
    "predicate",
    default=None,
    help="Rows to delete: one SQL expression over a row's columns (no subqueries).",
)
@click.option("-m", "--message", default="")
@click.option("--author", default=None)
@click.argument("ids", nargs=-1)
@click.pass_obj
def delete(
    obj: Context,
    ref: str | None,
    predicate: str | None,
    message: str,
    author: str | None,
    ids: Sequence[str],
) -> None:
    """Delete objects by ID, or rows matching --where (rewrites only affected objects)."""
    if bool(ids) == bool(predicate):
        raise InvalidInputError("delete needs object IDs or --where PREDICATE (not both)")
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    if predicate:
        made = pool.delete_where(predicate, branch, message, author)
        _done(made, f"deleted {made.meta.get('deleted_rows')} row(s) from {pool.name}@{branch}")
    else:
        made = pool.delete_objects(list(ids), branch, message, author)
        _done(made, f"deleted {len(made.actions)} object(s) from {pool.name}@{branch}")


@click.command()
@pool_option
@click.option("-m", "--message", default="")
@click.option("--author", default=None)
@click.argument("commit_id")
@click.pass_obj
def revert(obj: Context, ref: str | None, message: str, author: str | None, commit_id: str) -> None:
    """Make a commit that undoes COMMIT_ID."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().versioned_pool(name)
    made = pool.revert(commit_id, branch, message, author)
    _done(made, f"reverted {commit_id} on {pool.name}@{branch} ({len(made.actions)} action(s))")


@click.command()
@pool_option
@format_option
@click.option("--dry-run", is_flag=True, help="Report what would be removed.")
@click.option(
    "--grace",
    type=DURATION,
    default="15m",
    show_default=True,
    help="Keep objects younger than this.",
)
@click.option(
    "--retention",
    type=DURATION,
    default=None,
    help="Keep history only this far back (default: all history stays readable).",
)
@click.pass_obj
def vacuum(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    dry_run: bool,
    grace: dt.timedelta,
    retention: dt.timedelta | None,
) -> None:
    """Free the bytes of objects that no branch, tag, staging area or retained commit holds.

    Without -p (and no 'limno use' pool): every pool of the lake, of either kind."""
    lake = obj.lake()
    text = ref or working_ref(lake.uri)
    names = [obj.pool_ref(text)[0]] if text else [c.name for c in lake.list_pools()]
    verb = "would remove" if dry_run else "removed"
    out = obj.listing_format(fmt)
    rows: list[dict[str, object]] = []
    for name in names:
        with activity(f"vacuuming {name}"):
            report = lake.versioned_pool(name).vacuum(grace, dry_run, retention)
        if out is None:  # piped, no format chosen: PATH<TAB>BYTES lines, as they come
            for path, size in report.removed:
                click.echo(f"{path}\t{size}")
        rows += [{"path": p, "bytes": size} for p, size in report.removed]
        click.echo(
            f"{'' if text else f'{name}: '}{verb} {len(report.removed)} object(s),"
            f" {report.bytes} bytes; kept"
            f" {report.referenced} referenced, {report.leased} held by writes in flight and"
            f" {report.too_young} younger than the grace period",
            err=True,
        )
    if out is not None:
        write_dicts(("path", "bytes"), rows, out)


COMMANDS = [load, add, commit, stage, log, scan, get, query, delete, revert, vacuum]
