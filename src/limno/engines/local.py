"""The local engine: SQL over pools with an embedded DuckDB.

A table name in the SQL is a pool ref (``logs``, ``"logs@dev"``,
``"logs@main~2"``) or a meta table (``"logs:objects"``, ``"logs:commits"``,
``"logs:branches"``, ``":pools"``). Each name the statement mentions is resolved
to an Arrow table of that snapshot (schemas unified by limno's widening rule, so
every engine sees the same columns) and registered under exactly that name.

In safe mode (``query(..., safe=True)``, the CLI's ``query --safe``, and what a
server must use for SQL it did not write) the statement must be one read-only
query, and runs on a connection locked after the tables are registered
(:mod:`limno.data.sql_safety`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from limno.core.refs import parse_pool_ref
from limno.data.sql_safety import check_query, lock_down, sql_error
from limno.errors import LimnoError

if TYPE_CHECKING:
    from limno.lake import Lake

__all__ = ["query", "query_size", "resolve_table"]


def query(lake: Lake, sql: str, *, safe: bool = False) -> pa.Table:
    """Run ``sql`` over the lake's pools; returns an Arrow table.

    ``safe`` (for SQL that may come from someone else) allows one read-only
    query with no file, network, extension or settings access; without it this
    is DuckDB with the pools registered, for your own SQL.
    """
    if safe:
        check_query(sql)
    try:
        names = duckdb.get_table_names(sql)
    except duckdb.Error as e:
        raise sql_error(e) from e
    con = duckdb.connect()
    try:
        for name in sorted(names):
            con.register(name, resolve_table(lake, name))
        if safe:
            lock_down(con)
        return con.sql(sql).to_arrow_table()
    except duckdb.Error as e:
        raise sql_error(e) from e
    finally:
        con.close()


def resolve_table(lake: Lake, name: str) -> pa.Table:
    """The Arrow table a SQL table name stands for."""
    ref, sep, meta = name.rpartition(":")
    if sep:
        return lake.meta_table(ref, meta)
    pool_name, at = parse_pool_ref(name)
    return lake.pool(pool_name).table(at)


def query_size(lake: Lake, sql: str) -> int:
    """Bytes of the snapshots a statement names (what ``--engine auto`` goes by)."""
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
