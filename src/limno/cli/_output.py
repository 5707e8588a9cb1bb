"""Output formats: ``-f table|ndjson|json|csv|parquet|arrow`` for tables of results.

``table`` is for people (the default on a terminal), ``ndjson`` for pipes (the
default otherwise). Results stream batch by batch where the format allows.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import sys
from collections.abc import Iterable
from typing import IO, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from limno.data.schema import conform, unify
from limno.errors import InvalidInputError

__all__ = ["FORMATS", "default_format", "write_tables"]

FORMATS = ("table", "ndjson", "json", "csv", "parquet", "arrow")
MAX_CELL = 48


def default_format() -> str:
    return "table" if sys.stdout.isatty() else "ndjson"


def _json_default(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return str(v)


def to_json(v: Any) -> str:
    return json.dumps(v, default=_json_default, ensure_ascii=False)


def write_tables(tables: Iterable[pa.Table], fmt: str, out: IO[bytes] | None = None) -> int:
    """Write result tables in ``fmt`` to ``out`` (stdout); returns the row count."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown output format {fmt!r} (one of {', '.join(FORMATS)})")
    stream = out or sys.stdout.buffer
    if fmt == "ndjson":
        rows = 0
        for t in tables:
            for row in t.to_pylist():
                stream.write(to_json(row).encode() + b"\n")
                rows += 1
        stream.flush()
        return rows
    materialized = [t for t in tables if t.num_columns]
    table = _one(materialized)
    if fmt == "json":
        stream.write(json.dumps(table.to_pylist(), default=_json_default, indent=2).encode())
        stream.write(b"\n")
    elif fmt == "csv":
        pacsv.write_csv(_flatten_nested(table), stream)
    elif fmt == "parquet":
        buf = io.BytesIO()
        pq.write_table(table, buf)
        stream.write(buf.getvalue())
    elif fmt == "arrow":
        with ipc.new_stream(stream, table.schema) as writer:
            writer.write_table(table)
    else:
        stream.write(render_table(table).encode())
    stream.flush()
    return int(table.num_rows)


def _one(tables: list[pa.Table]) -> pa.Table:
    if not tables:
        return pa.table({})
    schema = unify(t.schema for t in tables)
    return pa.concat_tables([conform(t, schema) for t in tables])


def _flatten_nested(table: pa.Table) -> pa.Table:
    """CSV has no nesting: nested columns become JSON text."""
    cols = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_nested(col.type):
            col = pa.array(
                [None if v is None else to_json(v) for v in col.to_pylist()], pa.string()
            )
        cols.append((name, col))
    return pa.table(dict(cols)) if cols else table


def _cell(v: Any) -> str:
    if v is None:
        return ""
    text = v if isinstance(v, str) else to_json(v)
    if isinstance(v, dt.datetime | dt.date):
        text = v.isoformat()
    text = text.replace("\n", "\\n")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def render_table(table: pa.Table) -> str:
    """A plain-text table for terminals (values cut at 48 characters)."""
    if not table.num_columns:
        return "(no rows)\n"
    header = list(table.column_names)
    rows = [[_cell(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if not rows:
        lines.append("(no rows)")
    return "\n".join(lines) + "\n"
