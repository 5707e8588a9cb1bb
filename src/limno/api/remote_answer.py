"""One whole HTTP/1.1 exchange on a kept-alive socket, for the lane's small answers.

A remote ``get`` of one key was about 1 ms of the client's CPU, most of it (three
quarters in a profile) in ``http.client``: each header put through its checks one
call at a time, and the answer's head parsed by the ``email`` package (a feed
parser, a message object, a policy per header). The answers of
:meth:`limno.api.remote_lane.Lane.exchange` need none of that: a status, a handful
of headers (of which the client reads one) and a body of known length, or chunked.
:func:`send_request` writes the request head as ``http.client`` would (Host,
``Accept-Encoding: identity``, a Content-Length for a body or a method that expects
one) in one write with a small body; :func:`read_answer` parses the answer with
httptools (llhttp, the C parser uvicorn serves limno with: h11, pure Python, cost
~150 µs an answer, httptools a few).

Failures are worded as ``http.client``'s, so the lane words them as before: a
connection the server closed before answering raises ``RemoteDisconnected``, an
answer cut short ``IncompleteRead``, a malformed one another ``HTTPException``; a
header with a line break or a target with a control character is refused before
anything is sent.
"""

from __future__ import annotations

import http.client
import re
import socket
from collections.abc import Mapping

import httptools

__all__ = ["Fields", "read_answer", "send_request"]

#: bodies of up to this many bytes go out in one write with their request's head
JOINED = 64 << 10
#: methods whose request carries a Content-Length even without a body (as http.client)
_EXPECTING_BODY = frozenset({"PATCH", "POST", "PUT"})
#: what may not appear in a request target (http.client's check: controls and space)
_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
_READ = 1 << 16


class Fields(dict[str, str]):
    """An answer's headers by lower-cased name; :meth:`get` takes any case."""

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)


def send_request(
    sock: socket.socket,
    method: str,
    target: str,
    host: str,
    headers: Mapping[str, str],
    body: bytes | None,
) -> None:
    """Write one request: head and a small body in one write."""
    if _BAD_TARGET.search(target):
        raise http.client.InvalidURL(f"URL can't contain control characters. {target!r}")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"invalid header {name!r}: a line break in its name or value")
        lines.append(f"{name}: {value}")
    if body is not None or method in _EXPECTING_BODY:
        lines.append(f"Content-Length: {len(body or b'')}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    if body and len(body) <= JOINED:
        sock.sendall(head + body)
        return
    sock.sendall(head)
    if body:
        sock.sendall(body)


class _Answer:
    """httptools' callbacks: the last (non-informational) answer's parts."""

    def __init__(self) -> None:
        self.fields = Fields()
        self.parts: list[bytes] = []
        self.headed = self.done = self.keep = self.past = False
        self.status = 0
        self.parser: httptools.HttpResponseParser | None = None

    def on_message_begin(self) -> None:
        if self.done:  # bytes past the answer: the connection is not reused
            self.past = True

    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self.fields[key] = f"{self.fields[key]}, {text}" if key in self.fields else text

    def on_headers_complete(self) -> None:  # llhttp knows keep-alive here, not later
        self.headed = True
        assert self.parser is not None
        self.keep = self.parser.should_keep_alive() and self.parser.get_http_version() == "1.1"

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        assert self.parser is not None
        if 100 <= self.parser.get_status_code() < 200:  # 100 Continue and the like
            self.fields, self.parts, self.headed = Fields(), [], False
        elif not self.past:
            self.done, self.status = True, self.parser.get_status_code()


def read_answer(sock: socket.socket, method: str) -> tuple[int, Fields, bytes, bool]:
    """The answer to the request just sent: status, headers, body, and whether the
    connection may carry another request (HTTP/1.1 keep-alive, the body's end known
    and nothing read past it)."""
    answer = _Answer()
    parser = answer.parser = httptools.HttpResponseParser(answer)
    received = 0
    while True:
        data = sock.recv(_READ)
        if not data:
            return _at_close(answer, parser, method, received)
        received += len(data)
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as e:
            raise http.client.HTTPException(f"malformed answer: {e}") from None
        if answer.done:
            break
    keep = answer.keep and not answer.past
    return answer.status, answer.fields, b"".join(answer.parts), keep


def _at_close(
    answer: _Answer, parser: httptools.HttpResponseParser, method: str, received: int
) -> tuple[int, Fields, bytes, bool]:
    """The answer when the server closed the connection before its end was parsed:
    whole if its body runs to the close, else an error."""
    content = b"".join(answer.parts)
    if not received:
        raise http.client.RemoteDisconnected("Remote end closed connection without response")
    framed = "content-length" in answer.fields or "transfer-encoding" in answer.fields
    if not answer.headed or framed or method == "HEAD":
        raise http.client.IncompleteRead(content)
    return parser.get_status_code(), answer.fields, content, False
