"""Reading snapshots as Spark DataFrames: a native Parquet scan of the object list.

A snapshot is a list of data objects whose Arrow schemas limno already knows (they
are in the snapshot, so planning reads no data). The DataFrame of a snapshot has
the snapshot's unified schema (limno's widening rule, columns in first-seen
order), exactly what the local engine reads:

* objects are grouped by schema; a group that Spark reads natively and whose
  conversion to the unified schema is one of Spark's exact casts (see
  :mod:`._types`) is one ``spark.read.schema(...).parquet(paths)`` scan followed
  by a projection (missing columns as typed nulls, casts where types differ). The
  common case, every object of one shape, is a single plain Parquet scan;
* any other object (text renderings of mixed types, struct evolution, types
  Spark's Parquet reader lacks) is read by limno's Arrow code (``conform``) inside
  a Spark task, one task per few objects, so even these answers are identical.

Key ranges prune objects by their recorded min/max key before anything is read,
then filter rows in Spark (keyless rows are outside every range).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from limno.core.refs import parse_pool_ref
from limno.data import scan as _scan
from limno.data.keys import PoolKey
from limno.data.objects import DataObject, data_path
from limno.data.parquet import open_parquet
from limno.data.schema import conform, unify
from limno.errors import InvalidInputError
from limno.lake import Lake
from limno.lake import Lake as LakeCls
from limno.pools.records.key_bounds import key_bound
from limno.storage import Storage

from ._connect import default_parallelism
from ._session import LakeSpec, hadoop_uri, session
from ._types import castable, native, spark_arrow_schema, spark_type

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from limno.lake import Lake
    from limno.pools.records.pool import RecordPool

__all__ = ["ParquetPart", "frame", "key_columns", "open_pool", "read", "scan"]

#: hidden columns that carry an object's position in the snapshot and a row's
#: position in its object, for scans whose ties must break like the local merge
OBJ_COL = "__limno_object"
ROW_COL = "__limno_row"


@dataclass(frozen=True)
class ParquetPart:
    """A Parquet file of the lake (path relative to the root) and its Arrow schema."""

    path: str
    schema: pa.Schema
    ordinal: int = 0


def open_pool(
    pool: RecordPool | str, lake: Lake | str | None = None
) -> tuple[RecordPool, str | None]:
    """A pool object and the ref named with it (``"logs@dev"`` gives ``dev``)."""

    if not isinstance(pool, str):
        return pool, None
    name, ref = parse_pool_ref(pool)
    opened = lake if isinstance(lake, LakeCls) else LakeCls.open(lake)
    return opened.pool(name), ref


def frame(
    spark: SparkSession,
    storage: Storage,
    parts: Sequence[ParquetPart],
    target: pa.Schema | None = None,
    positions: bool = False,
) -> DataFrame:
    """One DataFrame of ``parts`` under ``target`` (default: their unified schema)."""
    from pyspark.sql import functions as F

    if target is None:
        target = unify(p.schema for p in parts)
    groups: dict[bytes, list[ParquetPart]] = {}
    for p in parts:
        groups.setdefault(p.schema.serialize().to_pybytes(), []).append(p)
    frames: list[DataFrame] = []
    fallback: list[ParquetPart] = []
    for members in groups.values():
        schema = members[0].schema
        if _native_group(schema, target):
            frames.append(_native(spark, storage, members, schema, target, positions))
        else:
            fallback.extend(members)
    if fallback:
        frames.append(_arrow_read(spark, storage, fallback, target, positions))
    if not frames:
        empty = spark.createDataFrame([], _with_positions(target, positions))
        return empty
    df = functools.reduce(lambda a, b: a.unionByName(b), frames)
    cols = [F.col(_q(f.name)) for f in target]
    if positions:
        cols += [F.col(OBJ_COL), F.col(ROW_COL)]
    return df.select(*cols)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _with_positions(target: pa.Schema, positions: bool) -> Any:
    from pyspark.sql import types as T

    from ._types import spark_schema

    schema = spark_schema(target)
    if positions:
        schema = schema.add(OBJ_COL, T.IntegerType(), False).add(ROW_COL, T.LongType(), False)
    return schema


def _native_group(schema: pa.Schema, target: pa.Schema) -> bool:
    readable = [f for f in schema if not pa.types.is_null(f.type)]
    if not readable:
        return False
    return all(native(f.type) and castable(f.type, target.field(f.name).type) for f in readable)


def _native(
    spark: SparkSession,
    storage: Storage,
    members: Sequence[ParquetPart],
    schema: pa.Schema,
    target: pa.Schema,
    positions: bool,
) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    readable = pa.schema([f for f in schema if not pa.types.is_null(f.type)])
    read_schema = T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in readable])
    paths = [hadoop_uri(storage, p.path) for p in members]
    df = spark.read.schema(read_schema).parquet(*paths)
    cols: list[Column] = []
    for f in target:
        want = spark_type(f.type)
        if f.name not in readable.names:
            cols.append(F.lit(None).cast(want).alias(f.name))
        elif read_schema[f.name].dataType == want:
            cols.append(F.col(_q(f.name)))
        else:
            cols.append(F.col(_q(f.name)).cast(want).alias(f.name))
    if positions:
        names = F.create_map(
            *[x for p in members for x in (F.lit(p.path.rsplit("/", 1)[-1]), F.lit(p.ordinal))]
        )
        cols.append(F.element_at(names, F.col("_metadata.file_name")).cast("int").alias(OBJ_COL))
        cols.append(F.col("_metadata.row_index").cast("long").alias(ROW_COL))
    return df.select(*cols)


def _arrow_read(
    spark: SparkSession,
    storage: Storage,
    members: Sequence[ParquetPart],
    target: pa.Schema,
    positions: bool,
) -> DataFrame:
    """Objects read by limno's Arrow code in Spark tasks (exact widening)."""
    spec = LakeSpec.of(storage)
    out = spark_arrow_schema(target)
    if positions:
        out = out.append(pa.field(OBJ_COL, pa.int32(), False))
        out = out.append(pa.field(ROW_COL, pa.int64(), False))
    rows = [(p.path, p.ordinal) for p in members]
    parallel = max(1, min(len(rows), default_parallelism(spark)))
    paths = spark.createDataFrame(rows, "path string, ordinal int").repartition(parallel)

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:

        store = spec.open()
        for batch in batches:
            for path, ordinal in zip(
                batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True
            ):
                table = conform(open_parquet(store, path).read(), target)
                if positions:
                    n = table.num_rows
                    table = table.append_column(OBJ_COL, pa.array([ordinal] * n, pa.int32()))
                    table = table.append_column(ROW_COL, pa.array(range(n), pa.int64()))
                yield from table.cast(out, safe=False).to_batches(max_chunksize=65536)

    return paths.mapInArrow(read, _with_positions(target, positions))


# -- pools -----------------------------------------------------------------------------


def object_parts(pool: RecordPool, objs: Sequence[DataObject]) -> list[ParquetPart]:
    return [
        ParquetPart(data_path(pool.id, o.id), o.schema, i)
        for i, o in enumerate(objs)
        if o.schema_b64
    ]


def read(
    pool: RecordPool | str,
    ref: str | None = None,
    start: Any = None,
    end: Any = None,
    *,
    lake: Lake | str | None = None,
    spark: SparkSession | None = None,
    as_of: Any = None,
) -> DataFrame:
    """A ref of a pool as a DataFrame (default: the pool's ``main``, or ``pool@ref``).

    ``start`` (inclusive) and ``end`` (exclusive) bound the key, in the pool's
    order, like ``scan --from/--to``: objects whose key range cannot match are
    never opened, keyless records are left out. Without bounds every record of the
    snapshot is there. Columns are the snapshot's unified schema.
    """
    rp, named = open_pool(pool, lake)
    df, _ = _snapshot(rp, ref if ref is not None else named, start, end, spark, as_of, False)
    return df


def _snapshot(
    rp: RecordPool,
    ref: str | None,
    start: Any,
    end: Any,
    spark: SparkSession | None,
    as_of: Any,
    positions: bool,
) -> tuple[DataFrame, pa.Schema]:
    spark = session(spark=spark)
    objs = rp.objects(ref, as_of)
    target = unify(o.schema for o in objs if o.schema_b64)
    parts = object_parts(rp, objs)
    bounded = start is not None or end is not None
    lo = hi = None
    if bounded:
        types = rp.key_types(objs)
        lo, hi = key_bound(rp.key, start, types), key_bound(rp.key, end, types)
        lo_sk = None if lo is None else rp.key.sort_key(lo)
        hi_sk = None if hi is None else rp.key.sort_key(hi)
        keep = {data_path(rp.id, o.id) for o in objs if o.overlaps(rp.key, lo_sk, hi_sk)}
        parts = [p for p in parts if p.path in keep]
    if rp.iterators or any(o.clip is not None for o in objs):
        # iterators (dedup, aggregation, age-off) and objects clipped by a partition
        # split need limno's merge-on-read: one task per cluster of overlapping objects
        return _merged(spark, rp, objs, target, lo, hi, positions), target
    df = frame(spark, rp.storage, parts, target, positions=positions)
    if bounded:
        cols = key_columns(rp.key, target)
        cond = ~_keyless(cols)
        if lo is not None:
            cond = cond & _compare(cols, rp.key, lo, target)
        if hi is not None:
            cond = cond & ~_compare(cols, rp.key, hi, target)
        df = df.filter(cond)
    return df, target


def _merged(
    spark: SparkSession,
    rp: RecordPool,
    objs: Sequence[DataObject],
    target: pa.Schema,
    lo: tuple[Any, ...] | None,
    hi: tuple[Any, ...] | None,
    positions: bool,
) -> DataFrame:
    """A snapshot read by limno's merge-on-read (and the pool's iterators), in Spark
    tasks: one per cluster of objects whose key ranges overlap."""

    clusters = _scan.plan(objs, rp.key, lo, hi)
    spec = LakeSpec.of(rp.storage)
    pool_id, key = rp.id, rp.key
    out = spark_arrow_schema(target)
    if positions:
        out = out.append(pa.field(OBJ_COL, pa.int32(), False))
        out = out.append(pa.field(ROW_COL, pa.int64(), False))
    schema = _with_positions(target, positions)
    if not clusters:
        return spark.createDataFrame([], schema)
    parallel = max(1, min(len(clusters), default_parallelism(spark)))
    jobs = spark.createDataFrame([(i,) for i in range(len(clusters))], "cluster int")

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:

        store = spec.open()
        pool = Lake(store).pool(pool_id)
        for batch in batches:
            for c in batch.column(0).to_pylist():
                rows = 0
                raw = _scan.scan(store, pool_id, clusters[c], key, lo, hi)
                for t in pool.iterated(raw):
                    t = conform(t, unify([target, t.schema]))
                    t = t.select(target.names)
                    if positions:
                        n = t.num_rows
                        t = t.append_column(OBJ_COL, pa.array([c] * n, pa.int32()))
                        t = t.append_column(ROW_COL, pa.array(range(rows, rows + n), pa.int64()))
                        rows += n
                    yield from t.cast(out, safe=False).to_batches(max_chunksize=65536)

    return jobs.repartition(parallel).mapInArrow(read, schema)


def scan(
    pool: RecordPool | str,
    ref: str | None = None,
    start: Any = None,
    end: Any = None,
    order: str = "asc",
    limit: int | None = None,
    *,
    lake: Lake | str | None = None,
    spark: SparkSession | None = None,
    as_of: Any = None,
) -> DataFrame:
    """A sorted scan as a DataFrame, in exactly the order of ``RecordPool.scan``.

    Rows with equal keys keep the local merge's order (object order, then row
    order); keyless records come last (first when ``order="desc"``).
    """
    from pyspark.sql import functions as F

    if order not in ("asc", "desc"):
        raise InvalidInputError(f"order must be asc or desc, not {order!r}")
    if limit is not None and limit < 0:
        raise InvalidInputError("limit must not be negative")
    rp, named = open_pool(pool, lake)
    at = ref if ref is not None else named
    df, target = _snapshot(rp, at, start, end, spark, as_of, True)
    cols = key_columns(rp.key, target)
    keyless = _keyless(cols)
    reverse = order == "desc"
    sort: list[Column] = [keyless.desc() if reverse else keyless.asc()]
    # keyless records tie on the key (like PoolKey.key_table nulls them out)
    for c, f in zip([F.when(~keyless, c) for c in cols], rp.key.fields, strict=True):
        down = f.descending != reverse
        sort.append(c.desc_nulls_last() if down else c.asc_nulls_last())
    for name in (OBJ_COL, ROW_COL):
        sort.append(F.col(name).desc() if reverse else F.col(name).asc())
    out = df.orderBy(*sort)
    if limit is not None:
        out = out.limit(limit)
    return out.select(*[F.col(_q(n)) for n in target.names])


# -- key expressions -------------------------------------------------------------------


def _field_type(schema: pa.Schema, path: Sequence[str]) -> pa.DataType | None:
    if path[0] not in schema.names:
        return None
    typ: pa.DataType = schema.field(path[0]).type
    for part in path[1:]:
        if not pa.types.is_struct(typ) or typ.get_field_index(part) < 0:
            return None
        typ = typ.field(part).type
    return typ


def key_columns(key: PoolKey, schema: pa.Schema) -> list[Column]:
    """Each key field as a Spark column of a frame with ``schema`` (null where absent)."""
    from pyspark.sql import functions as F

    out: list[Column] = []
    for f in key.fields:
        typ = _field_type(schema, f.path)
        if typ is None or pa.types.is_null(typ):
            out.append(F.lit(None).cast("string"))
        else:
            col = F.col(_q(f.path[0]))
            for part in f.path[1:]:
                col = col.getField(part)
            out.append(col)
    return out


def _keyless(cols: Sequence[Column]) -> Column:
    return functools.reduce(lambda a, b: a | b, [c.isNull() for c in cols])


def _lit(value: Any, typ: pa.DataType | None) -> Column:
    import datetime as dt

    from pyspark.sql import functions as F

    if isinstance(value, dt.datetime) and typ is not None and pa.types.is_timestamp(typ):
        return F.lit(value.isoformat()).cast(spark_type(typ))
    if isinstance(value, bytes):
        return F.lit(bytearray(value))
    return F.lit(value)


def _compare(
    cols: Sequence[Column], key: PoolKey, bound: tuple[Any, ...], schema: pa.Schema
) -> Column:
    """``key[:len(bound)] >= bound`` in the pool's order (per-field directions)."""
    from pyspark.sql import functions as F

    result: Column = F.lit(True)
    for i in reversed(range(min(len(bound), len(cols)))):
        f = key.fields[i]
        v = _lit(bound[i], _field_type(schema, f.path))
        after = cols[i] < v if f.descending else cols[i] > v
        result = after | ((cols[i] == v) & result)
    return result
