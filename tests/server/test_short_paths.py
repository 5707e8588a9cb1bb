"""The short ways through server and client (limno.server.fast, limno.api.remote_lane):
a lookup answered without FastAPI's routing only when the guard would allow it without
reading anything, the same answers and refusals either way, and the client's
keep-alive lane replacing a connection the server closed."""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from starlette.types import Message, Receive, Scope, Send

from limno import Lake
from limno.api import remote_lane
from limno.api.local import LocalLake
from limno.api.local_auth import LocalAuth
from limno.api.remote_lane import lane_for
from limno.errors import (
    ForbiddenError,
    InvalidInputError,
    StorageError,
    UnauthenticatedError,
)
from limno.server.app import create_app
from limno.server.fast import FastPaths
from server_support import AUTH_SECRET, Served, served_user, start_server

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    lake = str(tmp_path_factory.mktemp("short") / "lake")
    local = Lake.init(lake)
    for name in ("rows", "secret", "doomed"):
        local.create_pool(name, key="k").load([pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]})])
    server = start_server(lake)
    try:
        yield server, lake
    finally:
        assert server.stop() == 0


def _pool_id(lake: str, name: str) -> str:
    return str(LocalLake.open(lake).pool(name).config.id)


def _get(served: Served, pool: str, body: bytes, auth: str | None = None) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Accept": ARROW}
    headers["Authorization"] = auth or served.authorization.split(": ", 1)[1].strip()
    return httpx.post(f"{served.url}/v1/pools/{pool}/get", content=body, headers=headers)


def _header(env: dict[str, str], secret: str | None = None) -> str:
    pair = f"{env['LIMNO_ACCESS_KEY_ID']}:{secret or env['LIMNO_SECRET_ACCESS_KEY']}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def test_lookups_answer_alike_and_refuse_alike(
    world: tuple[Served, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeated lookups (the second and later on the short path) give the same rows;
    a key without a grant on the pool is refused every time, also once the server
    remembers both the key and the pool id; a wrong secret is 401; a bad body is 400."""
    served, lake = world
    rows, secret = _pool_id(lake, "rows"), _pool_id(lake, "secret")
    answers = [_get(served, rows, b'{"keys":[2]}') for _ in range(3)]
    for r in answers:
        assert r.status_code == 200, r.text
        assert ipc.open_stream(r.content).read_all().to_pylist() == [{"k": 2, "v": "b"}]
    assert len({r.content for r in answers}) == 1

    reader = served_user(served, "fenced", "analyst")
    LocalAuth(LocalLake.open(lake), server_secret=AUTH_SECRET).grant("fenced", "secret", "none")
    header = _header(reader)
    assert _get(served, rows, b'{"keys":[1]}', header).status_code == 200  # key remembered
    _get(served, secret, b'{"keys":[1]}')  # the admin's: the pool id remembered
    for _ in range(2):
        refused = _get(served, secret, b'{"keys":[1]}', header)
        assert refused.status_code == 403, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["error"] == "ForbiddenError"
    wrong = _get(served, rows, b'{"keys":[1]}', _header(reader, "not-the-secret"))
    assert (wrong.status_code, wrong.json()["error"]) == (401, "UnauthenticatedError")
    bad = _get(served, rows, b'{"keys":[1],"colour":"red"}')
    assert (bad.status_code, bad.json()["error"]) == (400, "InvalidInputError")
    assert "colour" in bad.json()["detail"]

    monkeypatch.setenv("LIMNO_ACCESS_KEY_ID", reader["LIMNO_ACCESS_KEY_ID"])
    monkeypatch.setenv("LIMNO_SECRET_ACCESS_KEY", reader["LIMNO_SECRET_ACCESS_KEY"])
    client = Lake.open(served.url)
    try:
        assert client.pool("rows").get([3]).to_pylist() == [{"k": 3, "v": "c"}]
        with pytest.raises(ForbiddenError):
            client.pool("secret").get([1])
        with pytest.raises(InvalidInputError, match="invalid request: body"):
            client._http.whole(  # type: ignore[attr-defined]
                "POST", f"/v1/pools/{rows}/get", content=b"{", headers={"Accept": ARROW}
            )
    finally:
        client.close()  # type: ignore[attr-defined]


def test_a_dropped_pool_is_not_found_on_the_short_path(world: tuple[Served, str]) -> None:
    """A pool dropped after its id was remembered: 404 problem+json, in the lake's words."""
    served, lake = world
    doomed = _pool_id(lake, "doomed")
    assert _get(served, doomed, b'{"keys":[1]}').status_code == 200
    LocalLake.open(lake).drop_pool("doomed")
    gone = _get(served, doomed, b'{"keys":[1]}')
    assert gone.status_code == 404, gone.text
    assert gone.headers["content-type"] == "application/problem+json"
    assert gone.json()["error"] == "NotFoundError"


def test_the_short_path_answers_alone_or_replays_the_body(tmp_path: Path) -> None:
    """FastPaths over a stand-in for the rest of the app: a valid lookup on a server
    without auth never reaches it; anything else reaches it with the body intact."""
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("rows", key="k").load([pa.table({"k": [1, 2]})])
    app = create_app(lake)
    reached: list[bytes] = []

    async def rest(scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        reached.append(message["body"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    fast = FastPaths(rest)

    async def call(path: str, body: bytes) -> int:
        scope: Scope = {
            "type": "http",
            "method": "POST",
            "path": path,
            "root_path": "",
            "query_string": b"",
            "headers": [(b"content-type", b"application/json"), (b"accept", ARROW.encode())],
            "app": app,
        }
        pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
        sent: list[Message] = []

        async def receive() -> Message:
            return pending.pop(0)

        async def send(message: Message) -> None:
            sent.append(message)

        await fast(scope, receive, send)
        return int(sent[0]["status"])

    pool = _pool_id(lake, "rows")

    def status(path: str, body: bytes) -> int:
        return asyncio.run(call(path, body))

    assert status(f"/v1/pools/{pool}/get", b'{"keys":[1]}') == 200
    assert status(f"/v1/pools/{pool}/get", b'{"keys":[9]}') == 200  # no row: still 200
    assert reached == []
    assert status(f"/v1/pools/{pool}/get", b'{"keys":1}') == 299
    assert status(f"/v1/pools/{pool}/scan", b'{"keys":[1]}') == 299
    assert reached == [b'{"keys":1}', b'{"keys":[1]}']
    assert status("/v1/pools/nope/get", b'{"keys":[1]}') == 404  # the lake's NotFound


def test_the_lane_goes_where_httpx_would_send_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain HTTP only, and not through a proxy the environment names."""
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert lane_for("http://127.0.0.1:9867") is not None
    assert lane_for("https://127.0.0.1:9867") is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert lane_for("http://lake.example:9867") is None
    monkeypatch.setenv("NO_PROXY", "lake.example")
    assert lane_for("http://lake.example:9867") is not None


def test_the_lane_replaces_a_connection_the_server_closed() -> None:
    """A server that closes each connection after one answer (as on its keep-alive
    timeout): every request still gets its answer, each on a new connection; a port
    nobody listens on is a StorageError in the client's words."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    closed = threading.Semaphore(0)
    accepted: list[int] = []

    def serve() -> None:
        for i in range(3):
            conn, _ = listener.accept()
            accepted.append(i)
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                body = f'{{"n":{i}}}'.encode()
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n"
                conn.sendall(head.encode() + body)  # keep-alive by HTTP/1.1's default
            closed.release()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    lane = lane_for(f"http://127.0.0.1:{port}")
    assert lane is not None
    try:
        for i in range(3):
            answer = lane.exchange("GET", "/x", {}, None, {}, 10.0)
            assert (answer.status_code, answer.content) == (200, f'{{"n":{i}}}'.encode())
            assert closed.acquire(timeout=30)
    finally:
        lane.close()
        thread.join(30)
        listener.close()
    assert accepted == [0, 1, 2]
    with pytest.raises(StorageError, match="cannot reach limno server"):
        lane.exchange("GET", "/x", {}, None, {}, 10.0)


def test_no_credentials_is_401_in_the_clients_words(
    world: tuple[Served, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    served, _ = world
    monkeypatch.delenv("LIMNO_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("LIMNO_SECRET_ACCESS_KEY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    client = Lake.open(served.url)
    try:
        with pytest.raises(UnauthenticatedError, match="no credentials"):
            client.list_pools()
    finally:
        client.close()  # type: ignore[attr-defined]


def test_the_lane_does_not_reuse_a_connection_idle_near_the_servers_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection idle for EXPIRY seconds (by the lane's clock, set forward here) is
    closed and replaced rather than raced against the server's keep-alive timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    answered = threading.Semaphore(0)

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            accepted.append(conn)
            for _ in range(2):  # at most two requests on a connection
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                if not data:
                    break
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                answered.release()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    lane = lane_for(f"http://127.0.0.1:{listener.getsockname()[1]}")
    assert lane is not None
    now = [1000.0]
    monkeypatch.setattr(remote_lane.time, "monotonic", lambda: now[0])
    try:
        for step in (0.0, remote_lane.EXPIRY / 2, remote_lane.EXPIRY):
            now[0] += step
            assert lane.exchange("GET", "/x", {}, None, {}, 10.0).content == b"ok"
            assert answered.acquire(timeout=30)
    finally:
        lane.close()
        thread.join(30)
        for conn in accepted:
            conn.close()
        listener.close()
    assert len(accepted) == 2  # the first reused once, then replaced
