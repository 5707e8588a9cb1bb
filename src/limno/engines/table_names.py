"""The table names SQL over a lake may mention, parsed once for every engine.

A name is a pool snapshot (``logs``, ``"logs@dev"``, ``"logs@main~2"``) or, when it
holds a ``:``, a meta table: a pool's (``"logs:objects"``, ``"logs@dev:commits"``)
or the lake's (``":pools"``). The text after the last ``:`` names the meta table, so
every engine reads the same name as the same table. This module imports no engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from limno.core.refs import parse_pool_ref
from limno.errors import ForbiddenError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MetaTableName",
    "PoolTableName",
    "TableName",
    "check_readable",
    "parse_table_name",
    "readable_pools",
]


@dataclass(frozen=True)
class PoolTableName:
    """A pool's snapshot: ``pool`` at ``ref`` (None: the default branch)."""

    pool: str
    ref: str | None


@dataclass(frozen=True)
class MetaTableName:
    """Meta table ``table`` of ``owner``: a pool ref (``logs``, ``logs@dev``), or ``""``
    for the lake's own (``:pools``), as :meth:`limno.lake.Lake.meta_table` takes them."""

    owner: str
    table: str


TableName: TypeAlias = "PoolTableName | MetaTableName"


def parse_table_name(name: str) -> TableName:
    """What the SQL table name ``name`` stands for; an ``InvalidInputError`` for a ref
    with nothing after its ``@``."""
    owner, sep, table = name.rpartition(":")
    if sep:
        return MetaTableName(owner, table)
    pool, ref = parse_pool_ref(name)
    return PoolTableName(pool, ref)


def check_readable(name: str, readable: Callable[[str], bool]) -> None:
    """Refuse (ForbiddenError naming the pool) a table name that is a pool, or a pool's
    meta table, that ``readable(pool)`` says may not be read. The lake's ``":pools"``
    passes: :func:`readable_pools` filters its rows instead."""
    parsed = parse_table_name(name)
    if isinstance(parsed, MetaTableName):
        if not parsed.owner:
            return
        pool = parse_pool_ref(parsed.owner)[0]
    else:
        pool = parsed.pool
    if not readable(pool):
        raise ForbiddenError(f"SQL: pool {pool} may not be read (table {name!r})")


def readable_pools(name: str, meta: pa.Table, readable: Callable[[str], bool]) -> pa.Table:
    """Meta table ``meta`` of table name ``name``; for the lake's ``":pools"``, only the
    rows of pools ``readable(pool)`` allows (the others are not shown at all)."""
    parsed = parse_table_name(name)
    if not isinstance(parsed, MetaTableName) or parsed.owner or "name" not in meta.column_names:
        return meta
    return meta.filter([readable(str(n)) for n in meta.column("name").to_pylist()])
