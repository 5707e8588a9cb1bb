"""The lane's own HTTP/1.1 exchange (limno.api.remote_answer) against answers a real
socket sends: chunked bodies with trailers, informational answers first, a body
that ends with the connection, ``Connection: close``; a request with a line break in
a header refused before anything is sent; an answer cut short a StorageError."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from limno.api.remote_lane import Lane, lane_for
from limno.errors import StorageError


class _Scripted:
    """A loopback server that reads one request head (and its Content-Length body) per
    answer in ``answers``, sends that answer, and closes after each one marked so."""

    def __init__(self, answers: list[tuple[bytes, bool]]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        pending = list(self.answers)
        while pending:
            conn, _ = self.sock.accept()
            self.connections += 1
            with conn:
                data = b""
                while pending:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if b"\r\n\r\n" not in data:
                        break
                    head, _, data = data.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    while len(data) < length:
                        data += conn.recv(65536)
                    self.requests.append(head + b"\r\n\r\n" + data[:length])
                    data = data[length:]
                    answer, close = pending.pop(0)
                    conn.sendall(answer)
                    if close:
                        break

    def close(self) -> None:
        self.thread.join(30)
        self.sock.close()


@pytest.fixture
def scripted(request: pytest.FixtureRequest) -> Iterator[tuple[_Scripted, Lane]]:
    server = _Scripted(request.param)
    lane = lane_for(server.url)
    assert lane is not None
    try:
        yield server, lane
    finally:
        lane.close()
        server.close()


_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
    b"5;ext=1\r\nhello\r\n1\r\n,\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
)
_INFO = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nnew"
_UNTIL_CLOSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end"
_CLOSING = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
_PLAIN = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nRetry-After: 7\r\n\r\nok"


@pytest.mark.parametrize(
    "scripted", [[(_CHUNKED, False), (_INFO, False), (_PLAIN, False)]], indirect=True
)
def test_chunked_and_informational_answers_keep_the_connection(
    scripted: tuple[_Scripted, Lane],
) -> None:
    server, lane = scripted
    first = lane.exchange("POST", "/v1/x", {"a": "b c"}, b'{"k":1}', {"Accept": "x/y"}, 10)
    assert (first.status_code, first.content) == (200, b"hello, world")
    assert first.headers.get("content-type") == "text/plain"  # any case
    assert first.headers.get("Content-Type") == "text/plain"
    second = lane.exchange("GET", "/v1/y", {}, None, {}, 10)
    assert (second.status_code, second.content) == (201, b"new")
    third = lane.exchange("PUT", "/v1/z", {}, None, {}, 10)
    assert third.headers.get("retry-after") == "7"
    assert server.connections == 1  # one kept-alive connection throughout
    head = server.requests[0].split(b"\r\n")
    assert head[0] == b"POST /v1/x?a=b+c HTTP/1.1"
    host = server.url.removeprefix("http://").encode()
    for line in (b"Host: " + host, b"Accept-Encoding: identity", b"Content-Length: 7"):
        assert line in head
    assert server.requests[0].endswith(b'\r\n\r\n{"k":1}')
    assert b"Content-Length" not in server.requests[1]  # a GET without a body: none
    assert b"Content-Length: 0" in server.requests[2]  # a PUT without one: 0, as http.client


@pytest.mark.parametrize(
    "scripted", [[(_UNTIL_CLOSE, True), (_CLOSING, True), (_PLAIN, False)]], indirect=True
)
def test_answers_that_end_the_connection_are_read_whole_and_not_reused(
    scripted: tuple[_Scripted, Lane],
) -> None:
    server, lane = scripted
    assert lane.exchange("GET", "/a", {}, None, {}, 10).content == b"to the end"
    assert lane._idle == []
    assert lane.exchange("GET", "/b", {}, None, {}, 10).content == b"ok"
    assert lane._idle == []
    assert lane.exchange("GET", "/c", {}, None, {}, 10).content == b"ok"
    assert len(lane._idle) == 1
    assert server.connections == 3


@pytest.mark.parametrize(
    "scripted",
    [[(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", True)]],
    indirect=True,
)
def test_an_answer_cut_short_is_a_storage_error(scripted: tuple[_Scripted, Lane]) -> None:
    _, lane = scripted
    with pytest.raises(StorageError, match="ended an answer early"):
        lane.exchange("GET", "/a", {}, None, {}, 10)
    assert lane._idle == []


@pytest.mark.parametrize("scripted", [[(_PLAIN, False)]], indirect=True)
def test_a_header_with_a_line_break_is_refused_before_sending(
    scripted: tuple[_Scripted, Lane],
) -> None:
    server, lane = scripted
    with pytest.raises(ValueError, match="line break"):
        lane.exchange("GET", "/a", {}, None, {"X-Evil": "a\r\nX-Injected: 1"}, 10)
    assert lane.exchange("GET", "/a", {}, None, {}, 10).content == b"ok"
    assert len(server.requests) == 1 and b"X-Injected" not in server.requests[0]
