"""Query limits: a time limit that interrupts DuckDB, and row and byte limits on the
answer that refuse it rather than cut it short; the CLI's --timeout, --max-rows and
--max-bytes."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest

from clirunner import fail, ok
from limno.api.local import LocalLake as Lake
from limno.engines.local import query
from limno.engines.query_limits import QueryLimits, Watchdog
from limno.errors import (
    InvalidInputError,
    QueryTimeoutError,
    ResultTooLargeError,
    http_status,
)

#: a statement that runs for minutes unless interrupted (10^10 rows summed)
ENDLESS = "SELECT sum(a.range * b.range) AS s FROM range(100000) a, range(100000) b"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("LIMNO_LAKE", raising=False)
    monkeypatch.delenv("LIMNO_SQL_SAFE", raising=False)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    """Pool ``logs`` of 100 rows (key ``ts``)."""
    lake = Lake.init(str(tmp_path / "lake"))
    logs = lake.create_pool("logs", key="ts")
    logs.load([pa.table({"ts": list(range(100)), "msg": ["x" * 10] * 100})], message="one")
    return lake


# -- QueryLimits ---------------------------------------------------------------------------


def test_limits_are_checked_and_a_caller_may_only_lower_a_cap() -> None:
    for bad in (
        {"timeout": 0},
        {"timeout": -1.0},
        {"timeout": float("inf")},
        {"max_rows": 0},
        {"max_bytes": -5},
    ):
        with pytest.raises(InvalidInputError, match="query"):
            QueryLimits(**bad)
    cap = QueryLimits(timeout=30, max_rows=1000, max_bytes=None)
    assert QueryLimits().within(cap) == cap
    assert QueryLimits(timeout=60, max_rows=10, max_bytes=5).within(cap) == QueryLimits(30, 10, 5)
    assert QueryLimits().unlimited and not cap.unlimited


def test_watchdog_interrupts_until_the_block_ends() -> None:
    calls: list[int] = []
    called = threading.Event()

    def interrupt() -> None:
        calls.append(1)
        called.set()

    with Watchdog(0.01, interrupt) as dog:
        assert called.wait(10)
    assert dog.fired
    seen = len(calls)
    assert seen >= 1
    # the thread is joined: no call comes after the block
    assert [t for t in threading.enumerate() if t.name == "limno-query-timeout"] == []
    assert len(calls) == seen
    with Watchdog(None, interrupt) as never:
        pass
    assert not never.fired


# -- the local engine ----------------------------------------------------------------------


@pytest.mark.parametrize("safe", [False, True])
def test_time_limit_stops_a_long_query(safe: bool, lake: Lake) -> None:
    with pytest.raises(QueryTimeoutError) as e:
        query(lake, ENDLESS, safe=safe, limits=QueryLimits(timeout=0.2))
    assert http_status(e.value) == 503
    assert "time limit of 0.2s" in str(e.value) and "--timeout" in str(e.value)
    # the interrupt stays with that query: the next one runs
    assert query(lake, "SELECT count(*) AS n FROM logs").to_pylist() == [{"n": 100}]


def test_time_limit_stops_reading_a_long_answer(lake: Lake) -> None:
    endless_rows = "SELECT a.range AS x FROM range(100000) a, range(100000) b"
    with pytest.raises(QueryTimeoutError):
        query(lake, endless_rows, limits=QueryLimits(timeout=0.2, max_rows=10**12))


def test_row_limit(lake: Lake) -> None:
    at_limit = query(lake, "SELECT * FROM logs ORDER BY ts", limits=QueryLimits(max_rows=100))
    assert at_limit.equals(query(lake, "SELECT * FROM logs ORDER BY ts"))
    with pytest.raises(ResultTooLargeError) as e:
        query(lake, "SELECT * FROM logs", safe=True, limits=QueryLimits(max_rows=99))
    assert http_status(e.value) == 413
    assert "more than 99 rows" in str(e.value) and "--max-rows" in str(e.value)
    # far past the limit: refused without reading the whole answer
    with pytest.raises(ResultTooLargeError, match="more than 10 rows"):
        query(
            lake,
            ENDLESS.replace("sum(a.range * b.range)", "a.range"),
            limits=QueryLimits(max_rows=10),
        )
    small = query(lake, "SELECT count(*) AS n FROM logs", limits=QueryLimits(max_rows=1))
    assert small.to_pylist() == [{"n": 100}]


def test_byte_limit(lake: Lake) -> None:
    whole = query(lake, "SELECT * FROM logs")
    fits = query(lake, "SELECT * FROM logs", limits=QueryLimits(max_bytes=whole.nbytes * 2))
    assert fits.equals(whole)
    with pytest.raises(ResultTooLargeError) as e:
        query(lake, "SELECT * FROM logs", limits=QueryLimits(max_bytes=100))
    assert http_status(e.value) == 413 and "--max-bytes" in str(e.value)


def test_api_passes_limits(lake: Lake) -> None:
    with pytest.raises(ResultTooLargeError):
        lake.query("SELECT * FROM logs", limits=QueryLimits(max_rows=5))
    with pytest.raises(QueryTimeoutError):
        lake.query(ENDLESS, safe=True, limits=QueryLimits(timeout=0.2))
    assert lake.query("SELECT 1 AS one", limits=QueryLimits(1.0, 1, 1000)).num_rows == 1


# -- the CLI -------------------------------------------------------------------------------


def test_cli_limit_flags(lake: Lake) -> None:
    assert len(ok("--lake", lake.uri, "query", "--max-rows", "100", "FROM logs").rows()) == 100
    r = fail("--lake", lake.uri, "query", "--max-rows", "10", "FROM logs")
    assert r.err.strip().splitlines() == [
        "error: SQL: the answer has more than 10 rows (the limit);"
        " narrow the query (WHERE, LIMIT) or set a higher limit with --max-rows N"
    ]
    r = fail("--lake", lake.uri, "query", "--max-bytes", "1k", "FROM logs")
    assert "error: SQL: the answer is larger than" in r.err and "--max-bytes" in r.err
    r = fail("--lake", lake.uri, "query", "--timeout", "0.2", ENDLESS)
    assert "time limit of 0.2s" in r.err and "Traceback" not in r.err
    for flag, value in (("--timeout", "0"), ("--max-rows", "-1"), ("--max-bytes", "lots")):
        assert "Invalid value" in fail("--lake", lake.uri, "query", flag, value, "SELECT 1").err
    rows = ok("--lake", lake.uri, "query", "--timeout", "30", "--max-bytes", "1MiB", "FROM logs")
    assert len(rows.rows()) == 100
