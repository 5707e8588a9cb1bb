"""A result's chunks made ahead of the socket, in a thread of their own.

Starlette iterates a plain iterator one chunk at a time in its thread pool: it asks
for a chunk, waits for it, sends it, and only then asks for the next, so reading and
encoding a scan never overlap with sending it. :func:`read_ahead` runs the iterator
in one thread that stays up to :data:`DEPTH` chunks ahead of the event loop, which
sends them as they come: a large scan's decoding, encoding and sending overlap (on
two cores, that is most of the gain), and the thread hops are one per chunk made,
not two per chunk sent.

The iterator is closed in its own thread when the answer ends for any reason (sent,
failed, or the client gone), so the objects a scan was reading are let go at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

__all__ = ["DEPTH", "read_ahead"]

#: how many chunks the producing thread may be ahead of the socket (about 1 MiB each
#: for an Arrow stream: the memory a slow client can make the server hold)
DEPTH = 4
_END = object()


async def read_ahead(chunks: Iterator[Any], *closing: Iterator[Any]) -> AsyncIterator[Any]:
    """The chunks of ``chunks``, made in a thread while earlier ones are sent; then
    ``chunks`` and every iterator of ``closing`` are closed in that thread."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Queue[Any] = asyncio.Queue()
    slots = threading.Semaphore(DEPTH)
    stop = threading.Event()

    def hand(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(ready.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server is gone
            stop.set()

    def produce() -> None:
        item: Any = _END
        try:
            for chunk in chunks:
                slots.acquire()
                if stop.is_set():
                    return
                hand(chunk)
        except BaseException as e:  # noqa: BLE001 -- handed to the sending side
            item = e
        finally:
            for it in (chunks, *closing):
                close = getattr(it, "close", None)
                if close is not None:
                    close()
        if not stop.is_set():
            hand(item)

    worker = threading.Thread(target=produce, name="limno-result", daemon=True)
    worker.start()
    try:
        while True:
            item = await ready.get()
            slots.release()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        slots.release()  # a producer waiting for a slot sees the stop at once
