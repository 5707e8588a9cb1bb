"""``query --engine spark`` under a caller's limits and grants: the row and byte limits
refuse an answer past them (Spark queries have no time limit), and a pool the caller
may not read is refused before Spark reads anything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from limno.api.local import LocalLake as Lake
from limno.engines import spark as ls
from limno.engines.query_limits import QueryLimits
from limno.errors import ForbiddenError, ResultTooLargeError
from spark_support import module_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from module_session()


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("logs", key="ts").load([pa.table({"ts": list(range(20))})])
    lake.create_pool("vault", key="ts").load([pa.table({"ts": [7], "pin": ["1234"]})])
    return lake


def test_row_and_byte_limits(spark: Any, lake: Lake) -> None:
    sql = "SELECT ts FROM logs ORDER BY ts"
    at_limit = ls.query(lake, sql, spark, limits=QueryLimits(max_rows=20))
    assert at_limit.column("ts").to_pylist() == list(range(20))
    with pytest.raises(ResultTooLargeError, match="more than 19 rows"):
        ls.query(lake, sql, spark, safe=True, limits=QueryLimits(max_rows=19))
    with pytest.raises(ResultTooLargeError, match="--max-bytes"):
        ls.query(lake, sql, spark, limits=QueryLimits(max_bytes=16))


def test_grants(spark: Any, lake: Lake) -> None:
    def readable(pool: str) -> bool:
        return pool == "logs"

    for sql in ("SELECT * FROM vault", 'SELECT * FROM "vault:commits"'):
        with pytest.raises(ForbiddenError, match="pool vault may not be read"):
            ls.query(lake, sql, spark, safe=True, readable=readable)
    names = ls.query(lake, 'SELECT name FROM ":pools"', spark, readable=readable)
    assert names.column("name").to_pylist() == ["logs"]
