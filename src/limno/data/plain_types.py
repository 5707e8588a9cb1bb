"""The stored form of input types: every load keeps one type per kind of value.

Parquet and Arrow writers disagree on how to lay out the same values in memory:
DuckDB, Polars and tpchgen-cli write ``string_view`` text, pandas dictionary-encoded
categories, some writers ``list_view`` lists, half floats or 256-bit decimals of
small precision. Arrow's compute kernels, DuckDB and Spark each handle a different
subset of these layouts (``take`` and ``sort_indices`` have no kernel for views,
DuckDB reads no ``decimal256`` nor ``halffloat`` through Arrow), so a load turns
them into their plain equivalents before anything else sees them, and every later
reader, merge and engine sees the one type:

=========================================  ===========================================
input type                                 stored as
=========================================  ===========================================
string_view, binary_view                   string, binary (large_string, large_binary
                                           when a batch holds more than 2 GiB of them)
list_view, large_list_view                 list, large_list
dictionary<V>                              V (decoded)
halffloat                                  float (every half float is a float exactly)
decimal256(p, s) with p <= 38              decimal128(p, s) (exactly)
=========================================  ===========================================

The rule applies at any depth (inside structs, lists and maps). Values never
change; every other type (large types, wider decimals, dates, times, timestamps of
any unit and zone, durations, fixed-size binary and lists, structs, maps,
extension types) is stored as it comes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.types as pt

from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy_module("pyarrow.compute")  # 40 ms to import, and a point lookup needs none

__all__ = [
    "empty_table",
    "is_text_dictionary",
    "list_view_as_list",
    "map_types",
    "plain_batch",
    "plain_type",
]

_DEC128_MAX = 38
_Data = TypeVar("_Data", pa.RecordBatch, pa.Table)


def map_types(t: pa.DataType, fn: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """``t`` rebuilt bottom-up with ``fn`` applied to every type in it.

    ``fn`` sees each leaf first, then each container (struct, list, large list, list
    view, large list view, fixed-size list, map, dictionary) rebuilt around what it
    returned for the children, so one function can swap a leaf type at any depth and
    also change a container itself. Field names, nullability and metadata are kept.
    Every other type (extension types, unions included) is a leaf.
    """
    if pt.is_dictionary(t):
        rebuilt: pa.DataType = pa.dictionary(t.index_type, map_types(t.value_type, fn), t.ordered)
    elif pt.is_struct(t):
        rebuilt = pa.struct([_mapped_field(f, fn) for f in t])
    elif pt.is_map(t):
        keys, items = _mapped_field(t.key_field, fn), _mapped_field(t.item_field, fn)
        rebuilt = pa.map_(keys, items, keys_sorted=t.keys_sorted)
    elif pt.is_fixed_size_list(t):
        rebuilt = pa.list_(_mapped_field(t.value_field, fn), t.list_size)
    elif pt.is_list(t):
        rebuilt = pa.list_(_mapped_field(t.value_field, fn))
    elif pt.is_large_list(t):
        rebuilt = pa.large_list(_mapped_field(t.value_field, fn))
    elif pt.is_list_view(t):
        rebuilt = pa.list_view(_mapped_field(t.value_field, fn))
    elif pt.is_large_list_view(t):
        rebuilt = pa.large_list_view(_mapped_field(t.value_field, fn))
    else:
        rebuilt = t
    return fn(rebuilt)


def _mapped_field(f: pa.Field, fn: Callable[[pa.DataType], pa.DataType]) -> pa.Field:
    return f.with_type(map_types(f.type, fn))


def plain_type(t: pa.DataType, large: bool = False) -> pa.DataType:
    """The stored form of type ``t`` (``large``: 64-bit offsets for views' values)."""
    return map_types(t, lambda node: _plain_node(node, large))


def _plain_node(t: pa.DataType, large: bool) -> pa.DataType:
    """The stored form of one type whose children are stored forms already."""
    if pt.is_dictionary(t):
        return t.value_type
    if pt.is_string_view(t):
        return pa.large_string() if large else pa.string()
    if pt.is_binary_view(t):
        return pa.large_binary() if large else pa.binary()
    if pt.is_float16(t):
        return pa.float32()
    if pt.is_decimal256(t) and t.precision <= _DEC128_MAX:
        return pa.decimal128(t.precision, t.scale)
    if pt.is_list_view(t):
        return pa.large_list(t.value_field) if large else pa.list_(t.value_field)
    if pt.is_large_list_view(t):
        return pa.large_list(t.value_field)
    return t


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows with ``schema`` (one empty chunk per column).

    ``schema.empty_table()`` builds its arrays from Python lists, and pyarrow imports
    pandas for that when it is installed: 0.4 s of a ``limno load`` of a small file.
    Empty arrays of nulls need no conversion (and exist for every type, unions too)."""
    arrays = [pa.nulls(0, t) for t in schema.types]
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=schema)])


def plain_batch(batch: _Data, text_dictionaries: bool = False) -> _Data:
    """``batch`` (a record batch or a table) with every column in its stored form; the
    batch itself when it is already.

    With ``text_dictionaries``, top-level text and binary dictionary columns (32-bit
    indices) stay dictionaries: the load path keeps a Parquet input's small dictionaries
    so that objects are encoded from them (:func:`is_text_dictionary`)."""
    schema = batch.schema
    targets = [
        t if text_dictionaries and is_text_dictionary(t) else plain_type(t) for t in schema.types
    ]
    if targets == schema.types:
        return batch
    columns, fields = [], []
    for f, column, target in zip(schema, batch.columns, targets, strict=True):
        if column.type != target:
            column = _converted(column, target)
        columns.append(column)
        fields.append(pa.field(f.name, column.type, f.nullable, f.metadata))
    plain = pa.schema(fields, schema.metadata)
    if isinstance(batch, pa.Table):
        return pa.Table.from_arrays(columns, schema=plain)
    return pa.RecordBatch.from_arrays(columns, schema=plain)


def is_text_dictionary(t: pa.DataType) -> bool:
    """Whether ``t`` is a dictionary of plain text or binary values with 32-bit indices:
    what the Parquet reader builds from a text column's dictionary pages, and what the
    Parquet writer encodes from its indices, without hashing a value per row."""
    if not pt.is_dictionary(t) or t.index_type != pa.int32():
        return False
    return plain_type(t.value_type) == t.value_type and (
        pt.is_string(t.value_type) or pt.is_binary(t.value_type)
    )


def _converted(column: Any, target: pa.DataType) -> Any:
    """``column`` in its stored form: with 64-bit offsets if it holds over 2 GiB of
    text or bytes, and as it is if its values do not convert (a decimal beyond its
    precision: the input checks name it)."""
    try:
        return _plain_column(column, target)
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        pass
    try:
        return _plain_column(column, plain_type(column.type, large=True))
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return column


def _plain_column(column: Any, target: pa.DataType) -> Any:
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([_to_plain(c, target) for c in column.chunks], target)
    return _to_plain(column, target)


def _has_list_view(t: pa.DataType) -> bool:
    if pt.is_list_view(t) or pt.is_large_list_view(t):
        return True
    if pt.is_dictionary(t):
        return _has_list_view(t.value_type)
    return any(_has_list_view(t.field(i).type) for i in range(t.num_fields))


def _to_plain(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """``arr`` converted to ``target`` (its stored form). Arrow's cast does it all
    except list views, which it converts wrongly (pyarrow 26 returns empty lists for
    views whose offsets are not in order): those are rebuilt here."""
    if arr.type == target:
        return arr
    t = arr.type
    if not _has_list_view(t):
        return arr.cast(target)
    mask = arr.is_null() if arr.null_count else None
    if pt.is_dictionary(t):
        return _to_plain(arr.dictionary_decode(), target)
    if pt.is_list_view(t) or pt.is_large_list_view(t):
        return list_view_as_list(arr, target, lambda v: _to_plain(v, target.value_type))
    if pt.is_list(t) or pt.is_large_list(t):
        values = _to_plain(arr.values, target.value_type)
        cls = pa.LargeListArray if pt.is_large_list(target) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=target, mask=mask)
    if pt.is_fixed_size_list(t):
        size = t.list_size
        values = arr.values.slice(arr.offset * size, len(arr) * size)
        return pa.FixedSizeListArray.from_arrays(
            _to_plain(values, target.value_type), type=target, mask=mask
        )
    if pt.is_struct(t):
        children = [_to_plain(c, f.type) for c, f in zip(arr.flatten(), target, strict=True)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    keys = _to_plain(arr.keys, target.key_type)
    items = _to_plain(arr.items, target.item_type)
    return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)


def list_view_as_list(
    arr: pa.Array,
    target: pa.DataType,
    convert_values: Callable[[pa.Array], pa.Array] | None = None,
) -> pa.Array:
    """A list view array as a list (or large list) array of type ``target``.

    The values are gathered in list order (views may point anywhere in their child,
    in any order); ``convert_values`` converts them to the target's item type, else
    Arrow's cast does.
    """
    large = pt.is_large_list(target)
    lengths = pc.fill_null(pc.list_value_length(arr), 0)
    offset_type = pa.int64() if large else pa.int32()
    ends = pc.cumulative_sum(lengths.cast(offset_type))
    offsets = pa.concat_arrays([pa.array([0], offset_type), ends])
    values = pc.list_flatten(arr)
    if convert_values is not None:
        values = convert_values(values)
    elif values.type != target.value_type:
        values = values.cast(target.value_type)
    cls = pa.LargeListArray if large else pa.ListArray
    mask = arr.is_null() if arr.null_count else None
    return cls.from_arrays(offsets, values, type=target, mask=mask)
