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
its own feed, nobody else's. On shutdown every stream ends (see :func:`stop_all`),
so SIGTERM never waits on an open stream.

**Who may go on reading.** A caller sees events of the pools it may read only, and
not just when the stream opens: a stream outlives the request that checked it, so
its caller is checked again (:class:`_Caller`) while it is idle (every
``recheck`` seconds) and before an event goes out once ``recheck`` seconds have
passed since the last check. A check goes through the server's
:class:`~limno.auth.verify.Authenticator`, which remembers a key for a few
seconds: most checks cost no I/O, and a key's store read is shared by every
stream and request of that key. A key deleted (or its user) ends the stream with an
``error`` event (401); a stream of one pool the caller may no longer read ends with
a 403 ``error``; an unfiltered stream leaves out the events of pools the caller may
no longer read, from then on. Changes made through this server apply at the next
check (it forgets its cache); those made by another process within the
authenticator's cache time as well.

**How many.** Each stream polls the lake's journals from a thread of its own, so a
server process holds at most ``max_open`` (``limno serve --max-event-streams``)
at once; one more is answered 503 with ``Retry-After`` (the client,
:mod:`limno.api.remote_events`, waits and tries again). A slot is freed when its
stream ends for any reason: the client gone, the caller refused, the server
stopping (:class:`_EventResponse`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Header, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from limno.auth.roles import allowed
from limno.errors import (
    ForbiddenError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    StorageError,
    UnauthenticatedError,
    http_status,
)
from limno.pools.events import NOW, EventFeed
from limno.server.authorization import user_of
from limno.server.deps import lake_of
from limno.server.problems import problem

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from limno.api.local import LocalLake
    from limno.auth.model import User
    from limno.auth.verify import Authenticator
    from limno.pools.events import Event

__all__ = [
    "MAX_STREAMS",
    "RECHECK_SECONDS",
    "RETRY_AFTER",
    "Streams",
    "install",
    "router",
    "stop_all",
]

router = APIRouter(prefix="/v1", tags=["events"])

#: events a feed reads ahead of a slow client
_QUEUE = 256
_END = object()
#: open streams a server process holds at most unless told (``--max-event-streams``)
MAX_STREAMS = 256
#: most seconds between two checks of an open stream's caller
RECHECK_SECONDS = 2.0
#: seconds a caller refused for want of a free stream is told to wait (``Retry-After``)
RETRY_AFTER = 2


@dataclass
class Streams:
    """The open event streams of one app, how they are paced, and how many may be."""

    heartbeat: float = 15.0
    poll_interval: float = 0.5
    max_open: int = MAX_STREAMS
    recheck: float = RECHECK_SECONDS
    stopping: threading.Event = field(default_factory=threading.Event)
    open: set[_Stream] = field(default_factory=set)
    #: streams counted against ``max_open``: open, or being opened
    taken: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self) -> _Slot | None:
        """A slot for one more stream (None: ``max_open`` are taken)."""
        with self._lock:
            if self.taken >= self.max_open:
                return None
            self.taken += 1
        return _Slot(self)

    def _give_back(self) -> None:
        with self._lock:
            self.taken -= 1


class _Slot:
    """One stream's place under the cap; :meth:`release` gives it back, once."""

    def __init__(self, streams: Streams) -> None:
        self._streams: Streams | None = streams

    def release(self) -> None:
        streams, self._streams = self._streams, None
        if streams is not None:
            streams._give_back()


def install(
    app: FastAPI,
    heartbeat: float = 15.0,
    poll_interval: float = 0.5,
    max_open: int = MAX_STREAMS,
    recheck: float = RECHECK_SECONDS,
) -> None:
    if max_open < 1:
        raise InvalidInputError("max event streams: at least 1")
    app.state.streams = Streams(heartbeat, poll_interval, max_open, recheck)


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

    async def items(self, idle: float) -> AsyncIterator[object | None]:
        """Queued items as they come; None when ``idle`` seconds passed without."""
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
                await asyncio.wait_for(self.wake.wait(), idle)
            except TimeoutError:
                yield None


class _Caller:
    """The caller of one stream, checked again while the stream is open.

    ``user`` is who the request authenticated as (None: no auth, nothing to check);
    :meth:`recheck` authenticates the request's ``Authorization`` header again, at
    most every ``every`` seconds, through the server's authenticator (its cache:
    no I/O unless the key's few seconds are up), and keeps the user it finds, with
    its grants as they are now. ``pool_id``: the one pool a filtered stream tells
    (None: all, or not known yet).
    """

    def __init__(
        self,
        authenticator: Authenticator | None,
        header: str | None,
        user: User | None,
        every: float,
        pool_id: str | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.header = header
        self.user = user
        self.every = every
        self.pool_id = pool_id
        self.checked = time.monotonic()

    def readable(self, pool_id: str) -> bool:
        return self.user is None or allowed(self.user, "read", pool_id)

    def forbidden(self, pool_id: str | None, name: str | None) -> ForbiddenError:
        who = "" if self.user is None else f"user {self.user.name!r} ({self.user.role}) "
        what = repr(name or pool_id)
        return ForbiddenError(f"{who}may no longer read pool {what}: event stream ended")

    async def recheck(self) -> LimnoError | None:
        """Why the stream must end now (None: the caller may go on; also when the
        last check was less than ``every`` seconds ago)."""
        if self.authenticator is None or self.user is None:
            return None
        now = time.monotonic()
        if now - self.checked < self.every:
            return None
        self.checked = now
        check = self.authenticator
        try:
            user = check.authenticate_remembered(self.header)
            if user is None:
                user = await run_in_threadpool(check.authenticate_header, self.header)
        except UnauthenticatedError:
            return UnauthenticatedError(
                "the stream's access key no longer authenticates (deleted, or its user):"
                " event stream ended"
            )
        except LimnoError as e:  # the auth store could not be read: end (the client resumes)
            return e
        self.user = user
        if not allowed(user, "read"):
            return ForbiddenError(
                f"user {user.name!r} ({user.role}) may no longer read the lake: event stream ended"
            )
        if self.pool_id is not None and not allowed(user, "read", self.pool_id):
            return self.forbidden(self.pool_id, None)
        return None


class _EventResponse(StreamingResponse):
    """An event stream that gives its slot back however it ends: the stream done, the
    client gone (the response is cancelled), or the response never sent."""

    def __init__(self, body: Any, slot: _Slot) -> None:
        super().__init__(
            body,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._body = body
        self._slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                await self._body.aclose()  # its own cleanup now, not when collected
            finally:
                self._slot.release()


def _message(event: str | None = None, data: Any = None, id: str | None = None) -> bytes:
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    if data is not None:
        lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def _busy(streams: Streams) -> Response:
    """503 for one stream more than the server holds, with when to try again."""
    answer = problem(
        503,
        f"this server holds {streams.max_open} event streams at most and all are open:"
        f" try again in {RETRY_AFTER} s, or another server",
        "StorageError",
    )
    answer.headers["Retry-After"] = str(RETRY_AFTER)
    return answer


@router.get(
    "/events",
    operation_id="events",
    summary="Server-sent events of pools, refs, commits and jobs",
    responses={
        200: {"content": {"text/event-stream": {}}},
        503: {"description": "Every event stream this server holds is open (Retry-After)"},
    },
)
async def events(
    request: Request,
    pool: str | None = None,
    after: str | None = None,
    from_start: bool = False,
    follow: bool = True,
    heartbeat: float | None = None,
    last_event_id: str | None = Header(default=None),
) -> Response:
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
    caller = _Caller(
        request.app.state.authenticator,
        request.headers.get("authorization"),
        user_of(request),
        streams.recheck,
    )
    lake = lake_of(request)
    stopped = threading.Event()

    def open_feed() -> tuple[str, Iterator[Event]]:
        if pool is not None:
            caller.pool_id = _watched(lake, pool, caller, resumed=bool(from_start or start))
        feed = EventFeed(lake.storage, None if from_start else (start or NOW))
        told = feed.events(pool, follow=follow, stop=stopped, poll_interval=streams.poll_interval)
        return feed.position(), told

    slot = streams.take()
    if slot is None:
        return _busy(streams)
    try:
        position, feed = await run_in_threadpool(open_feed)
    except BaseException:
        slot.release()
        raise
    stream = _Stream(feed, stopped, asyncio.get_running_loop())
    body = _sse(stream, streams, position, heartbeat or streams.heartbeat, caller, pool)
    return _EventResponse(body, slot)


def _watched(lake: LocalLake, pool: str, caller: _Caller, resumed: bool) -> str | None:
    """The id of the pool a filtered stream watches (its rechecks check it). Watching
    what comes next, the pool must exist and be readable; read from earlier on, its
    name may be gone (None: learnt from the events) or held by a pool the caller may
    not read (then the stream's first check ends it)."""
    try:
        found = lake.registry.find(pool)  # a pool of either kind
    except NotFoundError:
        if not resumed:
            raise
        return None
    if not resumed and not caller.readable(found.id):
        raise ForbiddenError(f"not allowed to read pool {pool!r}")
    return str(found.id)


async def _sse(
    stream: _Stream,
    streams: Streams,
    position: str,
    heartbeat: float,
    caller: _Caller,
    pool: str | None,
) -> AsyncIterator[bytes]:
    """The SSE messages of ``stream`` for ``caller`` (``pool``: the filter asked)."""
    streams.open.add(stream)
    stream.thread.start()
    quiet_since = time.monotonic()
    # idle, it wakes at least every recheck seconds to check the caller, and tells a
    # keep-alive on the wake closest to each heartbeat (each one when heartbeat <= idle)
    idle = min(heartbeat, caller.every)
    try:
        yield f"id: {position}\nretry: 1000\n\n".encode()
        async for item in stream.items(idle):
            if (refused := await caller.recheck()) is not None:
                yield _error(refused)
                return
            if item is _END:
                yield _message("end", {})
                return
            if isinstance(item, Exception):
                yield _error(item)
                return
            if item is not None:
                event: Event = item  # type: ignore[assignment]
                if event.pool_id is None or caller.readable(event.pool_id):
                    if pool is not None and event.pool_id is not None:
                        caller.pool_id = event.pool_id  # the pool the name names now
                    quiet_since = time.monotonic()
                    yield _message(event.type, event.to_json(), event.id)
                    continue
                if event.pool_id == caller.pool_id:  # the pool a filtered stream watches
                    yield _error(caller.forbidden(event.pool_id, event.pool))
                    return
                # left out: a pool the caller may not read (an unfiltered stream, or an
                # earlier pool of the watched name); quiet still, as far as it can tell
            if time.monotonic() - quiet_since >= heartbeat - idle / 2:
                quiet_since = time.monotonic()
                yield b": keep-alive\n\n"
    finally:
        stream.stop()
        streams.open.discard(stream)


def _error(e: Exception) -> bytes:
    if isinstance(e, LimnoError):
        doc = {"status": http_status(e), "detail": str(e), "error": type(e).__name__}
    else:
        doc = {"status": 500, "detail": f"{type(e).__name__}: {e}", "error": "InternalError"}
    return _message("error", doc)
