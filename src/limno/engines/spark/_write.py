"""Writing DataFrames as data objects: bulk import on Spark, one commit from the driver.

The plan (Sleeper's bulk import): range-partition the rows by the pool key and
sort each partition by the key in limno's order (descending fields, NaN after
numbers, keyless rows last; ties in input order for loads, and for DataFrames
where asked or where the pool has iterators). The range bounds come from a sample
of the key columns only (:func:`sample_bounds`, ordered by limno), cut again at
every leaf partition's lower bound so that each range lies in one leaf; rows reach
their range through a binary search of ``CASE`` expressions (``repartitionById``).
(Without a row estimate Spark's own range partitioner samples instead.) Then, by
default, Spark's own Parquet writer writes each sorted range and a second, light
job turns each file into a data object (metadata from its key columns, a key
sketch, a KSUID name): see :mod:`._native`. No row is copied from the JVM to
Python.

When Spark cannot store exactly what limno would (some types, a typed pool
schema, a non-UTC session time zone with timestamps...), or with
``native=False``, each task instead hands its sorted range to limno's own writer
(:func:`~limno.data.writer.write_sorted`: KSUID names, small row groups
with statistics and a page index, objects cut at the pool's target size, the
metadata of each: rows, size, min/max key, keyless count, Arrow schema).

Either way tasks return only metadata; the driver collects it and makes exactly
one commit. Until then nothing is visible:

* a failed task attempt deletes what it uploaded (best effort), and its output
  never reaches the driver: Spark hands the driver one successful attempt per
  partition (and its job commit protocol publishes only those attempts' files),
  so objects of failed or speculative attempts are never referenced;
* a failed or killed job commits nothing; what it did upload is unreferenced,
  under the pool's data prefix, and vacuum reclaims it after the grace period.

Keyless records (a key field missing or null) sort after every keyed record, so
they land in the last range(s), at the end of their objects, as limno expects.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from limno.core.commits import Commit
from limno.data import scan as _scan
from limno.data.keys import KeyField
from limno.data.keys import PoolKey as PoolKeyCls
from limno.data.objects import DataObject
from limno.data.schema import conform, unify
from limno.data.writer import delete_objects, write_sorted
from limno.errors import InvalidInputError
from limno.lake import Lake
from limno.pools.records.compaction import merge_clipped

from ._connect import default_parallelism, plan_stats
from ._read import key_columns, open_pool
from ._session import LakeSpec, session, session_conf, translate_errors

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from limno.data.keys import PoolKey
    from limno.lake import Lake
    from limno.pools.records.pool import RecordPool

__all__ = [
    "commit_objects",
    "compaction_runner",
    "merge_groups",
    "merge_sorted_objects",
    "sample_bounds",
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
#: hidden column: a row's position in the DataFrame (ties keep the input order)
SEQ_COL = "__limno_seq"

log = logging.getLogger("limno.spark")


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
    bounds: Sequence[tuple[Any, ...]] | None = None,
) -> DataFrame:
    """``df`` range-partitioned into ``partitions`` ranges of the key, each sorted.

    With ``bounds`` (from :func:`sample_bounds`: ascending in the pool's order) the
    ranges are cut there and at the lower bound of every leaf partition of
    ``leaves`` (in key order), so that no range straddles two leaves; rows go to
    their range by a comparison tree (``repartitionById``). Without, Spark's range
    partitioner samples the key itself; with more than one leaf a hidden column
    :data:`LEAF_COL` then holds each row's leaf index and leads the order, so a
    task's stream changes leaf only at a leaf boundary. ``tiebreak`` columns order
    rows with equal keys (a load keeps its input order).
    """
    from pyspark.sql import functions as F

    schema = _arrow_key_schema(df)
    cols = key_columns(key, schema)
    keyless = _any_null(cols)
    order: list[Column] = []
    cuts: list[tuple[Any, ...]] | None = None
    if bounds is not None:
        cuts = _cuts(key, bounds, [tuple(leaf.lo) for leaf in leaves[1:]])
    elif len(leaves) > 1:
        index: Column = F.lit(0)
        for leaf in leaves[1:]:
            at_or_after = _at_or_after(cols[:1], key, tuple(leaf.lo), schema)
            index = index + F.when(at_or_after, 1).otherwise(0)
        df = df.withColumn(LEAF_COL, F.when(keyless, len(leaves) - 1).otherwise(index))
        order.append(F.col(LEAF_COL).asc())
    # Keyless records sort after every keyed one and tie with each other (PoolKey.key_table
    # nulls every field of them): with one field that is "nulls last"; with more, every
    # field of a keyless record is nulled. The first field leads the order as it is, so
    # Spark's sort compares it by its prefix (fast, a radix sort) rather than row by row.
    fields = cols if len(cols) == 1 else [F.when(~keyless, c) for c in cols]
    for c, f in zip(fields, key.fields, strict=True):
        if f.descending and _floating(schema, f.path):
            # Arrow puts NaN after every number in both directions, Spark first when
            # descending: numbers, then NaN, then nulls
            order.append(F.when(c.isNull(), 2).when(F.isnan(c), 1).otherwise(0).asc())
        order.append(c.desc_nulls_last() if f.descending else c.asc_nulls_last())
    # equal keys never straddle two ranges: ties are broken only within a range
    ties = [F.col(name).asc() for name in tiebreak]
    if cuts is not None:
        # keyless records after every range: in the last one
        index = F.when(keyless, len(cuts)).otherwise(_range_index(cols, key, cuts, schema))
        parted = df.repartitionById(len(cuts) + 1, index)
    else:
        parted = df.repartitionByRange(partitions, *order)
    return parted.sortWithinPartitions(*order, *ties)


def _cuts(
    key: PoolKey, bounds: Sequence[tuple[Any, ...]], leaf_bounds: Sequence[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """The range boundaries: ``bounds`` and the leaves' lower bounds, in key order, once."""
    out: list[tuple[Any, ...]] = []
    for b in sorted([*bounds, *leaf_bounds], key=key.sort_key):
        if not out or key.sort_key(out[-1]) != key.sort_key(b):
            out.append(b)
    return out


def _range_index(
    cols: Sequence[Column], key: PoolKey, cuts: Sequence[tuple[Any, ...]], schema: pa.Schema
) -> Column:
    """The number of ``cuts`` a keyed row is at or after: a binary search (a tree of
    ``CASE`` expressions, so a row makes about log2(len(cuts)) comparisons)."""
    from pyspark.sql import functions as F

    def node(lo: int, hi: int) -> Column:  # the index lies in [lo, hi]
        if lo == hi:
            return F.lit(lo)
        mid = (lo + hi + 1) // 2
        after = _at_or_after(cols, key, cuts[mid - 1], schema)
        return F.when(after, node(mid, hi)).otherwise(node(lo, mid - 1))

    return node(0, len(cuts))


def _at_or_after(
    cols: Sequence[Column], key: PoolKey, bound: tuple[Any, ...], schema: pa.Schema
) -> Column:
    """``key[:len(bound)] >= bound`` in the pool's order for keyed rows (per-field
    directions; NaN after every number in both directions, like Arrow)."""
    from pyspark.sql import functions as F

    from ._read import _field_type, _lit

    result: Column = F.lit(True)
    for i in reversed(range(min(len(bound), len(cols)))):
        f, c = key.fields[i], cols[i]
        v = _lit(bound[i], _field_type(schema, f.path))
        after = c < v if f.descending else c > v
        if f.descending and _floating(schema, f.path):
            after = F.isnan(c) | after
        result = after | ((c == v) & result)
    return result


def _floating(schema: pa.Schema, path: Sequence[str]) -> bool:
    from ._read import _field_type

    typ = _field_type(schema, path)
    return typ is not None and bool(pa.types.is_floating(typ))


#: most key ranges limno samples the bounds of itself (beyond: Spark's range partitioner)
MAX_SAMPLED_RANGES = 512
#: keys sampled per range (Spark's range partitioner: 100, oversampled 3 times) ...
SAMPLE_PER_RANGE = 300
#: ... and in all, at least and at most
SAMPLE_MIN, SAMPLE_MAX = 3000, 1_000_000
SAMPLE_SEED = 0x5EED


def sample_bounds(df: DataFrame, key: PoolKey, partitions: int) -> list[tuple[Any, ...]] | None:
    """Bounds of ``partitions`` key ranges of about equal rows, from a sample of the key.

    Like Spark's range partitioner, but the sample reads the key columns only, and
    its keys are ordered by limno (descending fields, NaN after numbers). None when
    Spark has no row estimate for ``df`` (then its own range partitioner samples).
    """

    if partitions <= 1:
        return []
    rows = estimated_rows(df)
    if rows is None:
        return None
    want = min(SAMPLE_MAX, max(SAMPLE_MIN, SAMPLE_PER_RANGE * partitions))
    cols = key_columns(key, _arrow_key_schema(df))
    names = [f"k{i}" for i in range(len(cols))]
    sample = df.select(*[c.alias(n) for c, n in zip(cols, names, strict=True)])
    if want < rows:
        sample = sample.sample(fraction=want / rows, seed=SAMPLE_SEED)
    table = sample.toArrow()
    flat = PoolKeyCls(
        tuple(KeyField((n,), f.descending) for n, f in zip(names, key.fields, strict=True))
    )
    keyed = table.filter(flat.keyed_mask(table))
    if not keyed.num_rows:
        return []
    keyed = keyed.take(flat.sort_indices(keyed))
    keys = flat.key_table(keyed)
    out: list[tuple[Any, ...]] = []
    for i in range(1, partitions):
        b = flat.row_key(keys, i * keyed.num_rows // partitions)
        if b is None or any(isinstance(v, float) and v != v for v in b):
            continue  # NaN sorts after every number: not a useful bound
        if not out or key.sort_key(out[-1]) != key.sort_key(b):
            out.append(b)
    return out


def estimated_rows(df: DataFrame) -> int | None:
    """Spark's estimate of the DataFrame's rows: its row count where the plan has one,
    else its estimated size over the row size of its schema (None when neither)."""
    size, rows, width = plan_stats(df)
    if rows is not None:
        return rows
    if size is None or width is None:
        return None
    return max(1, size // max(1, width))


def _any_null(cols: Sequence[Column]) -> Column:
    out = cols[0].isNull()
    for c in cols[1:]:
        out = out | c.isNull()
    return out


def estimated_bytes(df: DataFrame) -> int | None:
    """Spark's estimate of the DataFrame's size (None when it has none)."""
    return plan_stats(df)[0]


def _partitions(df: DataFrame, target_size: int, spark: SparkSession) -> int:
    size = estimated_bytes(df)
    if size is None:
        return default_parallelism(spark)
    n = math.ceil(size / target_size)
    if size >= PARALLEL_BYTES:
        n = max(n, default_parallelism(spark))
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
    native: bool = True,
    keep_order: bool | None = None,
    _hook: ObjectHook | None = None,
) -> list[DataObject]:
    """Write ``df`` as sorted, non-overlapping data objects of ``pool`` (uncommitted).

    Returns the objects in key order. ``partitions`` fixes the number of key
    ranges (default: from Spark's size estimate and the pool's target size). When
    ``branch`` has leaf partitions, every object lies in one leaf and references it.
    Rows with equal keys are stored in the order of the ``tiebreak`` columns
    (which are not stored), else with ``keep_order`` in their order in ``df``
    (partition by partition), else in no particular order, like Spark's own sort.
    ``keep_order=None`` keeps the order only in pools with iterators, where the
    newest of equal keys wins. Keeping it costs Spark's radix sort (about 15%).

    With ``native`` (the default) Spark writes the sorted ranges as Parquet itself
    (:mod:`._native`: one object per range) whenever that stores exactly what
    limno's writer would; otherwise, or with ``native=False``, each task hands its
    rows to limno's Python writer (objects cut at the pool's target size).
    """
    from pyspark.sql import functions as F

    from . import _native

    spark = session(spark=spark)
    key = pool.key
    _check_key_types(df, key)
    leaves: list[Any] = []
    tree: Any = None
    if branch is not None and hasattr(pool, "partitions"):
        tree = pool.partitions(branch)
        leaves = list(tree.leaves()) if tree.stored else []
    n = partitions or _partitions(df, pool.config.target_size, spark)
    data_schema = df.drop(*tiebreak).schema if tiebreak else df.schema
    bounds = None
    if n + len(leaves) <= MAX_SAMPLED_RANGES and hasattr(df, "repartitionById"):
        with translate_errors("spark write"):
            bounds = sample_bounds(df, key, n)
    if keep_order is None:  # where the order of equal keys decides what a read returns
        keep_order = bool(pool.config.settings.iterators)
    if not tiebreak and keep_order:
        df = df.withColumn(SEQ_COL, F.monotonically_increasing_id())
        tiebreak = (SEQ_COL,)
    ordered = sorted_by_key(df, key, n, leaves, tiebreak, bounds)
    # rows carry their leaf index, or else every range lies in one leaf
    leaf_col = LEAF_COL if LEAF_COL in ordered.columns else None
    leaf_ids = [leaf.id for leaf in leaves] if leaf_col else []
    if native:
        reason = _native.unsupported(data_schema, pool, spark, check_schema)
        if reason is None:
            try:
                objs = _native.write_native(
                    ordered,
                    data_schema,
                    pool,
                    spark,
                    drop=tiebreak,
                    leaf_col=leaf_col,
                    leaf_ids=leaf_ids,
                    hook=_hook,
                )
                return _in_leaves(objs, tree, leaf_col)
            except _native.SchemaMismatch as e:
                reason = str(e)
        log.info("spark write: limno's writer instead of Spark's (%s)", reason)
    hidden = [*tiebreak, LEAF_COL]
    spec = LakeSpec.of(pool.storage)
    pool_id, target_size = pool.id, pool.config.target_size
    typed = pool.schema if check_schema else None

    def task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import dataclasses
        import itertools

        store = spec.open()

        def pieces() -> Iterator[tuple[int, pa.Table]]:
            rows = 0
            for batch in batches:
                if not batch.num_rows:
                    continue
                table = pa.Table.from_batches([batch])
                if leaf_col is not None:
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
                if _hook is not None:
                    _hook(o)
        except BaseException:
            delete_objects(store, pool_id, objs)  # best effort: vacuum gets the rest
            raise
        yield pa.RecordBatch.from_pydict(
            {"object": [json.dumps(o.to_json()) for o in objs]},
            schema=pa.schema([pa.field("object", pa.string())]),
        )

    batches = {"spark.sql.execution.arrow.maxRecordsPerBatch": str(WRITE_BATCH_ROWS)}
    with translate_errors("spark write"), session_conf(spark, batches):
        rows = ordered.mapInArrow(task, _OUT).collect()
    objs = [DataObject.from_json(json.loads(r[0])) for r in rows]
    return _in_leaves(objs, tree, leaf_col)


def _in_leaves(objs: list[DataObject], tree: Any, leaf_col: str | None) -> list[DataObject]:
    """Objects of ranges cut at the leaves' bounds, each pointed at its leaf."""
    if leaf_col is not None or tree is None:
        return objs  # referenced by the leaf index their rows carried (or no leaves)
    return list(tree.referencing(objs))


#: rows per Arrow batch Spark hands a writing task (Spark's default, 10,000, costs
#: a per-batch overhead that shows in bulk imports)
WRITE_BATCH_ROWS = 131072


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
    native: bool = True,
    keep_order: bool | None = None,
    _hook: ObjectHook | None = None,
) -> Commit:
    """Write a DataFrame to ``pool@branch`` as one atomic commit (default branch ``main``).

    ``pool`` is a :class:`~limno.pools.records.pool.RecordPool` or a name
    (``"logs"``, ``"logs@dev"``) of the lake ``lake`` (default: ``LIMNO_LAKE``).
    ``native=False`` writes the objects with limno's Python writer even where
    Spark's own Parquet writer could; ``keep_order`` stores rows with equal keys in
    the DataFrame's order (default: only in pools with iterators). See
    :func:`write_objects`.
    """
    rp, named = open_pool(pool, lake)
    branch = branch or named or "main"
    rp.versioned.writable_head(branch)  # a missing or protected branch fails before any work
    with rp.versioned.writing("spark write") as since:
        objs = write_objects(
            df,
            rp,
            branch=branch,
            partitions=partitions,
            spark=spark,
            native=native,
            keep_order=keep_order,
            _hook=_hook,
        )
        if not objs:
            raise InvalidInputError("no records to load")
        return commit_objects(
            rp, branch, objs, message=message, author=author, meta=meta, since=since
        )


def commit_objects(
    pool: RecordPool,
    branch: str,
    objs: Sequence[DataObject],
    message: str = "",
    author: str | None = None,
    meta: Mapping[str, Any] | None = None,
    since: int | None = None,
) -> Commit:
    """One commit adding objects already written (the driver's half of a bulk import).

    Keys that cannot sort with the branch's (see :meth:`RecordPool.check_key_types`)
    are refused, and the objects deleted; the check runs again against the snapshot
    the commit finally lands on. ``since`` is the gc ticket read before the objects
    were written (see :mod:`limno.core.gc`).
    """
    try:
        pool.check_key_types(pool.snapshot(branch)[0], objs)
    except InvalidInputError:
        delete_objects(pool.storage, pool.id, objs)
        raise
    return pool.commit_objects(objs, branch, message, author, meta, since)


# -- compaction as Spark tasks -----------------------------------------------------------

#: merges one group of objects into new (written, uncommitted) objects, in a task
Merge = Callable[["RecordPool", Sequence[DataObject]], Sequence[DataObject]]


def merge_sorted_objects(pool: RecordPool, objs: Sequence[DataObject]) -> list[DataObject]:
    """The default merge: the group's rows merged in key order (merge-on-read, the
    pool's iterators applied) and written as sorted objects of the target size."""

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


def compaction_runner(pool: RecordPool, groups: list[list[DataObject]]) -> list[list[DataObject]]:
    """A compaction runner (``RecordPool.compact(runner=...)``): each job's merge as a
    Spark task, the commit on the driver as for a local compaction."""
    return merge_groups(pool, groups, merge_clipped)
