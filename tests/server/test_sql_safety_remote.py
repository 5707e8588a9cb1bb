"""SQL sent to a server: always safe mode (no files, network, extensions, settings or
writes), whatever the request says; and under the server's limits, which a caller
may lower and never raise."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from limno import Lake
from limno.engines import local as local_engine
from limno.engines.query_limits import QueryLimits
from limno.errors import ForbiddenError, QueryTimeoutError, ResultTooLargeError
from server_support import Served, served_user, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("sql-safety")
    lake = str(root / "lake")
    Lake.init(lake).create_pool("logs", key="ts").load([pa.table({"ts": list(range(50))})])
    (root / "secret.csv").write_text("password\nhunter2\n")
    proc = start_server(lake, "--max-rows", "100", "--query-timeout", "3")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.lines


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _query(server: Served, sql: str, **params: Any) -> httpx.Response:
    body: dict[str, Any] = {"sql": sql}
    if "limits" in params:
        body["limits"] = params.pop("limits")
    return httpx.post(
        f"{server.url}/v1/query",
        json={**body, "safe": False},  # asking for unsafe SQL changes nothing
        params=params,
        headers={"Accept": "application/json"},
        auth=server.auth,
        timeout=120,
    )


def _escapes(root: Path) -> list[str]:
    out = root / "out"
    return [
        f"SELECT * FROM read_csv('{root / 'secret.csv'}')",
        f"SELECT * FROM '{root / 'secret.csv'}'",
        "SELECT * FROM read_text('/etc/hostname')",
        f"COPY (SELECT 1 AS x) TO '{out}.csv'",
        f"ATTACH '{out}.db' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET threads = 1",
        "SELECT current_setting('threads')",
        "CREATE TABLE t AS SELECT 1 AS x",
        "SELECT 1; SELECT 2",
        f"SELECT * FROM read_parquet('{root}/lake/**/*.parquet')",
    ]


def test_escapes_are_refused_and_change_nothing(server: Served) -> None:
    root = Path(server.lake).parent
    before = _files(root)
    for sql in _escapes(root):
        r = _query(server, sql)
        assert r.status_code in (400, 403), (sql, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert "hunter2" not in r.text
    assert _files(root) == before
    assert not any(p.name.startswith("out") for p in root.iterdir())


def test_escapes_are_refused_through_the_client(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in served_user(server, "ana", "analyst").items():
        monkeypatch.setenv(name, value)
    lake = Lake.open(server.url)
    root = Path(server.lake).parent
    with pytest.raises(ForbiddenError, match="not allowed in safe mode"):
        lake.query(f"SELECT * FROM read_csv('{root / 'secret.csv'}')")
    with pytest.raises(ForbiddenError):
        lake.query(f"COPY (SELECT 1 AS x) TO '{root / 'copied.csv'}'")
    assert not (root / "copied.csv").exists()
    assert lake.query("SELECT count(*) AS n FROM logs").to_pylist() == [{"n": 50}]


def test_the_server_caps_rows_and_a_caller_may_lower_them(server: Served) -> None:
    assert len(_query(server, "SELECT ts FROM logs").json()) == 50
    capped = _query(server, "SELECT * FROM range(500)")
    assert capped.status_code == 413 and "100 rows" in capped.json()["detail"]
    # a caller may not raise the server's cap, by body or by query parameter
    raised = _query(server, "SELECT * FROM range(500)", limits={"max_rows": 1000})
    assert raised.status_code == 413 and "100 rows" in raised.json()["detail"]
    raised = _query(server, "SELECT * FROM range(500)", max_rows=1000)
    assert raised.status_code == 413 and "100 rows" in raised.json()["detail"]
    # and may lower it either way
    lowered = _query(server, "SELECT ts FROM logs", max_rows=10)
    assert lowered.status_code == 413 and "10 rows" in lowered.json()["detail"]
    lowered = _query(server, "SELECT ts FROM logs", limits={"max_rows": 10})
    assert lowered.status_code == 413 and "10 rows" in lowered.json()["detail"]
    small = _query(server, "SELECT ts FROM logs", max_bytes=64)
    assert small.status_code == 413 and small.json()["error"] == "ResultTooLargeError"


def test_the_server_caps_time_and_a_caller_may_lower_it(
    server: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    endless = "SELECT count(*) AS n FROM range(1000000000000) a"
    lowered = _query(server, endless, timeout=0.5)
    assert lowered.status_code == 503, lowered.text
    assert lowered.json()["error"] == "QueryTimeoutError"
    assert "time limit of 0.5s" in lowered.json()["detail"]
    raised = _query(server, endless, timeout=1000)
    assert "time limit of 3s" in raised.json()["detail"]
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(QueryTimeoutError, match="0.5s"):
        Lake.open(server.url).query(endless, limits=QueryLimits(timeout=0.5))
    with pytest.raises(ResultTooLargeError):
        Lake.open(server.url).query("SELECT * FROM range(500)", limits=QueryLimits(max_rows=400))


def test_queries_spill_to_a_private_temp_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB spills into a directory of its own under the system's temp directory
    (capped for safe queries), never into ``.tmp`` of the working directory."""
    monkeypatch.chdir(tmp_path)
    spill = local_engine._spill_directory()
    assert Path(spill).parent == Path(tempfile.gettempdir())
    for temp_limit in (None, local_engine.SAFE_TEMP_LIMIT):
        con = local_engine._connect(temp_limit)
        try:
            row = con.execute(
                "SELECT current_setting('temp_directory'),"
                " current_setting('max_temp_directory_size')"
            ).fetchone()
            assert row is not None and Path(row[0]).parent == Path(spill)
            if temp_limit is not None:
                assert row[1] == "1.0 GiB"
            # a sort larger than the memory limit spills, into the private directory
            con.execute("SET memory_limit = '64MB'")
            con.execute("SET threads = 1")
            n = con.execute(
                "SELECT count(*) FROM"
                " (SELECT * FROM range(3000000) t(i) ORDER BY hash(i), i::VARCHAR)"
            ).fetchone()
            assert n == (3000000,)
        finally:
            con.close()
    assert not os.path.exists(tmp_path / ".tmp")
