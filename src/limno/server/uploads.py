"""Uploads of ``load`` and ``add``: request bodies spooled to disk, then loaded.

A body's bytes go to temporary files as they arrive, and the pool loads those files
with the same format detection as a local load (by the client's file name, else by
content). Arrow tables of a small upload (up to :data:`IN_MEMORY` bytes in all) stay
in memory instead: a thousand-row load then skips a temporary directory, a file and
two thread hops. A bigger one (by its ``Content-Length``, or from the part that passes
the bound as it arrives) goes to disk, so no upload holds more than that in memory.

One body carries one source, or several in limno's framing (``Content-Type:
application/vnd.limno.parts``, the ``parts`` query parameter naming each): every part
is a run of frames, a 4-byte big-endian length and that many bytes, ended by an empty
frame. Then a body that ends early is
always noticed (its last part has no end), and nothing is loaded from it.

A part of kind ``table`` is an Arrow IPC stream: an Arrow table the client loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request

from limno.errors import InvalidInputError, LimnoError
from limno.lazy import lazy_module
from limno.server.formats import ARROW

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.ipc as ipc
else:
    pa = lazy_module("pyarrow")
    ipc = lazy_module("pyarrow.ipc")

__all__ = ["IN_MEMORY", "PARTS", "Spooled", "renamed_errors", "spooled"]

#: the content type of a framed body of several sources
PARTS = "application/vnd.limno.parts"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
#: bytes of a body gathered before they are written out
_FLUSH = 1 << 20
#: most bytes of an upload's Arrow tables kept in memory rather than spooled
IN_MEMORY = 8 << 20


@dataclass(frozen=True)
class Spooled:
    """One source of an upload, on local disk."""

    name: str  # what the client called it (its path, ``-`` for stdin)
    path: str  # where it was spooled ("" when it is in memory)
    kind: str  # ``file`` or ``table``
    data: bytes | None = None  # a table's IPC stream, when kept in memory

    def source(self) -> str | pa.Table:
        """What the pool loads: the spooled file, or the table it holds."""
        if self.kind == "file":
            return self.path
        try:
            if self.data is not None:  # read in place: the table's buffers are the body's
                return ipc.open_stream(pa.py_buffer(self.data)).read_all()
            with pa.OSFile(self.path) as f:
                return ipc.open_stream(f).read_all()
        except (OSError, pa.ArrowException) as e:
            raise InvalidInputError(f"{self.name}: not an Arrow IPC stream ({e})") from None


def parse_parts(text: str | None) -> list[tuple[str, str]]:
    """The ``parts`` parameter: a JSON list of ``{"name": ..., "kind": file|table}``."""
    try:
        doc = json.loads(text or "[]")
        parts = [(str(p["name"]), str(p.get("kind", "file"))) for p in doc]
    except (ValueError, TypeError, KeyError) as e:
        raise InvalidInputError(f"parts: expected a JSON list of {{name, kind}} ({e})") from None
    if not parts or any(kind not in ("file", "table") for _, kind in parts):
        raise InvalidInputError("parts: name at least one part, each of kind file or table")
    return parts


def _local_name(name: str, kind: str) -> str:
    """A file name for a spooled part that keeps the extension format detection reads."""
    if kind == "table":
        return "table.arrows"
    base = os.path.basename(name.replace("\\", "/"))
    if name == "-" or base in ("", ".", ".."):
        return "stdin"  # no extension: the format is sniffed, as from stdin
    return _SAFE.sub("_", base)[-200:]


class _Body:
    """Exact reads over the chunks of a request body."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""

    async def _fill(self) -> bool:
        async for chunk in self._chunks:
            if chunk:
                self._buf += chunk
                return True
        return False

    async def exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not await self._fill():
                raise InvalidInputError("upload ended early: nothing was loaded")
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    async def pieces(self, n: int) -> AsyncIterator[bytes]:
        """The next ``n`` bytes, as they arrive."""
        while n:
            if not self._buf and not await self._fill():
                raise InvalidInputError("upload ended early: nothing was loaded")
            piece, self._buf = self._buf[:n], self._buf[n:]
            n -= len(piece)
            yield piece

    async def at_end(self) -> bool:
        return not self._buf and not await self._fill()


class _Writer:
    """Writes to a file in a worker thread, a megabyte at a time (not per network chunk)."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self._pending: list[bytes] = []
        self._size = 0

    async def write(self, data: bytes) -> None:
        self._pending.append(data)
        self._size += len(data)
        if self._size >= _FLUSH:
            await self.flush()

    async def flush(self) -> None:
        if self._pending:
            data, self._pending, self._size = b"".join(self._pending), [], 0
            await run_in_threadpool(self._f.write, data)


class _Spool:
    """Where an upload's parts go: memory while its tables fit in ``budget`` bytes,
    else files in a temporary directory (made on first use, removed by :meth:`close`)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.directory: str | None = None

    def path(self, i: int, name: str, kind: str) -> str:
        if self.directory is None:
            self.directory = tempfile.mkdtemp(prefix="limno-upload-")
        os.mkdir(os.path.join(self.directory, str(i)))
        return os.path.join(self.directory, str(i), _local_name(name, kind))

    async def close(self) -> None:
        if self.directory is not None:
            await run_in_threadpool(shutil.rmtree, self.directory, True)


class _Part:
    """One part as it arrives: in memory until the spool's budget runs out, then on disk."""

    def __init__(self, spool: _Spool, i: int, name: str, kind: str) -> None:
        self.spool, self.i, self.name, self.kind = spool, i, name, kind
        self.chunks: list[bytes] = []
        self.file: IO[bytes] | None = None
        self.writer: _Writer | None = None
        self.path = ""
        if kind == "file":  # the pool loads files by path
            self._to_disk()

    def _to_disk(self) -> None:
        self.path = self.spool.path(self.i, self.name, self.kind)
        self.file = open(self.path, "wb")  # noqa: SIM115 -- closed by done()/abort()
        self.writer = _Writer(self.file)

    async def write(self, data: bytes) -> None:
        if self.writer is None:
            if len(data) <= self.spool.budget:
                self.spool.budget -= len(data)
                self.chunks.append(data)
                return
            self._to_disk()
            assert self.writer is not None
            for chunk in self.chunks:
                await self.writer.write(chunk)
            self.spool.budget += sum(map(len, self.chunks))
            self.chunks = []
        await self.writer.write(data)

    async def done(self) -> Spooled:
        if self.writer is None:
            return Spooled(self.name, "", self.kind, b"".join(self.chunks))
        try:
            await self.writer.flush()
        finally:
            self.abort()
        return Spooled(self.name, self.path, self.kind)

    def abort(self) -> None:
        if self.file is not None:
            self.file.close()


async def _spool(request: Request, spool: _Spool, parts: list[tuple[str, str]]) -> list[Spooled]:
    framed = request.headers.get("content-type", "").split(";")[0].strip() == PARTS
    out = []
    body = _Body(request.stream())  # framed only: unframed, the whole body is one file
    for i, (name, kind) in enumerate(parts):
        part = _Part(spool, i, name, kind)
        try:
            if not framed:
                async for chunk in request.stream():
                    await part.write(chunk)
            else:
                while size := int.from_bytes(await body.exactly(4), "big"):
                    async for piece in body.pieces(size):
                        await part.write(piece)
        except BaseException:
            part.abort()
            raise
        out.append(await part.done())
    if framed and not await body.at_end():
        raise InvalidInputError("upload: bytes after its last part")
    return out


@contextlib.asynccontextmanager
async def spooled(
    request: Request, parts_param: str | None, name: str
) -> AsyncIterator[list[Spooled]]:
    """The sources of an upload: Arrow tables of a small one in memory, the rest spooled
    to a temporary directory removed afterwards.

    Unframed, the body is one source: ``name``, an Arrow table if its content type is
    an Arrow IPC stream. A client that goes away mid-body gets nothing loaded.
    """
    content = request.headers.get("content-type", "").split(";")[0].strip()
    if content == PARTS:
        parts = parse_parts(parts_param)
    else:
        parts = [(name, "table" if content == ARROW else "file")]
    length = request.headers.get("content-length", "")
    spool = _Spool(0 if length.isdigit() and int(length) > IN_MEMORY else IN_MEMORY)
    try:
        try:
            yield await _spool(request, spool, parts)
        except ClientDisconnect:
            raise InvalidInputError("upload ended early: nothing was loaded") from None
    finally:
        await spool.close()


@contextlib.contextmanager
def renamed_errors(spooled: list[Spooled]) -> Iterator[None]:
    """Errors that name a spooled file name the client's file instead (``<stdin>`` for
    stdin, as a local load does), so the message is the one a local load gives."""
    try:
        yield
    except LimnoError as e:
        text = str(e)
        for s in spooled:
            if s.path:  # a part in memory has none
                text = text.replace(s.path, "<stdin>" if s.name == "-" else s.name)
        if text != str(e):
            e.args = (text, *e.args[1:])
        raise


def query_json(text: str | None, what: str) -> Any:
    """A JSON-valued query parameter (None when absent)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise InvalidInputError(f"{what}: not JSON ({e})") from None
