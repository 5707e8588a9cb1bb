"""A scan through ``limno serve``: its stored-objects answer decoded here, or Arrow IPC.

:func:`iter_scan` asks for either form (:mod:`limno.api.wire_objects`) and reads the
one the server chose. Objects are decoded as in a scan in process, and give the same
tables: the same rows in the same order, each table conformed to the snapshot's
unified schema (which the server sends first).

An object is received into one buffer of Arrow's memory pool, its footer first;
its row groups are decoded, a few at a time, as soon as their bytes are in (on
Arrow's threads, off the GIL). A thread receives while this one decodes, at most
:data:`AHEAD` objects ahead, so the memory a scan holds is bounded by about that
many objects (a descending scan decodes an object once all of it is in: its last
rows come first). Over plain HTTP the objects' bytes are read from the socket
straight into their buffers: through the client's lane (``http.client``, see
:mod:`limno.api.remote_lane`) where there is one, else by :func:`_raw`.

An Arrow IPC answer (a scan the server merges or cuts) is read the same way where
the lane goes: each message straight from the socket into a buffer of Arrow's,
which the IPC reader takes without copying (through httpx, h11 parsed the chunked
body in Python and copied it several times: most of such a scan's client work).
"""

from __future__ import annotations

import http.client
import io
import json
import queue
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from limno.api import remote_http
from limno.api.remote_lane import Answer
from limno.api.wire_objects import DATA, END, ERROR, FOOTER, FRAME, MEDIA, OBJECT, SCHEMA
from limno.errors import StorageError, damaged_object, decode_reason
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from limno.data import kway
    from limno.data import schema as unification
    from limno.pools.registry import PoolConfig
else:
    pa = lazy_module("pyarrow")
    ipc = lazy_module("pyarrow.ipc")
    pq = lazy_module("pyarrow.parquet")
    kway = lazy_module("limno.data.kway")
    unification = lazy_module("limno.data.schema")

__all__ = ["ACCEPT", "iter_scan"]

#: what a scan asks for: stored objects where the server can send them, else Arrow IPC
ACCEPT = f"{MEDIA}, {remote_http.ARROW};q=0.5"
#: most row groups decoded at once (fewer: decoding starts sooner after bytes arrive)
MAX_GROUPS = 4
#: objects received ahead of the one being decoded
AHEAD = 1
#: bytes received between two wake-ups of the decoding thread
STEP = 1 << 20


def iter_scan(
    http: remote_http.Connection,
    path: str,
    params: Mapping[str, Any],
    config: PoolConfig,
    reverse: bool,
) -> Iterator[pa.Table]:
    """The tables of ``GET path`` (a pool's scan) as they arrive, non-empty."""
    headers = {"Accept": ACCEPT}
    if http.lane is not None:
        with http.streamed("GET", path, params, headers) as answer:
            reader = _lane_reader(answer, http.url)
            body = _Body(iter(()), http.url, reader=reader)
            yield from _tables(body, _media(answer.headers.get("content-type")), config, reverse)
            body.drain()  # the chunked body's end: the connection is then kept
        return
    with (
        http.stream("GET", path, params, headers=headers) as response,
        remote_http.transport_errors(http.url),
    ):
        media = _media(response.headers.get("content-type"))
        raw = _raw(response) if media == MEDIA else None
        yield from _tables(_Body(response.iter_bytes(), http.url, raw), media, config, reverse)


def _media(content_type: str | None) -> str:
    return (content_type or "").partition(";")[0].strip().lower()


def _tables(body: _Body, media: str, config: PoolConfig, reverse: bool) -> Iterator[pa.Table]:
    """The tables of an answer of ``media``: stored objects, or an Arrow IPC stream."""
    if media != MEDIA:
        yield from _arrow(body)
        return
    kind, n = body.head()
    if kind != SCHEMA:
        raise body.garbled(f"a stream starting with frame {kind!r}")
    schema = ipc.read_schema(pa.py_buffer(body.read(n)))
    decoder = _Decoder(config, schema, reverse)
    receiver = _Receiver(body)
    try:
        yield from decoder.tables(receiver.objects())
    finally:
        receiver.stop()


def _lane_reader(answer: http.client.HTTPResponse, url: str) -> Callable[[memoryview], int]:
    """``answer.readinto``, its transport failures worded as the client's."""

    def readinto(view: memoryview) -> int:
        try:
            return answer.readinto(view)
        except (OSError, http.client.HTTPException) as e:
            why = str(e).strip() or type(e).__name__
            raise StorageError(f"limno server {url} ended an answer early: {why}") from None

    return readinto


def _arrow(body: _Body) -> Iterator[pa.Table]:
    """The tables of an Arrow IPC answer (the server's merge-on-read)."""
    try:
        reader = ipc.open_stream(_ArrowFile(body))
        for batch in reader:
            if batch.num_rows:
                yield pa.Table.from_batches([batch])
    except pa.ArrowInvalid as e:  # the stream stopped short: the server failed
        raise StorageError(
            f"limno server {body.url} ended an answer early ({e}); see its log"
        ) from None


class _ArrowFile:
    """The body as the file Arrow's IPC reader reads: each read is a new buffer of
    Arrow's memory pool, filled from the body (from the socket itself where it can),
    which Arrow then uses as it is (its record batches' columns point into it)."""

    def __init__(self, body: _Body) -> None:
        self.body = body
        self.closed = False

    def read(self, size: int = -1) -> pa.Buffer:
        if size < 0:
            raise ValueError("an Arrow stream's read has a size")
        buf = pa.allocate_buffer(size)
        view = memoryview(buf).cast("B")
        got = 0
        while got < size:
            n = self.body.readinto(view[got:])
            if not n:
                return buf.slice(0, got)
            got += n
        return buf

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def _raw(response: httpx.Response) -> tuple[socket.socket, int] | None:
    """The connection's socket and the body's length, when the body can be read from
    the socket itself: plain HTTP/1.1 (no TLS), a Content-Length, no content coding.

    httpx reads a body 64 KiB at a time through h11, which copies each piece three
    times in Python; read straight into the object's buffer, the bytes are copied once,
    by the kernel (on two cores shared with the server, that is a tenth of a scan's
    time). The connection is then closed with the answer, not reused: httpx has not
    seen the body end (one more connect per scan, a fraction of a millisecond)."""
    if response.url.scheme != "http" or response.http_version != "HTTP/1.1":
        return None
    if response.headers.get("content-encoding", "identity").strip().lower() != "identity":
        return None
    length = response.headers.get("content-length", "").strip()
    stream = response.extensions.get("network_stream")
    sock = None if stream is None else stream.get_extra_info("socket")
    if not length.isdigit() or not isinstance(sock, socket.socket):
        return None
    return sock, int(length)


class _Body(io.RawIOBase):
    """An answer's chunks as a file (for Arrow's IPC reader) and as frames.

    With ``raw`` (:func:`_raw`: the socket, the body's length), everything after the
    first chunk httpx gives (what h11 read with the head: httpx reads no further
    until asked) is read from the socket itself."""

    def __init__(
        self,
        chunks: Iterator[bytes],
        url: str,
        raw: tuple[socket.socket, int] | None = None,
        *,
        reader: Callable[[memoryview], int] | None = None,
    ) -> None:
        self._chunks = chunks
        #: reads the body (after ``chunks``) into a buffer, as ``readinto`` does
        self._reader = reader
        self._buf = memoryview(b"")  # what is left of the last chunk: a view, not a copy
        self.url = url
        self._sock: socket.socket | None = None if raw is None else raw[0]
        self._left = 0 if raw is None else raw[1]  # the body's bytes not yet taken
        self._first = True

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if not self._buf and self._reader is not None:
            return self._reader(view)
        if not self._buf and self._sock is not None and not self._first:
            return self._recv(view)
        while not self._buf:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buf = memoryview(chunk)
            self._left -= len(chunk)
            self._first = False
        n = min(len(view), len(self._buf))
        view[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def _recv(self, view: memoryview) -> int:
        assert self._sock is not None
        want = min(len(view), self._left)
        if not want:
            return 0
        try:
            n = self._sock.recv_into(view, want)
        except OSError as e:
            raise StorageError(f"limno server {self.url} ended an answer early: {e}") from None
        self._left -= n
        return n

    def drain(self) -> None:
        """Read what is left of the body (an Arrow stream's chunked end), so that its
        connection can serve another request."""
        scrap = memoryview(bytearray(1 << 16))
        while self.readinto(scrap):
            pass

    def fill(self, view: memoryview) -> None:
        """Exactly ``len(view)`` bytes into ``view``; a body that ends first is an error."""
        pos, end = 0, len(view)
        while pos < end:
            n = self.readinto(view[pos:])
            if not n:
                raise StorageError(f"limno server {self.url} ended an answer early; see its log")
            pos += n

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            raise ValueError("a frame's read has a size")
        out = bytearray(size)
        self.fill(memoryview(out))
        return bytes(out)

    def head(self) -> tuple[bytes, int]:
        """The next frame's kind and payload length."""
        kind, n = FRAME.unpack(self.read(FRAME.size))
        return bytes(kind), int(n)

    def garbled(self, what: str) -> StorageError:
        return StorageError(f"limno server {self.url} sent {what}: not a scan's objects")


class _Object:
    """One object being received: its id, a buffer of its size, how much is in."""

    def __init__(self, body: _Body, payload: int) -> None:
        size, id_length = OBJECT.unpack(body.read(OBJECT.size))
        self.id = body.read(id_length).decode()
        tail = payload - OBJECT.size - id_length
        if not 0 < tail <= size:
            raise body.garbled(f"an object of {size} bytes with a footer of {tail}")
        self.size = size
        self.data_end = size - tail  # the footer comes first; the rest, up to it, after
        self.buffer = pa.allocate_buffer(size)
        self.view = memoryview(self.buffer).cast("B")
        body.fill(self.view[self.data_end :])
        #: bytes of ``[0, data_end)`` in so far
        self.got = 0
        self._cond = threading.Condition()
        self._failed: BaseException | None = None

    def arrived(self, n: int) -> None:
        with self._cond:
            self.got = n
            self._cond.notify_all()

    def failed(self, e: BaseException) -> None:
        with self._cond:
            self._failed = e
            self._cond.notify_all()

    def wait(self, n: int) -> None:
        """Until the first ``n`` bytes are in (or receiving them failed)."""
        with self._cond:
            self._cond.wait_for(lambda: self.got >= n or self._failed is not None)
            if self.got < n and self._failed is not None:
                raise self._failed


def _data(body: _Body, obj: _Object) -> None:
    kind, n = body.head()
    if kind != DATA or n != obj.data_end:
        raise body.garbled(f"frame {kind!r} of {n} bytes after an object's footer")


def _problem(payload: bytes, url: str) -> BaseException:
    """The error of an error frame (as :func:`remote_http.raise_problem` makes them)."""
    try:
        status = int(json.loads(payload).get("status", 500))
    except (ValueError, AttributeError):
        status = 500
    failed = Answer(max(status, 400), http.client.HTTPMessage(), payload, url)
    try:
        remote_http.raise_problem(failed)
    except Exception as e:  # noqa: BLE001 -- the error to raise in the caller
        return e
    return StorageError("limno server sent an error frame without an error")


class _Receiver:
    """The body received in a thread of its own, objects handed over as they start."""

    def __init__(self, body: _Body) -> None:
        self._body = body
        self._ready: queue.Queue[Any] = queue.Queue()
        self._slots = threading.Semaphore(AHEAD + 1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="limno-scan", daemon=True)
        self._thread.start()

    def objects(self) -> Iterator[_Object]:
        while True:
            item = self._ready.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            self._slots.release()

    def stop(self) -> None:
        self._stop.set()
        self._slots.release()
        self._thread.join()

    def _run(self) -> None:
        body = self._body
        obj: _Object | None = None
        try:
            while True:
                kind, n = body.head()
                if kind == END:
                    break
                if kind == ERROR:
                    raise _problem(body.read(n), body.url)
                if kind != FOOTER:
                    raise body.garbled(f"frame {kind!r}")
                self._slots.acquire()
                if self._stop.is_set():
                    return
                obj = _Object(body, n)
                _data(body, obj)
                self._ready.put(obj)
                pos = 0
                while pos < obj.data_end:
                    if self._stop.is_set():
                        return
                    end = min(pos + STEP, obj.data_end)
                    body.fill(obj.view[pos:end])
                    pos = end
                    obj.arrived(pos)
                obj = None
            self._ready.put(None)
        except BaseException as e:  # noqa: BLE001 -- raised in the decoding thread
            if obj is not None:
                obj.failed(e)
            self._ready.put(e)


class _Decoder:
    """Objects' row groups decoded into tables of the scan's schema, in scan order."""

    def __init__(self, config: PoolConfig, schema: pa.Schema, reverse: bool) -> None:
        self.config = config
        self.schema = schema
        self.reverse = reverse

    def tables(self, objects: Iterator[_Object]) -> Iterator[pa.Table]:
        for obj in objects:
            yield from self._object(obj)

    def _object(self, obj: _Object) -> Iterator[pa.Table]:
        try:
            pf = pq.ParquetFile(pa.BufferReader(obj.buffer))
            ends = _group_ends(pf.metadata, obj.data_end)
        except (pa.ArrowException, OSError) as e:
            raise self._damaged(obj, e) from e
        groups = [g for g in range(len(ends)) if pf.metadata.row_group(g).num_rows]
        if self.reverse:
            obj.wait(obj.data_end)
            batches = [groups[i : i + MAX_GROUPS] for i in range(0, len(groups), MAX_GROUPS)]
            for batch in reversed(batches):
                yield self._read(obj, pf, batch, reverse=True)
            return
        i = 0
        while i < len(groups):
            obj.wait(ends[groups[i]])
            j = i + 1
            while j < len(groups) and j - i < MAX_GROUPS and ends[groups[j]] <= obj.got:
                j += 1
            yield self._read(obj, pf, groups[i:j], reverse=False)
            i = j
        obj.wait(obj.data_end)

    def _read(self, obj: _Object, pf: pq.ParquetFile, groups: list[int], reverse: bool) -> pa.Table:
        try:
            table = pf.read_row_groups(groups, use_threads=True)
        except (pa.ArrowException, OSError) as e:
            raise self._damaged(obj, e) from e
        if reverse:
            table = kway.reverse_table(table)
        if not table.schema.equals(self.schema):
            table = unification.conform(table, unification.unify([self.schema, table.schema]))
        return table

    def _damaged(self, obj: _Object, e: BaseException) -> Exception:
        path = f"{self.config.id}/data/{obj.id}.parquet"
        return damaged_object(path, self.config.name, decode_reason(e))


def _group_ends(md: pq.FileMetaData, data_end: int) -> list[int]:
    """For each row group, how many of the object's first bytes hold all of it: up to
    where the next group starts (the last: up to the footer). A layout where that
    does not hold every column chunk of a group (no writer of limno's makes one) waits
    for the whole object: a row group is never decoded from bytes yet to come."""
    n = md.num_row_groups
    chunks: list[list[tuple[int, int]]] = []  # per group: (start, end) of its column chunks
    for g in range(n):
        rg = md.row_group(g)
        spans = []
        for c in range(rg.num_columns):
            col = rg.column(c)
            offset = col.data_page_offset
            if col.has_dictionary_page and col.dictionary_page_offset:
                offset = min(offset, col.dictionary_page_offset)
            spans.append((offset, offset + col.total_compressed_size))
        chunks.append(spans)
    starts = [min((a for a, _ in spans), default=data_end) for spans in chunks]
    ends = [*starts[1:], data_end]
    laid_out = all(
        before <= limit and all(end <= limit for _, end in spans)
        for before, limit, spans in zip([0, *ends[:-1]], ends, chunks, strict=True)
    )
    return ends if laid_out else [data_end] * n
