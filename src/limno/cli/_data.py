"""Data commands: load, add, commit, stage, log, scan, get, query, delete, revert, vacuum.

Commands that make a commit print its id alone on stdout and a summary on stderr.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import click
import pyarrow as pa

from limno.cli._main import Context
from limno.cli._output import to_json, write_tables
from limno.core.commits import Commit
from limno.errors import InvalidInputError, LimnoError
from limno.pools.records.objects import DataObject

__all__ = ["COMMANDS", "parse_duration"]

F = Callable[..., Any]
INPUT_FORMATS = ("ndjson", "json", "csv", "tsv", "parquet", "arrow", "avro", "orc")


def _pool_opt(f: F) -> F:
    return click.option("-p", "--pool", "ref", default=None, help="POOL[@REF] (default: use).")(f)


def _fmt_opt(f: F) -> F:
    return click.option("-f", "--format", "fmt", default=None, help="Output format.")(f)


def _meta(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep or not k:
            raise InvalidInputError(f"--meta expects KEY=VALUE, not {pair!r}")
        out[k] = v
    return out


def parse_duration(text: str) -> dt.timedelta:
    """``15m``, ``2h``, ``30d``, ``90s``, ``0`` → a timedelta."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*", text)
    if not m:
        raise InvalidInputError(f"invalid duration {text!r} (e.g. 90s, 15m, 2h, 30d)")
    unit = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2) or "s"]
    return dt.timedelta(seconds=float(m.group(1)) * unit)


def _parse_time(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError as e:
        raise InvalidInputError(f"invalid time {text!r} (use ISO 8601)") from e
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _done(commit: Commit, summary: str) -> None:
    click.echo(commit.id)
    click.echo(summary, err=True)


def _summary(objs: Sequence[DataObject]) -> str:
    rows = sum(o.rows for o in objs)
    return f"{len(objs)} object(s), {rows} record(s)"


def _engine_opts(f: F) -> F:
    """``--engine`` and the Spark session options of ``load`` and ``query``."""
    f = click.option(
        "--spark-conf",
        "spark_conf",
        multiple=True,
        help="KEY=VALUE Spark setting for a new session (repeatable).",
    )(f)
    f = click.option(
        "--spark-master",
        default=None,
        help="Spark master URL (default: $LIMNO_SPARK_MASTER, else local[*]).",
    )(f)
    return click.option(
        "--engine",
        type=click.Choice(["local", "spark", "auto"]),
        default="auto",
        show_default=True,
        help="Where to run: auto is Spark from $LIMNO_SPARK_THRESHOLD (1GB) of data on.",
    )(f)


def _spark_session(master: str | None, conf: Sequence[str]) -> Any:
    from limno.engines.spark import session

    pairs = {}
    for pair in conf:
        k, sep, v = pair.partition("=")
        if not sep or not k:
            raise InvalidInputError(f"--spark-conf expects KEY=VALUE, not {pair!r}")
        pairs[k] = v
    return session(master, pairs)


@click.command()
@_pool_opt
@click.option("-i", "--input-format", "ifmt", type=click.Choice(INPUT_FORMATS), default=None)
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--author", default=None, help="Commit author (default: the current user).")
@click.option("--meta", multiple=True, help="KEY=VALUE stored on the commit (repeatable).")
@_engine_opts
@click.argument("files", nargs=-1, required=True)
@click.pass_obj
def load(
    obj: Context,
    ref: str | None,
    ifmt: str | None,
    message: str,
    author: str | None,
    meta: Sequence[str],
    engine: str,
    spark_master: str | None,
    spark_conf: Sequence[str],
    files: Sequence[str],
) -> None:
    """Load FILES (or - for stdin) into a branch as one commit."""
    import os

    from limno.engines.spark import use_spark

    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    size = sum(os.path.getsize(f) for f in files if f != "-" and os.path.isfile(f))
    if use_spark(engine, size) and not (engine == "auto" and "-" in files):
        from limno.engines.spark import load as spark_load

        commit = spark_load(
            pool,
            list(files),
            ifmt,
            branch,
            message,
            author,
            _meta(meta),
            spark=_spark_session(spark_master, spark_conf),
        )
    else:
        commit = pool.load(
            list(files), ifmt, branch=branch, message=message, author=author, meta=_meta(meta)
        )
    objs = [DataObject.from_json(a.value) for a in commit.actions]
    _done(commit, f"committed {_summary(objs)} to {pool.name}@{branch}")


@click.command()
@_pool_opt
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


@click.command()
@_pool_opt
@click.option("-m", "--message", default="", help="Commit message.")
@click.option("--author", default=None)
@click.option("--meta", multiple=True, help="KEY=VALUE stored on the commit (repeatable).")
@click.argument("ids", nargs=-1)
@click.pass_obj
def commit(
    obj: Context,
    ref: str | None,
    message: str,
    author: str | None,
    meta: Sequence[str],
    ids: Sequence[str],
) -> None:
    """Commit staged objects (all, or the given IDs) as one commit."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    made = pool.commit(list(ids) or None, branch, message, author, _meta(meta))
    objs = [DataObject.from_json(a.value) for a in made.actions]
    _done(made, f"committed {_summary(objs)} to {pool.name}@{branch}")


@click.command()
@_pool_opt
@_fmt_opt
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
    write_tables([objects_table(pool.staged(branch))], obj.format(fmt))


def objects_table(objs: Sequence[DataObject]) -> pa.Table:
    return pa.table(
        {
            "id": [o.id for o in objs],
            "rows": pa.array([o.rows for o in objs], pa.int64()),
            "size": pa.array([o.size for o in objs], pa.int64()),
            "min_key": [to_json(o.to_json()["min_key"]) for o in objs],
            "max_key": [to_json(o.to_json()["max_key"]) for o in objs],
        }
    )


@click.command()
@_pool_opt
@_fmt_opt
@click.option("-n", "--max-count", "limit", type=int, default=None, help="Show at most N.")
@click.option("--first-parent", is_flag=True, help="Follow only first parents.")
@click.pass_obj
def log(
    obj: Context, ref: str | None, fmt: str | None, limit: int | None, first_parent: bool
) -> None:
    """Commits reachable from a ref, newest first, with their actions."""
    name, at = obj.pool_ref(ref)
    commits = obj.lake().pool(name).log(at, limit, first_parent)
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
    table = pa.table(
        {
            "id": [c.id for c in commits],
            "parents": pa.array([list(c.parents) for c in commits], pa.list_(pa.string())),
            "author": [c.author for c in commits],
            "date": [c.date for c in commits],
            "message": [c.message for c in commits],
            "meta": [json.dumps(dict(c.meta), sort_keys=True) for c in commits],
            "retries": pa.array([c.retries for c in commits], pa.int64()),
            "actions": pa.array(
                [[{"op": a.op, "id": a.key} for a in c.actions] for c in commits],
                pa.list_(pa.struct([("op", pa.string()), ("id", pa.string())])),
            ),
        }
    )
    write_tables([table], fmt)


@click.command()
@_pool_opt
@_fmt_opt
@click.option("--from", "start", default=None, help="First key (inclusive).")
@click.option("--to", "end", default=None, help="Last key (exclusive).")
@click.option("--order", type=click.Choice(["asc", "desc"]), default="asc")
@click.option("--limit", type=int, default=None)
@click.option("--as-of", "as_of", default=None, help="Read the branch as it was at this time.")
@click.pass_obj
def scan(
    obj: Context,
    ref: str | None,
    fmt: str | None,
    start: str | None,
    end: str | None,
    order: str,
    limit: int | None,
    as_of: str | None,
) -> None:
    """Records in key order (merge-on-read of overlapping objects)."""
    if limit is not None and limit < 0:
        raise InvalidInputError("--limit must not be negative")
    name, at = obj.pool_ref(ref)
    pool = obj.lake().pool(name)
    when = _parse_time(as_of) if as_of else None
    tables = pool.iter_scan(at, start=start, end=end, order=order, limit=limit, as_of=when)
    write_tables(tables, obj.format(fmt))


@click.command()
@_pool_opt
@_fmt_opt
@click.argument("keys", nargs=-1, required=True)
@click.pass_obj
def get(obj: Context, ref: str | None, fmt: str | None, keys: Sequence[str]) -> None:
    """Records whose key equals one of KEYS (point lookup)."""
    name, at = obj.pool_ref(ref)
    write_tables([obj.lake().pool(name).get(list(keys), at)], obj.format(fmt))


@click.command()
@_fmt_opt
@_engine_opts
@click.option(
    "--safe",
    is_flag=True,
    help="One read-only query; no file, network or settings access (also $LIMNO_SQL_SAFE=1).",
)
@click.argument("sql")
@click.pass_obj
def query(
    obj: Context,
    fmt: str | None,
    engine: str,
    spark_master: str | None,
    spark_conf: Sequence[str],
    safe: bool,
    sql: str,
) -> None:
    """SQL over pools: FROM logs, FROM "logs@dev", FROM "logs:objects", FROM ":pools"."""
    from limno.engines.spark import use_spark
    from limno.engines.sql_safety import safe_from_env

    safe = safe or safe_from_env()
    lake = obj.lake()
    size = _query_size(lake, sql) if engine == "auto" else 0
    if use_spark(engine, size):
        from limno.engines.spark import query as spark_query

        table = spark_query(lake, sql, _spark_session(spark_master, spark_conf), safe=safe)
    else:
        from limno.engines.local import query as run

        table = run(lake, sql, safe=safe)
    write_tables([table], obj.format(fmt))


def _query_size(lake: Any, sql: str) -> int:
    """Bytes of the snapshots a statement names (for ``--engine auto``)."""
    import duckdb

    from limno.core.refs import parse_pool_ref

    try:
        names = duckdb.get_table_names(sql)
    except duckdb.Error:
        return 0
    total = 0
    for name in names:
        if ":" in name:
            continue
        pool_name, at = parse_pool_ref(name)
        try:
            total += sum(o.size for o in lake.pool(pool_name).objects(at))
        except LimnoError:
            continue
    return total


@click.command()
@_pool_opt
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
@_pool_opt
@click.option("-m", "--message", default="")
@click.option("--author", default=None)
@click.argument("commit_id")
@click.pass_obj
def revert(obj: Context, ref: str | None, message: str, author: str | None, commit_id: str) -> None:
    """Make a commit that undoes COMMIT_ID."""
    name, branch = obj.branch_ref(ref)
    pool = obj.lake().pool(name)
    made = pool.revert(commit_id, branch, message, author)
    _done(made, f"reverted {commit_id} on {pool.name}@{branch} ({len(made.actions)} action(s))")


@click.command()
@_pool_opt
@click.option("--dry-run", is_flag=True, help="Report what would be removed.")
@click.option("--grace", default="15m", show_default=True, help="Keep objects younger than this.")
@click.option(
    "--retention",
    default=None,
    help="Keep history only this far back (default: all history stays readable).",
)
@click.pass_obj
def vacuum(obj: Context, ref: str | None, dry_run: bool, grace: str, retention: str | None) -> None:
    """Free the bytes of objects that no branch, tag, staging area or retained commit holds."""
    name, _ = obj.pool_ref(ref)
    keep = parse_duration(retention) if retention else None
    report = obj.lake().pool(name).vacuum(parse_duration(grace), dry_run, keep)
    verb = "would remove" if dry_run else "removed"
    for path, size in report.removed:
        click.echo(f"{path}\t{size}")
    click.echo(
        f"{verb} {len(report.removed)} object(s), {report.bytes} bytes; kept"
        f" {report.referenced} referenced, {report.leased} held by writes in flight and"
        f" {report.too_young} younger than the grace period",
        err=True,
    )


COMMANDS = [load, add, commit, stage, log, scan, get, query, delete, revert, vacuum]
