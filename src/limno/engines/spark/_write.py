"""Writing DataFrames as data objects: bulk import on Spark, one commit from the driver.

The plan (Sleeper's bulk import): range-partition the rows by the pool key
(Spark samples the key to choose the ranges), sort each partition by the key, and
let each task write its sorted range as data objects with limno's own writer
(:func:`~limno.pools.records._writer.write_sorted`: KSUID names, small row groups
with statistics and a page index, objects cut at the pool's target size, the
metadata of each: rows, size, min/max key, keyless count, Arrow schema). A task
returns only its objects' metadata; the driver collects it and makes exactly one
commit. Until then nothing is visible:

* a failed task attempt deletes what it uploaded (best effort), and its output
  never reaches the driver: Spark hands the driver one successful attempt per
  partition, so objects of failed or speculative attempts are never referenced;
* a failed or killed job commits nothing; objects it did upload are unreferenced
  and vacuum reclaims them after the grace period.

Keyless records (a key field missing or null) sort after every keyed record, so
they land in the last range(s), at the end of their objects, as limno expects.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from limno.core.commits import Action, Commit
from limno.errors import InvalidInputError
from limno.pools.records.objects import DataObject

from ._read import key_columns, open_pool
from ._session import LakeSpec, session, translate_errors

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from limno.lake import Lake
    from limno.pools.records.keys import PoolKey
    from limno.pools.records.pool import RecordPool

__all__ = [
    "commit_objects",
    "merge_groups",
    "merge_sorted_objects",
    "sorted_by_key",
    "write",
    "write_objects",
]

#: a hook run in the task after each object is uploaded (tests inject failures here)
ObjectHook = Callable[[DataObject], None]

#: below this estimated size a write uses as few ranges as the target size allows
PARALLEL_BYTES = 32 * 2**20

_OUT = "object string"

#: hidden column: the index of a row's leaf partition (bulk import honours leaves)
LEAF_COL = "__limno_leaf"


def _arrow_key_schema(df: DataFrame) -> pa.Schema:
    """The DataFrame's schema as Arrow (key field paths only need names and structs)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema)


def sorted_by_key(
    df: DataFrame,
    key: PoolKey,
    partitions: int,
    leaves: Sequence[Any] = (),
    tiebreak: Sequence[str] = (),
) -> DataFrame:
    """``df`` range-partitioned into ``partitions`` ranges of the key, each sorted.

    With the pool's leaf partitions (``leaves``, in key order, more than one) a
    hidden column :data:`LEAF_COL` holds each row's leaf index and leads the
    order, so a task's stream changes leaf only at a leaf boundary. ``tiebreak``
    columns order rows with equal keys (a load keeps its input order).
    """
    from pyspark.sql import functions as F

    from ._read import _compare

    schema = _arrow_key_schema(df)
    cols = key_columns(key, schema)
    keyless = _any_null(cols)
    order: list[Column] = []
    if len(leaves) > 1:
        index: Column = F.lit(0)
        for leaf in leaves[1:]:
            index = index + F.when(_compare(cols[:1], key, tuple(leaf.lo), schema), 1).otherwise(0)
        df = df.withColumn(LEAF_COL, F.when(keyless, len(leaves) - 1).otherwise(index))
        order.append(F.col(LEAF_COL).asc())
    order.append(keyless.asc())
    # keyless records tie on the key (PoolKey.key_table nulls every field of them)
    for c, f in zip([F.when(~keyless, c) for c in cols], key.fields, strict=True):
        order.append(c.desc_nulls_last() if f.descending else c.asc_nulls_last())
    # equal keys never straddle two ranges: ties are broken only within a range
    ties = [F.col(name).asc() for name in tiebreak]
    return df.repartitionByRange(partitions, *order).sortWithinPartitions(*order, *ties)


def _any_null(cols: Sequence[Column]) -> Column:
    out = cols[0].isNull()
    for c in cols[1:]:
        out = out | c.isNull()
    return out


def estimated_bytes(df: DataFrame) -> int | None:
    """Spark's estimate of the DataFrame's size (None when it has none)."""
    try:
        size = int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:
        return None
    return size if 0 < size < 2**62 else None


def _partitions(df: DataFrame, target_size: int, spark: SparkSession) -> int:
    size = estimated_bytes(df)
    if size is None:
        return max(1, spark.sparkContext.defaultParallelism)
    n = math.ceil(size / target_size)
    if size >= PARALLEL_BYTES:
        n = max(n, spark.sparkContext.defaultParallelism)
    return max(1, n)


def _check_key_types(df: DataFrame, key: PoolKey) -> None:
    from pyspark.sql import types as T

    for f in key.fields:
        typ: Any = df.schema
        for part in f.path:
            if not isinstance(typ, T.StructType) or part not in typ.fieldNames():
                typ = None
                break
            typ = typ[part].dataType
        if isinstance(typ, T.StructType | T.ArrayType | T.MapType):
            raise InvalidInputError(
                f"key field {f.name!r} has type {typ.simpleString()}, which cannot be sorted"
            )


def write_objects(
    df: DataFrame,
    pool: RecordPool,
    *,
    branch: str | None = None,
    partitions: int | None = None,
    spark: SparkSession | None = None,
    source: str = "<dataframe>",
    tiebreak: Sequence[str] = (),
    check_schema: bool = True,
    _hook: ObjectHook | None = None,
) -> list[DataObject]:
    """Write ``df`` as sorted, non-overlapping data objects of ``pool`` (uncommitted).

    Returns the objects in key order. ``partitions`` fixes the number of key
    ranges (default: from Spark's size estimate and the pool's target size). When
    ``branch`` has leaf partitions, every object lies in one leaf and references it.
    """
    spark = session(spark=spark)
    key = pool.key
    _check_key_types(df, key)
    leaves: list[Any] = []
    if branch is not None and hasattr(pool, "partitions"):
        tree = pool.partitions(branch)
        leaves = list(tree.leaves()) if tree.stored else []
    n = partitions or _partitions(df, pool.config.target_size, spark)
    ordered = sorted_by_key(df, key, n, leaves, tiebreak)
    hidden = [*tiebreak, LEAF_COL]
    spec = LakeSpec.of(pool.storage)
    pool_id, target_size = pool.id, pool.config.target_size
    typed = pool.schema if check_schema else None
    leaf_ids = [leaf.id for leaf in leaves]

    def task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import dataclasses
        import itertools

        from limno.lake import Lake
        from limno.pools.records._writer import write_sorted

        store = spec.open()
        rp = Lake(store).pool(pool_id)

        def pieces() -> Iterator[tuple[int, pa.Table]]:
            rows = 0
            for batch in batches:
                if not batch.num_rows:
                    continue
                table = pa.Table.from_batches([batch])
                if len(leaf_ids) > 1:
                    ids = table.column(LEAF_COL).to_numpy()
                    cuts = [0, *(i + 1 for i in range(len(ids) - 1) if ids[i] != ids[i + 1])]
                    bounds = [*cuts, len(ids)]
                    runs = [(int(ids[a]), a, b) for a, b in itertools.pairwise(bounds)]
                else:
                    runs = [(0, 0, table.num_rows)]
                table = table.drop_columns([c for c in hidden if c in table.column_names])
                for leaf, a, b in runs:
                    piece = table.slice(a, b - a)
                    if typed is not None:
                        checked = typed.check(piece.combine_chunks().to_batches()[0], source, rows)
                        piece = pa.Table.from_batches([checked])
                    rows += piece.num_rows
                    yield leaf, piece

        objs: list[DataObject] = []
        try:
            for leaf, run in itertools.groupby(pieces(), key=lambda p: p[0]):
                made = write_sorted(store, pool_id, (t for _, t in run), key, target_size)
                if leaf_ids:
                    made = [dataclasses.replace(o, partitions=(leaf_ids[leaf],)) for o in made]
                objs += made
            for o in objs:
                if hasattr(rp, "write_sketch"):
                    rp.write_sketch(o)
                if _hook is not None:
                    _hook(o)
        except BaseException:
            _delete(store, pool_id, objs)
            raise
        yield pa.RecordBatch.from_pydict(
            {"object": [json.dumps(o.to_json()) for o in objs]},
            schema=pa.schema([pa.field("object", pa.string())]),
        )

    with translate_errors("spark write"), _batch_rows(spark, WRITE_BATCH_ROWS):
        rows = ordered.mapInArrow(task, _OUT).collect()
    return [DataObject.from_json(json.loads(r[0])) for r in rows]


#: rows per Arrow batch Spark hands a writing task (Spark's default, 10,000, costs
#: a per-batch overhead that shows in bulk imports)
WRITE_BATCH_ROWS = 131072


@contextlib.contextmanager
def _batch_rows(spark: SparkSession, n: int) -> Iterator[None]:
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key, None)
    spark.conf.set(key, str(n))
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


def _delete(store: Any, pool_id: str, objs: Sequence[DataObject]) -> None:
    from limno.pools.records.objects import data_path

    for o in objs:
        with contextlib.suppress(Exception):  # best effort: vacuum reclaims what is left
            store.delete(data_path(pool_id, o.id))


def write(
    df: DataFrame,
    pool: RecordPool | str,
    branch: str | None = None,
    message: str = "",
    author: str | None = None,
    meta: Mapping[str, Any] | None = None,
    *,
    lake: Lake | str | None = None,
    partitions: int | None = None,
    spark: SparkSession | None = None,
    _hook: ObjectHook | None = None,
) -> Commit:
    """Write a DataFrame to ``pool@branch`` as one atomic commit (default branch ``main``).

    ``pool`` is a :class:`~limno.pools.records.pool.RecordPool` or a name
    (``"logs"``, ``"logs@dev"``) of the lake ``lake`` (default: ``LIMNO_LAKE``).
    """
    rp, named = open_pool(pool, lake)
    branch = branch or named or "main"
    rp.versioned.head(branch)  # a missing branch fails before any work
    objs = write_objects(df, rp, branch=branch, partitions=partitions, spark=spark, _hook=_hook)
    if not objs:
        raise InvalidInputError("no records to load")
    return commit_objects(rp, branch, objs, message=message, author=author, meta=meta)


def commit_objects(
    pool: RecordPool,
    branch: str,
    objs: Sequence[DataObject],
    message: str = "",
    author: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Commit:
    """One commit adding objects already written (the driver's half of a bulk import)."""
    rows = sum(o.rows for o in objs)
    return pool.versioned.commit(
        branch,
        [Action("add", o.id, o.to_json()) for o in objs],
        message=message or f"load {rows} record(s)",
        author=author,
        meta=meta,
    )


# -- compaction as Spark tasks -----------------------------------------------------------

#: merges one group of objects into new (written, uncommitted) objects, in a task
Merge = Callable[["RecordPool", Sequence[DataObject]], Sequence[DataObject]]


def merge_sorted_objects(pool: RecordPool, objs: Sequence[DataObject]) -> list[DataObject]:
    """The default merge: the group's rows merged in key order (merge-on-read, the
    pool's iterators applied) and written as sorted objects of the target size."""
    from limno.pools.records import _scan
    from limno.pools.records._schema import conform, unify
    from limno.pools.records._writer import write_sorted

    target = unify(o.schema for o in objs if o.schema_b64)
    raw = _scan.scan(pool.storage, pool.id, objs, pool.key)
    stream = pool.iterated(raw) if hasattr(pool, "iterated") else raw
    merged = (conform(t, unify([target, t.schema])) for t in stream)
    return write_sorted(pool.storage, pool.id, merged, pool.key, pool.config.target_size)


def merge_groups(
    pool: RecordPool,
    groups: Sequence[Sequence[DataObject]],
    merge: Merge = merge_sorted_objects,
    *,
    spark: SparkSession | None = None,
) -> list[list[DataObject]]:
    """Run ``merge`` on each group of objects as a Spark task (one task per group);
    the new objects of each group, in group order. Nothing is committed: compaction
    commits each group's inputs out and outputs in with its own protocol, so
    ``compact --engine spark`` runs the same jobs as the local engine, on Spark.

    ``merge`` (picklable) gets the pool opened in the task and the group's objects.
    """
    spark = session(spark=spark)
    spec = LakeSpec.of(pool.storage)
    pool_id = pool.id
    if not groups:
        return []
    frozen = [list(g) for g in groups]
    jobs = spark.createDataFrame([(i,) for i in range(len(frozen))], "job int")
    jobs = jobs.repartition(len(frozen), "job")

    def task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from limno.lake import Lake

        store = spec.open()
        rp = Lake(store).pool(pool_id)
        for batch in batches:
            for job in batch.column(0).to_pylist():
                made = list(merge(rp, frozen[job]))
                yield pa.RecordBatch.from_pydict(
                    {"job": [job] * len(made), "object": [json.dumps(o.to_json()) for o in made]},
                    schema=pa.schema([("job", pa.int32()), ("object", pa.string())]),
                )

    with translate_errors("spark compaction"):
        rows = jobs.mapInArrow(task, "job int, object string").collect()
    out: list[list[DataObject]] = [[] for _ in frozen]
    for r in rows:
        out[r[0]].append(DataObject.from_json(json.loads(r[1])))
    return out
