"""A real webhook receiver for the webhook tests: ``http.server.ThreadingHTTPServer`` on
127.0.0.1 (a free port) in a thread, recording every request and answering as the
test says (a status and body, or a stall until the test releases it).

A stalled handler waits on an Event, not a clock: the test's webhook times out on its
own short timeout, and :meth:`Receiver.close` releases the handler before joining
the server's threads (every socket closed, no thread left behind).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bounded import DEFAULT_TIMEOUT

__all__ = ["Received", "Receiver", "receiving"]


@dataclass(frozen=True)
class Received:
    """One request as the receiver read it."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> dict[str, Any]:
        doc = json.loads(self.body)
        assert isinstance(doc, dict)
        return doc


class Receiver:
    """The server and what it has received; set ``status``/``answer`` or ``stall``
    before the request comes."""

    def __init__(self) -> None:
        self.status = 200
        self.answer = b"ok\n"
        self.stall = False
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[Received] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                with receiver._lock:
                    receiver._requests.append(Received("POST", self.path, headers, body))
                if receiver.stall:
                    receiver.release.wait(DEFAULT_TIMEOUT)
                try:
                    self.send_response(receiver.status)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(receiver.answer)))
                    self.end_headers()
                    self.wfile.write(receiver.answer)
                except OSError:  # the client gave up (a stalled answer): nobody listens
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                """Quiet: the test asserts on what was recorded."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = False  # server_close joins the handlers
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._requests)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(DEFAULT_TIMEOUT)
        assert not self._thread.is_alive()


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()
    try:
        yield receiver
    finally:
        receiver.close()
