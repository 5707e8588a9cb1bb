"""The table names SQL over a lake may mention, parsed once for every engine.

A name is a pool snapshot (``logs``, ``"logs@dev"``, ``"logs@main~2"``) or, when it
holds a ``:``, a meta table: a pool's (``"logs:objects"``, ``"logs@dev:commits"``)
or the lake's (``":pools"``). The text after the last ``:`` names the meta table, so
every engine reads the same name as the same table. This module imports no engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from limno.core.refs import parse_pool_ref

__all__ = ["MetaTableName", "PoolTableName", "TableName", "parse_table_name"]


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
