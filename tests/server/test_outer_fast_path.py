"""The lookup's short path outside every middleware (limno.server.fast, placed by
limno.server.app): there only when no CORS or telemetry layer has a part in the
answer, and then doing the guard's part itself (a path the guard refuses, a body
that does not come within the timeout) and the catch-all's (an unexpected error is
a 500 problem); the pool registry's parsed configurations reused while unchanged."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from starlette.types import Message

from limno import Lake
from limno.api.local import LocalLake
from limno.errors import NotFoundError
from limno.server import fast
from limno.server.app import create_app
from limno.server.guard import Limits

ARROW = "application/vnd.apache.arrow.stream"


@pytest.fixture
def lake(tmp_path: Path) -> str:
    path = str(tmp_path / "lake")
    Lake.init(path).create_pool("rows", key="k").load([pa.table({"k": [1, 2], "v": ["a", "b"]})])
    return path


def _call(app: Any, path: str, body: bytes | None) -> tuple[int, bytes, dict[bytes, bytes]]:
    """One POST through the app's whole stack; ``body`` None: the client never sends it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("latin-1"),
        "query_string": b"",
        "root_path": "",
        "server": ("127.0.0.1", 9867),
        "client": ("127.0.0.1", 5000),
        "headers": [(b"content-type", b"application/json"), (b"accept", ARROW.encode())],
    }
    sent: list[Message] = []

    async def run() -> None:
        pending = [] if body is None else [{"type": "http.request", "body": body}]
        never = asyncio.Event()

        async def receive() -> Message:
            if pending:
                return pending.pop(0)
            await never.wait()  # a client that stopped sending
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            sent.append(message)

        await asyncio.wait_for(app(scope, receive, send), 60)

    asyncio.run(run())
    start = sent[0]
    content = b"".join(m.get("body", b"") for m in sent[1:])
    return int(start["status"]), content, dict(start["headers"])


def test_the_short_path_is_outermost_only_without_cors(lake: str) -> None:
    plain = create_app(lake, request_limits=Limits(body_timeout=5.0))
    stack = plain.build_middleware_stack()
    assert isinstance(stack, fast.FastPaths) and stack.limits == Limits(body_timeout=5.0)
    browsers = create_app(lake, cors_origins=["http://ui.example"])
    assert not isinstance(browsers.build_middleware_stack(), fast.FastPaths)
    assert any(m.cls is fast.FastPaths for m in browsers.user_middleware)  # inside the guard


def test_the_outer_short_path_answers_and_refuses_as_the_guard(lake: str) -> None:
    app = create_app(lake, request_limits=Limits(body_timeout=0.2))
    pool = str(LocalLake.open(lake).pool("rows").config.id)
    status, content, _ = _call(app, f"/v1/pools/{pool}/get", b'{"keys":[2]}')
    assert status == 200
    assert pa.ipc.open_stream(content).read_all().to_pylist() == [{"k": 2, "v": "b"}]

    status, content, headers = _call(app, f"/v1/pools/{pool}/get", None)
    assert (status, headers[b"content-type"]) == (408, b"application/problem+json")
    assert "sent no key list bytes for 0.2 s" in json.loads(content)["detail"]

    status, content, _ = _call(app, "/v1/pools/a\x01b/get", b'{"keys":[2]}')
    assert status == 400
    assert "control characters" in json.loads(content)["detail"]


def test_an_unexpected_error_on_the_short_path_is_a_500_problem(
    lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(lake)
    pool = str(LocalLake.open(lake).pool("rows").config.id)

    def broken(*args: Any) -> bytes:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(fast, "lookup", broken)
    status, content, headers = _call(app, f"/v1/pools/{pool}/get", b'{"keys":[2]}')
    assert (status, headers[b"content-type"]) == (500, b"application/problem+json")
    problem = json.loads(content)
    assert problem["error"] == "InternalError"
    assert "RuntimeError: disk on fire" in problem["detail"]


def test_the_registry_parses_a_pool_once_until_it_changes(lake: str) -> None:
    opened = LocalLake.open(lake)
    first = opened.registry.find("rows")
    assert opened.registry.find("rows") is first
    assert opened.registry.find(str(first.id)) is first
    LocalLake.open(lake).rename_pool("rows", "cols")  # another process's change
    renamed = opened.registry.find(str(first.id))
    assert renamed is not first and renamed.name == "cols"
    with pytest.raises(NotFoundError):
        opened.registry.find("rows")
