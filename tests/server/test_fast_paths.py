"""The server's fast paths: small Arrow uploads kept in memory (and still all or
nothing), bigger ones spilled to disk, and ``limno serve --workers``."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from limno import Lake
from limno.api.local import LocalLake
from limno.server import uploads
from server_support import Served, start_server

PARTS = "application/vnd.limno.parts"


def _framed_table(table: pa.Table) -> bytes:
    """``table`` as one framed ``table`` part (limno.server.uploads)."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue().to_pybytes()
    return len(data).to_bytes(4, "big") + data + (0).to_bytes(4, "big")


def _load_path(pool: str) -> str:
    parts = json.dumps([{"name": "t", "kind": "table"}])
    return f"/v1/pools/{pool}/load?parts={quote(parts)}"


def _commits(lake: str, pool: str) -> int:
    return len(LocalLake.open(lake).pool(pool).log())


@pytest.fixture
def server(tmp_path: Path) -> tuple[Served, str]:
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("rows", key="k")
    return start_server(lake), lake


def test_a_small_upload_cut_short_commits_nothing(server: tuple[Served, str]) -> None:
    """A table small enough to stay in memory, half sent: no commit; whole: one."""
    served, lake = server
    try:
        body = _framed_table(pa.table({"k": list(range(1000)), "v": ["x"] * 1000}))
        assert len(body) < uploads.IN_MEMORY
        before = _commits(lake, "rows")
        url = urlsplit(served.url)
        with socket.create_connection((url.hostname, url.port)) as sock:
            head = (
                f"POST {_load_path('rows')} HTTP/1.1\r\nHost: {url.netloc}\r\n"
                f"Content-Type: {PARTS}\r\nContent-Length: {len(body)}\r\n"
                f"{served.authorization}\r\n"
            )
            sock.sendall(head.encode() + body[: len(body) // 2])
        assert httpx.get(f"{served.url}/health").status_code == 200
        assert _commits(lake, "rows") == before
        with httpx.Client(auth=served.auth) as client:  # and it loads once whole
            r = client.post(
                served.url + _load_path("rows"), content=body, headers={"Content-Type": PARTS}
            )
        assert r.status_code == 200, r.text
        assert _commits(lake, "rows") == before + 1
        assert LocalLake.open(lake).pool("rows").scan().num_rows == 1000
    finally:
        assert served.stop() == 0, served.lines


def test_uploads_past_the_memory_bound_spill_to_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a tiny bound, a table part goes to disk midway, and loads the same."""
    from limno.server.run import serving

    monkeypatch.setattr(uploads, "IN_MEMORY", 64)
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("rows", key="k")
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("TMPDIR", str(spool))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read afresh
    small = pa.table({"k": [1, 2], "v": ["a", "b"]})
    big = pa.table({"k": list(range(10, 5010)), "v": ["y"] * 5000})
    with serving(lake) as url:
        pool = Lake.open(url).pool("rows")
        made = pool.load([small, big])
        assert made.message
    assert LocalLake.open(lake).pool("rows").scan().num_rows == 5002
    assert list(spool.iterdir()) == []  # the spool directory was removed


def test_two_workers_serve_two_clients_and_stop_cleanly(tmp_path: Path) -> None:
    """``--workers 2``: two clients at once load and read; SIGTERM: exit 0."""
    lake = str(tmp_path / "lake")
    created = Lake.init(lake)
    for name in ("a", "b"):
        created.create_pool(name, key="k")
    served = start_server(lake, "--workers", "2")
    try:
        assert served.lines[-1].startswith("limno serve: listening on http://")
        assert served.lines[-1].endswith(", 2 workers)")
        clients = [httpx.Client(base_url=served.url, auth=served.auth) for _ in range(2)]
        try:
            for i in range(3):
                for name, client in zip(("a", "b"), clients, strict=True):
                    table = pa.table({"k": [i], "v": [name]})
                    r = client.post(
                        _load_path(name),
                        content=_framed_table(table),
                        headers={"Content-Type": PARTS},
                    )
                    assert r.status_code == 200, r.text
            for name, client in zip(("a", "b"), clients, strict=True):
                r = client.get(f"/v1/pools/{name}/log")
                assert r.status_code == 200
                assert len(r.json()) == 4  # the creation and three loads
        finally:
            for client in clients:
                client.close()
    finally:
        code = served.stop()
    assert code == 0, served.lines
    assert not [line for line in served.lines if "Traceback" in line or "error" in line]


def test_the_default_is_one_worker_per_core(tmp_path: Path) -> None:
    """No ``--workers``: one process per usable core, at most four (one: no mention)."""
    import os

    from limno.cli._serve import MAX_DEFAULT_WORKERS, default_workers

    cores = len(os.sched_getaffinity(0))
    assert default_workers() == max(1, min(MAX_DEFAULT_WORKERS, cores))
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("a", key="k")
    served = start_server(lake, workers=None)
    try:
        many = default_workers()
        ready = served.lines[-1]
        assert ready.endswith(f", {many} workers)") if many > 1 else ready.endswith(f"{lake})")
        with httpx.Client(base_url=served.url, auth=served.auth) as client:
            assert client.get("/v1/pools/a/log").status_code == 200
    finally:
        assert served.stop() == 0
