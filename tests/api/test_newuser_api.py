"""What a new user of the Python API tried and got a traceback, a server's 500 or a
silently wrong answer for: each now an ``InvalidInputError`` naming the mistake (or, for
a null key, no row), the same in process and through a server.

One lake per module (pool ``logs``, key ts, rows 1..3), read in process and through
:func:`limno.server.run.serving` on it: these calls change nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from limno import InvalidInputError, Lake
from limno.server.run import serving


@pytest.fixture(scope="module")
def lake_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("newuser") / "lake")
    lake = Lake.init(path)
    lake.create_pool("logs", key="ts").load(pa.table({"ts": [1, 2, 3], "v": ["a", "b", "c"]}))
    return path


@pytest.fixture(scope="module")
def url(lake_path: str) -> Iterator[str]:
    with serving(lake_path) as where:
        yield where


@pytest.fixture(params=["local", "served"])
def lake(request: pytest.FixtureRequest, lake_path: str) -> Iterator[Lake]:
    where = lake_path if request.param == "local" else request.getfixturevalue("url")
    opened = Lake.open(where)
    try:
        yield opened
    finally:
        close = getattr(opened, "close", None)
        if close is not None:
            close()


def test_a_null_key_matches_nothing(lake: Lake) -> None:
    """It was an AssertionError in process and a 500 from a server."""
    logs = lake.pool("logs")
    assert logs.get([None]).num_rows == 0
    assert logs.get([None, 2, None]).column("v").to_pylist() == ["b"]


@pytest.mark.parametrize("keys", ["12", b"12", 12])
def test_get_wants_a_list_of_keys(lake: Lake, keys: Any) -> None:
    """``get("12")`` looked up the keys 1 and 2 (a str is a sequence of characters)."""
    with pytest.raises(InvalidInputError, match="get takes a list of keys"):
        lake.pool("logs").get(keys)


def test_a_negative_limit_is_refused_not_an_empty_answer(lake: Lake) -> None:
    logs = lake.pool("logs")
    with pytest.raises(InvalidInputError, match="limit must not be negative"):
        logs.log(limit=-1)
    with pytest.raises(InvalidInputError, match="limit must not be negative"):
        logs.scan(limit=-1)
    assert logs.log(limit=0) == [] and logs.scan(limit=0).num_rows == 0


def test_sql_that_is_not_text_is_invalid_input(lake: Lake) -> None:
    with pytest.raises(InvalidInputError):
        lake.query(b"SELECT 1")  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["", ["ts"]])
def test_a_pool_key_is_text_and_never_silently_ts(lake: Lake, key: Any) -> None:
    """``key=""`` made a pool keyed on ts; a list failed with an AttributeError."""
    with pytest.raises(InvalidInputError):
        lake.create_pool("keyed", key=key)
    assert "keyed" not in [p.name for p in lake.list_pools()]


UNSTORABLE = {
    "interval": pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval()),
    "union": pa.UnionArray.from_sparse(pa.array([0], pa.int8()), [pa.array([1]), pa.array(["a"])]),
    "run-end": pa.RunEndEncodedArray.from_arrays(pa.array([1], pa.int32()), pa.array([5])),
    "nested interval": pa.array([[pa.MonthDayNano([1, 2, 3])]]),
    "list of size 0": pa.array([[]], pa.list_(pa.int8(), 0)),
}


@pytest.mark.parametrize("kind", UNSTORABLE)
def test_a_type_parquet_cannot_keep_is_refused_naming_the_field(lake: Lake, kind: str) -> None:
    """An interval (DuckDB's INTERVAL), a union or run-end encoding was an internal error;
    a fixed-size list of size 0 was committed and then no scan of the pool could read it."""
    logs = lake.pool("logs")
    head = logs.resolve("main")
    with pytest.raises(InvalidInputError, match="field 'x': type .* cannot be stored"):
        logs.load(pa.table({"ts": [9], "x": UNSTORABLE[kind]}))
    assert logs.resolve("main") == head and logs.scan().num_rows == 3


def test_as_of_is_a_datetime(lake: Lake) -> None:
    """``as_of="2026-01-01"`` was an AttributeError, in process and through a server."""
    logs = lake.pool("logs")
    with pytest.raises(InvalidInputError, match="as_of is a datetime, not a str"):
        logs.scan(as_of="2026-01-01")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="as_of is a datetime"):
        logs.objects(as_of="2026-01-01")  # type: ignore[arg-type]
