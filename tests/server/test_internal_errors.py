"""An unexpected error in a route is a 500 problem, and the kept-alive connection it
came on goes on serving (Starlette's own handling answered, then raised again, and
uvicorn closed the connection: the client's next request on it was reset)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from limno.api.local import LocalLake
from limno.server.run import serving


def test_a_500_keeps_the_connection_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = str(tmp_path / "lake")
    LocalLake.init(where)

    def broken(self: LocalLake) -> list[object]:
        raise RuntimeError("injected fault\nsecond line")

    monkeypatch.setattr(LocalLake, "list_pools", broken)
    with serving(where) as url:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        try:
            conn.request("GET", "/v1/pools")
            answer = conn.getresponse()
            body = json.loads(answer.read())
            assert answer.status == 500
            assert answer.getheader("content-type") == "application/problem+json"
            assert body["error"] == "InternalError"
            assert body["detail"] == "internal error on the server: RuntimeError: injected fault"
            sock = conn.sock
            assert sock is not None
            conn.request("GET", "/health")  # on the same connection
            again = conn.getresponse()
            assert again.status == 200
            assert json.loads(again.read())["status"] == "ok"
            assert conn.sock is sock
        finally:
            conn.close()
