"""A large upload never sits in the server's memory: its peak RSS is measured.

The server spools a ``load`` body to disk as it arrives and loads the file from
there, so its resident memory grows with what one load step holds, not with the
upload. Both tests read the real ``limno serve`` process's ``VmRSS`` before and its
``VmHWM`` (the kernel's high-water mark) after.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from limno import Lake
from server_support import Served, start_server

pytestmark = pytest.mark.slow

MiB = 1 << 20
#: every wait here is bounded by this (seconds)
BOUND = 300.0


def _status(pid: int, field: str) -> int:
    """A ``/proc/PID/status`` memory field, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _block(first: int, rows: int) -> bytes:
    return b"".join(
        b'{"ts": %d, "msg": "%s"}\n' % (i, b"x" * 40) for i in range(first, first + rows)
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("logs", key="ts")
    spool = tmp_path / "tmp"
    spool.mkdir()
    served = start_server(lake, env={"TMPDIR": str(spool)})
    try:
        yield served, spool
    finally:
        assert served.stop() == 0, served.lines


def test_a_5_gib_upload_cut_short_stays_out_of_memory_and_commits_nothing(
    server: tuple[Served, Path],
) -> None:
    served, spool = server
    before = served.commits()
    base = _status(served.proc.pid, "VmRSS")
    block = _block(0, 16_000)  # about 1 MiB of NDJSON
    total = 5 * 1024 * MiB
    url = urlsplit(served.url)
    with socket.create_connection((url.hostname, url.port), timeout=BOUND) as sock:
        head = (
            f"POST /v1/pools/logs/load?name=big.ndjson HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Content-Type: application/x-ndjson\r\nContent-Length: {total + 1}\r\n"
            f"{served.authorization}\r\n"
        )
        sock.sendall(head.encode())
        sent = 0
        while sent < total:  # all of it but the last byte, then the connection closes
            piece = block[: total - sent]
            sock.sendall(piece)
            sent += len(piece)
    deadline = time.monotonic() + BOUND
    while any(spool.rglob("*")):  # the server drops the spooled part once it sees the cut
        assert time.monotonic() < deadline, sorted(spool.rglob("*"))
        time.sleep(0.1)
    grown = _status(served.proc.pid, "VmHWM") - base
    assert grown < 256 * MiB, f"peak RSS grew by {grown / MiB:.0f} MiB for a 5 GiB upload"
    assert served.commits() == before


def test_a_whole_large_upload_loads_in_bounded_memory(server: tuple[Served, Path]) -> None:
    served, _ = server
    before = served.commits()
    base = _status(served.proc.pid, "VmRSS")
    rows_per_block, blocks = 16_000, 512  # 8.2M rows, about 0.5 GiB of NDJSON

    sizes: list[int] = []

    def body() -> Iterator[bytes]:
        for b in range(blocks):
            block = _block(b * rows_per_block, rows_per_block)
            sizes.append(len(block))
            yield block

    r = httpx.post(
        f"{served.url}/v1/pools/logs/load",
        params={"name": "big.ndjson"},
        content=body(),
        headers={"Content-Type": "application/x-ndjson"},
        auth=served.auth,
        timeout=BOUND,
    )
    assert r.status_code == 200, r.text
    assert served.commits() == before + 1
    grown = _status(served.proc.pid, "VmHWM") - base
    uploaded = sum(sizes)
    print(f"upload {uploaded / MiB:.0f} MiB, peak RSS grew {grown / MiB:.0f} MiB")
    assert grown < uploaded, f"peak RSS grew by {grown / MiB:.0f} MiB for {uploaded / MiB:.0f} MiB"
    count = httpx.post(
        f"{served.url}/v1/query",
        json={"sql": "SELECT count(*) AS n FROM logs"},
        headers={"Accept": "application/json"},
        auth=served.auth,
        timeout=BOUND,
    )
    assert count.status_code == 200, count.text
    assert count.json() == [{"n": rows_per_block * blocks}]
