"""Result tables as HTTP bodies, in the format the ``Accept`` header asks for.

Scans, lookups, queries and meta tables answer with a stream of Arrow tables; each
is written as it arrives, so a scan of any size goes out in bounded memory:

    application/vnd.apache.arrow.stream  Arrow IPC stream (what limno's client reads)
    application/x-ndjson                 one JSON object per row
    application/json                     one JSON array of rows
    text/csv                             CSV with a header (nested values as JSON text)
    application/vnd.apache.parquet       a Parquet file (one row group per table)

Without an ``Accept`` header (or with ``*/*``) the answer is NDJSON, readable with
curl. Every table of one stream shares one schema (a scan's chunks do, see
:meth:`~limno.pools.records.pool.RecordPool.scan_objects`).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
else:
    pa = lazy_module("pyarrow")
    pacsv = lazy_module("pyarrow.csv")
    ipc = lazy_module("pyarrow.ipc")
    pq = lazy_module("pyarrow.parquet")

__all__ = [
    "ARROW",
    "MEDIA_TYPES",
    "NDJSON",
    "NotAcceptableError",
    "Pieces",
    "accepts",
    "check_json",
    "choose",
    "encode",
    "joined",
    "table_bytes",
    "whole",
]

ARROW = "application/vnd.apache.arrow.stream"
NDJSON = "application/x-ndjson"
JSON = "application/json"
CSV = "text/csv"
PARQUET = "application/vnd.apache.parquet"
MEDIA_TYPES = (ARROW, NDJSON, JSON, CSV, PARQUET)


class NotAcceptableError(Exception):
    """No format the server writes matches the request's ``Accept`` header (406)."""


def accepts(accept: str | None, media: str) -> bool:
    """Whether the ``Accept`` header names ``media`` itself (with a quality above 0):
    for answers a client must ask for by name, such as a scan's stored objects."""
    return any(m == media for _, _, m in _ranked(accept or ""))


def choose(accept: str | None) -> str:
    """The media type to answer with: the client's most preferred one that we write
    (a wildcard, ``*/*`` or ``application/*``: NDJSON, or the first type we write that
    the header does not refuse by name with ``q=0``)."""
    if not accept:
        return NDJSON
    for _, _, media in sorted(_ranked(accept)):
        if media in MEDIA_TYPES and _quality(accept, media) > 0:
            return media
        if media in _WILDCARDS:
            for ours in (NDJSON, *MEDIA_TYPES):
                if _quality(accept, ours) > 0:
                    return ours
    raise NotAcceptableError(
        f"cannot answer with {accept!r}: results come as one of {', '.join(MEDIA_TYPES)}"
    )


_WILDCARDS = ("*/*", "application/*")


def check_json(accept: str | None) -> None:
    """NotAcceptableError unless the ``Accept`` header takes JSON (none does, as
    ``*/*`` and ``application/*`` do, unless JSON is refused by name with ``q=0``):
    for the routes that answer only in JSON, so that they refuse a type they cannot
    write (406) as :func:`choose` does. A client that names
    ``application/problem+json`` takes JSON too."""
    if accept and _quality(accept, JSON) <= 0 and not accepts(accept, "application/problem+json"):
        raise NotAcceptableError(f"cannot answer with {accept!r}: this route answers in {JSON}")


def _quality(accept: str, media: str) -> float:
    """The quality the ``Accept`` header gives ``media``: that of the most specific
    range naming it (the type itself, then ``application/*``, then ``*/*``; RFC 9110
    12.5.1), 0 when none does."""
    found: dict[str, float] = {}
    for q, _, item in _ranked(accept, refused=True):
        found.setdefault(item, -q)
    for item in (media, media.split("/", 1)[0] + "/*", "*/*"):
        if item in found:
            return found[item]
    return 0.0


def _ranked(accept: str, refused: bool = False) -> list[tuple[float, int, str]]:
    """The media types of an ``Accept`` header with a quality above 0 (``refused``:
    and those of quality 0), as (-quality, position, type), in header order (sorted,
    the most preferred comes first)."""
    ranked: list[tuple[float, int, str]] = []
    for i, item in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in item.split(";"))
        q = 1.0
        for p in params:
            name, _, value = p.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0 or refused:
            ranked.append((-q, i, media.lower()))
    return ranked


class _Sink:
    """A write-only file that hands what Arrow wrote to the stream, chunk by chunk."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._pos = 0
        self.closed = False

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        self._pos += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out


class Pieces:
    """One chunk of a body made of several buffers: an Arrow IPC message's metadata and
    padding (small bytes) and its batch's column buffers (views of Arrow's memory). The
    server hands them to the socket as they are (``writelines``: one ``writev``), so a
    batch is never copied into one buffer; a layer that needs one bytes joins them."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: tuple[bytes | memoryview, ...], size: int) -> None:
        self.parts = parts
        self.size = size

    def __len__(self) -> int:
        return self.size

    def joined(self) -> bytes:
        return b"".join(self.parts)


#: a chunk of a body :func:`encode` writes
Chunk = bytes | memoryview | Pieces

#: a write of Arrow's IPC writer at least this long is kept as a view, not copied
_VIEW_BYTES = 1 << 14


class _PieceSink:
    """A write-only file for Arrow's IPC writer that keeps its writes as they come:
    Arrow hands a Python file each body buffer as a ``pyarrow.Buffer`` (no copy), kept
    here as a view when large; the small writes between are joined."""

    def __init__(self) -> None:
        self._parts: list[bytes | memoryview] = []
        self._small = bytearray()
        self._size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        n = len(data)
        if n >= _VIEW_BYTES and isinstance(data, pa.Buffer):
            if self._small:
                self._parts.append(bytes(self._small))
                self._small.clear()
            self._parts.append(memoryview(data))
        else:
            self._small += data
        self._size += n
        return n

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> Chunk:
        """What was written since the last take: one bytes when it is all small."""
        if self._small:
            self._parts.append(bytes(self._small))
            self._small.clear()
        parts, self._parts = self._parts, []
        if len(parts) == 1 and isinstance(parts[0], bytes):
            return parts[0]
        return Pieces(tuple(parts), sum(len(p) for p in parts))


def joined(chunks: Iterable[Chunk]) -> bytes:
    """A body's chunks as one bytes (small results, tests)."""
    return b"".join(c.joined() if isinstance(c, Pieces) else c for c in chunks)


def _json_default(v: Any) -> Any:
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return str(v)  # decimals too


def _json(v: Any) -> bytes:
    return json.dumps(v, default=_json_default, ensure_ascii=False).encode()


def _text_columns(table: pa.Table) -> pa.Table:
    """CSV has no nesting: nested columns become JSON text."""
    cols = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_nested(col.type):
            col = pa.array([None if v is None else _json(v).decode() for v in col.to_pylist()])
        cols[name] = col
    return pa.table(cols) if cols else table


def encode(
    tables: Iterable[pa.Table], media: str, empty: pa.Schema | None = None
) -> Iterator[Chunk]:
    """The body of a result in ``media``, written table by table (``empty``: the schema
    of a result without tables; none when not given)."""
    it = iter(tables)
    if media == NDJSON:
        for t in it:
            for row in t.to_pylist():
                yield _json(row) + b"\n"
        return
    if media == JSON:
        yield b"["
        first = True
        for t in it:
            for row in t.to_pylist():
                yield (b"" if first else b",") + _json(row)
                first = False
        yield b"]\n"
        return
    head = next(it, None)
    schema = head.schema if head is not None else (empty or pa.schema([]))
    sink = _Sink()
    if media == CSV:
        if head is None:
            if schema.names:
                flat = [
                    pa.field(f.name, pa.string()) if pa.types.is_nested(f.type) else f
                    for f in schema
                ]
                with pacsv.CSVWriter(sink, pa.schema(flat)):
                    pass
            yield sink.take()
            return
        head = _text_columns(head)
        with pacsv.CSVWriter(sink, head.schema) as csv:
            for t in _chain(head, it):
                csv.write_table(_text_columns(t) if t is not head else t)
                yield sink.take()
        yield sink.take()
        return
    if media == ARROW:
        yield from _ipc_messages(schema, head, it)
        return
    writer: Any = pq.ParquetWriter(sink, schema)
    with writer:
        yield sink.take()
        if head is not None:
            for t in _chain(head, it):
                writer.write_table(t)
                yield sink.take()
    yield sink.take()


#: about the most bytes of one message of an Arrow stream: the event loop's send buffer
#: (a bytearray in Python 3.11) moves what is left after every partial send, so one
#: write of many megabytes costs time quadratic in its size
_MESSAGE_BYTES = 1 << 20


def _ipc_messages(
    schema: pa.Schema, head: pa.Table | None, rest: Iterator[pa.Table]
) -> Iterator[Chunk]:
    """An Arrow IPC stream, each batch one chunk of the body as it comes: its message
    and its column buffers as :class:`Pieces` (views of Arrow's memory, no copy). A
    batch of more than about :data:`_MESSAGE_BYTES` is cut into several messages."""
    sink = _PieceSink()
    with ipc.new_stream(sink, schema) as writer:
        if head is not None:
            for t in _chain(head, rest):
                rows = max(1, _MESSAGE_BYTES * t.num_rows // max(t.nbytes, 1))
                for batch in t.to_batches(max_chunksize=rows):
                    if batch.num_rows:
                        writer.write_batch(batch)
                        yield sink.take()
    yield sink.take()


def whole(table: pa.Table, media: str) -> bytes:
    """A small result (a lookup, a meta table) as one body: no stream, no thread hops."""
    if media == ARROW:
        return table_bytes(table)
    return joined(encode([table] if table.num_rows else [], media, table.schema))


def _chain(head: pa.Table, rest: Iterator[pa.Table]) -> Iterator[pa.Table]:
    yield head
    yield from rest


def table_bytes(table: pa.Table) -> bytes:
    """One table as the bytes of an Arrow IPC stream (results small enough for JSON):
    written by Arrow into its own buffer, no Python call per piece (a served ``get``
    pays this on every answer)."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        if table.num_rows:
            writer.write_table(table)
    return sink.getvalue().to_pybytes()
