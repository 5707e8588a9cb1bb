"""Uploads to ``limno serve``: how ``load`` and ``add`` of a
:class:`~limno.api.remote.RemotePool` send their sources.

Several sources go in one request body, framed as :mod:`limno.server.uploads` reads
it (``application/vnd.limno.parts``): each source is a run of length-prefixed pieces
ended by an empty one, and the ``parts`` parameter names each source and its kind.
Files (and stdin) are sent as they are read and Arrow tables as an IPC stream, batch
by batch, so a load of any size crosses the wire in bounded memory; only tables small
enough to hold go as one body of known length, which the server keeps in memory.
pyarrow is imported only when a table is sent.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

from limno.api.remote_http import ARROW
from limno.errors import InvalidInputError
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from limno.api.base import Source
    from limno.api.remote_http import Connection
else:
    pa = lazy_module("pyarrow")
    ipc = lazy_module("pyarrow.ipc")

__all__ = ["PARTS", "upload"]

#: limno's framing of several sources in one upload (limno.server.uploads)
PARTS = "application/vnd.limno.parts"
_CHUNK = 1 << 20
#: most bytes of tables an upload sends as one body of known length (not streamed)
_WHOLE = 4 << 20
_END = (0).to_bytes(4, "big")


def upload(http: Connection, path: str, sources: Iterable[Source], params: dict[str, Any]) -> Any:
    """POST ``sources`` to ``path`` as one framed body (limno.server.uploads), each read
    as it is sent; the server's JSON answer. ``params`` gets the ``parts`` parameter
    (one small table goes alone, unframed, without it)."""
    with contextlib.ExitStack() as stack:
        parts: list[tuple[str, str, Callable[[], Iterator[bytes]]]] = []
        in_memory = 0  # bytes of the tables (None: a file among the sources)
        for i, source in enumerate(sources):
            if isinstance(source, str):
                stream = _open_input(source, stack)
                parts.append((source, "file", lambda s=stream: _file_chunks(s)))  # type: ignore[misc]
                in_memory = _WHOLE + 1
            else:
                parts.append((f"table-{i}", "table", lambda t=source: _table_chunks(t)))  # type: ignore[misc]
                in_memory += source.nbytes
        if not parts:
            raise InvalidInputError("nothing to load: name at least one source")
        if len(parts) == 1 and parts[0][1] == "table" and in_memory <= _WHOLE:
            # one small table (a program's commit of a few rows): the body is its IPC
            # stream, unframed, of known length (a body cut short is then seen by the
            # server's HTTP parser), and the URL carries no ``parts``: every request's
            # URL is checked character by character in Python by httpx, three times
            content: Iterable[bytes] | bytes = b"".join(parts[0][2]())
            headers = {"Content-Type": ARROW}
        else:
            params["parts"] = json.dumps([{"name": n, "kind": k} for n, k, _ in parts])

            def body() -> Iterator[bytes]:  # a frame per piece: each piece is a send
                for _, _, chunks in parts:
                    for chunk in chunks():
                        if chunk:
                            yield len(chunk).to_bytes(4, "big") + chunk
                    yield _END

            # small tables go as one body of known length: one send, one piece for the
            # server (which keeps it in memory), instead of a chunked stream
            content = b"".join(body()) if in_memory <= _WHOLE else body()
            headers = {"Content-Type": PARTS}
        if isinstance(content, bytes):  # a small body: answered whole
            return json.loads(http.whole("POST", path, params, content=content, headers=headers))
        with http.stream("POST", path, params, content=content, headers=headers) as r:
            return json.loads(r.read())


# -- the sources of an upload ------------------------------------------------------------


def _open_input(path: str, stack: contextlib.ExitStack) -> IO[bytes]:
    """An input file opened for sending (stdin for ``-``), failing as a local load does."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return stack.enter_context(open(path, "rb"))  # noqa: SIM115 -- closed by the stack
    except FileNotFoundError:
        raise InvalidInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{path}: is a directory") from None
    except OSError as e:
        raise InvalidInputError(f"{path}: cannot open ({e.strerror or e})") from None


def _file_chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """What the file holds, sent as it is read (a pipe's bytes as soon as they come)."""
    read = getattr(stream, "read1", stream.read)
    while chunk := read(_CHUNK):
        yield chunk


class _Sink:
    """A write-only file collecting what Arrow's IPC writer writes."""

    closed = False

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(self.parts[-1])

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def _table_chunks(table: pa.Table | pa.RecordBatch) -> Iterator[bytes]:
    """An Arrow table as an IPC stream, batch by batch."""
    sink = _Sink()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    with ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=65536):
            writer.write_batch(batch)
            yield sink.take()
    yield sink.take()
