"""The HTTP API of a real ``limno serve``: health, the OpenAPI document, problem+json
errors, results in every format by ``Accept``, and uploads that end early."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from limno import Lake
from server_support import Served, start_server

ROWS = [{"ts": i, "msg": f"m{i}"} for i in range(1, 6)]


@pytest.fixture(scope="module")
def logs(server: Served) -> str:
    """Pool ``logs`` (key ts) on the module's server, holding ROWS."""
    lake = Lake.open(server.url)
    pool = lake.create_pool("logs", key="ts")
    pool.load([pa.Table.from_pylist(ROWS)])
    return pool.id


def test_health_answers_once_ready(server: Served) -> None:
    r = httpx.get(f"{server.url}/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"


def test_openapi_has_a_path_per_operation(server: Served) -> None:
    # the first request for the document builds it (seconds on a loaded machine)
    doc = httpx.get(f"{server.url}/openapi.json", timeout=120).json()
    operations = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    expected = {
        "list_pools", "create_pool", "get_pool", "drop_pool", "rename_pool",
        "branches", "create_branch", "delete_branch", "tags", "create_tag", "delete_tag",
        "resolve", "log", "merge", "diff", "cherry_pick", "reset", "revert",
        "hooks", "add_hook", "remove_hook",
        "load", "add", "staged", "unstage", "commit", "delete_objects", "delete_where",
        "scan", "get", "objects", "pool_meta_table", "meta_table", "query",
        "compact", "split", "vacuum", "status", "verify", "health",
    }  # fmt: skip
    assert expected <= operations
    assert httpx.get(f"{server.url}/docs", timeout=120).status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error"),
    [
        ("GET", "/v1/pools/nope", None, 404, "NotFoundError"),
        ("POST", "/v1/pools", {"name": "logs", "key": "ts"}, 409, "AlreadyExistsError"),
        ("GET", "/v1/pools/logs/scan?order=sideways", None, 400, "InvalidInputError"),
        ("GET", "/v1/pools/logs/log?limit=many", None, 400, "InvalidInputError"),
        ("GET", "/v1/no/such/route", None, 404, "NotFoundError"),
    ],
)
def test_errors_are_problem_details(
    server: Served, logs: str, method: str, path: str, body: object, status: int, error: str
) -> None:
    r = httpx.request(method, server.url + path, json=body, auth=server.auth)
    assert r.status_code == status
    assert r.headers["content-type"] == "application/problem+json"
    doc = r.json()
    assert doc["status"] == status and doc["error"] == error
    assert doc["title"] and doc["detail"]


def test_a_vetoed_commit_is_412(server: Served, logs: str) -> None:
    hook = {"name": "no", "event": "pre-commit", "run": "exit 3", "branches": ["guarded"]}
    assert (
        httpx.post(f"{server.url}/v1/pools/logs/hooks", json=hook, auth=server.auth).status_code
        == 201
    )
    httpx.post(f"{server.url}/v1/pools/logs/branches", json={"name": "guarded"}, auth=server.auth)
    r = httpx.post(
        f"{server.url}/v1/pools/logs/load?branch=guarded&name=x.ndjson",
        content=b'{"ts": 9}\n',
        auth=server.auth,
    )
    assert r.status_code == 412, r.text
    assert r.json()["error"] == "HookVetoError"
    assert r.headers["content-type"] == "application/problem+json"


def _scan(server: Served, accept: str | None) -> httpx.Response:
    headers = {"Accept": accept} if accept else {}
    r = httpx.get(f"{server.url}/v1/pools/logs/scan", headers=headers, auth=server.auth)
    assert r.status_code == 200, r.text
    return r


def test_scan_in_every_format(server: Served, logs: str) -> None:
    arrow = ipc.open_stream(_scan(server, "application/vnd.apache.arrow.stream").content)
    assert arrow.read_all().to_pylist() == ROWS
    ndjson = _scan(server, "application/x-ndjson")
    assert [json.loads(x) for x in ndjson.text.splitlines()] == ROWS
    assert [json.loads(x) for x in _scan(server, None).text.splitlines()] == ROWS
    assert _scan(server, "application/json").json() == ROWS
    csv = pacsv.read_csv(io.BytesIO(_scan(server, "text/csv").content))
    assert csv.to_pylist() == ROWS
    parquet = _scan(server, "application/vnd.apache.parquet").content
    assert pq.read_table(io.BytesIO(parquet)).to_pylist() == ROWS
    preferred = _scan(server, "text/html;q=0.9, text/csv;q=0.5, application/json;q=0.8")
    assert preferred.headers["content-type"].startswith("application/json")
    refused = httpx.get(
        f"{server.url}/v1/pools/logs/scan", headers={"Accept": "image/png"}, auth=server.auth
    )
    assert refused.status_code == 406


def test_an_empty_result_has_its_schema(server: Served, logs: str) -> None:
    sql = {"sql": "SELECT ts, msg FROM logs WHERE ts > 100"}
    r = httpx.post(
        f"{server.url}/v1/query",
        json=sql,
        headers={"Accept": "application/vnd.apache.arrow.stream"},
        auth=server.auth,
    )
    table = ipc.open_stream(r.content).read_all()
    assert table.num_rows == 0 and table.schema.names == ["ts", "msg"]
    csv = httpx.post(
        f"{server.url}/v1/query", json=sql, headers={"Accept": "text/csv"}, auth=server.auth
    )
    assert csv.text == '"ts","msg"\n'


@pytest.mark.parametrize("framed", [False, True])
def test_an_upload_that_ends_early_commits_nothing(server: Served, logs: str, framed: bool) -> None:
    """Half a body, then the connection closes: no commit, and the server goes on."""
    before = server.commits()
    data = b"".join(b'{"ts": %d, "msg": "late"}\n' % i for i in range(100, 2100))
    if framed:
        parts = '[{"name":"a.ndjson","kind":"file"}]'
        path = f"/v1/pools/logs/load?parts={parts.replace(chr(34), '%22')}"
        body = len(data).to_bytes(4, "big") + data + (0).to_bytes(4, "big")
        content_type = "application/vnd.limno.parts"
    else:
        path, body, content_type = "/v1/pools/logs/load?name=a.ndjson", data, "text/plain"
    url = urlsplit(server.url)
    with socket.create_connection((url.hostname, url.port)) as sock:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n{server.authorization}\r\n"
        )
        sock.sendall(head.encode() + body[: len(body) // 2])
    assert httpx.get(f"{server.url}/health").status_code == 200
    assert server.commits() == before
    # and a whole body loads
    r = httpx.post(
        f"{server.url}{path}",
        content=body,
        headers={"Content-Type": content_type},
        auth=server.auth,
    )
    assert r.status_code == 200, r.text
    assert server.commits() == before + 1
    assert r.json()["message"] == "load 2000 record(s)"


def test_a_framed_body_cut_between_frames_commits_nothing(server: Served, logs: str) -> None:
    """A body that ends cleanly but before its last part's end frame is refused."""
    before = server.commits()
    chunk = b'{"ts": 7, "msg": "x"}\n'
    r = httpx.post(
        f"{server.url}/v1/pools/logs/load",
        params={"parts": '[{"name": "a.ndjson"}]'},
        content=len(chunk).to_bytes(4, "big") + chunk,
        headers={"Content-Type": "application/vnd.limno.parts"},
        auth=server.auth,
    )
    assert r.status_code == 400
    assert r.json()["detail"] == "upload ended early: nothing was loaded"
    assert server.commits() == before


def test_serve_refuses_a_server_url() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", "http://127.0.0.1:1", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: limno serve serves a lake path or s3:// location, not another server"
        " (http://127.0.0.1:1)"
    ]


def test_two_servers_on_one_lake_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    first, second = start_server(lake), start_server(lake)
    for name, value in first.env.items():  # a key of the lake works on both of its servers
        monkeypatch.setenv(name, value)
    try:
        Lake.open(first.url).create_pool("shared", key="k")
        pool = Lake.open(second.url).pool("shared")
        pool.load([pa.table({"k": [1, 2]})])
        assert Lake.open(first.url).pool("shared").scan().to_pylist() == [{"k": 1}, {"k": 2}]
    finally:
        assert first.stop() == 0
        assert second.stop() == 0
