"""Pool commands: ``create``, ``ls``, ``drop``, ``rename``, ``use``."""

from __future__ import annotations

import re
import sys

import click
import pyarrow as pa

from limno.cli._main import Context
from limno.cli._output import write_tables
from limno.cli._state import set_working_ref, working_ref
from limno.errors import InvalidInputError
from limno.pools.records.typed_schema import TypedSchema

__all__ = ["COMMANDS", "parse_size"]

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20})
_UNITS.update({"g": 2**30})


def parse_size(text: str) -> int:
    """``256MB``, ``1GiB``, ``1000`` → bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise InvalidInputError(f"invalid size {text!r} (e.g. 256MB, 1GiB, 1000000)")
    size = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if size <= 0:
        raise InvalidInputError(f"size must be positive, not {text!r}")
    return size


@click.command()
@click.argument("pool")
@click.option("-k", "--key", "key", default=None, help="Pool key, e.g. 'ts', 'tenant,ts:desc'.")
@click.option("--kind", type=click.Choice(["records", "files"]), default="records")
@click.option("--target-size", default="256MB", show_default=True, help="Max size of an object.")
@click.option("--schema", "schema_file", default=None, help="JSON file with a typed schema.")
@click.option(
    "--iterator",
    "iterators",
    multiple=True,
    help="dedup | sum(F),min(F),max(F) | age-off(F,30d); applied at query and compaction.",
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
    target_size: str,
    schema_file: str | None,
    iterators: tuple[str, ...],
    split_threshold: int | None,
    compaction: str | None,
    retention: tuple[str, ...],
) -> None:
    """Create a pool (branch main, at an empty root commit)."""
    from limno.cli._data import parse_duration

    windows = {}
    for rule in retention:
        glob, sep, span = rule.rpartition("=")
        if not sep or not glob:
            raise InvalidInputError(f"--retention expects BRANCH_GLOB=DURATION, not {rule!r}")
        windows[glob] = parse_duration(span)
    schema = TypedSchema.from_file(schema_file) if schema_file else None
    created = obj.lake().create_pool(
        pool,
        key=key,
        kind=kind,
        target_size=parse_size(target_size),
        schema=schema,
        iterators=iterators,
        split_threshold=split_threshold,
        compaction=_compaction(compaction) if compaction else None,
        retention=windows or None,
    )
    click.echo(created.id)
    click.echo(f"created pool {created.name} (key {created.key})", err=True)


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
@click.option("-f", "--format", "fmt", default=None, help="Output format.")
@click.pass_obj
def ls(obj: Context, pool: str | None, fmt: str | None) -> None:
    """List pools; or a pool's branches and tags."""
    lake = obj.lake()
    if pool is None:
        pools = lake.pools()
        table = pa.table(
            {
                "name": [p.name for p in pools],
                "id": [p.id for p in pools],
                "key": [p.key for p in pools],
                "kind": [p.kind for p in pools],
            }
        )
    else:
        refs = lake.pool(pool).versioned.refs
        rows = [("branch", n, c) for n, c in refs.branches().items()]
        rows += [("tag", n, c) for n, c in refs.tags().items()]
        table = pa.table(
            {
                "kind": [r[0] for r in rows],
                "name": [r[1] for r in rows],
                "commit": [r[2] for r in rows],
            }
        )
    write_tables([table], obj.format(fmt))


@click.command()
@click.argument("pool")
@click.option("-f", "--force", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def drop(obj: Context, pool: str, force: bool) -> None:
    """Delete a pool with all its data and history."""
    lake = obj.lake()
    lake.registry.find(pool)
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
    """Rename a pool (its id does not change)."""
    config = obj.lake().rename_pool(old, new)
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
    pool = lake.pool(pool_name)
    branch = at or "main"
    pool.versioned.head(branch)
    set_working_ref(lake.uri, f"{pool.name}@{branch}")
    click.echo(f"switched to {pool.name}@{branch}", err=True)


COMMANDS = [create, ls, drop, rename, use]
