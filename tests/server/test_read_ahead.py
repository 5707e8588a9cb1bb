"""The thread that makes a streamed result's chunks ahead of the socket."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator, Iterator

import pytest

from limno.server.ahead import DEPTH, read_ahead

WAIT = 30.0


class Tracked:
    """An iterator of ``count`` chunks that records the threads it runs and closes in."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count, self.fail_at = count, fail_at
        self.made = 0
        self.threads: set[str] = set()
        self.closed = threading.Event()
        self._it = self._chunks()

    def _chunks(self) -> Generator[bytes, None, None]:
        try:
            for i in range(self.count):
                self.threads.add(threading.current_thread().name)
                if i == self.fail_at:
                    raise ValueError(f"chunk {i} failed")
                self.made += 1
                yield b"%d;" % i
        finally:
            self.threads.add(threading.current_thread().name)
            self.closed.set()

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._it)

    def close(self) -> None:
        self._it.close()
        self.threads.add(threading.current_thread().name)
        self.closed.set()


async def _all(chunks: Tracked) -> list[bytes]:
    return [c async for c in read_ahead(chunks)]


def test_every_chunk_comes_in_order_from_another_thread() -> None:
    chunks = Tracked(50)
    got = asyncio.run(_all(chunks))
    assert got == [b"%d;" % i for i in range(50)]
    assert chunks.closed.is_set()
    assert chunks.threads == {"limno-result"}


def test_a_failure_midway_ends_the_stream_after_the_chunks_before_it() -> None:
    chunks = Tracked(20, fail_at=7)
    got: list[bytes] = []

    async def run() -> None:
        async for c in read_ahead(chunks):
            got.append(c)

    with pytest.raises(ValueError, match="chunk 7 failed"):
        asyncio.run(run())
    assert got == [b"%d;" % i for i in range(7)]
    assert chunks.closed.wait(WAIT)


def test_a_reader_that_stops_closes_every_iterator_in_the_producing_thread() -> None:
    chunks, other = Tracked(10_000), Tracked(1)

    async def run() -> bytes:
        stream = read_ahead(chunks, other)
        first = await stream.__anext__()
        await stream.aclose()  # type: ignore[attr-defined]
        return first

    assert asyncio.run(run()) == b"0;"
    assert chunks.closed.wait(WAIT) and other.closed.wait(WAIT)
    assert chunks.threads == {"limno-result"}
    assert chunks.made <= 1 + DEPTH + 1  # never further ahead than its slots allow
