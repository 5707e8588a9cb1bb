"""What ``limno serve`` refuses: oversized and stalled bodies, malformed JSON, unknown
fields, names that try to leave where they belong; CORS only when configured."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from limno import Lake
from limno.api.local import LocalLake
from server_support import Served, start_server

#: every wait of these tests is bounded by this (seconds)
BOUND = 30.0
UI = "https://ui.example"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with small limits (10 KB JSON, 50 KB uploads, 1 s body pauses) and CORS
    for one origin, on a lake with pool ``logs``."""
    lake = str(tmp_path_factory.mktemp("guarded") / "lake")
    Lake.init(lake)
    LocalLake.open(lake).create_pool("logs", key="ts")
    args = ("--max-body-mb", "0.01", "--max-upload-mb", "0.05", "--body-timeout", "1")
    proc = start_server(lake, *args, "--cors-origin", UI, "--cors-origin", "https://b.example")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.lines


@pytest.fixture
def client(guarded: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=guarded.url, auth=guarded.auth, timeout=BOUND) as c:
        yield c


def _commits(served: Served) -> int:
    return len(LocalLake.open(served.lake).pool("logs").log())


def _problem(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    doc = response.json()
    assert doc["status"] == status
    return str(doc["detail"])


def test_malformed_bodies_are_400_naming_the_field(client: httpx.Client) -> None:
    json_type = {"content-type": "application/json"}
    bad = client.post("/v1/pools/logs/commit", content=b'{"branch": ', headers=json_type)
    assert "body: not valid JSON" in _problem(bad, 400)
    wrong = client.post("/v1/pools/logs/commit", json={"message": ["not", "text"]})
    assert "message: Input should be a valid string" in _problem(wrong, 400)
    unknown = client.post("/v1/pools/logs/commit", json={"mesage": "typo"})
    assert "mesage: Extra inputs are not permitted" in _problem(unknown, 400)
    not_object = client.post("/v1/pools", json=["logs"])
    assert "body: " in _problem(not_object, 400)
    nested = client.post("/v1/query", json={"sql": "SELECT 1", "limits": {"timeout": "soon"}})
    assert "limits.timeout" in _problem(nested, 400)


#: what an injection may leave: the lake's pools, logs' branches and tags
def _listing(served: Served) -> tuple[list[str], set[str], set[str]]:
    lake = LocalLake.open(served.lake)
    pool = lake.pool("logs")
    return [p.name for p in lake.list_pools()], set(pool.branches()), set(pool.tags())


def _untouched(served: Served, around: list[str]) -> None:
    """Nothing created or removed beside the lake, nor in it; no traversal target made."""
    assert sorted(os.listdir(Path(served.lake).parent)) == around
    assert _listing(served) == (["logs"], {"main"}, set())
    for target in ("/etc/x", "/abs", "/etc/main"):
        assert not Path(target).exists()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/pools/..%2F..%2Fetc"),
        ("GET", "/v1/pools/logs%2Fbranches"),  # would route to logs' branches if decoded
        ("DELETE", "/v1/pools/logs%2Fbranches%2Fmain"),
        ("GET", "/v1/pools/%2e%2e/branches"),
        ("GET", "/v1/pools/lo%00gs/log"),
        ("DELETE", "/v1/pools/logs/branches/..%2F..%2Fetc"),
        ("DELETE", "/v1/pools/logs/branches/%2E%2E"),  # not the pool: the branch ".."
        ("DELETE", "/v1/pools/logs/tags/..%5Cmain"),
        ("DELETE", "/v1/pools/logs/hooks/..%2Fx"),
        ("GET", "/v1/pools/logs/meta/%2E%2E"),
        ("GET", "/v1/pools/logs/log?ref=../../etc"),
        ("GET", "/v1/pools/logs/scan?ref=..%2Fmain"),
        ("GET", "/v1/pools/logs/diff?old=main&new=/etc/passwd"),
        ("GET", "/v1/pools/logs/resolve?ref=main%0Ax"),
        ("GET", "/v1/pools/logs/staged?branch=../../x"),
        ("GET", "/v1/pools/logs/staged?branch=..%2F..%2F..%2Ftmp"),
        ("GET", "/v1/pools/logs/log?ref=" + "x" * 2000),
        ("GET", "/v1/verify?pool=../logs"),
        ("GET", "/v1/meta?name=commits&ref=logs@../../etc"),
        ("GET", "/v1/events?pool=../logs"),
    ],
)
def test_names_in_paths_and_queries_cannot_escape(
    client: httpx.Client, guarded: Served, method: str, path: str
) -> None:
    """A name that climbs is no name: a clean 400 or 404, never a 500, nothing changed."""
    around = sorted(os.listdir(Path(guarded.lake).parent))
    answer = client.request(method, path)
    assert answer.status_code in (400, 404), answer.text
    assert _problem(answer, answer.status_code)
    _untouched(guarded, around)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/pools", {"name": "../x", "key": "ts"}),
        ("/v1/pools/logs/rename", {"name": "a/b"}),
        ("/v1/pools/logs/branches", {"name": "../../etc"}),
        ("/v1/pools/logs/branches", {"name": "dev", "from_ref": "../../etc"}),
        ("/v1/pools/logs/tags", {"name": "v1", "from_ref": "main/../x"}),
        ("/v1/pools/logs/tags", {"name": "v\x00"}),
        ("/v1/pools/logs/merge", {"source": "../other"}),
        ("/v1/pools/logs/merge", {"source": "main", "into": "/abs"}),
        ("/v1/pools/logs/reset", {"branch": "main", "ref": "..\\x"}),
        ("/v1/pools/logs/commit", {"branch": "../main"}),
        ("/v1/pools/logs/commit", {"branch": "../../../../tmp"}),
        ("/v1/pools/logs/revert", {"commit": "../x"}),
        ("/v1/pools/logs/unstage", {"ids": ["ok", "../../x"]}),
        ("/v1/pools/logs/unstage", {"branch": "../../x", "ids": ["a"]}),
        ("/v1/pools/logs/delete-objects", {"ids": ["/etc/passwd"]}),
    ],
)
def test_names_in_bodies_cannot_escape(
    client: httpx.Client, guarded: Served, path: str, body: dict[str, str]
) -> None:
    """The lake refuses these in its own words (as for a lake path): 4xx, no change."""
    around = sorted(os.listdir(Path(guarded.lake).parent))
    answer = client.post(path, json=body)
    assert answer.status_code in (400, 404), answer.text
    assert _problem(answer, answer.status_code)
    _untouched(guarded, around)


def test_control_characters_and_long_names_are_refused_first(client: httpx.Client) -> None:
    """What could confuse routing or logs is 400 before the lake, naming why."""
    newline = client.get("/v1/pools/logs/log", params={"ref": "main\nx"})
    assert "control characters" in _problem(newline, 400)
    nul = client.post("/v1/pools/logs/branches", json={"name": "a\x00b"})
    assert "control characters" in _problem(nul, 400)
    long = client.get("/v1/pools/" + "p" * 1100)
    assert "at most 1024 bytes" in _problem(long, 400)


def test_the_lake_words_names_it_does_not_have(client: httpx.Client) -> None:
    """Past the guard, names are the lake's: its words, as for a lake path."""
    climbing = client.get("/v1/pools/..%2F..%2Fetc")
    assert _problem(climbing, 404) == "pool '../../etc' not found"
    dots = client.get("/v1/pools/logs/log", params={"ref": "a..b"})
    assert _problem(dots, 404) == "no branch, tag or commit named 'a..b'"
    staged = client.get("/v1/pools/logs/staged", params={"branch": "../../x"})
    assert _problem(staged, 404) == "branch '../../x' not found"


def test_an_upload_file_name_is_only_a_name(client: httpx.Client, guarded: Served) -> None:
    before = _commits(guarded)
    done = client.post(
        "/v1/pools/logs/load",
        params={"name": "../../../tmp/evil.ndjson", "message": "named"},
        content=b'{"ts": 1}\n',
    )
    assert done.status_code == 200, done.text
    assert _commits(guarded) == before + 1
    assert not Path("/tmp/evil.ndjson").exists()


def test_bodies_over_their_limit_are_413(client: httpx.Client, guarded: Served) -> None:
    before = _commits(guarded)
    big = {"message": "x" * 20_000}
    assert "over the limit" in _problem(client.post("/v1/pools/logs/commit", json=big), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"message": "'
        for _ in range(20):
            yield b"x" * 1000
        yield b'"}'

    chunked = client.post(
        "/v1/pools/logs/commit", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "over the limit" in _problem(chunked, 413)
    rows = b"".join(b'{"ts": %d, "pad": "%s"}\n' % (i, b"p" * 90) for i in range(200))
    assert len(rows) > 20_000  # over the JSON limit, under the upload limit: fine
    assert client.post("/v1/pools/logs/load", params={"name": "a.ndjson"}, content=rows).is_success
    huge = rows * 4  # over the upload limit
    cut = client.post("/v1/pools/logs/load", params={"name": "b.ndjson"}, content=huge)
    assert "upload" in _problem(cut, 413)
    assert _commits(guarded) == before + 1


def test_a_stalled_body_is_408_and_loads_nothing(guarded: Served) -> None:
    before = _commits(guarded)
    host, port = guarded.url.removeprefix("http://").rsplit(":", 1)
    head = (
        "POST /v1/pools/logs/load?name=s.ndjson HTTP/1.1\r\n"
        f"Host: {host}\r\n{guarded.authorization}Content-Length: 1000\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=BOUND) as sock:
        sock.sendall(head.encode() + b'{"ts": 1}\n')  # then nothing: the client stalls
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status, _, rest = answer.partition(b"\r\n")
    assert status.split()[1] == b"408", answer
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert "nothing was done" in body["detail"]
    assert _commits(guarded) == before


def test_cors_only_for_configured_origins(client: httpx.Client) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x"}
    allowed = client.options("/v1/pools", headers={"Origin": UI, **preflight})
    assert allowed.headers.get("access-control-allow-origin") == UI
    other = client.get("/v1/pools", headers={"Origin": "https://evil.example"})
    assert other.status_code == 200
    assert "access-control-allow-origin" not in other.headers


def test_no_cors_and_loopback_by_default(server: Served) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    with httpx.Client(base_url=server.url, auth=server.auth, timeout=BOUND) as c:
        answer = c.get("/v1/pools", headers={"Origin": UI})
        preflight = c.options(
            "/v1/pools", headers={"Origin": UI, "Access-Control-Request-Method": "GET"}
        )
    assert answer.status_code == 200
    assert "access-control-allow-origin" not in answer.headers
    assert "access-control-allow-origin" not in preflight.headers
