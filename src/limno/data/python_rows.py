"""Records parsed in Python (JSON the Arrow reader cannot type, Avro) as Arrow tables.

pyarrow's JSON reader infers one type per column and fails when a later value
disagrees; such blocks, and Avro records, are typed here instead: every value's type
is inferred and widened with :func:`._schema.widen` (an int and a string become a
string; objects of different fields become one struct). Inference mimics pyarrow's
(ISO 8601 strings become ``timestamp[s]``), so results do not depend on the path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from limno.data.input_checks import reason
from limno.data.schema import coerce, infer_type, widen
from limno.errors import InvalidInputError

__all__ = ["BUILD_ERRORS", "build", "python_table"]

_ZONED = r"[T ]\d\d(:?\d\d){0,2}(Z|[+-]\d\d(:?\d\d)?)$"  # an ISO 8601 time with a zone
_Rows = list[dict[str, Any]]
_Where = Callable[[int], str]
#: what building a table from Python rows raises for a value that does not fit
BUILD_ERRORS = (
    pa.ArrowException,
    TypeError,
    ValueError,
    OverflowError,
    UnicodeError,
    RecursionError,
)


def python_table(name: str, records: list[dict[str, Any]], lines: list[int]) -> pa.Table:
    """JSON records as a table of their widened types (the heterogeneous-input path)."""
    typ: pa.DataType = pa.struct([])
    for i, record in enumerate(records):
        try:
            t = infer_type(record)
        except UnicodeEncodeError as e:  # a field name with a \ud800 escape
            raise InvalidInputError(f"{name}: line {lines[i]}: {reason(e)}") from None
        if t != typ:
            typ = widen(typ, t)
    table = build(name, records, typ, lambda i: f"line {lines[i]}", False)
    return pa.Table.from_arrays(
        [_timestamps(c.combine_chunks()) for c in table.columns], table.column_names
    )


def build(name: str, rows: _Rows, typ: pa.StructType, where: _Where, direct: bool) -> pa.Table:
    schema = pa.schema(list(typ))
    if direct:  # the rows may already fit: skip the coercion pass
        try:
            return pa.Table.from_pylist(rows, schema=schema)
        except BUILD_ERRORS:
            pass
    rows = [coerce(r, typ) for r in rows]
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except BUILD_ERRORS as e:
        for i, row in enumerate(rows):  # find the record to blame
            try:
                pa.Table.from_pylist([row], schema=schema)
            except BUILD_ERRORS as bad:
                raise InvalidInputError(f"{name}: {where(i)}: {reason(bad)}") from None
        raise InvalidInputError(f"{name}: {reason(e)}") from None


def _timestamps(arr: pa.Array) -> pa.Array:
    """Strings that are all ISO 8601 times become timestamp[s], as pyarrow.json infers."""
    t = arr.type
    if pt.is_string(t) and arr.null_count < len(arr):
        zoned = pc.match_substring_regex(arr, _ZONED)
        none = pa.scalar(None, t)
        try:
            utc = pc.cast(pc.if_else(zoned, arr, none), pa.timestamp("s", "UTC"))
            naive = pc.cast(pc.if_else(zoned, none, arr), pa.timestamp("s"))
            return pc.coalesce(pc.cast(utc, pa.timestamp("s")), naive)
        except pa.ArrowInvalid:
            return arr
    elif pt.is_struct(t):
        kids = [_timestamps(arr.field(i)) for i in range(t.num_fields)]
        if any(k.type != f.type for k, f in zip(kids, t, strict=True)):
            fields = [pa.field(f.name, k.type) for k, f in zip(kids, t, strict=True)]
            mask = arr.is_null() if arr.null_count else None
            return pa.StructArray.from_arrays(kids, fields=fields, mask=mask)
    elif pt.is_list(t):
        values = _timestamps(arr.values)
        if values.type != t.value_type:
            mask = arr.is_null() if arr.null_count else None
            return pa.ListArray.from_arrays(arr.offsets, values, mask=mask)
    return arr
