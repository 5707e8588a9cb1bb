"""``limno iterator set|clear|ls``: a pool's iterators after it was created.

Thin over :meth:`limno.api.Pool.set_iterators`, which replaces the pool's iterators
as a whole (the class of a ``python(...)`` iterator is loaded and constructed first,
so one that cannot run is refused and nothing changes). Iterators belong to the pool,
not to a branch: ``-p POOL@BRANCH`` names the pool. Data already compacted keeps what
the old iterators did to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from limno.cli._context import Context, format_option
from limno.cli._output import write_dicts
from limno.errors import InvalidInputError, os_reason

if TYPE_CHECKING:
    from limno.api import Pool
    from limno.data.iterators import IteratorSpec

__all__ = ["COMMANDS", "read_iterator_file"]

_COLUMNS = ("iterator", "file", "sha256")


def read_iterator_file(path: str) -> str:
    """The text of an iterator file (UTF-8 Python source); ``limno create`` reads it too."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        raise InvalidInputError(f"iterator file {path} is not UTF-8 text") from None
    except OSError as e:
        raise InvalidInputError(
            f"cannot read iterator file {path}: {os_reason(e.errno, e.strerror or '')}"
        ) from None


def _pool_option(f: Any) -> Any:
    return click.option("-p", "--pool", "ref", default=None, help="POOL (default: limno use).")(f)


def _pool(obj: Context, ref: str | None) -> Pool:
    name, _ = obj.pool_ref(ref)  # a pool-wide setting: a @BRANCH is not one of its own
    return obj.lake().pool(name)


def _rows(spec: IteratorSpec) -> list[dict[str, Any]]:
    """One row per iterator, in the order they run (a user iterator last, with the file
    it comes from and the file's digest)."""
    rows = [{"iterator": text, "file": None, "sha256": None} for text in spec.texts()]
    if spec.user is not None:
        rows[-1].update(file=spec.user.file, sha256=spec.user.sha256)
    return rows


@click.group()
def iterator() -> None:
    """A pool's iterators (dedup, sum/min/max, age-off, python): set, clear, list.

    They apply at query time and at compaction (see 'limno create --iterator')."""


@iterator.command(name="set")
@_pool_option
@click.option(
    "--iterator-file",
    "iterator_file",
    default=None,
    metavar="FILE",
    help="A Python file stored in the lake whose class 'python(CLASS,k=v)' names"
    " (it runs wherever the pool is read; through a server: admin only).",
)
@click.argument("iterators", nargs=-1, required=True)
@click.pass_obj
def iterator_set(
    obj: Context, ref: str | None, iterator_file: str | None, iterators: Sequence[str]
) -> None:
    """Replace the pool's iterators with ITERATORS: dedup | sum(F),min(F),max(F) |
    age-off(F,30d) | python(module:Class,k=v) | python(CLASS,k=v) with --iterator-file."""
    file_text = read_iterator_file(iterator_file) if iterator_file else None
    pool = _pool(obj, ref)
    config = pool.set_iterators(list(iterators), file_text, iterator_file)
    described = config.settings.iterators.describe()
    click.echo(f"iterators of pool {config.name}: {described}", err=True)


@iterator.command(name="clear")
@_pool_option
@click.pass_obj
def iterator_clear(obj: Context, ref: str | None) -> None:
    """Remove every iterator of the pool (reads return each write as stored)."""
    config = _pool(obj, ref).set_iterators([])
    click.echo(f"iterators of pool {config.name}: none", err=True)


@iterator.command(name="ls")
@_pool_option
@format_option
@click.pass_obj
def iterator_ls(obj: Context, ref: str | None, fmt: str | None) -> None:
    """The pool's iterators in the order they run: iterator, file, sha256."""
    spec = _pool(obj, ref).config.settings.iterators
    write_dicts(_COLUMNS, _rows(spec), obj.format(fmt))


COMMANDS = [iterator]
