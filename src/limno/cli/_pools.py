"""Pool commands: ``create``, ``ls``, ``drop``, ``rename``, ``use``."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import click

from limno.cli._context import SIZE, Context, format_option
from limno.cli._output import write_rows
from limno.cli._state import set_working_ref, working_ref
from limno.errors import InvalidInputError, LimnoError, NotFoundError
from limno.lazy import lazy_module
from limno.units import parse_duration

if TYPE_CHECKING:
    from limno.data import iterators as iterator_specs
    from limno.data import typed_schema
    from limno.pools import inspect
else:
    iterator_specs = lazy_module("limno.data.iterators")
    typed_schema = lazy_module("limno.data.typed_schema")
    inspect = lazy_module("limno.pools.inspect")

__all__ = ["COMMANDS"]


@click.command()
@click.argument("pool")
@click.option("-k", "--key", "key", default=None, help="Pool key, e.g. 'ts', 'tenant,ts:desc'.")
@click.option("--kind", type=click.Choice(["records", "files"]), default="records")
@click.option(
    "--target-size",
    type=SIZE,
    default="256MiB",
    show_default=True,
    help="Max size of an object (Arrow bytes: 256MiB, 1GB...).",
)
@click.option("--schema", "schema_file", default=None, help="JSON file with a typed schema.")
@click.option(
    "--iterator",
    "iterators",
    multiple=True,
    help="dedup | sum(F),min(F),max(F) | age-off(F,30d) | python(module:Class,k=v);"
    " applied at query and compaction.",
)
@click.option(
    "--iterator-file",
    "iterator_file",
    default=None,
    metavar="FILE",
    help="A Python file stored in the lake whose class --iterator 'python(CLASS,k=v)' names"
    " (it runs wherever the pool is read; through a server: admin only).",
)
@click.option("--split-threshold", type=int, default=None, help="Rows before a partition splits.")
@click.option(
    "--compaction",
    default=None,
    help="Strategy size-ratio|basic|overlap, optionally with ratio=R,batch=N.",
)
@click.option(
    "--retention",
    "retention",
    multiple=True,
    help="BRANCH_GLOB=DURATION: how long vacuum keeps a branch's history (repeatable).",
)
@click.pass_obj
def create(
    obj: Context,
    pool: str,
    key: str | None,
    kind: str,
    target_size: int,
    schema_file: str | None,
    iterators: tuple[str, ...],
    iterator_file: str | None,
    split_threshold: int | None,
    compaction: str | None,
    retention: tuple[str, ...],
) -> None:
    """Create a pool (branch main, at an empty root commit): of records (the default),
    or with --kind files of files by path ('limno fs')."""
    if kind == "files":
        _files_take_no_record_options(
            key=key,
            target_size=target_size,
            schema=schema_file,
            iterator=iterators,
            iterator_file=iterator_file,
            split_threshold=split_threshold,
            compaction=compaction,
        )
    windows = {}
    for rule in retention:
        glob, sep, span = rule.rpartition("=")
        if not sep or not glob:
            raise InvalidInputError(f"--retention expects BRANCH_GLOB=DURATION, not {rule!r}")
        windows[glob] = parse_duration(span)
    schema = typed_schema.TypedSchema.from_file(schema_file) if schema_file else None
    file_text = None
    if iterator_file:
        from limno.cli._iterator import read_iterator_file

        file_text = read_iterator_file(iterator_file)
    # a user iterator is set once the pool exists (checked, its file stored): parsed
    # here first, so that a mistyped one creates nothing
    spec = iterator_specs.parse_iterators(iterators, file_text=file_text, file_name=iterator_file)
    lake = obj.lake()
    if kind == "files":
        click.echo(lake.create_pool(pool, kind="files", retention=windows or None).id)
        click.echo(f"created pool {pool} (files)", err=True)
        return
    created = lake.create_pool(
        pool,
        key=key,
        kind="records",
        target_size=target_size,
        schema=schema,
        iterators=() if spec.user else iterators,
        split_threshold=split_threshold,
        compaction=_compaction(compaction) if compaction else None,
        retention=windows or None,
    )
    if spec.user:
        try:
            created.set_iterators(iterators, file_text, iterator_file)
        except BaseException:
            with contextlib.suppress(LimnoError):
                lake.drop_pool(created.id)  # the pool is new and empty: none half made
            raise
    click.echo(created.id)
    summary = f"key {created.config.key}"
    if spec.user:  # which file (by its digest) the lake now runs
        summary += f"; iterators {created.config.settings.iterators.describe()}"
    click.echo(f"created pool {created.name} ({summary})", err=True)


def _files_take_no_record_options(**given: object) -> None:
    """A file pool has paths, not a key: the options of record pools are refused (one
    left at its default is not given: ``--target-size``'s)."""
    ctx = click.get_current_context()
    for name, value in given.items():
        source = ctx.get_parameter_source(name if name != "iterator" else "iterators")
        if value and source != click.core.ParameterSource.DEFAULT:
            flag = {"key": "-k/--key", "iterator": "--iterator"}.get(name)
            flag = flag or "--" + name.replace("_", "-")
            raise InvalidInputError(f"{flag} is for record pools: a file pool has no key")


def _compaction(text: str) -> dict[str, object]:
    """``size-ratio,ratio=3,batch=12`` → settings."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    out: dict[str, object] = {"strategy": parts[0]} if parts else {}
    for part in parts[1:]:
        name, sep, value = part.partition("=")
        if not sep or name not in ("ratio", "batch"):
            raise InvalidInputError(f"--compaction: expected ratio=R or batch=N, not {part!r}")
        try:
            out[name] = float(value) if name == "ratio" else int(value)
        except ValueError:
            raise InvalidInputError(
                f"--compaction: {name} must be a number, not {value!r}"
            ) from None
    return out


@click.command(name="ls")
@click.argument("pool", required=False)
@format_option
@click.pass_obj
def ls(obj: Context, pool: str | None, fmt: str | None) -> None:
    """List pools; or a pool's branches and tags."""
    lake = obj.lake()
    if pool is None:
        listing = inspect.pools_rows(lake.list_pools())
    else:
        found = lake.versioned_pool(pool)
        listing = inspect.branches_rows(found.branches(), found.tags(), found.protected())
    write_rows(listing, obj.format(fmt))


@click.command()
@click.argument("pool")
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def drop(obj: Context, pool: str, force: bool) -> None:
    """Delete a pool with all its data and history."""
    lake = obj.lake()
    lake.versioned_pool(pool)  # a missing pool fails before the question
    if not force:
        if not sys.stdin.isatty():
            raise InvalidInputError(f"refusing to drop pool {pool!r} without -f")
        click.confirm(f"drop pool {pool!r} and all its data?", abort=True)
    config = lake.drop_pool(pool)
    click.echo(f"dropped pool {config.name} ({config.id})", err=True)


@click.command()
@click.argument("old")
@click.argument("new")
@click.pass_obj
def rename(obj: Context, old: str, new: str) -> None:
    """Rename a pool (its id does not change). To its own name: nothing changes (exit 0)."""
    config = obj.lake().rename_pool(old, new)
    if old == new:
        click.echo(f"pool {new} already has that name: nothing to rename", err=True)
        return
    click.echo(f"renamed pool {old} to {config.name} ({config.id})", err=True)


@click.command()
@click.argument("ref", required=False)
@click.pass_obj
def use(obj: Context, ref: str | None) -> None:
    """Set (or show) the working pool@branch used when -p is not given."""
    lake = obj.lake()
    if ref is None:
        current = working_ref(lake.uri)
        if not current:
            raise InvalidInputError("no working pool set (run 'limno use POOL[@BRANCH]')")
        click.echo(current)
        return
    pool_name, at = obj.pool_ref(ref)
    pool = lake.versioned_pool(pool_name)
    branch = at or "main"
    if branch not in pool.branches():
        raise NotFoundError(f"branch {branch!r} not found")
    set_working_ref(lake.uri, f"{pool.name}@{branch}")
    click.echo(f"switched to {pool.name}@{branch}", err=True)


COMMANDS = [create, ls, drop, rename, use]
