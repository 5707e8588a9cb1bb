"""Helpers of the tests of ``GET /v1/events`` on a real ``limno serve``
(tests/server/: test_events_sse.py, test_events_limits.py, test_protect_events_sse.py).

Their fixtures (``events_lake``, ``events_server``) are in tests/server/conftest.py.
Every wait is bounded: a read by the client's timeout (:data:`BOUND`; the servers of
these tests send keep-alives every 0.2 s, so a read never waits long), a wait for
events by a deadline of :data:`BOUND` seconds.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from limno.api.remote import RemoteLake
from limno.pools.events import Event
from server_support import Served

__all__ = ["BOUND", "Message", "Stream", "connect", "limno", "watching"]

#: every wait of these tests is bounded by this (seconds)
BOUND = 30.0


@dataclass
class Message:
    """One message of a stream: an event (with its data and id), a bare id, or a
    keep-alive comment (``comment``: nothing else is set)."""

    event: str | None
    data: dict[str, Any] | None
    id: str | None
    comment: bool = False

    @property
    def branch(self) -> str | None:
        return None if self.data is None else self.data.get("data", {}).get("branch")

    @property
    def pool(self) -> str | None:
        return None if self.data is None else self.data.get("pool")


class Stream:
    """One SSE response, read message by message."""

    def __init__(
        self,
        client: httpx.Client,
        params: Mapping[str, Any] | None = None,
        *,
        path: str = "/v1/events",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.cm = client.stream("GET", path, params=dict(params or {}), headers=headers)
        self.response = self.cm.__enter__()
        self.lines = self.response.iter_lines()

    def close(self) -> None:
        self.cm.__exit__(None, None, None)

    def next(self) -> Message | None:
        """The next message, a keep-alive comment as one with ``comment`` set (so that a
        caller waiting for an event sees time pass); None: the stream ended."""
        event, data, id = None, None, None
        for line in self.lines:
            if line.startswith(":"):
                return Message(None, None, None, comment=True)
            if not line:
                if event or data or id:
                    return Message(event, data, id)
                continue
            name, _, value = line.partition(": ")
            if name == "event":
                event = value
            elif name == "data":
                data = json.loads(value)
            elif name == "id":
                id = value
        return None

    def until(self, done: Callable[[Message], bool]) -> list[Message]:
        """Events (keep-alives and bare ids skipped) up to and including the first that
        is ``done``."""
        return self._read(lambda got: bool(got) and done(got[-1]))

    def events(self, n: int) -> list[Message]:
        """The next ``n`` events."""
        return self._read(lambda got: len(got) >= n)

    def _read(self, enough: Callable[[list[Message]], bool]) -> list[Message]:
        deadline = time.monotonic() + BOUND
        got: list[Message] = []
        while not enough(got):
            assert time.monotonic() < deadline, f"only {got} before the deadline"
            m = self.next()
            assert m is not None, f"stream ended after {got}"
            if m.event is not None:
                got.append(m)
        return got

    def rest(self) -> list[Message]:
        """Every event until the server ends the stream."""
        deadline = time.monotonic() + BOUND
        got: list[Message] = []
        while (m := self.next()) is not None:
            assert time.monotonic() < deadline, f"still open after {got}"
            if m.event is not None:
                got.append(m)
        return got


def connect(served: Served, env: Mapping[str, str] | None = None) -> httpx.Client:
    """A client of ``served`` with the credentials of ``env`` (default: its admin's)."""
    env = served.env if env is None else env
    auth = httpx.BasicAuth(env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"])
    return httpx.Client(base_url=served.url, auth=auth, timeout=BOUND)


def limno(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``limno ARGS`` in a process of its own (``env`` added to this one's)."""
    return subprocess.run(
        [sys.executable, "-m", "limno", *args],
        capture_output=True,
        text=True,
        timeout=BOUND * 2,
        env={**os.environ, **(env or {})},
        check=False,
    )


def watching(
    url: str,
    stop: threading.Event,
    poll_interval: float,
    pool: str | None = None,
    after: str | None = "now",
) -> tuple[threading.Thread, queue.Queue[Event | BaseException]]:
    """A thread telling the events (of ``pool``, or all; ``after``: new ones, or those
    after an id, or all with None) through a client of ``url`` (credentials from the
    environment) into the queue until ``stop``, and the error that ended it if one did."""
    got: queue.Queue[Event | BaseException] = queue.Queue()

    def watch() -> None:
        try:
            with RemoteLake(url) as remote:
                for event in remote.events(pool, after, stop=stop, poll_interval=poll_interval):
                    got.put(event)
        except BaseException as e:
            got.put(e)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, got
