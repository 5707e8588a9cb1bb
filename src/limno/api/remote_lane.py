"""The short lane of the client: whole answers over kept-alive ``http.client`` connections.

Most requests of a client are small and answered whole: a lookup, a load of a small
table, a pool's details. For those, httpx's own work per request (building and
checking the URL three times, the auth and redirect flows, cookies, its event
machinery) cost about 0.5 ms of CPU, as much as a quarter of a remote ``get``; the
standard library's ``http.client`` does the same exchange in about a fifth of that,
and :mod:`limno.api.remote_answer` (the request head written in one piece, the answer
read with a split and a buffer, no ``email`` parser) with less again: a remote
``get``'s client CPU went from 1.09 to 0.74 ms with it (loaded machine, A/B).
:class:`Lane` sends such requests over keep-alive connections of its own.

A scan's answer also comes this way (:meth:`Lane.streaming`): ``http.client`` reads
a body, chunked or of known length, straight into the caller's buffer (a line of
Python per chunk), where httpx parses it in Python through h11, 64 KiB at a time,
copying each piece several times: for an Arrow IPC scan that was most of the
client's work. Events, file reads and large uploads keep going through httpx.

It is used only where it sends exactly what httpx would: plain ``http://`` servers
that no proxy setting of the environment applies to (``HTTPS`` servers and proxies
stay with httpx, which handles certificates and proxies). A connection idle for
:data:`EXPIRY` seconds is not used again (the server closes them after 5 s), and one
the server closed anyway is noticed before it is reused, as httpx notices it.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping

from limno.api.remote_answer import JOINED, Fields, read_answer, send_request
from limno.errors import StorageError

__all__ = ["EXPIRY", "Answer", "Lane", "lane_for"]

#: bodies of up to this many bytes go out in one write with their request's head
_JOINED = JOINED
#: connections kept idle at most (more only while more threads send at once)
_IDLE = 8
#: seconds a connection may have been idle and still be used: well under the server's
#: keep-alive timeout (uvicorn's: 5 s), so that the server never closes one just as a
#: request goes out on it (a reset, which a busy machine made likely: between the
#: check for a close and the send, a client waiting for a core can lose seconds)
EXPIRY = 2.0


class Answer:
    """A whole answer: status, headers (looked up case-insensitively), body."""

    def __init__(
        self, status: int, headers: http.client.HTTPMessage | Fields, content: bytes, url: str
    ):
        self.status_code = status
        self.headers = headers
        self.content = content
        self.url = url


def lane_for(base_url: str) -> Lane | None:
    """A lane to ``base_url``, or None where httpx must go (TLS, a proxy, odd URLs)."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme.lower() != "http" or not parts.hostname or parts.query or parts.fragment:
        return None
    proxies = urllib.request.getproxies_environment()
    if ("http" in proxies or "all" in proxies) and not urllib.request.proxy_bypass(parts.hostname):
        return None
    try:
        port = parts.port or 80
        name = parts.hostname.encode("idna").decode("ascii")
    except (ValueError, UnicodeError):
        return None
    return Lane(base_url, parts.hostname, port, parts.path.rstrip("/"), name)


class Lane:
    """Keep-alive connections to one plain-HTTP server (thread-safe: a connection is
    used by one request at a time)."""

    def __init__(self, url: str, host: str, port: int, prefix: str, name: str = "") -> None:
        self.url = url
        self.host = host
        self.port = port
        self.prefix = prefix
        # the Host header http.client would send (port only when not the default)
        shown = f"[{name or host}]" if ":" in host else (name or host)
        self.host_header = shown if port == 80 else f"{shown}:{port}"
        self._idle: list[tuple[float, http.client.HTTPConnection]] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, conn in idle:
            conn.close()

    def exchange(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: bytes | None,
        headers: Mapping[str, str],
        connect_timeout: float,
    ) -> Answer:
        """Send one request and read its whole answer (StorageError when the server
        cannot be reached or ends the answer early): written and read here
        (:mod:`limno.api.remote_answer`), on a connection :meth:`streaming` may use
        next (``http.client`` keeps no state of its own between exchanges)."""
        target = self._target(path, query)
        conn = self._take(connect_timeout)
        with self.errors(conn):
            if conn.sock is None:
                conn.connect()
            assert conn.sock is not None
            send_request(conn.sock, method, target, self.host_header, headers, body)
            status, fields, content, keep = read_answer(conn.sock, method)
        if keep:
            self._give(conn)
        else:
            conn.close()
        return Answer(status, fields, content, self.url + target)

    @contextlib.contextmanager
    def streaming(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        connect_timeout: float,
    ) -> Iterator[http.client.HTTPResponse]:
        """Send one request without a body; its answer, for the caller to read as it
        arrives (``readinto``: straight into the caller's buffer). The connection is
        kept for another request only when the caller read the whole body; a body
        left unread (the caller stopped early) closes it. Transport errors while the
        block reads are StorageErrors, as :meth:`exchange`'s."""
        conn = self._take(connect_timeout)
        with self.errors(conn):
            conn.request(method, self._target(path, query), None, dict(headers))
            response = conn.getresponse()
            yield response
        if response.isclosed() and not response.will_close:
            self._give(conn)
        else:
            conn.close()

    @contextlib.contextmanager
    def errors(self, conn: http.client.HTTPConnection | None = None) -> Iterator[None]:
        """Transport failures in the block as one-line StorageErrors (``conn``: closed
        on any failure, and on a caller's early exit)."""
        done = False
        try:
            yield
            done = True
        except TimeoutError as e:
            raise StorageError(f"limno server {self.url} did not answer in time ({e})") from None
        except (ConnectionRefusedError, socket.gaierror) as e:
            raise StorageError(f"cannot reach limno server {self.url}: {e}") from None
        except (OSError, http.client.HTTPException) as e:
            why = str(e).strip() or type(e).__name__
            raise StorageError(f"limno server {self.url} ended an answer early: {why}") from None
        finally:
            if conn is not None and not done:
                conn.close()

    def _target(self, path: str, query: Mapping[str, str]) -> str:
        target = self.prefix + path
        return target + "?" + urllib.parse.urlencode(query) if query else target

    def _take(self, connect_timeout: float) -> http.client.HTTPConnection:
        """An idle connection still open, or a new one (connected on first use, then
        without a timeout: answers take as long as the work)."""
        while True:
            with self._lock:
                since, conn = self._idle.pop() if self._idle else (0.0, None)
            if conn is None:
                return _Connection(self.host, self.port, timeout=connect_timeout)
            fresh = time.monotonic() - since < EXPIRY
            if fresh and conn.sock is not None and not _readable(conn.sock):
                return conn
            conn.close()  # idle too long, closed by the server, or sent what no one asked

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < _IDLE:
                self._idle.append((time.monotonic(), conn))
                return
        conn.close()


class _Connection(http.client.HTTPConnection):
    """A connection whose timeout bounds the connecting only; with Nagle off, as
    httpx's. (A small request's head and body go out in one write:
    :func:`limno.api.remote_answer.send_request`; with Nagle off, two writes were two
    packets, and the server's event loop woke twice for one request.)"""

    def connect(self) -> None:
        super().connect()
        assert self.sock is not None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(None)


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read: the server's close."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True
