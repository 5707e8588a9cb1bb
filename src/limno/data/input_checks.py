"""What every input must satisfy before a load keeps it: valid UTF-8, bounded nesting.

Both rules protect the pool, not the input: a string of invalid UTF-8 is accepted by
the Arrow readers and by Parquet, and only fails when a scan turns it into Python
text, so one bad row would make the whole pool unreadable; and records nested deeper
than Parquet can read back are written but never read again, while very deep JSON
(thousands of levels) crashes pyarrow's JSON parser outright. So bad input is
refused at load time, naming the file and the line or row, before it reaches a
native library:

* Text (NDJSON, JSON, CSV, TSV) is checked as bytes, block by block, before it is
  parsed: UTF-8 by Python's decoder, nesting by :func:`check_json_nesting`, a scan
  of the JSON punctuation done with numpy, so it stays a few percent of the parse.
* Binary inputs (Parquet, ORC, Arrow IPC, Avro) and Arrow tables handed to the
  Python API have their schema checked (:func:`check_schema`) before any data is
  converted, and their data validated once read (:func:`check_values`,
  :func:`check_arrow`).

:data:`MAX_NESTING` counts the record itself as one level and each object or array
(struct or list) inside it as one more; a map counts two, since Arrow and Parquet
store it as a list of key-value structs. ``{"a": 1}`` is one level deep and
``{"a": {"b": [1]}}`` three. The limit is well below what the native libraries can
read back (Parquet: about 49 nested lists, as each takes two of its 100 schema
levels; Arrow IPC and the C data interface DuckDB uses: 64 levels).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pt

from limno.data.schema import is_listish
from limno.errors import InvalidInputError

__all__ = [
    "MAX_NESTING",
    "check_arrow",
    "check_avro_schema",
    "check_json_nesting",
    "check_schema",
    "check_text",
    "check_values",
    "nesting_error",
    "reason",
]

MAX_NESTING = 32
#: fewest rows per thread when a large Arrow batch is validated (:func:`check_arrow`)
PARALLEL_CHECK_ROWS = 1 << 19

# JSON punctuation that decides nesting: every other byte is dropped before the scan
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'{}[]"')
_QUOTE, _OPENERS = ord('"'), (ord("{"), ord("["))
_ESCAPE = re.compile(rb'\\[\\"]')  # an escaped backslash or quote (pairs, left to right)
_BRACKET = np.zeros(256, np.bool_)
_BRACKET[list(b"{}[]")] = True


def reason(e: BaseException) -> str:
    """What an error says about the input, in a few words (its first line)."""
    if isinstance(e, UnicodeEncodeError):  # JSON text of a lone UTF-16 surrogate: \ud800
        return f"invalid UTF-8 (unpaired surrogate \\u{ord(e.object[e.start]):04x})"
    if isinstance(e, RecursionError):
        return f"nesting deeper than {MAX_NESTING} levels"
    if isinstance(e, MemoryError) and not str(e).strip():
        return "a size larger than memory"
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def nesting_error(name: str, where: str = "") -> InvalidInputError:
    """The error for input nested deeper than :data:`MAX_NESTING`."""
    at = f" {where}:" if where else ""
    return InvalidInputError(f"{name}:{at} nesting deeper than {MAX_NESTING} levels")


# -- text --------------------------------------------------------------------------
def check_text(name: str, block: bytes, first_line: int) -> None:
    """Refuse a block of text lines that is not valid UTF-8, naming the first bad line."""
    if block.isascii():
        return
    try:
        block.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + block.count(b"\n", 0, e.start)
        raise InvalidInputError(f"{name}: line {line}: invalid UTF-8") from None


def check_json_nesting(name: str, data: bytes, first_line: int, outer: int = 0) -> None:
    """Refuse JSON text whose values nest deeper than :data:`MAX_NESTING` (``outer``
    more levels are allowed around the records: 1 for a top-level array of them).

    Only brackets outside strings count, and a string is what lies between two quotes
    that no backslash escapes. The depth is taken from the start of ``data`` and never
    below zero (a stray closing bracket does not hide what follows), so it bounds the
    depth any parser reaches, whichever line it starts at: pyarrow's, which parses a
    block as one stream and lets objects span lines, and Python's, line by line.
    """
    limit = MAX_NESTING + outer
    if b"\\" in data:  # neutralize escapes (same length, so positions still match)
        data = _ESCAPE.sub(b"__", data)
    kept = data.translate(None, _NOT_STRUCTURE)
    if kept.count(b"[") + kept.count(b"{") <= limit:
        return
    marks = np.frombuffer(kept, np.uint8)
    brackets = np.flatnonzero(marks != _QUOTE)
    # quotes before the k-th bracket: its index among the marks minus k
    outside = ((brackets - np.arange(len(brackets))) & 1) == 0
    kinds = marks[brackets]
    opening = (kinds == _OPENERS[0]) | (kinds == _OPENERS[1])
    step = np.where(outside, np.where(opening, 1, -1), 0)
    depth = np.cumsum(step, dtype=np.int64)
    depth -= np.minimum(np.minimum.accumulate(depth), 0)
    over = np.flatnonzero(depth > limit)
    if len(over):
        nth = int(over[0])  # the bracket that goes too deep, among all brackets
        pos = int(np.flatnonzero(_BRACKET[np.frombuffer(data, np.uint8)])[nth])
        line = first_line + data.count(b"\n", 0, pos)
        raise nesting_error(name, f"line {line}")


# -- schemas -----------------------------------------------------------------------
def _inside(t: pa.DataType) -> tuple[int, list[pa.Field]]:
    """How many levels a value of type ``t`` adds, and the fields it holds."""
    if pt.is_struct(t) or pt.is_union(t):
        return 1, [t.field(i) for i in range(t.num_fields)]
    if pt.is_map(t):
        return 2, [t.key_field, t.item_field]
    if is_listish(t):
        return 1, [t.value_field]
    if pt.is_dictionary(t) or pt.is_run_end_encoded(t):
        return 0, [pa.field("values", t.value_type)]
    if isinstance(t, pa.BaseExtensionType):
        return 0, [pa.field("storage", t.storage_type)]
    return 0, []


def check_schema(name: str, schema: pa.Schema) -> None:
    """Refuse a schema nested deeper than :data:`MAX_NESTING`, with a field name that
    is not valid UTF-8 (possible in binary files), or of a type pyarrow cannot hold.
    Walks at most that deep."""
    try:
        todo = [(f, 1, f.name) for f in schema]
        while todo:
            field, depth, top = todo.pop()
            field.name  # noqa: B018 -- decoding the name is the check
            adds, kids = _inside(field.type)
            if depth + adds > MAX_NESTING:
                raise nesting_error(name, f"field {top!r}")
            if not kids and not _has_arrays(field.type):
                raise InvalidInputError(f"{name}: field {top!r}: unsupported type {field.type}")
            why = _unstorable(field.type)
            if why:
                raise InvalidInputError(f"{name}: field {top!r}: {why}")
            todo.extend((k, depth + adds, top) for k in kids)
    except UnicodeDecodeError:
        raise InvalidInputError(f"{name}: a field name is not valid UTF-8") from None


#: Arrow type ids pyarrow reads in a schema but has no array class for (a damaged file
#: can name one; taking a column of it raises KeyError): the two older interval types
_NO_ARRAYS = frozenset({pa.lib.Type_INTERVAL_DAY_TIME, pa.lib.Type_INTERVAL_MONTHS})


def _unstorable(t: pa.DataType) -> str:
    """Why values of ``t`` (a node of a field's type) cannot be kept in a data object,
    or "": Parquet has no unions, no month-day-nano intervals (what DuckDB's INTERVAL
    becomes in Arrow) and no run-end encoding, so writing them failed with an internal
    error; and a fixed-size list of size 0 is written but never read back, which made
    the whole pool unreadable after the commit."""
    if pt.is_union(t) or pt.is_interval(t) or pt.is_run_end_encoded(t):
        return f"type {t} cannot be stored (Parquet has no such type); cast it first"
    if pt.is_fixed_size_list(t) and t.list_size == 0:
        return f"type {t} cannot be stored (Parquet cannot read back a list of size 0)"
    return ""


def _has_arrays(t: pa.DataType) -> bool:
    """Whether pyarrow can hold values of ``t``: looked up, never tried (trying a
    damaged type, such as a union without members, can crash the process)."""
    return t.id not in _NO_ARRAYS


def check_avro_schema(name: str, schema: Any) -> None:
    """Refuse an Avro schema (parsed JSON, before it becomes an Arrow type) nested
    deeper than :data:`MAX_NESTING`, or whose records, or some array's items, take no
    bytes; in one walk of the schema.

    Nesting is counted as :func:`check_schema` counts it: records and arrays add a
    level, maps two, unions and references none. Widths: Avro writes a count before
    each block of records and each block of array items, then the values; a value
    that takes no bytes (a ``null``, a zero-size ``fixed``, a record of such fields,
    or of none) lets a few bytes claim 2^62 of them, and the reader would spin
    forever on an empty input. Such a file carries no data, so it is refused.

    A schema too deep is refused as such wherever the walk meets it (a chain of
    unions or wrapped types too long for the walk too); otherwise the first array
    of empty items, in the walk's order; otherwise records that take no bytes.
    """
    named: dict[str, bool] = {}
    empty_items: list[InvalidInputError] = []  # the first array of empty items

    def empty(s: Any, depth: int) -> bool:  # does a value of s always encode to no bytes?
        if isinstance(s, str):
            return s == "null" or named.get(s, False)
        if isinstance(s, list):
            for branch in s:  # its arrays, and the types it defines
                empty(branch, depth)
            return False  # a union writes its branch index
        if not isinstance(s, dict):
            return False
        kind = s.get("type")
        out = False
        if kind in ("record", "error"):
            fields = s.get("fields")
            kids = [f.get("type") for f in fields if isinstance(f, dict)] if fields else []
            inner = _deeper(depth, 1)
            _name(s, False)  # a reference while it is being defined is a recursion
            out = all([empty(k, inner) for k in kids])  # each one walked
        elif kind == "fixed":
            out = s.get("size") == 0
        elif kind == "array":
            if empty(s.get("items"), _deeper(depth, 1)) and not empty_items:
                empty_items.append(
                    InvalidInputError(f"{name}: an Avro array of items that take no bytes")
                )
        elif kind == "map":
            empty(s.get("values"), _deeper(depth, 2))  # map keys are strings: never empty
        elif isinstance(kind, dict | list | str) and kind not in ("enum", "array", "map"):
            out = empty(kind, depth)
        if kind in ("record", "error", "enum", "fixed"):
            _name(s, out)
        return out

    def _deeper(depth: int, adds: int) -> int:
        if depth + adds > MAX_NESTING:
            raise nesting_error(name)
        return depth + adds

    def _name(s: dict[str, Any], value: bool) -> None:
        if isinstance(s.get("name"), str):
            named[s["name"]] = named[s["name"].rpartition(".")[2]] = value

    try:
        records_empty = empty(schema, 0)
    except RecursionError:
        raise nesting_error(name) from None
    if empty_items:
        raise empty_items[0]
    if records_empty:
        raise InvalidInputError(f"{name}: the Avro records take no bytes: no data to load")


# -- data --------------------------------------------------------------------------
def _parts(arr: pa.Array) -> Iterator[pa.Array]:
    """``arr`` and the arrays its structs, lists and maps hold, each cut to the part
    ``arr`` covers (a slice of a nested array still holds its children whole)."""
    yield arr
    t = arr.type
    if pt.is_struct(t):
        for i in range(t.num_fields):
            yield from _parts(arr.field(i))
    elif pt.is_map(t):  # its keys and items are not cut by flatten(): cut them here
        first, last = (arr.offsets[0].as_py(), arr.offsets[-1].as_py()) if len(arr) else (0, 0)
        yield from _parts(arr.keys.slice(first, last - first))
        yield from _parts(arr.items.slice(first, last - first))
    elif is_listish(t):
        yield from _parts(arr.flatten())


def _sound(arr: pa.Array) -> bool:
    """Whether the structure of ``arr`` and of all it nests holds: buffers of the right
    sizes, and list offsets (and sizes) that stay inside their child. Arrow's
    ``flatten()`` trusts offsets, so damaged ones must be caught before any walk."""
    try:
        arr.validate()  # buffer sizes: reading the offsets below stays in bounds
    except pa.ArrowInvalid:
        return False
    t = arr.type
    if pt.is_struct(t):
        return all(_sound(arr.field(i)) for i in range(t.num_fields))
    if not (is_listish(t) or pt.is_map(t)):
        return True
    child = arr.values
    if pt.is_fixed_size_list(t):
        return len(child) >= (arr.offset + len(arr)) * t.list_size and _sound(child)
    offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    if pt.is_list_view(t) or pt.is_large_list_view(t):
        sizes = arr.sizes.to_numpy(zero_copy_only=False).astype(np.int64)
        ok = bool(np.all(offsets >= 0) and np.all(sizes >= 0))
        ok = ok and bool(np.all(offsets + sizes <= len(child)))
    else:
        ok = len(offsets) == len(arr) + 1 and bool(np.all(np.diff(offsets) >= 0))
        ok = ok and (len(arr) == 0 or (offsets[0] >= 0 and offsets[-1] <= len(child)))
    return ok and _sound(child)


def _validate_values(arr: pa.Array) -> None:
    """Arrow's full validation of every value in ``arr`` (UTF-8 text, decimals within
    their precision, dictionary indices...): each container is checked for its own
    structure and each leaf in full, so no child is validated twice."""
    for part in _parts(arr):
        nested = pt.is_struct(part.type) or pt.is_map(part.type) or is_listish(part.type)
        part.validate(full=not nested)


def _values_valid(arr: pa.Array) -> bool:
    try:
        _validate_values(arr)
    except pa.ArrowInvalid:
        return False
    return True


def _first_bad(arr: pa.Array, valid: Callable[[pa.Array], bool]) -> int:
    """The first row of ``arr`` (which fails ``valid``) that fails it alone, found by
    halving: a slice fails when it holds such a row."""
    lo, hi = 0, len(arr)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if valid(arr.slice(lo, mid - lo)):
            lo = mid
        else:
            hi = mid
    return lo


def _chunks(table: pa.Table | pa.RecordBatch) -> Iterator[tuple[str, int, pa.Array]]:
    """(column name, first row, chunk) of every column of ``table``."""
    for col_name, column in zip(table.column_names, table.columns, strict=True):
        if isinstance(column, pa.ChunkedArray):
            start = 0
            for chunk in column.chunks:
                yield col_name, start, chunk
                start += len(chunk)
        else:
            yield col_name, 0, column


def _bad_row(name: str, col_name: str, chunk: pa.Array, row: int) -> InvalidInputError:
    """The error for the first row of ``chunk`` (row ``row`` of the file) whose values
    fail validation, with the reason Arrow gives for that row alone."""
    bad = _first_bad(chunk, _values_valid)
    try:
        _validate_values(chunk.slice(bad, 1))
        why = "rejected by Arrow's validation"
    except pa.ArrowInvalid as e:
        why = reason(e)
    what = "invalid UTF-8" if "UTF8" in why else f"invalid data ({why})"
    return InvalidInputError(f"{name}: row {row + bad + 1}: {what} in field {col_name!r}")


def check_values(name: str, table: pa.Table | pa.RecordBatch, first_row: int) -> None:
    """Refuse rows holding values Arrow's full validation rejects, at any depth: the
    Parquet and ORC readers build well-formed arrays, but copy in text without checking
    it is UTF-8 and decimals without checking their precision. ``first_row`` is the
    0-based position of ``table``'s first row in its file."""
    for col_name, start, chunk in _chunks(table):
        if _ascii_text(chunk):
            continue  # every byte below 0x80: valid UTF-8, nothing else to check
        if not _values_valid(chunk):
            raise _bad_row(name, col_name, chunk, first_row + start)


def _ascii_text(arr: pa.Array) -> bool:
    """Whether ``arr`` is a (large) string array, sound, whose bytes are all ASCII.

    Such text is valid UTF-8, and one vectorized pass over the bytes (numpy) takes a
    fraction of Arrow's character-by-character UTF-8 validation, which is most of a
    Parquet load's checking time (TPC-H lineitem's text is ASCII)."""
    large = pt.is_large_string(arr.type)
    if not (large or pt.is_string(arr.type)) or not len(arr):
        return False
    try:
        arr.validate()  # buffer sizes: the offsets read below are in bounds
    except pa.ArrowInvalid:
        return False
    offsets = np.frombuffer(
        arr.buffers()[1],
        dtype=np.int64 if large else np.int32,
        count=len(arr) + 1,
        offset=arr.offset * (8 if large else 4),
    )
    first, last = int(offsets[0]), int(offsets[-1])
    data = arr.buffers()[2]
    if last <= first or data is None:
        return last == first
    if first < 0 or last > data.size:
        return False
    return int(np.frombuffer(data, np.uint8, last - first, first).max()) < 0x80


def check_arrow(name: str, batch: pa.Table | pa.RecordBatch, first_row: int) -> None:
    """Refuse Arrow data that fails Arrow's full validation (offsets, sizes, UTF-8):
    Arrow IPC files and tables built in Python may hold any bytes at all.

    A large batch is validated in slices of rows, one thread per core (Arrow validates
    without the GIL): a table handed to ``load`` whole is checked before anything else
    of the load can start, so this step would otherwise leave all cores but one idle.
    Only whether it is valid is decided there; a fault is then found and named below.
    """
    if _valid(batch):
        return
    for col_name, start, chunk in _chunks(batch):
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid as e:
            if not _sound(chunk):  # offsets out of their child: never walk into it
                where = f"rows {first_row + start + 1}-{first_row + start + len(chunk)}"
                raise InvalidInputError(
                    f"{name}: {where}: invalid data ({reason(e)}) in field {col_name!r}"
                ) from None
            if not _values_valid(chunk):  # some rows hold bad values: name the first
                raise _bad_row(name, col_name, chunk, first_row + start) from None
            why = reason(e)  # the structure itself, or bytes no row refers to
            where = f"rows {first_row + start + 1}-{first_row + start + len(chunk)}"
            what = "invalid UTF-8" if "UTF8" in why else f"invalid data ({why})"
            raise InvalidInputError(f"{name}: {where}: {what} in field {col_name!r}") from None
    raise InvalidInputError(f"{name}: invalid Arrow data")


def _valid(batch: pa.Table | pa.RecordBatch) -> bool:
    """Whether ``batch`` passes Arrow's full validation, slices in threads when large.

    Only batches of flat columns (numbers, text, binary, temporal) are sliced: a slice
    recounts the nulls a column declares only where it declares none, so the counts a
    column declares are compared with its slices' here, and nested columns (whose
    children declare counts of their own) are validated whole.
    """
    workers = min(os.cpu_count() or 1, 8, batch.num_rows // PARALLEL_CHECK_ROWS)
    try:
        if workers < 2 or not all(_flat_type(t) for t in batch.schema.types):
            batch.validate(full=True)
            return True
        batch.validate()  # sizes first: slicing reads the offsets of the buffers
        n = batch.num_rows
        cuts = [n * i // workers for i in range(workers + 1)]
        slices = [batch.slice(cuts[i], cuts[i + 1] - cuts[i]) for i in range(workers)]
        with ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="limno-check") as pool:
            futures = [pool.submit(s.validate, full=True) for s in slices[1:]]
            slices[0].validate(full=True)
            for f in futures:
                f.result()
        for i, column in enumerate(batch.columns):
            if column.null_count and column.null_count != sum(
                s.column(i).null_count for s in slices
            ):
                return False
        return True
    except pa.ArrowInvalid:
        return False


def _flat_type(t: pa.DataType) -> bool:
    return bool(
        pt.is_integer(t)
        or pt.is_floating(t)
        or pt.is_boolean(t)
        or pt.is_decimal(t)
        or pt.is_temporal(t)
        or pt.is_string(t)
        or pt.is_large_string(t)
        or pt.is_binary(t)
        or pt.is_large_binary(t)
        or pt.is_fixed_size_binary(t)
    )


# -- empty objects ------------------------------------------------------------------------


def has_empty_struct(t: pa.DataType) -> bool:
    """Whether ``t`` is, or holds, a struct without fields (Parquet cannot store one)."""
    if pa.types.is_struct(t):
        return t.num_fields == 0 or any(has_empty_struct(f.type) for f in t)
    if is_listish(t):
        return has_empty_struct(t.value_type)
    if pa.types.is_map(t):
        return has_empty_struct(t.key_type) or has_empty_struct(t.item_type)
    return False


def without_empty_structs(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with every empty object (a struct without fields, ``{}`` in JSON) made
    null: Parquet has no way to store a struct without fields. Other values are kept."""
    if not any(has_empty_struct(t) for t in batch.schema.types):
        return batch
    arrays = [_no_empty(c) for c in batch.columns]
    fields = [
        pa.field(f.name, a.type, True, f.metadata)
        for f, a in zip(batch.schema, arrays, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, batch.schema.metadata))


def _no_empty(arr: pa.Array) -> pa.Array:
    t = arr.type
    if not has_empty_struct(t):
        return arr
    mask = arr.is_null()
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            return pa.nulls(len(arr))
        kids = [_no_empty(arr.field(i)) for i in range(t.num_fields)]
        names = [t.field(i).name for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(kids, names=names, mask=mask)
    if pa.types.is_large_list(t):
        return pa.LargeListArray.from_arrays(arr.offsets, _no_empty(arr.values), mask=mask)
    if pa.types.is_list(t):
        return pa.ListArray.from_arrays(arr.offsets, _no_empty(arr.values), mask=mask)
    # maps, fixed-size lists: rare enough to store as JSON text through the widening rule
    return pa.array([None if v is None else json.dumps(v, default=str) for v in arr.to_pylist()])
