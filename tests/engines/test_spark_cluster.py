"""A real Spark standalone cluster: a master and two workers, each a separate JVM
process on 127.0.0.1 started from the PySpark install, run bulk import, compaction
tasks and SQL against one lake directory that every process shares."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from limno.api.local import LocalLake as Lake
from limno.engines import spark as ls
from limno.engines.local import query as local_query
from spark_support import Cluster, rows, start_session, stop_session

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    stop_session()
    c = Cluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        spark = start_session(
            c.url,
            {
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.cores.max": "2",
            },
        )
        yield spark
    finally:
        stop_session()
        c.stop()


def test_bulk_import_compaction_and_query_on_a_cluster(
    cluster: SparkSession, tmp_path: Path
) -> None:
    spark = cluster
    assert str(spark.sparkContext.master).startswith("spark://127.0.0.1:")
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("events", key="user,ts")
    df = spark.range(0, 6000, numPartitions=4).selectExpr(
        "concat('u', cast(id % 17 AS string)) AS user", "id AS ts", "id % 5 AS kind"
    )
    commit = ls.write(df, pool, partitions=4, message="cluster import", spark=spark)
    assert len(commit.actions) >= 4
    assert len(pool.objects()) == len(commit.actions)
    # the import ran in tasks of both workers' executors
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    assert status.size() >= 3  # the driver and two executors
    data = tmp_path / "more.ndjson"
    data.write_text("".join(json.dumps({"user": "u1", "ts": 10_000 + i}) + "\n" for i in range(30)))
    ls.load(pool, [str(data)], spark=spark)
    # compaction: the merges run as tasks on the workers, one commit on the driver
    before = pool.scan()
    ids = [o.id for o in pool.snapshot()[0]]
    compacted, _ = pool.compact(ids, runner=ls.compaction_runner)
    assert compacted is not None and compacted.meta["compaction"]["rows_out"] == 6030
    assert len(pool.snapshot()[0]) < len(ids)
    assert pool.scan().equals(before)
    sql = (
        'SELECT kind, count(*) AS n, max(ts) AS hi FROM "events@main"'
        " GROUP BY kind ORDER BY kind NULLS LAST"
    )
    assert rows(ls.query(lake, sql, spark)) == rows(local_query(lake, sql))
    assert rows(ls.query(lake, sql, spark))[0] == {"kind": 0, "n": 1200, "hi": 5995}
    in_range = pool.scan(start="u1", end="u2").num_rows
    assert ls.read(pool, start="u1", end="u2", spark=spark).count() == in_range > 30
    assert pool.scan().num_rows == 6030
    assert list(lake.verify()) == []
