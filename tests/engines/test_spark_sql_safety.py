"""Safe mode of ``query --engine spark``: Spark's parser must read exactly one query, and
the query session has no SQL on files, no scripts and no JVM method calls by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from clirunner import fail
from limno.api.local import LocalLake as Lake
from limno.engines import spark as ls
from limno.engines.local import query as local_query
from limno.errors import ForbiddenError, InvalidInputError
from spark_support import module_session, rows

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from module_session()


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = Lake.init(str(tmp_path / "lake"))
    logs = lake.create_pool("logs", key="ts")
    logs.load([pa.table({"ts": [1, 2, 3], "level": ["info", "debug", "info"]})])
    logs.load([pa.table({"ts": [4, 5], "level": ["warn", "debug"]})])
    return lake


HOSTILE = [
    "SET spark.sql.ansi.enabled = false",
    "RESET",
    "INSERT INTO logs SELECT 9, 'x'",
    "WITH a AS (SELECT 1) INSERT INTO logs SELECT * FROM a",
    "FROM logs INSERT INTO x SELECT *",
    "INSERT OVERWRITE DIRECTORY '{out}' USING parquet SELECT * FROM logs",
    "CREATE TABLE x USING parquet LOCATION '{out}' AS SELECT * FROM logs",
    "CREATE TEMPORARY VIEW v AS SELECT 1",
    "CACHE TABLE logs",
    "ADD JAR '{out}/x.jar'",
    "EXECUTE IMMEDIATE 'SET x = 1'",
    "DECLARE VARIABLE v INT",
    "EXPLAIN SELECT 1",
    "SHOW TABLES",
    "SELECT * FROM parquet.`{data}`",
    "SELECT ts FROM logs WHERE ts IN (SELECT id FROM parquet.`{data}`)",
    "SELECT * FROM `{data}`",
    "SELECT * FROM spark_catalog.default.logs",
    "SELECT TRANSFORM(ts) USING 'cat' AS (x) FROM logs",
    "SELECT reflect('java.lang.System', 'getProperty', 'user.home')",
    "SELECT java_method('java.lang.System', 'getenv', 'HOME')",
    "SELECT try_reflect('java.lang.System', 'getenv', 'HOME')",
    "SELECT * FROM python_worker_logs()",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_hostile_statements_are_refused(
    sql: str, spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    data = tmp_path / "data.parquet"
    if not data.exists():
        spark.range(3).write.parquet(str(data))
    out = tmp_path / "out"
    sql = sql.format(data=data, out=out)
    head = lake.pool("logs").log()[0].id
    with pytest.raises(ForbiddenError, match="not allowed in safe mode"):
        ls.query(lake, sql, spark, safe=True)
    assert not out.exists()
    assert lake.pool("logs").log()[0].id == head


def test_names_resolved_late_still_cannot_reach_files_or_the_jvm(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    data = tmp_path / "data.parquet"
    spark.range(3).write.parquet(str(data))
    # IDENTIFIER() names a table or function only when analyzed: the session refuses it
    for sql in (
        f"SELECT * FROM IDENTIFIER('parquet.`{data}`')",
        "SELECT IDENTIFIER('reflect')('java.lang.System', 'getProperty', 'user.home')",
    ):
        with pytest.raises(InvalidInputError, match="SQL"):
            ls.query(lake, sql, spark, safe=True)
    # the caller's own session is untouched
    assert spark.sql(f"SELECT count(*) AS n FROM parquet.`{data}`").collect()[0]["n"] == 3
    assert spark.sql("SELECT reflect('java.lang.String', 'valueOf', 7) AS r").collect()[0]["r"]


ORDINARY = [
    "SELECT level, count(*) AS n FROM logs GROUP BY level ORDER BY level",
    'SELECT a.ts, b.level FROM logs a JOIN "logs@main~1" b ON a.ts = b.ts ORDER BY 1',
    "WITH d AS (SELECT * FROM logs WHERE level = 'debug') SELECT sum(ts) AS s FROM d",
    "SELECT ts, row_number() OVER (PARTITION BY level ORDER BY ts DESC) AS r FROM logs ORDER BY ts",
    'SELECT count(*) AS n FROM "logs:objects"',
    'SELECT name, "key" FROM ":pools"',
    "SELECT ts FROM logs WHERE ts IN (SELECT ts FROM logs WHERE level = 'info') ORDER BY ts",
    "SELECT 1 AS one;",
]


def test_ordinary_queries_agree_in_safe_mode(spark: SparkSession, lake: Lake) -> None:
    for sql in ORDINARY:
        safe = rows(ls.query(lake, sql, spark, safe=True))
        assert safe, sql
        assert safe == rows(ls.query(lake, sql, spark, safe=False)), sql
        assert safe == rows(local_query(lake, sql, safe=True)), sql
    values = "VALUES (1, 'a'), (2, 'b')"  # column names differ by engine: Spark's own only
    assert rows(ls.query(lake, values, spark, safe=True)) == rows(
        ls.query(lake, values, spark, safe=False)
    )


def test_several_statements_are_a_parse_error(spark: SparkSession, lake: Lake) -> None:
    with pytest.raises(InvalidInputError, match="SQL: .*PARSE_SYNTAX_ERROR"):
        ls.query(lake, "SELECT 1; SELECT 2", spark, safe=True)


def test_cli_engine_spark_safe(spark: SparkSession, lake: Lake, tmp_path: Path) -> None:
    data = tmp_path / "data.parquet"
    spark.range(3).write.parquet(str(data))
    sql = f"SELECT * FROM parquet.`{data}`"
    r = fail("--lake", lake.uri, "query", "--engine", "spark", "--safe", sql)
    assert "not allowed in safe mode" in r.err
