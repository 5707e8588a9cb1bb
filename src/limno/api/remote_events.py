"""The client side of ``GET /v1/events``: a server-sent event stream read as it arrives.

:func:`events` yields the lake's events like ``LocalLake.events``, so ``limno watch``
against a server prints what it prints next to the lake. A connection that drops
(a network hiccup, a server restarting) is reopened with ``Last-Event-ID`` set to the
last id seen, so no event is lost or told twice; the stream's first line is the id
of its starting point, so this holds even before the first event. After
:data:`RETRIES` failed attempts in a row the error is raised.

A server holding all the event streams it may (``limno serve --max-event-streams``)
answers 503 with ``Retry-After``: a busy server, not a broken one, so it gets more
patience: :data:`BUSY_RETRIES` attempts in a row, waiting at least what it asks
and growing to :data:`_MAX_PAUSE` (about 7 minutes in all), said once on stderr
(a watcher that seems to hang should say why).

The server sends a keep-alive comment whenever nothing happened for ``heartbeat``
seconds (asked a bit longer than the caller's ``poll_interval``). A read blocked
between two lines does not wait for it once ``stop`` is set: a thread shuts the
stream's socket down (:func:`_cut_on_stop`), so the read ends at once, and the
caller's Ctrl-C needs no exception raised into it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from limno import errors
from limno.errors import LimnoError, StorageError

if TYPE_CHECKING:
    import httpx

    from limno.api.remote_http import Connection
    from limno.pools.events import Event

__all__ = ["BUSY_RETRIES", "RETRIES", "events"]

#: reconnection attempts in a row before giving up: about a minute of trying (pauses
#: 0.25 s doubling to 30 s), long enough for a server to restart on a busy machine (a
#: new server process imports its libraries and opens the lake first: seconds)
RETRIES = 8
#: ... when the server answers 503 with Retry-After (all its event streams are taken)
BUSY_RETRIES = 20
#: the pause before attempt n (seconds): 0.25, 0.5, 1, 2, ... (busy: at least Retry-After)
_BACKOFF = 0.25
#: the longest pause between two attempts
_MAX_PAUSE = 30.0
#: how often the thread that cuts a followed stream on ``stop`` looks whether the
#: stream ended meanwhile (seconds; ``stop`` itself wakes it at once)
_CUT_CHECK = 0.25
_NOW = "now"


class _Dropped(Exception):
    """The stream ended without its ``end`` event: the connection was cut."""


def events(
    http: Connection,
    pool: str | None = None,
    after: str | None = None,
    follow: bool = True,
    stop: threading.Event | None = None,
    poll_interval: float = 1.0,
) -> Iterator[Event]:
    """The server's events (``after``: an id, ``"now"``, or None for all of them)."""
    from limno.pools.events import Event

    stop = stop or threading.Event()
    heartbeat = min(max(poll_interval * 2, 1.0), 15.0)
    last = after
    failures = 0
    told_busy = False
    while not stop.is_set():
        params: dict[str, Any] = {"pool": pool, "follow": follow, "heartbeat": heartbeat}
        headers = {"Accept": "text/event-stream"}
        if last is None:
            params["from_start"] = True
        elif last != _NOW:
            headers["Last-Event-ID"] = last
        try:
            with (
                http.stream("GET", "/v1/events", params, headers=headers) as response,
                _cut_on_stop(response, stop, follow),
            ):
                for kind, data, id in _messages(response.iter_lines(), stop):
                    failures = 0
                    if id is not None:
                        last = id
                    if kind == "end":
                        return
                    if kind == "error":
                        raise _problem(data)
                    if kind is not None and data is not None:
                        yield Event.from_json(json.loads(data))
                if stop.is_set():
                    return
                raise _Dropped
        except (StorageError, _Dropped) as e:
            if stop.is_set():
                return  # the stream was cut on purpose
            failures += 1
            busy: float | None = getattr(e, "retry_after", None)
            if failures > (RETRIES if busy is None else BUSY_RETRIES):
                if isinstance(e, StorageError):
                    raise
                raise StorageError(
                    f"limno server {http.url} keeps ending the event stream"
                ) from None
            if busy is not None and not told_busy:
                told_busy = True
                _say_busy(http.url, busy)
            if stop.wait(_pause(failures, busy)):
                return


@contextlib.contextmanager
def _cut_on_stop(response: httpx.Response, stop: threading.Event, follow: bool) -> Iterator[None]:
    """While a followed stream is read, ``stop`` set shuts its socket down: the read
    blocked on it returns at once (end of stream) instead of at the server's next
    keep-alive (up to 15 s away). The thread does not outlive the stream by more than
    :data:`_CUT_CHECK`, and is not waited for (the stream's end is not delayed); a
    socket already closed by then refuses the shutdown, which is ignored."""
    network = response.extensions.get("network_stream") if follow else None
    sock = network.get_extra_info("socket") if network is not None else None
    if not isinstance(sock, socket.socket):
        yield
        return
    ended = threading.Event()

    def cut() -> None:
        while not ended.is_set():
            if stop.wait(_CUT_CHECK):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                return

    threading.Thread(target=cut, name="limno-events-cut", daemon=True).start()
    try:
        yield
    finally:
        ended.set()


def _pause(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before trying again after ``attempt`` failures in a row."""
    pause = _BACKOFF * 2 ** (attempt - 1)
    return min(max(pause, retry_after or 0.0), _MAX_PAUSE)


def _say_busy(url: str, retry_after: float) -> None:
    total = sum(_pause(n, retry_after) for n in range(1, BUSY_RETRIES + 1))
    sys.stderr.write(
        f"limno: server {url} has no free event stream (503, all taken):"
        f" trying again for up to {total / 60:.0f} min\n"
    )
    sys.stderr.flush()


def _messages(
    lines: Iterator[str], stop: threading.Event
) -> Iterator[tuple[str | None, str | None, str | None]]:
    """(event type, data, id) of each SSE message (type None: an id alone)."""
    kind: str | None = None
    data: list[str] = []
    id: str | None = None
    for line in lines:
        if stop.is_set():
            return
        if not line:
            if kind is not None or data or id is not None:
                yield (kind or ("message" if data else None)), "\n".join(data) or None, id
            kind, data, id = None, [], None
            continue
        if line.startswith(":"):
            continue  # a keep-alive comment
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            kind = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            id = value


def _problem(data: str | None) -> LimnoError:
    """The exception an ``error`` event stands for (the server's, with its message)."""
    try:
        doc = json.loads(data or "{}")
    except ValueError:
        doc = {}
    found = getattr(errors, str(doc.get("error", "")), None)
    cls = found if isinstance(found, type) and issubclass(found, LimnoError) else LimnoError
    err = cls.__new__(cls)
    Exception.__init__(err, str(doc.get("detail") or "the event stream failed"))
    return err
