"""The client's lane as a transport (limno.api.remote_lane): a small request in one
write, streamed answers read from the socket and the connection kept only when the
answer was read to its end; and FastAPI's per-request telemetry off by default."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Generator, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from limno import Lake
from limno.api import remote_lane
from limno.api.remote import RemoteLake
from limno.server.app import create_app
from server_support import served

#: the answer the fake server gives every request
_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class _Recorder:
    """A one-connection HTTP server on loopback that records each read of a request
    and answers it once its head and body (of the Content-Length given) are in."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        #: per request, the pieces ``recv`` gave
        self.requests: list[list[bytes]] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            pending = b""
            while True:
                pieces: list[bytes] = []
                while not _complete(pending):
                    data = conn.recv(1 << 20)
                    if not data:
                        return
                    pieces.append(data)
                    pending += data
                head, _, rest = pending.partition(b"\r\n\r\n")
                cut = _length(head)
                pending = rest[cut:]
                self.requests.append(pieces)
                conn.sendall(_OK)

    def close(self) -> None:
        self._thread.join(10)
        self.sock.close()


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _complete(data: bytes) -> bool:
    head, sep, rest = data.partition(b"\r\n\r\n")
    return bool(sep) and len(rest) >= _length(head)


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    r = _Recorder()
    try:
        yield r
    finally:
        r.close()


def test_a_small_request_goes_out_in_one_write(recorder: _Recorder) -> None:
    lane = remote_lane.lane_for(recorder.url)
    assert lane is not None
    try:
        bodies = [b'{"keys":[1]}', b'{"keys":[2]}', None, b"", b"x" * (remote_lane._JOINED + 1)]
        for body in bodies:  # one connection, kept alive throughout
            headers = {"Content-Type": "application/json"}
            answer = lane.exchange("POST", "/v1/x", {}, body, headers, 5)
            assert (answer.status_code, answer.content) == (200, b"ok")
    finally:
        lane.close()
    assert len(recorder.requests) == len(bodies)
    for pieces, body in zip(recorder.requests[:4], bodies[:4], strict=True):
        assert len(pieces) == 1  # head and body (if any) in one read: one write
        assert pieces[0].endswith(b"\r\n\r\n" + (body or b""))
        assert pieces[0].count(b"POST /v1/x ") == 1
    big = b"".join(recorder.requests[4])
    assert big.count(b"POST /v1/x ") == 1 and big.endswith(b"x" * (remote_lane._JOINED + 1))


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    lake = str(tmp_path / "lake")
    pool = Lake.init(lake).create_pool("rows", key="k")
    pool.load([pa.table({"k": list(range(0, 4000, 2)), "v": ["a"] * 2000})])
    pool.load([pa.table({"k": list(range(1, 4000, 2)), "v": ["b"] * 2000})])  # interleaved
    with served(lake) as at:
        yield at


def test_an_arrow_scan_read_to_its_end_keeps_its_connection(url: str) -> None:
    lake = RemoteLake(url)
    try:
        lane = lake._http.lane
        assert lane is not None
        pool = lake.pool("rows")
        got = pool.scan(limit=3000)  # the server merges: an Arrow IPC stream, chunked
        assert got.num_rows == 3000
        assert got.column("k").to_pylist() == list(range(3000))
        assert len(lane._idle) == 1  # read to its end: kept for the next request
        kept = lane._idle[0][1]
        assert pool.scan(start=10, end=20).column("k").to_pylist() == list(range(10, 20))
        assert lane._idle[0][1] is kept
    finally:
        lake.close()


def test_a_scan_left_early_closes_its_connection(url: str) -> None:
    lake = RemoteLake(url)
    try:
        lane = lake._http.lane
        assert lane is not None
        tables = lake.pool("rows").iter_scan(limit=4000)
        assert isinstance(tables, Generator)
        first = next(tables)
        assert first.num_rows > 0
        tables.close()  # the rest of the answer unread: the connection cannot be reused
        assert lane._idle == []
        assert lake.pool("rows").get([7]).column("v").to_pylist() == ["b"]
    finally:
        lake.close()


def test_fastapis_telemetry_is_off_unless_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    for name in [n for n in os.environ if n.startswith(("OTEL_", "FASTAPI_OTEL_"))]:
        monkeypatch.delenv(name)
    assert not create_app(lake)._native_telemetry.enabled()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "limno")
    assert create_app(lake)._telemetry["tracing"] is True
