"""The local engine: SQL over pools with an embedded DuckDB.

A table name in the SQL is a pool ref (``logs``, ``"logs@dev"``,
``"logs@main~2"``) or a meta table (``"logs:objects"``, ``"logs:commits"``,
``"logs:branches"``, ``":pools"``). Each name the statement mentions becomes a
view of exactly that name over the snapshot (schemas unified by limno's widening
rule, so every engine sees the same columns).

A pool's view reads the snapshot's Parquet objects in place, so DuckDB plans the
statement over the files with their statistics (:func:`_scan_files`) and its own
projection and filter pushdown, row-group pruning and threads (on an S3 lake
pyarrow scans the objects for it, with the same pushdown); only rows that need
limno's merge (iterators, clipped objects, types DuckDB would read differently) are
merged first, and objects whose key range cannot satisfy the statement's conditions
on the first key field are left out (:mod:`limno.pools.records.sql_source`).

In safe mode (``query(..., safe=True)``, the CLI's ``query --safe``, and what a
server must use for SQL it did not write) the statement must be one read-only
query, and runs on a connection locked after the views are made, reading no file
but the snapshots' own objects (:mod:`limno.data.sql_safety`).

``readable`` (a server passes the caller's grants) says which pools the SQL may
name: a pool ref or pool meta table of any other pool is refused with
:class:`~limno.errors.ForbiddenError` naming the pool, before anything is read,
and the lake's ``":pools"`` lists only the readable pools (grants hold in safe mode
only: without it, SQL may read any file). ``limits``
(:class:`~limno.engines.query_limits.QueryLimits`) stop a query at a time limit
and refuse an answer past a row or byte limit.

A pool with no rows and no declared columns (created, nothing loaded) reads as
an empty table of its key fields, so ``count(*)`` is 0 and ``SELECT *`` has no rows.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from limno.data.objects import DataObject, data_path
from limno.data.plain_types import map_types
from limno.data.sql_ranges import key_conditions
from limno.data.sql_safety import check_query, lock_down, parse_tree, sql_error, tree_nodes
from limno.engines.query_limits import QueryLimits, Watchdog
from limno.engines.table_names import (
    MetaTableName,
    check_readable,
    parse_table_name,
    readable_pools,
)
from limno.errors import LimnoError, NotFoundError, damaged_object
from limno.pools.records.sql_source import SnapshotSource, snapshot_source

if TYPE_CHECKING:
    from limno.lake import Lake
    from limno.pools.records.pool import RecordPool

__all__ = ["query", "query_size", "reads_alike", "resolve_table"]


@dataclass(frozen=True)
class _Read:
    """A pool snapshot a statement reads: which files its view scans."""

    pool: RecordPool
    source: SnapshotSource


#: rows per batch when an answer is read against a row or byte limit
_BATCH_ROWS = 8192


def query(
    lake: Lake,
    sql: str,
    *,
    safe: bool = False,
    limits: QueryLimits | None = None,
    readable: Callable[[str], bool] | None = None,
    as_of: dt.datetime | None = None,
) -> pa.Table:
    """Run ``sql`` over the lake's pools; returns an Arrow table.

    ``safe`` (for SQL that may come from someone else) allows one read-only
    query with no file, network, extension or settings access; without it this
    is DuckDB with the pools registered, for your own SQL. ``limits``: time,
    row and byte limits (None: none). ``readable(pool_name)``: whether the SQL
    may read that pool (None: every pool); see the module docstring. ``as_of``:
    every branch the SQL reads, as it was at that time (tags and commits as named).
    """
    if safe:
        check_query(sql)
    names = _tables_of(sql)
    if readable is not None:
        for name in names:
            check_readable(name, readable)
    limits = limits or QueryLimits()
    # a safe query locks its connection for good: it gets a DuckDB instance of its own
    con = _connect(SAFE_TEMP_LIMIT) if safe else _shared().cursor()
    reads: list[_Read] = []
    watchdog = Watchdog(limits.timeout, con.interrupt)
    try:
        with watchdog:
            for i, name in enumerate(names):
                hidden = f"__limno_merged_{i}"
                read = _register(con, lake, sql, name, hidden, readable, as_of)
                if read is not None:
                    reads.append(read)
            if safe:
                lock_down(con, [f for r in reads for f in r.source.files])
            if watchdog.fired:  # before DuckDB ran the statement
                raise limits.timed_out()
            return _answer(con, sql, limits)
    # pyarrow's reader words an interrupt as OSError; one while a view was made, as limno's
    except (duckdb.Error, OSError, LimnoError) as e:
        if watchdog.fired:
            raise limits.timed_out() from e
        # DuckDB's own error, or the same worded by pyarrow's batch reader (an OSError
        # without errno) when it surfaces while the answer is fetched: a damaged object
        # fails either way, depending on which thread decodes it first
        if isinstance(e, duckdb.Error) or (isinstance(e, OSError) and e.errno is None):
            raise _read_error(e, reads) from e
        raise
    finally:
        con.close()


def _tables_of(sql: str) -> list[str]:
    """The tables ``sql`` names, but its own CTEs.

    DuckDB's ``get_table_names`` binds a join's ``USING`` columns against tables it
    does not have (a Binder Error for ``FROM a JOIN b USING (k)``): then the names
    come from the parse tree instead, less the names its ``WITH`` clauses define.
    """
    try:
        return sorted(duckdb.get_table_names(sql))
    except duckdb.BinderException:
        pass
    except duckdb.Error as e:
        raise sql_error(e) from e
    tables: set[str] = set()
    ctes: set[str] = set()
    for node in tree_nodes(parse_tree(sql)):
        if node.get("type") == "BASE_TABLE":
            tables.add(str(node.get("table_name", "")))
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            ctes.update(
                str(e.get("key", "")) for e in cte_map.get("map", []) if isinstance(e, dict)
            )
    return sorted(tables - ctes - {""})


def _answer(con: duckdb.DuckDBPyConnection, sql: str, limits: QueryLimits) -> pa.Table:
    """The statement's answer; read in batches, and no further than a limit, when
    ``limits`` has a row or byte limit."""
    if limits.max_rows is None and limits.max_bytes is None:
        return con.sql(sql).to_arrow_table()
    reader = con.sql(sql).to_arrow_reader(_BATCH_ROWS)
    try:
        batches: list[pa.RecordBatch] = []
        rows = nbytes = 0
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            nbytes += batch.nbytes
            limits.check_answer(rows, nbytes)
        return pa.Table.from_batches(batches, reader.schema)
    finally:
        reader.close()


@functools.cache
def _shared() -> duckdb.DuckDBPyConnection:
    """The DuckDB instance queries run on, each on a cursor of its own.

    A new instance costs tens of milliseconds, more than a small query; a cursor
    costs nothing, and what a query registers (temporary views, Arrow tables) is
    its cursor's alone and gone when it closes.
    """
    return _connect(None)


#: how much a safe query (SQL from someone else: a server's caller) may spill to disk
SAFE_TEMP_LIMIT = "1GiB"


def _connect(temp_limit: str | None) -> duckdb.DuckDBPyConnection:
    """A DuckDB instance that spills (a sort or join larger than memory) into a
    private directory under the system's temp directory, never into ``./.tmp`` of
    the working directory (DuckDB's default for an in-memory database); ``temp_limit``
    caps what it may spill (None: DuckDB's default). Each instance has a directory of
    its own (instances must not share their spill files), which DuckDB makes when it
    first spills and removes when it closes; what a killed query leaves goes at exit."""
    own = os.path.join(_spill_directory(), uuid.uuid4().hex)
    config: dict[str, str | bool | int | float | list[str]] = {"temp_directory": own}
    if temp_limit is not None:
        config["max_temp_directory_size"] = temp_limit
    return duckdb.connect(config=config)


@functools.cache
def _spill_directory() -> str:
    import atexit
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="limno-duckdb-")
    atexit.register(shutil.rmtree, path, True)
    return path


def resolve_table(lake: Lake, name: str) -> pa.Table:
    """The Arrow table a SQL table name stands for (the whole snapshot, in memory)."""
    parsed = parse_table_name(name)
    if isinstance(parsed, MetaTableName):
        return lake.meta_table(parsed.owner, parsed.table)
    return lake.pool(parsed.pool).table(parsed.ref)


def _register(
    con: duckdb.DuckDBPyConnection,
    lake: Lake,
    sql: str,
    name: str,
    hidden: str,
    readable: Callable[[str], bool] | None = None,
    as_of: dt.datetime | None = None,
) -> _Read | None:
    """Make ``name`` a view of what it stands for; the pool snapshot it reads, if any.

    ``hidden`` names the rows limno merged, when the view also reads files;
    ``readable`` filters the lake's ``":pools"``; a branch is read as of ``as_of``.
    """
    parsed = parse_table_name(name)
    if isinstance(parsed, MetaTableName):
        meta = lake.meta_table(parsed.owner, parsed.table)
        if readable is not None:
            meta = readable_pools(name, meta, readable)
        con.register(name, meta)
        return None
    pool = lake.pool(parsed.pool)
    first = pool.key.fields[0].path
    conditions = key_conditions(sql, name, first[0]) if len(first) == 1 else []
    at = pool.branch_time(parsed.ref, as_of)
    source = snapshot_source(
        pool,
        parsed.ref,
        at,
        conditions,
        readable=reads_alike,
        field_conditions=functools.partial(key_conditions, sql, name),
    )
    if not source.files:
        assert source.merged is not None
        merged = source.merged
        if merged.num_columns == 0:  # nothing loaded yet: DuckDB takes no table without columns
            keys = dict.fromkeys(f.path[0] for f in pool.key.fields)
            merged = pa.table({k: pa.nulls(0) for k in keys})
        con.register(name, _presentable(merged))
        return None
    read = _Read(pool, source)
    if source.filesystem is None:
        view = _scan_files(source.files)
    else:  # DuckDB reaches S3 only through an extension: pyarrow scans, DuckDB pushes down
        import pyarrow.dataset as ds  # 0.25 s to import (it brings pandas): S3 lakes only

        scanned = ds.dataset(
            list(source.files), source.schema, format="parquet", filesystem=source.filesystem
        )
        con.register(f"{hidden}_files", scanned)
        view = f"SELECT * FROM {_name(hidden + '_files')}"
    if source.merged is not None and source.merged.num_rows:
        con.register(hidden, _presentable(source.merged))
        view += f" UNION ALL SELECT * FROM {_name(hidden)}"
    try:  # DuckDB reads the footers here already
        con.execute(f"CREATE TEMPORARY VIEW {_name(name)} AS {view}").fetchall()
    except duckdb.Error as e:
        raise _read_error(e, [read]) from e
    return read


def _scan_files(files: tuple[str, ...]) -> str:
    """A query scanning ``files`` (local Parquet files of one schema) in place.

    DuckDB gives its optimizer the column statistics (min/max, nulls) and the exact
    row count of a scan over several files only when told to read every file's
    footer for them (``maximum_files_for_stats``; its default is one file): without
    them it plans joins blind, and orders them worse than over one file of the same
    rows (TPC-H Q21 over lineitem in 4 objects: a different join order, 1.6x the
    time). Reading a footer costs about 0.1 ms per file and scan, so past
    :data:`STATS_FILES` files the scan goes without.
    """
    paths = ", ".join(_text(f) for f in files)
    stats = f", maximum_files_for_stats={len(files)}" if 1 < len(files) <= STATS_FILES else ""
    return f"SELECT * FROM read_parquet([{paths}]{stats})"


#: the most files of one scan whose footers DuckDB reads for statistics at planning
#: (see :func:`_scan_files`)
STATS_FILES = 256


def _presentable(table: pa.Table) -> pa.Table:
    """``table`` as DuckDB can take it: decimals wider than its 38 digits become doubles,
    as DuckDB's own Parquet reader presents them (Arrow hands over no decimal256)."""
    schema = pa.schema([f.with_type(_within_duckdb(f.type)) for f in table.schema])
    return table if schema.equals(table.schema) else table.cast(schema)


def _within_duckdb(t: pa.DataType) -> pa.DataType:
    return map_types(t, lambda node: pa.float64() if pa.types.is_decimal256(node) else node)


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _name(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def reads_alike(schema: pa.Schema) -> bool:
    """Whether DuckDB reads an object of ``schema`` from Parquet as it reads it from Arrow.

    Parquet cannot hold some Arrow types as they are (durations, dictionaries, second
    timestamps, half floats, ...): pyarrow stores them as another type plus a note
    DuckDB does not read, so such objects are merged by limno instead.
    """
    return all(_alike(f.type) for f in schema)


def _alike(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return all(_alike(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return _alike(t.value_type)
    if pa.types.is_timestamp(t):
        return t.unit != "s"
    if pa.types.is_decimal(t):
        return t.bit_width == 128
    return (
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or pa.types.is_date32(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
    )


def _read_error(e: duckdb.Error | OSError, reads: list[_Read]) -> LimnoError:
    """A failed statement's error: a snapshot object missing or damaged, else the SQL's.

    DuckDB does not always name the file it failed to decode ("Out of buffer"), so
    after a failure that is not the statement's own fault, limno reads the objects
    itself to find the one to blame.
    """
    text = str(e)
    suspects: list[tuple[RecordPool, str, DataObject]] = []
    for read in reads:
        pool = read.pool
        for path, obj in zip(read.source.files, read.source.objects, strict=True):
            if not pool.storage.exists(data_path(pool.id, obj.id)):
                if pool.is_removed(obj.id):
                    return NotFoundError(
                        f"object {obj.id} was removed by vacuum: this commit is outside the"
                        " retention window"
                    )
                return NotFoundError(
                    f"pool {pool.name}: object {obj.id} is missing ({path}); run limno verify"
                )
            if path in text or obj.id in text:
                return damaged_object(data_path(pool.id, obj.id), pool.name, text.splitlines()[0])
            suspects.append((pool, path, obj))
    if type(e) is duckdb.Error or isinstance(e, _READ_FAILURES):
        for pool, _, obj in suspects:
            try:
                with pool.reading([obj]):
                    pool.read_object(obj)
            except LimnoError as found:
                return found
    return sql_error(e)


#: DuckDB's failures that may come from a damaged file rather than from the SQL (and
#: its unclassified ``duckdb.Error``, as a page that fails to decode gives; OSError:
#: the same failure worded by pyarrow's batch reader while the answer is fetched)
_READ_FAILURES = (
    OSError,
    duckdb.IOException,
    duckdb.InvalidInputException,
    duckdb.InternalException,
    duckdb.SerializationException,
    duckdb.FatalException,
)


def query_size(lake: Lake, sql: str) -> int:
    """Bytes of the snapshots a statement names (what ``--engine auto`` goes by)."""
    try:
        names = duckdb.get_table_names(sql)
    except duckdb.Error:
        return 0
    total = 0
    for name in names:
        parsed = parse_table_name(name)
        if isinstance(parsed, MetaTableName):
            continue
        try:
            total += sum(o.size for o in lake.pool(parsed.pool).objects(parsed.ref))
        except LimnoError:
            continue
    return total
