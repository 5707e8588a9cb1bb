"""The file routes of a real ``limno serve`` (``/v1/pools/{pool}/files/...``), spoken
to in plain HTTP: byte ranges (206, 416), listing pages and their continuation,
conditional puts, who may do what (an analyst reads and never writes; an import is an
admin's), and a large upload that streams through the server in bounded memory."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from clirunner import fail, ok
from limno import Lake
from limno.server.routes.files import MAX_PAGE, byte_range
from server_support import Served, served_user, start_server

MiB = 1 << 20
DATA = bytes(range(256)) * 40  # 10240 bytes


@dataclass
class World:
    server: Served
    lake: str
    users: dict[str, dict[str, str]]

    def auth(self, user: str) -> httpx.BasicAuth:
        env = self.users[user]
        return httpx.BasicAuth(env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"])

    def url(self, op: str, pool: str = "imgs") -> str:
        return f"{self.server.url}/v1/pools/{pool}/files/{op}"

    def get(self, op: str, user: str = "admin", **kw: Any) -> httpx.Response:
        return httpx.get(self.url(op), auth=self.auth(user), timeout=60, **kw)

    def put(self, path: str, data: Any, user: str = "admin", **params: Any) -> httpx.Response:
        return httpx.put(
            self.url("object"),
            params={"path": path, **params},
            content=data,
            auth=self.auth(user),
            timeout=300,
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    lake = str(tmp_path_factory.mktemp("files") / "lake")
    Lake.init(lake).create_pool("imgs", kind="files")
    server = start_server(lake)
    try:
        users = {"admin": server.env}
        users["dev"] = served_user(server, "dev", "developer")
        users["ana"] = served_user(server, "ana", "analyst")
        yield World(server, lake, users)
    finally:
        assert server.stop() == 0, server.lines


def test_ranges_answer_as_http_says(world: World) -> None:
    assert world.put("r/data.bin", DATA).status_code == 200
    whole = world.get("object", params={"path": "r/data.bin"})
    assert whole.status_code == 200 and whole.content == DATA
    assert whole.headers["etag"] == f'"{hashlib.md5(DATA).hexdigest()}"'
    assert whole.headers["accept-ranges"] == "bytes" and "last-modified" in whole.headers
    for header, status, want, content_range in (
        ("bytes=0-9", 206, DATA[:10], "bytes 0-9/10240"),
        ("bytes=10000-", 206, DATA[10000:], "bytes 10000-10239/10240"),
        ("bytes=-100", 206, DATA[-100:], "bytes 10140-10239/10240"),
        ("bytes=10200-99999", 206, DATA[10200:], "bytes 10200-10239/10240"),
        ("bytes=0-1,5-6", 200, DATA, None),  # several ranges: the whole file
    ):
        r = world.get("object", params={"path": "r/data.bin"}, headers={"Range": header})
        assert (r.status_code, r.content) == (status, want), header
        assert r.headers.get("content-range") == content_range, header
    past = world.get("object", params={"path": "r/data.bin"}, headers={"Range": "bytes=10240-"})
    assert past.status_code == 416 and past.headers["content-range"] == "bytes */10240"
    # limno's own client asks start/end: clipped as a lake opened directly reads
    r = world.get("object", params={"path": "r/data.bin", "start": 10230, "end": 99999})
    assert (r.status_code, r.content) == (200, DATA[10230:])
    r = world.get("object", params={"path": "r/data.bin", "start": 20000})
    assert (r.status_code, r.content) == (200, b"")
    r = world.get("object", params={"path": "r/data.bin", "start": 5, "end": 2})
    assert r.status_code == 400
    r = world.get("object", params={"path": "r/missing.bin"})
    assert r.status_code == 404 and r.json()["error"] == "NotFoundError"


def test_byte_range_parsing() -> None:
    assert byte_range(None, 10) is None
    assert byte_range("bytes=2-4", 10) == (2, 5)
    assert byte_range("bytes=-3", 10) == (7, 10)
    assert byte_range("bytes=-30", 10) == (0, 10)
    assert byte_range("bytes=9-", 10) == (9, 10)
    assert byte_range("bytes=10-", 10) == "unsatisfiable"
    assert byte_range("bytes=-0", 10) == "unsatisfiable"
    assert byte_range("bytes=5-2", 10) is None
    assert byte_range("items=0-1", 10) is None
    assert byte_range("bytes=0-", 0) == "unsatisfiable"


def test_listing_pages_continue_after_the_last_path(world: World) -> None:
    for i in range(7):
        assert world.put(f"list/{i:02d}", b"x").status_code == 200
    seen, after, pages = [], "", 0
    while True:
        r = world.get("list", params={"prefix": "list/", "limit": 3, "after": after})
        assert r.status_code == 200, r.text
        page = r.json()
        seen += [e["path"] for e in page["entries"]]
        pages += 1
        if not page["truncated"]:
            break
        after = page["next_after"]
    assert seen == [f"list/{i:02d}" for i in range(7)] and pages == 3
    r = world.get("list", params={"delimiter": "/", "prefix": ""})
    assert "list/" in r.json()["prefixes"]
    assert world.get("list", params={"limit": 0}).status_code == 400
    r = world.get("list", params={"limit": MAX_PAGE * 10})
    assert r.status_code == 200 and len(r.json()["entries"]) <= MAX_PAGE


def test_conditional_puts_and_metadata(world: World) -> None:
    first = world.put("cond/a", b"one", content_type="text/plain", metadata='{"K": "v"}')
    assert first.status_code == 200
    entry = first.json()
    assert entry["content_type"] == "text/plain" and entry["metadata"] == {"k": "v"}
    assert world.put("cond/a", b"two", if_none_match="true").status_code == 412
    assert world.put("cond/a", b"two", if_match="0" * 32).status_code == 412
    assert world.put("cond/a", b"two", if_match=entry["etag"]).status_code == 200
    assert world.put("cond/a", b"x", metadata="[1]").status_code == 400
    stat = world.get("stat", params={"path": "cond/a"})
    assert stat.json()["size"] == 3 and stat.json()["etag"] == hashlib.md5(b"two").hexdigest()


def test_an_analyst_reads_and_never_writes(world: World, tmp_path: Path) -> None:
    assert world.put("auth/readable", b"r").status_code == 200
    staged = world.get("uncommitted").json()
    assert world.get("stat", "ana", params={"path": "auth/readable"}).status_code == 200
    assert world.get("object", "ana", params={"path": "auth/readable"}).content == b"r"
    r = world.put("auth/by-analyst", b"nope", user="ana")
    assert r.status_code == 403 and "may not write" in r.json()["detail"]
    for op, body in (
        ("remove", {"paths": ["auth/readable"]}),
        ("discard", {}),
        ("commit", {}),
        ("copy", {"src_path": "auth/readable", "dst_path": "auth/copy"}),
    ):
        r = httpx.post(world.url(op), json=body, auth=world.auth("ana"), timeout=60)
        assert r.status_code == 403, op
    assert world.get("uncommitted").json() == staged  # nothing staged, nothing dropped
    assert world.get("stat", params={"path": "auth/by-analyst"}).status_code == 404

    # through the CLI: the same 403, worded once
    local = tmp_path / "f.txt"
    local.write_bytes(b"cli")
    with pytest.MonkeyPatch.context() as env:
        for name, value in world.users["ana"].items():
            env.setenv(name, value)
        denied = fail("--lake", world.server.url, "fs", "upload", str(local), "imgs@main/auth/cli")
        assert "may not write to pool imgs" in denied.err
        assert ok("--lake", world.server.url, "fs", "cat", "imgs/auth/readable").out == b"r"


def test_an_import_is_an_admins(world: World, tmp_path: Path) -> None:
    source = tmp_path / "server-side"
    source.mkdir()
    (source / "f.bin").write_bytes(b"server's own file")
    body = {"source": str(source), "prefix": "imported/"}
    r = httpx.post(world.url("import"), json=body, auth=world.auth("dev"), timeout=60)
    assert r.status_code == 403, r.text
    assert world.get("stat", params={"path": "imported/f.bin"}).status_code == 404
    r = httpx.post(world.url("import"), json=body, auth=world.auth("admin"), timeout=60)
    assert r.status_code == 200, r.text
    got = world.get("object", params={"path": "imported/f.bin"})
    assert got.content == b"server's own file"


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.slow
def test_a_50_mb_upload_streams_through_in_bounded_memory(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("big", kind="files")
    server = start_server(lake)
    try:
        url = f"{server.url}/v1/pools/big/files/object"
        warm = httpx.put(
            url, params={"path": "warm"}, content=b"w" * MiB, auth=server.auth, timeout=300
        )
        assert warm.status_code == 200, warm.text
        base = _status(server.proc.pid, "VmRSS")
        digest = hashlib.sha256()
        block = os.urandom(MiB)

        def body() -> Iterator[bytes]:
            for i in range(50):
                piece = bytes([i]) + block[1:]
                digest.update(piece)
                yield piece

        r = httpx.put(
            url, params={"path": "big.bin"}, content=body(), auth=server.auth, timeout=300
        )
        assert r.status_code == 200, r.text
        assert r.json()["size"] == 50 * MiB
        grown = _status(server.proc.pid, "VmHWM") - base
        print(f"50 MiB upload: the server's peak RSS grew {grown / MiB:.1f} MiB")
        assert grown < 25 * MiB, f"peak RSS grew by {grown / MiB:.0f} MiB for a 50 MiB upload"
        back = hashlib.sha256()
        with httpx.stream(
            "GET", url, params={"path": "big.bin"}, auth=server.auth, timeout=300
        ) as answer:
            assert answer.status_code == 200
            for chunk in answer.iter_bytes():
                back.update(chunk)
        assert back.hexdigest() == digest.hexdigest()
        grown = _status(server.proc.pid, "VmHWM") - base
        assert grown < 25 * MiB, f"peak RSS grew by {grown / MiB:.0f} MiB reading 50 MiB back"
    finally:
        assert server.stop() == 0, server.lines
