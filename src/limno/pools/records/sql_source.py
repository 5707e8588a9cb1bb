"""What a SQL engine reads for one snapshot of a record pool: files, and merged rows.

Merging on read costs a full decode of every object into one table before the
engine starts. Most snapshots need none of it: without iterators the rows of a
snapshot are exactly the rows of its objects, in any order, so an engine can scan
the objects' Parquet files itself (by path on a local lake, through pyarrow's
filesystem on S3), with its own projection and filter pushdown,
row-group pruning and threads. Only what needs limno's hand is merged here: every
object of a pool with iterators (dedup, aggregation and age-off decide which rows
exist), objects only partly referenced after a split (*clipped*), objects the
engine cannot read as limno would (the caller's ``readable``), and every object of
a store the engine cannot reach (a memory store).

Objects that cannot hold a row the statement wants (:func:`limno.data.sql_ranges.may_hold`)
are left out before either path, and so are those whose search index rules out the
statement's equality conditions on an indexed field
(:func:`limno.pools.records.indexing.prune`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from limno.data.objects import DataObject, data_path
from limno.data.schema import conform, unify
from limno.data.sql_ranges import Condition, may_hold
from limno.pools.records.indexing import prune

if TYPE_CHECKING:
    from limno.pools.records.pool import RecordPool

__all__ = ["SnapshotSource", "snapshot_source"]


@dataclass(frozen=True)
class SnapshotSource:
    """A snapshot as an engine reads it: ``files`` scanned directly plus ``merged`` rows.

    Every file holds exactly the columns of ``schema`` with its types, and
    ``merged`` (when not None) is conformed to it too, so the two concatenate by
    position. ``objects`` are the files' data objects, in the same order.
    """

    schema: pa.Schema
    files: tuple[str, ...]
    objects: tuple[DataObject, ...]
    merged: pa.Table | None
    #: the ``pyarrow.fs.FileSystem`` the files are paths of; None: local paths
    filesystem: Any = None


def snapshot_source(
    pool: RecordPool,
    ref: str | None = None,
    as_of: dt.datetime | None = None,
    conditions: Sequence[Condition] = (),
    readable: Callable[[pa.Schema], bool] = lambda schema: True,
    field_conditions: Callable[[str], Sequence[Condition]] | None = None,
) -> SnapshotSource:
    """The snapshot of ``ref`` split into files an engine may scan and rows limno merges.

    ``field_conditions(column)``: the statement's conditions on a column, for the
    search indexes to leave out objects (None: no index is asked)."""
    commit = pool.resolve(ref, as_of)
    everything = pool.objects(commit)
    schema = unify(o.schema for o in everything if o.schema_b64)
    objs = [o for o in everything if may_hold(o, pool.key, conditions)]
    if field_conditions is not None:
        objs = prune(pool, objs, commit, field_conditions, schema)
    remote = pool.storage.arrow_filesystem()
    direct: list[tuple[str, DataObject]] = []
    rest: list[DataObject] = []
    iterating = bool(pool.iterators)
    for o in objs:
        stored = data_path(pool.id, o.id)
        path = pool.storage.local_path(stored)
        if path is None and remote is not None:
            path = f"{remote[1]}/{stored}"
        if (
            path is None
            or iterating
            or o.clip is not None
            or not _same_columns(o.schema, schema)
            or not readable(o.schema)
        ):
            rest.append(o)
        else:
            direct.append((path, o))
    merged = None
    if rest or not direct:
        chunks = list(pool.scan_objects(rest)) if rest else []
        merged = conform(pa.concat_tables(chunks), schema) if chunks else schema.empty_table()
    return SnapshotSource(
        schema,
        tuple(p for p, _ in direct),
        tuple(o for _, o in direct),
        merged,
        None if remote is None else remote[0],
    )


def _same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    """Same names and types in the same order (nullability and metadata aside)."""
    return a.names == b.names and all(x.type.equals(y.type) for x, y in zip(a, b, strict=True))
