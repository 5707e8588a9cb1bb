"""A streamed answer's body chunks written to the connection's transport itself.

uvicorn writes each chunk of a chunked answer as ``b"".join([size line, chunk,
b"\\r\\n"])``: one more copy of every byte, made on the event loop with the GIL held
(about 0.07 s of CPU per 205 MB, a 5M-row scan as Arrow IPC), after the chunk went
through every middleware's ``send``. :class:`DirectStream` sends the answer's head
through the middleware as any response does (the guard and the catch-all see it),
then hands each chunk's pieces (its size line, its buffers: an Arrow batch's column
buffers are not joined, see :class:`~limno.server.formats.Pieces`, and its end) to the
transport's ``writelines`` (uvloop's
takes them as they are; asyncio's own joins them, as uvicorn did), waiting while
uvicorn's flow control says the client is behind, as uvicorn's own ``send`` does.
Server CPU of that scan: 0.55-0.63 -> 0.44-0.47 s (README, Server).
The end of the body goes through the middleware again, so uvicorn completes the
answer (its ``0`` chunk, keep-alive) as usual.

This holds only under uvicorn's httptools protocol, whose ``send`` the outermost
layer (:class:`~limno.server.fast.FastPaths`, present where no middleware changes
bodies) puts in the scope as :data:`RAW_SEND`. Anything else (another server, a
test client, h11, an answer not chunked) streams as Starlette does.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from limno.server.formats import Pieces

__all__ = ["RAW_SEND", "DirectStream"]

#: the scope key of the ASGI server's own ``send`` (set by the outermost middleware)
RAW_SEND = "limno.raw_send"


class DirectStream(StreamingResponse):
    """A StreamingResponse whose body chunks skip the middleware and uvicorn's join
    (see the module docstring)."""

    _cycle: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._cycle = _cycle_of(scope)
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        cycle = self._cycle
        if cycle is None:
            self.body_iterator = _joined(self.body_iterator)
            await super().stream_response(send)
            return
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        if not cycle.response_started or cycle.chunked_encoding is not True:
            cycle = None  # a layer kept the head back (a refusal), or uvicorn copies nothing
        async for chunk in self.body_iterator:
            if not chunk:
                continue
            if cycle is None:
                body = chunk.joined() if isinstance(chunk, Pieces) else chunk
                await send({"type": "http.response.body", "body": body, "more_body": True})
                continue
            if cycle.flow.write_paused and not cycle.disconnected:
                await cycle.flow.drain()
            if cycle.disconnected:  # the client left: let go of what the body holds
                close = getattr(self.body_iterator, "aclose", None)
                if close is not None:
                    await close()
                return
            parts = chunk.parts if isinstance(chunk, Pieces) else (chunk,)
            cycle.transport.writelines((b"%x\r\n" % len(chunk), *parts, b"\r\n"))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _joined(chunks: AsyncIterable[Any]) -> AsyncIterator[Any]:
    """The chunks with each :class:`~limno.server.formats.Pieces` joined (for a layer
    that sends one bytes per chunk)."""
    async for chunk in chunks:
        yield chunk.joined() if isinstance(chunk, Pieces) else chunk


def _cycle_of(scope: Scope) -> Any:
    """uvicorn's request-response cycle behind the scope's raw ``send``, when it is the
    httptools protocol's (whose transport and flow control are used as its ``send``
    uses them), and the request is not a HEAD (which has no body); else None."""
    raw = scope.get(RAW_SEND)
    cycle = getattr(raw, "__self__", None)
    if cycle is None or scope.get("method") == "HEAD":
        return None
    try:
        from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
    except ImportError:
        return None
    if not isinstance(cycle, RequestResponseCycle):
        return None
    used = ("transport", "flow", "chunked_encoding", "disconnected", "response_started")
    return cycle if all(hasattr(cycle, a) for a in used) else None
