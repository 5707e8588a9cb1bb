"""Arrow types (what limno stores and unifies) as Spark types, and which reads are native.

Every column of a pool has an Arrow type: the one limno's widening rule
(:mod:`limno.data.schema`) gives over the snapshot's objects. Spark holds
some Arrow types as others (unsigned integers as wider signed ones, ``uint64`` as
``decimal(20,0)``, every timestamp in microseconds, large strings as strings...):
:func:`spark_arrow_type` is the Arrow type Spark holds a type's values as, and
:func:`spark_type` the Spark type. :func:`native` tells whether Spark's Parquet
reader reads a stored type as exactly those values; :func:`castable` whether
Spark's own ``CAST`` from one stored type to the unified one gives the values
limno's rule does (numeric widening, date to timestamp, naive to zoned
timestamps, all in UTC). Objects that pass both are read by Spark's Parquet scan;
any other object is read by limno's Arrow code inside a Spark task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.types as pt

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = ["castable", "native", "spark_arrow_schema", "spark_arrow_type", "spark_schema"]


def _is_text(t: pa.DataType) -> bool:
    return bool(pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t))


def _is_bytes(t: pa.DataType) -> bool:
    return bool(
        pt.is_binary(t)
        or pt.is_large_binary(t)
        or pt.is_fixed_size_binary(t)
        or pt.is_binary_view(t)
    )


def _is_list(t: pa.DataType) -> bool:
    return bool(
        pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t) or pt.is_list_view(t)
    )


def spark_arrow_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark holds values of ``t`` as (Spark's Arrow form)."""
    if pt.is_dictionary(t):
        return spark_arrow_type(t.value_type)
    if isinstance(t, pa.ExtensionType):
        return spark_arrow_type(t.storage_type)
    if pt.is_uint8(t):
        return pa.int16()
    if pt.is_uint16(t):
        return pa.int32()
    if pt.is_uint32(t):
        return pa.int64()
    if pt.is_uint64(t):
        return pa.decimal128(20, 0)
    if pt.is_float16(t):
        return pa.float32()
    if pt.is_decimal(t):
        return pa.decimal128(t.precision, t.scale) if t.precision <= 38 else pa.string()
    if _is_text(t):
        return pa.string()
    if _is_bytes(t):
        return pa.binary()
    if pt.is_date(t):
        return pa.date32()
    if pt.is_timestamp(t):
        return pa.timestamp("us", "UTC" if t.tz else None)
    if pt.is_time(t):
        return pa.time64("us")
    if pt.is_duration(t):
        return pa.duration("us")
    if pt.is_struct(t):
        return pa.struct([pa.field(f.name, spark_arrow_type(f.type), True) for f in t])
    if _is_list(t):
        return pa.list_(spark_arrow_type(t.value_type))
    if pt.is_map(t):
        return pa.map_(spark_arrow_type(t.key_type), spark_arrow_type(t.item_type))
    return t


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, spark_arrow_type(f.type), True) for f in schema])


def spark_type(t: pa.DataType) -> DataType:
    """The Spark type of an Arrow type (after :func:`spark_arrow_type`)."""
    from pyspark.sql import types as T

    t = spark_arrow_type(t)
    simple: list[tuple[pa.DataType, DataType]] = [
        (pa.null(), T.NullType()),
        (pa.bool_(), T.BooleanType()),
        (pa.int8(), T.ByteType()),
        (pa.int16(), T.ShortType()),
        (pa.int32(), T.IntegerType()),
        (pa.int64(), T.LongType()),
        (pa.float32(), T.FloatType()),
        (pa.float64(), T.DoubleType()),
        (pa.string(), T.StringType()),
        (pa.binary(), T.BinaryType()),
        (pa.date32(), T.DateType()),
        (pa.timestamp("us"), T.TimestampNTZType()),
        (pa.timestamp("us", "UTC"), T.TimestampType()),
        (pa.time64("us"), T.TimeType(6)),
        (pa.duration("us"), T.DayTimeIntervalType(0, 3)),
    ]
    for arrow, spark in simple:
        if t == arrow:
            return spark
    if pt.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pt.is_struct(t):
        return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in t])
    if pt.is_list(t):
        return T.ArrayType(spark_type(t.value_type), True)
    if pt.is_map(t):
        return T.MapType(spark_type(t.key_type), spark_type(t.item_type), True)
    raise TypeError(f"no Spark type for Arrow type {t}")


def spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in schema])


def native(t: pa.DataType, top: bool = True) -> bool:
    """Whether Spark's Parquet reader reads a column stored as ``t`` as the values
    limno reads (an all-null top-level column is never read: it is a null literal)."""
    if pt.is_dictionary(t):
        return native(t.value_type, top)
    if pt.is_null(t):
        return top
    if (
        pt.is_boolean(t)
        or pt.is_integer(t)
        or pt.is_float32(t)
        or pt.is_float64(t)
        or _is_text(t)
        or _is_bytes(t)
        or pt.is_date(t)
    ):
        return True
    if pt.is_decimal(t):
        return bool(t.precision <= 38)
    if pt.is_timestamp(t):
        # nanoseconds are not a Spark type; pyarrow stores seconds as milliseconds
        return bool(t.unit != "ns")
    if pt.is_struct(t):
        return all(native(f.type, False) for f in t)
    if _is_list(t):
        return native(t.value_type, False)
    if pt.is_map(t):
        return native(t.key_type, False) and native(t.item_type, False)
    return False  # time, duration, float16, extension types...


def _numeric(t: pa.DataType) -> bool:
    return bool(pt.is_boolean(t) or pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t))


def castable(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether Spark's CAST from ``src`` to ``dst`` (their Spark forms) gives the values
    limno's :func:`~limno.data.schema.conform` does. Text renderings and
    nested types are left to limno's own code."""
    s, d = spark_arrow_type(src), spark_arrow_type(dst)
    if s == d:
        return True
    if _numeric(s) and _numeric(d) and not pt.is_boolean(d):
        return True
    if pt.is_date(s) and pt.is_timestamp(d):
        return True
    return bool(pt.is_timestamp(s) and pt.is_timestamp(d))
