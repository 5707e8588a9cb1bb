"""Schema unification: how records of different shapes share one Arrow schema.

A pool needs no schema. Every data object keeps the Arrow schema its records came
with, so two objects may disagree: a field may be missing from one, or be an int in
one and a string in another. Scans, merges and compaction must still see one table,
and the spec forbids dropping anything. This module is that one rule, in one place:

* :func:`widen` — the smallest type two types both convert to without losing values;
* :func:`unify` — a schema holding every field of many schemas (by name, first-seen
  order, types widened);
* :func:`conform` — convert a table to such a schema (reorder, add missing columns
  and struct fields as nulls, cast);
* :func:`infer_type`, :func:`coerce`, :func:`from_avro` — the same rule for records
  that arrive as Python values (JSON, Avro), so that every reader widens alike.

Widening rule (symmetric; ``null`` is the identity; equal types widen to themselves):

======================================  ===============================================
types                                   widen to
======================================  ===============================================
null + T                                T
T + T                                   T
bool, int8..int64, uint8..uint32 mixed  int64 (bool becomes 0/1)
uint64 + any other integer or bool      float64 (no integer type holds both ranges)
integer + float, float + other float    float64
decimal(p1,s1) + decimal(p2,s2)         decimal(max(p-s) + max(s), max(s)): decimal128
                                        up to precision 38, decimal256 up to 76 (or if
                                        either is decimal256), else float64
decimal(p,s) + integer or bool          as decimal(19,0) + decimal(p,s) above
decimal + uint64, decimal + float       float64
timestamp(u1,tz1) + timestamp(u2,tz2)   timestamp(u1 if u1 == u2 else "us",
                                        tz1 if tz1 == tz2 else "UTC"); naive values
                                        are read as UTC; ns becomes us when the units
                                        differ (sub-microsecond digits are truncated)
date + timestamp(u,tz)                  timestamp(u,tz) (midnight UTC)
date32 + date64                         date64
time + time                             the finer unit (time32 for s/ms, else time64)
duration(u1) + duration(u2)             duration(u1 if u1 == u2 else "us")
string + string (any width, view)       large_string if either is large, else string
binary + binary (any width, fixed)      large_binary if either is large, else binary
binary + string or anything else        binary (large if either side is large); text is
                                        stored as its UTF-8 bytes, other values as the
                                        UTF-8 of their text form (below)
struct + struct                         struct of the union of fields by name, each
                                        widened; order: a's fields, then b's new ones
list + list (any width, fixed size)     list of the widened items (large_list if
                                        either is large)
map + map                               map of the widened keys and the widened items
dictionary<V> + T                       V + T (dictionaries are decoded)
anything else                           string (large_string if either side is a
(int + string, struct + int, list +     large string); values that are not text are
string, date + int, ...)                rendered as text: scalars by Arrow's cast
                                        (``1``, ``1.5``, ``true``, ``2024-01-02``,
                                        ``2024-01-02 03:04:05.000000Z``), structs,
                                        lists, maps and unions as compact JSON
======================================  ===============================================

Why these choices: every row of the table is a widening that cannot lose a value
except two documented corners (integers beyond 2**53 in float64, nanoseconds when
mixed with another unit), and it is commutative and associative (struct field order
aside), so the unified schema of a pool does not depend on the order objects are
read in. Binary is the top of the lattice because arbitrary bytes have no lossless
text form, while text has a lossless byte form. Inside JSON text, bytes are base64,
decimals are strings (exact), and temporal values are ISO 8601 strings.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.types as pt

from limno.data.json_text import json_text, text_of
from limno.data.plain_types import list_view_as_list
from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy_module("pyarrow.compute")  # 40 ms to import, and a point lookup needs none

__all__ = [
    "coerce",
    "conform",
    "from_avro",
    "infer_type",
    "is_listish",
    "json_text",
    "text_of",
    "unify",
    "widen",
]

_INT64_DIGITS = 19  # any int64 (and any smaller integer, or bool) fits decimal(19, 0)
_DEC128_MAX, _DEC256_MAX = 38, 76
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# -- type families -----------------------------------------------------------------
def _is_text(t: pa.DataType) -> bool:
    return bool(pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t))


def _is_bytes(t: pa.DataType) -> bool:
    return bool(
        pt.is_binary(t)
        or pt.is_large_binary(t)
        or pt.is_fixed_size_binary(t)
        or pt.is_binary_view(t)
    )


def _is_large(t: pa.DataType) -> bool:
    return bool(pt.is_large_string(t) or pt.is_large_binary(t))


def is_listish(t: pa.DataType) -> bool:
    return bool(
        pt.is_list(t)
        or pt.is_large_list(t)
        or pt.is_fixed_size_list(t)
        or pt.is_list_view(t)
        or pt.is_large_list_view(t)
    )


def _is_intlike(t: pa.DataType) -> bool:
    return bool(pt.is_integer(t) or pt.is_boolean(t))


def _is_nested(t: pa.DataType) -> bool:
    return bool(pt.is_struct(t) or is_listish(t) or pt.is_map(t) or pt.is_union(t))


# -- widen ---------------------------------------------------------------------------
def widen(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The smallest type both ``a`` and ``b`` convert to (see the module table)."""
    if a == b:
        return a
    if pt.is_null(a):
        return b
    if pt.is_null(b):
        return a
    if pt.is_dictionary(a):
        return widen(a.value_type, b)
    if pt.is_dictionary(b):
        return widen(a, b.value_type)
    if isinstance(a, pa.ExtensionType):
        return widen(a.storage_type, b)
    if isinstance(b, pa.ExtensionType):
        return widen(a, b.storage_type)
    if _is_bytes(a) or _is_bytes(b):
        large = _is_large(a) or _is_large(b)
        return pa.large_binary() if large else pa.binary()
    same = _widen_same_kind(a, b)
    if same is not None:
        return same
    return pa.large_string() if _is_large(a) or _is_large(b) else pa.string()


def _widen_same_kind(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """Widen two types of one family; None when they are of different families."""
    if _is_text(a) and _is_text(b):
        return pa.large_string() if _is_large(a) or _is_large(b) else pa.string()
    numeric = _widen_numeric(a, b)
    if numeric is not None:
        return numeric
    temporal = _widen_temporal(a, b)
    if temporal is not None:
        return temporal
    if pt.is_struct(a) and pt.is_struct(b):
        return _widen_struct(a, b)
    if is_listish(a) and is_listish(b):
        item = pa.field(a.value_field.name, widen(a.value_type, b.value_type))
        large = pt.is_large_list(a) or pt.is_large_list(b)
        large = large or pt.is_large_list_view(a) or pt.is_large_list_view(b)
        return pa.large_list(item) if large else pa.list_(item)
    if pt.is_map(a) and pt.is_map(b):
        return pa.map_(widen(a.key_type, b.key_type), widen(a.item_type, b.item_type))
    return None


def _widen_numeric(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    a_num = _is_intlike(a) or pt.is_floating(a) or pt.is_decimal(a)
    b_num = _is_intlike(b) or pt.is_floating(b) or pt.is_decimal(b)
    if not (a_num and b_num):
        return None
    if pt.is_floating(a) or pt.is_floating(b):
        return pa.float64()
    if pt.is_uint64(a) or pt.is_uint64(b):
        return pa.float64()  # a, b differ, so the other one is signed, bool or decimal
    if pt.is_decimal(a) or pt.is_decimal(b):
        return _widen_decimal(a, b)
    return pa.int64()


def _widen_decimal(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    def shape(t: pa.DataType) -> tuple[int, int, bool]:  # integer digits, scale, is 256
        if pt.is_decimal(t):
            return t.precision - t.scale, t.scale, pt.is_decimal256(t)
        return _INT64_DIGITS, 0, False

    ia, sa, wa = shape(a)
    ib, sb, wb = shape(b)
    scale = max(sa, sb)
    precision = max(ia, ib) + scale
    if precision <= _DEC128_MAX and not (wa or wb):
        return pa.decimal128(precision, scale)
    if precision <= _DEC256_MAX:
        return pa.decimal256(precision, scale)
    return pa.float64()


_UNITS = ("s", "ms", "us", "ns")


def _widen_temporal(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if pt.is_date(a) and pt.is_date(b):
        return pa.date64()
    if pt.is_date(a) and pt.is_timestamp(b):
        return b
    if pt.is_timestamp(a) and pt.is_date(b):
        return a
    if pt.is_timestamp(a) and pt.is_timestamp(b):
        unit = a.unit if a.unit == b.unit else "us"
        return pa.timestamp(unit, a.tz if a.tz == b.tz else "UTC")
    if pt.is_time(a) and pt.is_time(b):
        unit = max(a.unit, b.unit, key=_UNITS.index)
        return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
    if pt.is_duration(a) and pt.is_duration(b):
        return pa.duration(a.unit if a.unit == b.unit else "us")
    return None


def _widen_struct(a: pa.StructType, b: pa.StructType) -> pa.StructType:
    fields: dict[str, pa.Field] = {}
    for f in list(a) + list(b):
        seen = fields.get(f.name)
        if seen is None:
            fields[f.name] = pa.field(f.name, relaxed(f.type), True, f.metadata)
        else:
            fields[f.name] = pa.field(f.name, widen(seen.type, f.type), True, seen.metadata)
    return pa.struct(list(fields.values()))


def relaxed(t: pa.DataType) -> pa.DataType:
    """``t`` with every nested field (struct fields, list items, map values) nullable.

    A unified column may hold rows that lack the field (nulls all the way down), so a
    non-nullable child would make such a column unwritable. Map keys stay non-null.
    """
    if pt.is_struct(t):
        return pa.struct([pa.field(f.name, relaxed(f.type), True, f.metadata) for f in t])
    if pt.is_map(t):
        item = t.item_field
        return pa.map_(t.key_field, pa.field(item.name, relaxed(item.type), True, item.metadata))
    if is_listish(t):
        vf = t.value_field
        item = pa.field(vf.name, relaxed(vf.type), True, vf.metadata)
        if pt.is_fixed_size_list(t):
            return pa.list_(item, t.list_size)
        if pt.is_large_list(t):
            return pa.large_list(item)
        if pt.is_list(t):
            return pa.list_(item)
        if pt.is_large_list_view(t):
            return pa.large_list_view(item)
        return pa.list_view(item)
    return t


# -- unify -----------------------------------------------------------------------------
def unify(schemas: Iterable[pa.Schema]) -> pa.Schema:
    """One schema holding every field of ``schemas``: by name, first-seen order, widened.

    Every field is nullable (a record of another shape may lack it) and schema-level
    metadata is dropped (it described one writer's view, e.g. pandas' index).
    """
    fields: dict[str, pa.Field] = {}
    for schema in schemas:
        _check_unique(schema.names, "schema")
        for f in schema:
            seen = fields.get(f.name)
            if seen is None:
                fields[f.name] = pa.field(f.name, relaxed(f.type), True, f.metadata)
            elif seen.type != f.type:
                fields[f.name] = pa.field(f.name, widen(seen.type, f.type), True, seen.metadata)
    return pa.schema(list(fields.values()))


def _check_unique(names: list[str], what: str) -> None:
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InvalidInputError(f"{what} has field {dup!r} more than once")


# -- conform ---------------------------------------------------------------------------
def conform(table: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """``table`` converted to ``schema``: columns reordered, missing ones null, cast.

    ``schema`` must hold every column of ``table`` (as :func:`unify` guarantees):
    a column with nowhere to go is an error, never silently dropped. A column whose
    type already matches is passed through untouched, so data that needs no widening
    round-trips exactly.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    names = table.column_names  # pyarrow builds these lists anew on every access
    _check_unique(names, "table")
    targets = set(schema.names)
    extra = [n for n in names if n not in targets]
    if extra:
        raise InvalidInputError(f"column {extra[0]!r} is not in the target schema")
    index = {n: i for i, n in enumerate(names)}
    columns: list[pa.ChunkedArray] = []
    for f in schema:
        i = index.get(f.name)
        if i is None:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, f.type)], f.type))
            continue
        col = table.column(i)
        if col.type == f.type:
            columns.append(col)
        else:
            chunks = [_cast(c, f.type, f.name) for c in col.chunks]
            columns.append(pa.chunked_array(chunks, type=f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _cast(arr: pa.Array, dst: pa.DataType, path: str) -> pa.Array:
    """Convert one array to ``dst``, which :func:`widen` produced from its type."""
    src = arr.type
    if src == dst:
        return arr
    if pt.is_dictionary(src):
        return _cast(arr.dictionary_decode(), dst, path)
    if isinstance(src, pa.ExtensionType):
        return _cast(arr.storage, dst, path)
    if pt.is_null(src):
        return pa.nulls(len(arr), dst)
    try:
        if _is_text(dst) and not _is_text(src):
            return _to_text(arr, dst)
        if _is_bytes(dst) and not _is_bytes(src):
            return pc.cast(arr if _is_text(src) else _to_text(arr, pa.large_string()), dst)
        if pt.is_struct(dst) and pt.is_struct(src):
            return _cast_struct(arr, dst, path)
        if is_listish(dst) and is_listish(src) and not pt.is_fixed_size_list(dst):
            return _cast_list(arr, dst, path)
        if pt.is_map(dst) and pt.is_map(src):
            keys = _cast(arr.keys, dst.key_type, path + ".key")
            items = _cast(arr.items, dst.item_type, path + ".value")
            return pa.MapArray.from_arrays(arr.offsets, keys, items, type=dst, mask=_mask(arr))
        return _cast_scalar(arr, dst)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        reason = str(e).splitlines()[0]
        raise InvalidInputError(f"cannot convert {path} from {src} to {dst}: {reason}") from e


def _mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


def _cast_struct(arr: pa.StructArray, dst: pa.StructType, path: str) -> pa.Array:
    src = arr.type
    names = [src.field(i).name for i in range(src.num_fields)]
    _check_unique(names, f"struct {path}")
    targets = {f.name for f in dst}
    extra = [n for n in names if n not in targets]
    if extra:
        raise InvalidInputError(f"field {path}.{extra[0]} is not in the target type")
    children = []
    for f in dst:
        if f.name in names:
            children.append(_cast(arr.field(names.index(f.name)), f.type, f"{path}.{f.name}"))
        else:
            children.append(pa.nulls(len(arr), f.type))
    return pa.StructArray.from_arrays(children, fields=list(dst), mask=_mask(arr))


def _cast_list(arr: pa.Array, dst: pa.DataType, path: str) -> pa.Array:
    if pt.is_list_view(arr.type) or pt.is_large_list_view(arr.type):
        arr = list_view_as_list(arr, pa.large_list(arr.type.value_field))
    elif pt.is_fixed_size_list(arr.type):  # let Arrow build offsets first
        arr = pc.cast(arr, pa.large_list(arr.type.value_field))
    values = _cast(arr.values, dst.value_type, path + "[]")
    large = pt.is_large_list(dst)
    offsets = pc.cast(arr.offsets, pa.int64() if large else pa.int32())
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(offsets, values, type=dst, mask=_mask(arr))


def _cast_scalar(arr: pa.Array, dst: pa.DataType) -> pa.Array:
    if pt.is_boolean(arr.type) and pt.is_decimal(dst):
        arr = pc.cast(arr, pa.int64())  # Arrow has no bool -> decimal kernel
    try:
        return pc.cast(arr, dst)
    except pa.ArrowInvalid:
        # The two lossy corners the rule documents: precision of big integers and
        # decimals in float64, and sub-microsecond digits when units are mixed.
        if pt.is_floating(dst) or pt.is_timestamp(dst) or pt.is_duration(dst):
            return pc.cast(arr, dst, safe=False)
        raise


def _to_text(arr: pa.Array, dst: pa.DataType) -> pa.Array:
    """Values rendered as text: Arrow's cast for scalars, compact JSON for the rest."""
    if not _is_nested(arr.type) and not _is_bytes(arr.type):
        try:
            text = pc.cast(arr, dst)
        except pa.ArrowNotImplementedError:
            pass
        else:
            if pt.is_timestamp(arr.type) and arr.type.tz:
                text = _exact_instants(arr, text, dst)
            return text
    return pa.array([None if v is None else json_text(v) for v in _pylist(arr)], dst)


def _exact_instants(arr: pa.Array, text: pa.Array, dst: pa.DataType) -> pa.Array:
    """Arrow renders a zoned timestamp with its offset in whole minutes, so an instant
    in a zone whose offset had seconds (local mean time before 1900-1920: Paris was
    +00:09:21) would read back wrong. Such values are rendered in UTC instead."""
    try:
        back = pc.cast(text, arr.type)
        same = pc.fill_null(pc.equal(back, arr), True)
    except pa.ArrowException:
        same = pa.array([False] * len(arr))
    if pc.all(same).as_py():
        return text
    utc = pc.cast(pc.cast(arr, pa.timestamp(arr.type.unit, "UTC")), dst)
    return pc.if_else(same, text, utc)


def _pylist(arr: pa.Array) -> list[Any]:
    try:
        return list(arr.to_pylist(maps_as_pydicts="strict"))
    except (KeyError, ValueError):  # duplicate map keys: keep them as [key, value] pairs
        return list(arr.to_pylist())


# -- Python values (JSON and Avro records) ---------------------------------------------
def infer_type(value: Any) -> pa.DataType:
    """The Arrow type of a JSON value; list items and dicts of a list widen together.

    Integers beyond int64 stay exact: decimal128(38, 0) up to 38 digits, else text.
    """
    if value is None:
        return pa.null()
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return pa.int64()
        return pa.decimal128(38, 0) if abs(value) < 10**_DEC128_MAX else pa.string()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, list):
        item = pa.null()
        for x in value:
            t = infer_type(x)
            item = item if t == item else widen(item, t)
        return pa.list_(item)
    if isinstance(value, dict):
        return pa.struct([pa.field(k, infer_type(x)) for k, x in value.items()])
    raise InvalidInputError(f"cannot store a {type(value).__name__} value")


def coerce(value: Any, t: pa.DataType) -> Any:
    """``value`` as pyarrow builds it into type ``t``, a widening of its own type.

    The Python-side twin of :func:`conform`: text columns take other values as their
    text (see :func:`text_of`), int64 takes bools as 0/1, decimals take ints.
    """
    if value is None:
        return None
    if pt.is_struct(t) and isinstance(value, dict):
        return {f.name: coerce(value.get(f.name), f.type) for f in t}
    if (pt.is_list(t) or pt.is_large_list(t)) and isinstance(value, list | tuple):
        return [coerce(x, t.value_type) for x in value]
    if pt.is_map(t) and isinstance(value, dict):
        return [(coerce(k, t.key_type), coerce(x, t.item_type)) for k, x in value.items()]
    if _is_text(t):
        return text_of(value)
    if _is_bytes(t):
        return value if isinstance(value, bytes) else text_of(value).encode()
    if pt.is_decimal(t) and isinstance(value, int):
        return decimal.Decimal(int(value))
    if pt.is_integer(t) and isinstance(value, bool):
        return int(value)
    return value


# -- Avro schemas ----------------------------------------------------------------------
_AVRO_PRIMITIVES = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_AVRO_LOGICAL = {
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms", "UTC"),
    "timestamp-micros": pa.timestamp("us", "UTC"),
    "timestamp-nanos": pa.timestamp("ns", "UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
    "uuid": pa.string(),
}


def from_avro(schema: Any) -> pa.DataType:
    """The Arrow type of an Avro schema (as parsed JSON); unions widen their branches.

    A recursive type has no Arrow equivalent: the recursive field holds JSON text,
    which :func:`coerce` renders. Enums become strings, fixed becomes fixed-size binary,
    logical types (decimal, date, time, timestamp, uuid) their Arrow types.
    """
    return _avro_type(schema, {})


def _avro_type(s: Any, named: dict[str, pa.DataType | None]) -> pa.DataType:
    if isinstance(s, str):
        if s in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[s]
        if s not in named:
            raise InvalidInputError(f"unknown Avro type {s!r}")
        return named[s] or pa.string()
    if isinstance(s, list):
        out = pa.null()
        for branch in s:
            out = widen(out, _avro_type(branch, named))
        return out
    kind, logical = s.get("type"), s.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(s["precision"]), int(s.get("scale", 0))
        out = (
            pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        )
    elif logical in _AVRO_LOGICAL and isinstance(kind, str) and kind in _AVRO_PRIMITIVES:
        out = _AVRO_LOGICAL[logical]
    elif kind in ("record", "error"):
        named[s["name"]] = None  # being defined: a reference now is a recursion
        out = pa.struct([pa.field(f["name"], _avro_type(f["type"], named)) for f in s["fields"]])
    elif kind == "enum":
        out = pa.string()
    elif kind == "fixed":
        out = pa.binary(int(s["size"]))
    elif kind == "array":
        return pa.list_(_avro_type(s["items"], named))
    elif kind == "map":
        return pa.map_(pa.string(), _avro_type(s["values"], named))
    else:
        return _avro_type(kind, named)
    if kind in ("record", "error", "enum", "fixed"):
        named[s["name"]] = out
        named.setdefault(s["name"].rpartition(".")[2], out)
    return out
