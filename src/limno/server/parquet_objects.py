"""A full scan answered with the stored Parquet objects' bytes (no decoding here).

The framing is :mod:`limno.api.wire_objects`. :func:`objects_body` decides whether a
scan can be answered so: only when the in-process scan would yield each object's
rows as they are stored, object after object. That is a snapshot whose objects do
not overlap (:func:`limno.data.scan.plan` puts each in a cluster of its own), none
clipped by the partition tree or holding keyless rows (which a scan moves to the
end), and a pool without iterators. Bounds, ranges and limits are for the caller to
rule out (they need the server's cutting): anything else gets ``None`` and the
usual Arrow IPC answer.

The server then only copies file bytes to the socket, in :data:`CHUNK` pieces
read into Arrow's memory pool (its pages are reused from one answer to the next:
on a virtual machine a fresh page costs microseconds to fault in). A missing
object of a local lake is found before the answer starts (a 404, worded as the
in-process scan words it); one found missing midway, or on another store, ends
the body with an error frame that the client raises.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from limno.api.wire_objects import DATA, END, ERROR, FOOTER, FRAME, OBJECT, SCHEMA, frame
from limno.errors import LimnoError, NotFoundError, damaged_object, http_status, storage_error
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import datetime as dt

    import pyarrow as pa

    from limno.api.local_pool import LocalPool
    from limno.data import objects as data_objects
    from limno.data import scan
    from limno.data import schema as unification
    from limno.data.objects import DataObject
else:
    pa = lazy_module("pyarrow")
    data_objects = lazy_module("limno.data.objects")
    scan = lazy_module("limno.data.scan")
    unification = lazy_module("limno.data.schema")

__all__ = ["CHUNK", "Answer", "objects_body"]

log = logging.getLogger("limno.server")

#: bytes of one piece of an object's body (one read, one write to the socket)
CHUNK = 1 << 20
#: ... read at once from a store that is not a local directory (one ranged GET each)
REMOTE_CHUNK = 8 << 20
#: the end of a Parquet file: the footer's length (4 bytes) and the magic
_MAGIC = b"PAR1"
_TRAILER = 8


class Answer(NamedTuple):
    """A body of frames and, when known up front, its length in bytes."""

    body: Iterator[bytes | memoryview]
    length: int | None


def objects_body(
    pool: LocalPool, ref: str | None, as_of: dt.datetime | None, order: str
) -> Answer | None:
    """The framed body of a full scan of ``ref`` in ``order``, or None when the scan
    needs merging or cutting (see the module's docstring). Errors of the snapshot
    (a missing ref) and a missing object of a local lake are raised here.

    The objects of a local lake are looked at (``stat``) first: a missing one is an
    error answer before the body starts, and their sizes give the body's length. A
    body of known length goes out without chunked encoding, which would copy every
    piece once more (uvicorn joins each chunk with its head)."""
    if order not in ("asc", "desc") or pool.config.settings.iterators:
        return None
    objs = pool.objects(ref, as_of)
    if any(o.clip is not None or o.keyless or o.min_key is None for o in objs):
        return None
    clusters = scan.plan(objs, pool.key, None, None)
    if any(len(c) != 1 for c in clusters):
        return None
    ordered = [c[0] for c in clusters]
    if order == "desc":
        ordered.reverse()
    head = _schema(unification.unify(o.schema for o in objs if o.schema_b64))
    length: int | None = len(head) + FRAME.size
    sizes: dict[str, int] = {}
    for o in ordered:
        path = data_objects.data_path(pool.id, o.id)
        local = pool.storage.local_path(path)
        if local is None:
            length = None
            continue
        try:
            size = os.stat(local).st_size
        except FileNotFoundError:
            with pool.reading([o]):
                raise NotFoundError(f"object not found: {path}") from None
        except OSError as e:
            raise storage_error("read", local, e) from e
        sizes[o.id] = size
        if length is not None:
            length += 2 * FRAME.size + OBJECT.size + len(o.id.encode()) + size
    return Answer(_frames(pool, head, ordered, sizes, length is not None), length)


def _schema(schema: pa.Schema) -> bytes:
    data = schema.serialize()
    return frame(SCHEMA, data.size) + data.to_pybytes()


def _frames(
    pool: LocalPool,
    head: bytes,
    objs: Sequence[DataObject],
    sizes: dict[str, int],
    sized: bool,
) -> Iterator[bytes | memoryview]:
    """The frames. An error between two objects ends them with an error frame (a
    body of declared length is then cut short: the client has read the error frame
    before it sees that); one inside an object's frames can only cut the body short
    (the client says the answer ended early)."""
    yield head
    for o in objs:
        sending = _Sending()
        try:
            with pool.reading([o]):
                yield from _object(pool, o, sizes.get(o.id), sending)
        except LimnoError as e:
            log.warning("scan of pool %s stopped at object %s: %s", pool.name, o.id, e)
            if sending.inside:
                raise
            yield _error(e)
            if sized:
                raise
            return
    yield frame(END, 0)


class _Sending:
    """Whether an object's frames have begun and not ended (an error frame cannot go
    there: the client would read it as the object's bytes)."""

    inside = False


def _error(e: LimnoError) -> bytes:
    """An error frame: the problem document of ``e`` (as limno.server.problems makes)."""
    doc: dict[str, Any] = {"status": http_status(e), "detail": str(e), "error": type(e).__name__}
    for name in ("path", "pool", "reason"):  # what a damaged object's error carries
        value = getattr(e, name, None)
        if isinstance(value, str) and value:
            doc[name] = value
    body = json.dumps(doc).encode()
    return frame(ERROR, len(body)) + body


def _object(
    pool: LocalPool, obj: DataObject, expected: int | None, sending: _Sending
) -> Iterator[bytes | memoryview]:
    """One object's F and D frames, read from its store piece by piece (``expected``:
    its size when the answer began, which the body's length counted)."""
    path = data_objects.data_path(pool.id, obj.id)
    local = pool.storage.local_path(path)
    if local is None:
        yield from _stored(pool, obj, path, sending)
        return
    try:
        f = open(local, "rb")  # noqa: SIM115 -- closed below, after the last piece
    except FileNotFoundError:
        raise NotFoundError(f"object not found: {path}") from None
    except OSError as e:
        raise storage_error("read", local, e) from e
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            if expected is not None and size != expected:
                raise OSError(f"its size changed from {expected} to {size} bytes")
            f.seek(max(0, size - _TRAILER))
            tail = _tail_length(pool, path, f.read(_TRAILER), size)
            f.seek(size - tail)
            footer = _footer(obj, size, f.read(tail))
            sending.inside = True
            yield footer
            f.seek(0)
            left = size - tail
            yield frame(DATA, left)
            while left:
                buf = pa.allocate_buffer(min(CHUNK, left))
                view = memoryview(buf).cast("B")
                n = f.readinto(view)
                if not n:
                    raise storage_error("read", local, OSError("the file was cut short"))
                left -= n
                yield view[:n]
            sending.inside = False
        except OSError as e:
            raise storage_error("read", local, e) from e


def _stored(pool: LocalPool, obj: DataObject, path: str, sending: _Sending) -> Iterator[bytes]:
    """An object of a store that is not a local directory, by ranged reads."""
    get = pool.storage.get_range
    size = obj.size or pool.storage.head(path).size
    tail = _tail_length(pool, path, get(path, max(0, size - _TRAILER), size), size)
    footer = _footer(obj, size, get(path, size - tail, size))
    sending.inside = True
    yield footer
    left = size - tail
    yield frame(DATA, left)
    pos = 0
    while pos < left:
        end = min(pos + REMOTE_CHUNK, left)
        yield get(path, pos, end)
        pos = end
    sending.inside = False


def _tail_length(pool: LocalPool, path: str, trailer: bytes, size: int) -> int:
    """How many bytes end the object: its footer, the footer's length and the magic."""
    if len(trailer) != _TRAILER or trailer[4:] != _MAGIC:
        raise damaged_object(path, pool.name, "not a Parquet file (no magic at its end)")
    tail = int.from_bytes(trailer[:4], "little") + _TRAILER
    if tail > size - len(_MAGIC):
        raise damaged_object(path, pool.name, "its footer is longer than the file")
    return tail


def _footer(obj: DataObject, size: int, tail: bytes) -> bytes:
    oid = obj.id.encode()
    head = OBJECT.pack(size, len(oid)) + oid
    return frame(FOOTER, len(head) + len(tail)) + head + tail
