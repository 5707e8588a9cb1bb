"""Output formats: ``-f table|ndjson|json|csv|parquet|arrow`` for tables of results.

``table`` is for people (the default on a terminal), ``ndjson`` for pipes (the
default otherwise). Results stream batch by batch where the format allows.
Listings that commands build as Python rows (:class:`~limno.pools.inspect.Rows`)
are printed as text or JSON without loading Arrow.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any

from limno.config import OUTPUT_FORMATS
from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import base64

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from limno.data import schema as unification
    from limno.pools.inspect import Rows
else:
    base64 = lazy_module("base64")  # bytes in results, never in the listings of ls and log
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pacsv = lazy_module("pyarrow.csv")
    ipc = lazy_module("pyarrow.ipc")
    pq = lazy_module("pyarrow.parquet")
    unification = lazy_module("limno.data.schema")

__all__ = ["FORMATS", "default_format", "write_dicts", "write_rows", "write_tables"]

FORMATS = OUTPUT_FORMATS
#: the formats written from Python values (the others are Arrow's writers)
TEXT_FORMATS = ("table", "ndjson", "json")
MAX_CELL = 48


def default_format() -> str:
    return "table" if sys.stdout.isatty() else "ndjson"


class _Exact(Exception):
    """Raised by the fast path at a value ``json`` cannot write exactly (a decimal)."""


def _json_default(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if type(v).__name__ == "Decimal":
        raise _Exact  # its digits, not a float's rounding: the exact path writes it
    return str(v)


def to_json(v: Any, indent: int | None = None) -> str:
    """``v`` as JSON, numbers kept numbers: integers of any size as their digits,
    decimals as their own digits (``12.30``, never a float's rounding), NaN and
    infinities as ``null`` (JSON has none).

    ``json`` writes the common row in C; a row holding a decimal or a non-finite
    float takes the exact path, which writes numbers itself.
    """
    try:
        return json.dumps(
            v, default=_json_default, ensure_ascii=False, allow_nan=False, indent=indent
        )
    except (_Exact, ValueError):
        return _exact(v, indent, 0)


def _exact(v: Any, indent: int | None, level: int) -> str:
    """JSON text of ``v``, writing numbers itself (see :func:`to_json`)."""
    if v is None or isinstance(v, bool | str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        return float.__repr__(v) if math.isfinite(v) else "null"
    if type(v).__name__ == "Decimal":
        return str(v) if v.is_finite() else "null"  # Decimal's text is JSON's number
    if isinstance(v, dict):
        items = [
            f"{json.dumps(str(k), ensure_ascii=False)}: {_exact(x, indent, level + 1)}"
            for k, x in v.items()
        ]
        return _join("{", items, "}", indent, level)
    if isinstance(v, list | tuple):
        return _join("[", [_exact(x, indent, level + 1) for x in v], "]", indent, level)
    return _exact(_json_default(v), indent, level)


def _join(open_: str, items: list[str], close: str, indent: int | None, level: int) -> str:
    if not items:
        return open_ + close
    if indent is None:
        return open_ + ", ".join(items) + close
    inner = "\n" + " " * (indent * (level + 1))
    return open_ + inner + ("," + inner).join(items) + "\n" + " " * (indent * level) + close


def write_tables(tables: Iterable[pa.Table], fmt: str, out: IO[bytes] | None = None) -> int:
    """Write result tables in ``fmt`` to ``out`` (stdout); returns the row count."""
    _check(fmt)
    stream = out or sys.stdout.buffer
    if fmt == "ndjson":
        rows = (row for t in tables for row in _nano_times(t).to_pylist())
        return _write_text((), rows, fmt, stream)
    materialized = [t for t in tables if t.num_columns]
    table = _one(materialized)
    if fmt in TEXT_FORMATS:
        return _write_text(table.column_names, _nano_times(table).to_pylist(), fmt, stream)
    if fmt == "csv":
        pacsv.write_csv(_csv_ready(_nano_times(table, nested_only=True)), stream)
    elif fmt == "parquet":
        buf = io.BytesIO()
        pq.write_table(table, buf)
        stream.write(buf.getvalue())
    else:
        with ipc.new_stream(stream, table.schema) as writer:
            writer.write_table(table)
    stream.flush()
    return int(table.num_rows)


def write_rows(listing: Rows, fmt: str, out: IO[bytes] | None = None) -> int:
    """Write a listing in ``fmt`` to ``out`` (stdout): as text or JSON straight from its
    rows, in the binary formats as its Arrow table. Returns the row count."""
    _check(fmt)
    if fmt not in TEXT_FORMATS:
        return write_tables([listing.table()], fmt, out)
    return _write_text(listing.names, listing.rows, fmt, out or sys.stdout.buffer)


def write_dicts(
    names: Sequence[str], rows: Sequence[dict[str, Any]], fmt: str, out: IO[bytes] | None = None
) -> int:
    """Write rows built in a command (``names``: the columns, in order) in ``fmt``:
    text and JSON straight from the rows, the binary formats through Arrow (types
    inferred from the values; the columns of no rows are strings)."""
    _check(fmt)
    if fmt in TEXT_FORMATS:
        return _write_text(names, rows, fmt, out or sys.stdout.buffer)
    if rows:
        table = pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows])
    else:
        table = pa.table({n: pa.array([], pa.string()) for n in names})
    return write_tables([table], fmt, out)


def _check(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown output format {fmt!r} (one of {', '.join(FORMATS)})")


def _write_text(
    names: Sequence[str], rows: Iterable[dict[str, Any]], fmt: str, stream: IO[bytes]
) -> int:
    """Rows as NDJSON (streamed), a JSON list, or a text table with columns ``names``."""
    count = 0
    if fmt == "ndjson":
        for row in rows:
            stream.write(to_json(row).encode() + b"\n")
            count += 1
    else:
        whole = list(rows)
        count = len(whole)
        if fmt == "json":
            stream.write(to_json(whole, indent=2).encode())
            stream.write(b"\n")
        else:
            stream.write(render_table(names, whole).encode())
    stream.flush()
    return count


def _one(tables: list[pa.Table]) -> pa.Table:
    if not tables:
        return pa.table({})
    schema = unification.unify(t.schema for t in tables)
    return pa.concat_tables([unification.conform(t, schema) for t in tables])


def _nano_times(table: pa.Table, nested_only: bool = False) -> pa.Table:
    """Nanosecond times of day as their ISO text: Python's ``time`` holds microseconds,
    so ``00:00:00.000000001`` came out as ``00:00:00`` (timestamps keep theirs). Also
    inside structs, lists and maps; ``nested_only`` leaves top-level columns (CSV
    writes those itself, exactly)."""
    for i, t in enumerate(table.schema.types):
        if nested_only and not pa.types.is_nested(t):
            continue
        texts = _nano_text_type(t)
        if texts is not None:
            table = table.set_column(i, table.field(i).name, table.column(i).cast(texts))
    return table


def _nano_text_type(t: pa.DataType) -> pa.DataType | None:
    """``t`` with each ``time64[ns]`` in it made a string, or None if it holds none."""
    if pa.types.is_time64(t):
        return pa.string() if t.unit == "ns" else None
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        changed = [_nano_text_type(f.type) for f in fields]
        if all(c is None for c in changed):
            return None
        return pa.struct(
            [f if c is None else f.with_type(c) for f, c in zip(fields, changed, strict=True)]
        )
    if pa.types.is_map(t):
        key, item = _nano_text_type(t.key_type), _nano_text_type(t.item_type)
        if key is None and item is None:
            return None
        return pa.map_(key or t.key_type, t.item_field.with_type(item or t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        value = _nano_text_type(t.value_type)
        if value is None:
            return None
        field = t.value_field.with_type(value)
        if pa.types.is_large_list(t):
            return pa.large_list(field)
        if pa.types.is_fixed_size_list(t):
            return pa.list_(field, t.list_size)
        return pa.list_(field)
    return None


def _csv_ready(table: pa.Table) -> pa.Table:
    """Columns Arrow's CSV writer cannot write, or writes unlike the JSON formats, as
    text: nested ones as JSON, bytes as base64 (raw bytes that are not UTF-8 failed the
    writer, and others made a CSV with NUL bytes in it), durations in seconds,
    timestamps as ISO 8601 with their offset (Arrow's writer put a space for the ``T``
    and ``+0100`` or ``Z`` for the offset: the same instant read differently in CSV
    than in the table and JSON formats), and views and extension types (a UUID of
    DuckDB's) as JSON renders their values."""
    cols = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        t = col.type
        if pa.types.is_string_view(t):
            col = col.cast(pa.string())
        elif pa.types.is_timestamp(t) and (iso := _iso_timestamps(col)) is not None:
            col = iso
        elif (
            pa.types.is_nested(t)
            or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t)
            or pa.types.is_duration(t)
            or pa.types.is_timestamp(t)  # one only Python writes (see _iso_timestamps)
            or isinstance(t, pa.BaseExtensionType)
        ):
            col = pa.array([_csv_text(v) for v in col.to_pylist()], pa.string())
        cols.append((name, col))
    return pa.table(dict(cols)) if cols else table


#: zones whose offset is always zero, and a fixed offset's text (``+05:30``)
_UTC_ZONES = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z", "+00:00"})
_FIXED_OFFSET = re.compile(r"([+-])(\d\d):(\d\d)")
#: a unit's ticks per second
_SCALE = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
#: the instants Python's ``datetime`` holds (years 1 to 9999), in seconds
_YEARS_1_TO_9999 = (-62135596800, 253402300799)
#: 2037-01-01T00:00Z: before it Arrow's and Python's zone rules give every named zone
#: the same offsets (compared hour by hour from 1850 on); from 2038 on they part
_ZONES_AGREE_UNTIL = 2114380800


def _iso_timestamps(col: pa.ChunkedArray) -> pa.Array | None:
    """A timestamp column as the ISO 8601 text the JSON formats write for it (``T``, a
    fraction only where one is, ``+05:30``), made by Arrow: a Python object a cell
    cost 20 s a million. A named zone's offset at each instant is Arrow's too, but for
    instants from :data:`_ZONES_AGREE_UNTIL` on (Arrow's zone rules stop where the
    zone database's explicit transitions do; Python's go on): those few are Python's.
    None where only Python gives that text: a year outside 1-9999, a zone Arrow does
    not know."""
    t = col.type
    scale = _SCALE[t.unit]
    whole = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    valid = np.asarray(whole.is_valid(), bool)
    ticks = np.asarray(whole.cast(pa.int64()).fill_null(0), np.int64)
    late = None
    if t.tz is None or t.tz in _UTC_ZONES:
        shift: Any = 0
        suffix: Any = "" if t.tz is None else "+00:00"
    elif (fixed := _FIXED_OFFSET.fullmatch(t.tz)) is not None:
        sign, hours, minutes = fixed.groups()
        shift = (1 if sign == "+" else -1) * (int(hours) * 3600 + int(minutes) * 60)
        suffix = t.tz
    else:
        try:
            local = pc.local_timestamp(whole)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        shift = (np.asarray(local.cast(pa.int64()).fill_null(0), np.int64) - ticks) // scale
        late = valid & (ticks >= _ZONES_AGREE_UNTIL * scale)
        suffix = _offset_texts(shift)
    low, high = _YEARS_1_TO_9999
    if ticks.size and (
        int(np.min(ticks // scale + shift)) < low or int(np.max(ticks // scale + shift)) > high
    ):
        return None
    wall = ticks + shift * scale
    text = pa.array(wall, pa.timestamp(t.unit), mask=~valid).cast(pa.string())
    text = pc.replace_substring(text, " ", "T", max_replacements=1)
    seconds = pc.utf8_slice_codeunits(text, 0, 19)
    fraction = wall % scale
    if t.unit == "ms":
        text = pc.if_else(fraction == 0, seconds, pc.binary_join_element_wise(text, "000", ""))
    elif t.unit == "us":
        text = pc.if_else(fraction == 0, seconds, text)
    elif t.unit == "ns":
        micros = pc.utf8_slice_codeunits(text, 0, 26)
        text = pc.if_else(fraction == 0, seconds, pc.if_else(fraction % 1000 == 0, micros, text))
    if not isinstance(suffix, str) or suffix:
        text = pc.binary_join_element_wise(text, suffix, "")
    if late is not None and late.any():
        where = np.flatnonzero(late)
        python = [_csv_text(v) for v in whole.take(pa.array(where)).to_pylist()]
        text = pc.replace_with_mask(text, pa.array(late), pa.array(python, pa.string()))
    return text


def _offset_texts(offsets: np.ndarray) -> pa.Array:
    """Each offset (seconds) as ``isoformat`` writes it: ``+01:00``, ``+00:09:21``."""
    distinct, which = np.unique(offsets, return_inverse=True)
    texts = []
    for offset in distinct.tolist():
        sign, left = ("-" if offset < 0 else "+"), abs(offset)
        text = f"{sign}{left // 3600:02d}:{left % 3600 // 60:02d}"
        texts.append(text + (f":{left % 60:02d}" if left % 60 else ""))
    return pa.array(texts, pa.string()).take(pa.array(which.astype(np.int64)))


def _csv_text(v: Any) -> str | None:
    """A value as the text of a CSV cell: what JSON writes for it, a string unquoted."""
    if v is None or isinstance(v, str):
        return v
    text = to_json(v)
    return str(json.loads(text)) if text.startswith('"') else text


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # nan, inf: JSON's null would read as a missing value
    text = v if isinstance(v, str) else to_json(v)
    if isinstance(v, dt.datetime | dt.date | dt.time):
        text = v.isoformat()
    text = text.replace("\n", "\\n")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def render_table(names: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    """A plain-text table for terminals (values cut at 48 characters)."""
    if not names:
        return "(no rows)\n"
    header = list(names)
    cells = [[_cell(row.get(n)) for n in header] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for r in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if not cells:
        lines.append("(no rows)")
    return "\n".join(lines) + "\n"
