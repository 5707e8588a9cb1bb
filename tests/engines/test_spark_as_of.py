"""``Lake.query(..., as_of=)`` on Spark reads branches as they were and tags as named,
exactly as the local engine does (tests/cli/test_as_of_cli.py covers the local one)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from limno.api.local import LocalLake
from limno.errors import NotFoundError
from spark_support import module_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield from module_session()


def test_spark_sql_as_of_moves_branches_and_keeps_tags(spark: SparkSession, tmp_path: Path) -> None:
    lake = LocalLake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("logs", key="ts")
    pool.load([pa.table({"ts": [1, 2]})])
    between = dt.datetime.now(dt.UTC)
    pool.load([pa.table({"ts": [3]})])
    pool.tag("v2")
    sql = "SELECT (SELECT count(*) FROM logs) AS main, (SELECT count(*) FROM `logs@v2`) AS v2"
    for engine in ("local", "spark"):
        got = lake.query(sql, engine=engine, as_of=between, spark_master="local[2]")
        assert got.to_pylist() == [{"main": 2, "v2": 3}], engine
        with pytest.raises(NotFoundError, match="did not exist"):
            lake.query(sql, engine=engine, as_of=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
