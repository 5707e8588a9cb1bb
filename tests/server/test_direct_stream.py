"""A streamed answer's body written to uvicorn's transport itself (limno.server.direct):
the same answer as before, chunk by chunk past uvicorn's ``send``, and a client that
leaves early still ends the server's side of the stream."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from limno import Lake
from limno.api.remote import RemoteLake
from server_support import served, start_server
from tls_support import self_signed

WAIT = 60.0
ROWS = 30_000


def _rows(start: int, step: int) -> pa.Table:
    keys = list(range(start, ROWS, step))
    n = len(keys)
    return pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "s": pa.array([None if k % 7 == 0 else f"v{k}" for k in keys]),
            "tag": pa.array([["red", "green", None][k % 3] for k in keys]).dictionary_encode(),
            "xs": pa.array([None if k % 5 == 0 else list(range(k % 4)) for k in keys]),
            "st": pa.array([{"a": k, "b": None if k % 2 else "x"} for k in keys]),
            "d": pa.array([decimal.Decimal(k) / 100 for k in keys], pa.decimal128(12, 2)),
            "t": pa.array(
                [dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=k) for k in keys],
                pa.timestamp("us", "UTC"),
            ),
            "f": pa.array([None if k % 11 == 0 else k / 3 for k in keys] if n else []),
        }
    )


@pytest.fixture
def lake(tmp_path: Path) -> str:
    at = str(tmp_path / "lake")
    pool = Lake.init(at).create_pool("rows", key="k")
    pool.load([_rows(0, 2)])
    pool.load([_rows(1, 2)])  # interleaved: a scan merges, the answer is Arrow IPC
    return at


@pytest.fixture
def body_sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the body messages that went through uvicorn's own ``send``."""
    sizes: list[int] = []
    original = RequestResponseCycle.send

    async def send(self: RequestResponseCycle, message: Any) -> None:
        if message["type"] == "http.response.body":
            sizes.append(len(message.get("body", b"")))
        await original(self, message)

    monkeypatch.setattr(RequestResponseCycle, "send", send)
    return sizes


def test_a_streamed_scan_is_the_same_and_skips_uvicorns_send(
    lake: str, body_sends: list[int]
) -> None:
    expected = Lake.open(lake).pool("rows").scan(limit=ROWS)
    with served(lake) as url:
        remote = RemoteLake(url)
        try:
            pool = remote.pool("rows")
            body_sends.clear()
            got = pool.scan(limit=ROWS)
            sent = list(body_sends)
            desc = pool.scan(order="desc", limit=ROWS - 5)
        finally:
            remote.close()
    assert got.schema == expected.schema
    assert got.equals(expected)
    assert desc.equals(Lake.open(lake).pool("rows").scan(order="desc", limit=ROWS - 5))
    # the head went out as a message; the chunks went to the transport; then the end
    assert sent == [0], sent


def test_a_streamed_csv_answer_is_the_same(lake: str) -> None:
    import httpx

    with served(lake) as url:  # served without auth: any request is allowed
        answer = httpx.get(
            f"{url}/v1/pools/rows/scan",
            params={"limit": 20_000},
            headers={"Accept": "text/csv"},
            timeout=WAIT,
        )
    assert answer.status_code == 200
    lines = answer.text.splitlines()
    assert len(lines) == 20_001 and lines[0].startswith('"k","s","tag"')
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(range(20_000))


def _result_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "limno-result"]


def _until(condition: Any) -> bool:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if condition():
            return True
        threading.Event().wait(0.05)
    return condition()


def test_a_client_leaving_early_ends_the_servers_stream(tmp_path: Path) -> None:
    at = str(tmp_path / "big")
    pool = Lake.init(at).create_pool("big", key="k")
    many = 2_000_000  # 32 MB as Arrow IPC: more than loopback's socket buffers hold
    for start in (0, 1):
        keys = pa.array(range(start, many, 2), pa.int64())
        pool.load([pa.table({"k": keys, "v": pc.cast(keys, pa.float64())})])
    with served(at) as url:
        remote = RemoteLake(url)
        try:
            tables = remote.pool("big").iter_scan(limit=many)
            assert isinstance(tables, Generator)
            first = next(tables)
            assert 0 < first.num_rows < many
            assert _result_threads()  # the server is still making the answer
            tables.close()
            # the server notices the closed connection and lets go of the scan
            assert _until(lambda: not _result_threads()), _result_threads()
            assert remote.pool("big").get([7]).column("k").to_pylist() == [7]
        finally:
            remote.close()


def test_a_streamed_scan_over_tls_is_the_same(
    lake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    expected = Lake.open(lake).pool("rows").scan(limit=ROWS)
    proc = start_server(lake, "--tls-cert", cert, "--tls-key", key)
    try:
        for name, value in {**proc.env, "LIMNO_CA_BUNDLE": cert}.items():
            monkeypatch.setenv(name, value)
        remote = RemoteLake(proc.url)
        try:
            got = remote.pool("rows").scan(limit=ROWS)
        finally:
            remote.close()
    finally:
        assert proc.stop() == 0, proc.lines
    assert proc.url.startswith("https://")
    assert got.equals(expected)
