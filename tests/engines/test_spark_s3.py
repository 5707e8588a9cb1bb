"""A lake on S3 (the loopback moto server of conftest.py): Spark reads and writes
objects through ``s3a://`` with path-style requests, limno's code in tasks through
its own S3 storage; bulk import, compaction tasks and SQL as on a local lake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from limno.api.local import LocalLake as Lake
from limno.engines import spark as ls
from limno.engines.local import query as local_query
from spark_support import rows, start_session, stop_session

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow]


@pytest.fixture(scope="module")
def spark(s3_endpoint: str) -> Iterator[SparkSession]:
    # the session reads the AWS_* settings the S3 fixture exported
    session = start_session()
    conf = session.sparkContext.getConf()
    assert conf.get("spark.hadoop.fs.s3a.endpoint") == s3_endpoint
    assert conf.get("spark.hadoop.fs.s3a.path.style.access") == "true"
    assert any("hadoop-aws" in j for j in ls.jars()), "run scripts/jars.sh"
    yield session
    stop_session()


def test_import_compaction_and_query_on_s3(
    spark: SparkSession, s3_uri: str, tmp_path: Path
) -> None:
    lake = Lake.init(s3_uri)
    pool = lake.create_pool("logs", key="ts")
    df = spark.range(0, 3000).selectExpr("id * 3 % 3000 AS ts", "id % 4 AS level")
    commit = ls.write(df, pool, partitions=2, spark=spark)
    assert len(commit.actions) >= 2
    data = tmp_path / "late.ndjson"
    data.write_text("".join(json.dumps({"ts": 5000 + i, "level": 9}) + "\n" for i in range(20)))
    ls.load(pool, [str(data)], spark=spark)
    assert ls.hadoop_uri(lake.storage, "x").startswith("s3a://")

    def pairs() -> list[tuple[int, int]]:
        t = pool.scan()
        return sorted(zip(t.column("ts").to_pylist(), t.column("level").to_pylist(), strict=True))

    before = pairs()
    ids = [o.id for o in pool.snapshot()[0]]
    compacted, _ = pool.compact(ids, runner=ls.compaction_runner)
    assert compacted is not None and len(pool.snapshot()[0]) < len(ids)
    assert pairs() == before and len(before) == 3020
    sql = "SELECT level, count(*) AS n, sum(ts) AS s FROM logs GROUP BY level ORDER BY level"
    assert rows(ls.query(lake, sql, spark)) == rows(local_query(lake, sql))
    assert ls.read(pool, start=5000, spark=spark).count() == 20
    assert list(lake.verify()) == []
