"""``GET /v1/events``: the lake's events as a server-sent event stream.

Each event is one SSE message: ``id:`` its id (a cursor, see
:mod:`limno.pools.events`), ``event:`` its type, ``data:`` its JSON. The stream starts
with an ``id:`` line alone, the position it starts from, so a client that reconnects
before any event came resumes there and misses nothing. Query parameters:

- ``pool``: one pool's events (a name or id);
- ``after`` or the ``Last-Event-ID`` header: resume after that id (the header wins);
- ``from_start=1``: every event since the lake began; neither: only new events;
- ``follow=0``: stop at the current end (an ``end`` event says it is complete);
- ``heartbeat``: seconds between keep-alive comments when nothing happens (default
  the server's, 15 s).

Events come from the lake's journals, so changes made by any process appear. Each
client gets a feed thread of its own and a bounded queue: a slow reader holds up
its own feed, nobody else's. A caller sees events of the pools it may read only.
On shutdown every stream ends (see :func:`stop_all`), so SIGTERM never waits on an
open stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from limno.errors import (
    ForbiddenError,
    InvalidInputError,
    LimnoError,
    StorageError,
    http_status,
)
from limno.pools.events import NOW, EventFeed
from limno.server.authorization import visible
from limno.server.deps import lake_of

if TYPE_CHECKING:
    from limno.pools.events import Event

__all__ = ["Streams", "install", "router", "stop_all"]

router = APIRouter(prefix="/v1", tags=["events"])

#: events a feed reads ahead of a slow client
_QUEUE = 256
_END = object()


@dataclass
class Streams:
    """The open event streams of one app, and how they are paced."""

    heartbeat: float = 15.0
    poll_interval: float = 0.5
    stopping: threading.Event = field(default_factory=threading.Event)
    open: set[_Stream] = field(default_factory=set)


def install(app: FastAPI, heartbeat: float = 15.0, poll_interval: float = 0.5) -> None:
    app.state.streams = Streams(heartbeat, poll_interval)


def stop_all(app: Any) -> None:
    """End every open stream now and refuse new ones (the server is stopping)."""
    streams: Streams | None = getattr(getattr(app, "state", None), "streams", None)
    if streams is None:
        return
    streams.stopping.set()
    for stream in list(streams.open):
        stream.stop()


class _Stream:
    """One client's feed: a thread reading the journals into a bounded queue."""

    def __init__(
        self, events: Iterator[Event], stopped: threading.Event, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.events = events
        self.loop = loop
        self.queue: queue.Queue[object] = queue.Queue(_QUEUE)
        self.stopped = stopped  # also the feed's: it stops polling when set
        self.wake = asyncio.Event()
        self.thread = threading.Thread(target=self._pump, name="limno-events", daemon=True)

    def stop(self) -> None:
        self.stopped.set()
        self._notify()

    def _notify(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
            self.loop.call_soon_threadsafe(self.wake.set)

    def _put(self, item: object) -> bool:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.25)
            except queue.Full:
                continue
            self._notify()
            return True
        return False

    def _pump(self) -> None:
        try:
            for event in self.events:
                if not self._put(event):
                    return
            self._put(_END)
        except Exception as e:  # told to the client as an error event
            self._put(e)
        finally:
            close = getattr(self.events, "close", None)
            if close is not None:
                with contextlib.suppress(ValueError):
                    close()

    async def items(self, heartbeat: float) -> AsyncIterator[object | None]:
        """Queued items as they come; None when ``heartbeat`` seconds passed without."""
        while not self.stopped.is_set():
            try:
                yield self.queue.get_nowait()
                continue
            except queue.Empty:
                self.wake.clear()
            try:
                yield self.queue.get_nowait()
                continue
            except queue.Empty:
                pass
            try:
                await asyncio.wait_for(self.wake.wait(), heartbeat)
            except TimeoutError:
                yield None


def _message(event: str | None = None, data: Any = None, id: str | None = None) -> bytes:
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    if data is not None:
        lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def _readable(request: Request) -> Callable[[str], bool]:
    """Whether the caller may read a pool (by id); everyone may when auth is off."""
    return lambda pool_id: visible(request, [pool_id])[0]


@router.get(
    "/events",
    operation_id="events",
    summary="Server-sent events of pools, refs, commits and jobs",
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def events(
    request: Request,
    pool: str | None = None,
    after: str | None = None,
    from_start: bool = False,
    follow: bool = True,
    heartbeat: float | None = None,
    last_event_id: str | None = Header(default=None),
) -> StreamingResponse:
    streams: Streams = request.app.state.streams
    if streams.stopping.is_set():
        raise StorageError("the server is stopping: reconnect to another, or later")
    if after and from_start:
        raise InvalidInputError("give from_start or an event id to resume after, not both")
    # a reconnecting client's Last-Event-ID wins over the query it first connected with
    start = last_event_id or after
    from_start = from_start and not start
    if heartbeat is not None and not 0.05 <= heartbeat <= 3600:
        raise InvalidInputError("heartbeat: between 0.05 and 3600 seconds")
    readable = _readable(request)
    lake = lake_of(request)
    stopped = threading.Event()

    def open_feed() -> tuple[str, Iterator[Event]]:
        if pool is not None and not from_start and not start:
            found = lake.pool(pool)  # watching what comes next: the pool must exist
            if not readable(found.id):
                raise ForbiddenError(f"not allowed to read pool {pool!r}")
        feed = EventFeed(lake.storage, None if from_start else (start or NOW))
        told = feed.events(pool, follow=follow, stop=stopped, poll_interval=streams.poll_interval)
        return feed.position(), told

    position, feed = await run_in_threadpool(open_feed)
    stream = _Stream(feed, stopped, asyncio.get_running_loop())
    return StreamingResponse(
        _sse(stream, streams, position, heartbeat or streams.heartbeat, readable),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _sse(
    stream: _Stream,
    streams: Streams,
    position: str,
    heartbeat: float,
    readable: Callable[[str], bool],
) -> AsyncIterator[bytes]:
    streams.open.add(stream)
    stream.thread.start()
    try:
        yield f"id: {position}\nretry: 1000\n\n".encode()
        async for item in stream.items(heartbeat):
            if item is None:
                yield b": keep-alive\n\n"
            elif item is _END:
                yield _message("end", {})
                return
            elif isinstance(item, Exception):
                yield _error(item)
                return
            else:
                event: Event = item  # type: ignore[assignment]
                if event.pool_id is None or readable(event.pool_id):
                    yield _message(event.type, event.to_json(), event.id)
    finally:
        stream.stop()
        streams.open.discard(stream)


def _error(e: Exception) -> bytes:
    if isinstance(e, LimnoError):
        doc = {"status": http_status(e), "detail": str(e), "error": type(e).__name__}
    else:
        doc = {"status": 500, "detail": f"{type(e).__name__}: {e}", "error": "InternalError"}
    return _message("error", doc)
