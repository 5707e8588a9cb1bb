"""The local engine: SQL over pools with an embedded DuckDB.

A table name in the SQL is a pool ref (``logs``, ``"logs@dev"``,
``"logs@main~2"``) or a meta table (``"logs:objects"``, ``"logs:commits"``,
``"logs:branches"``, ``":pools"``). Each name the statement mentions is resolved
to an Arrow table of that snapshot (schemas unified by limno's widening rule, so
every engine sees the same columns) and registered under exactly that name.

In safe mode (``query(..., safe=True)``, the CLI's ``query --safe``, and what a
server must use for SQL it did not write) the statement must be one read-only
query, and runs on a connection locked after the tables are registered
(:mod:`limno.engines.sql_safety`). Row predicates (:func:`filter_rows`) are
always parsed as one expression and run locked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from limno.core.refs import parse_pool_ref
from limno.engines.sql_safety import check_predicate, check_query, lock_down, sql_error
from limno.errors import InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from limno.lake import Lake

__all__ = ["META_TABLES", "filter_rows", "meta_table", "query"]

META_TABLES = ("objects", "commits", "branches", "partitions")


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
        return meta_table(lake, ref, meta)
    pool_name, at = parse_pool_ref(name)
    return lake.pool(pool_name).table(at)


def meta_table(lake: Lake, ref: str, meta: str) -> pa.Table:
    """A meta table: ``:pools``, or ``<pool>[@ref]:objects|commits|branches``."""
    if not ref:
        if meta != "pools":
            raise NotFoundError(f"no meta table ':{meta}' (try ':pools')")
        pools = lake.pools()
        return pa.table(
            {
                "name": [p.name for p in pools],
                "id": [p.id for p in pools],
                "kind": [p.kind for p in pools],
                "key": [p.key for p in pools],
                "created": [p.created for p in pools],
            }
        )
    if meta not in META_TABLES:
        raise NotFoundError(f"no meta table {meta!r} (one of {', '.join(META_TABLES)})")
    pool_name, at = parse_pool_ref(ref)
    pool = lake.pool(pool_name)
    if meta == "partitions":
        from limno.pools.records.manage import partitions_table

        return partitions_table(pool, at)
    if meta == "objects":
        objs, tree = pool.snapshot(at)
        return pa.table(
            {
                "id": [o.id for o in objs],
                "rows": pa.array([o.rows for o in objs], pa.int64()),
                "size": pa.array([o.size for o in objs], pa.int64()),
                "min_key": [json.dumps(o.to_json()["min_key"]) for o in objs],
                "max_key": [json.dumps(o.to_json()["max_key"]) for o in objs],
                "keyless": pa.array([o.keyless for o in objs], pa.int64()),
                "created": [o.created for o in objs],
                "partitions": pa.array(
                    [[p.id for p in tree.leaves_of(o)] for o in objs], pa.list_(pa.string())
                ),
            }
        )
    if meta == "commits":
        commits = pool.log(at)
        return pa.table(
            {
                "id": [c.id for c in commits],
                "parents": pa.array([list(c.parents) for c in commits], pa.list_(pa.string())),
                "author": [c.author for c in commits],
                "date": [c.date for c in commits],
                "message": [c.message for c in commits],
                "meta": [json.dumps(dict(c.meta), sort_keys=True) for c in commits],
                "actions": pa.array([len(c.actions) for c in commits], pa.int64()),
                "retries": pa.array([c.retries for c in commits], pa.int64()),
            }
        )
    refs = pool.versioned.refs
    rows = [("branch", n, c) for n, c in refs.branches().items()]
    rows += [("tag", n, c) for n, c in refs.tags().items()]
    return pa.table(
        {
            "kind": [r[0] for r in rows],
            "name": [r[1] for r in rows],
            "commit": [r[2] for r in rows],
        }
    )


def filter_rows(table: pa.Table, predicate: str) -> tuple[pa.Table, int]:
    """``(rows where predicate is not true, number of rows where it is)``; order kept.

    The predicate is one SQL expression over the row's columns, parsed and
    checked as such (:func:`~limno.engines.sql_safety.check_predicate`), never
    pasted into a statement, and evaluated on a locked connection. NULL counts
    as false. A predicate naming a column this table lacks matches none of its
    rows (objects of one pool may have different shapes).
    """
    expression = check_predicate(predicate)
    con = duckdb.connect()
    try:
        rows = con.from_arrow(table)
        lock_down(con)
        try:
            mask = rows.select(expression).to_arrow_table().column(0)
        except duckdb.BinderException:
            return table, 0
    except duckdb.Error as e:
        raise InvalidInputError(f"SQL: predicate {predicate!r}: {str(e).splitlines()[0]}") from e
    finally:
        con.close()
    if pa.types.is_null(mask.type):
        return table, 0
    if not pa.types.is_boolean(mask.type):
        raise InvalidInputError(
            f"SQL: predicate {predicate!r}: not a condition (gives {mask.type})"
        )
    if len(mask) != table.num_rows:
        raise InvalidInputError(f"SQL: predicate {predicate!r}: not a condition on each row")
    mask = pc.fill_null(mask, False)
    count = int(pc.sum(mask).as_py() or 0)
    if not count:
        return table, 0
    return table.filter(pc.invert(mask)), count
