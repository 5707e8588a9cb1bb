"""Spark's ``s3a://`` file system (hadoop-aws from scripts/jars.sh), unchanged, against
the S3 gateway: a PySpark job writes a partitioned DataFrame as Parquet onto a branch
(Hadoop's default FileOutputCommitter: task output under ``_temporary/``, moved into
place by copy + delete, directory markers, listings by delimiter), ``limno`` commits
and tags it, and Spark reads it back at the tag, after the branch was overwritten."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from gateway.clients_support import Gateway, limno, plain, s3a_conf
from limno.engines import spark as ls
from spark_support import start_session, stop_session

__all__ = ["plain"]  # fixtures

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def spark(plain: Gateway) -> Iterator[SparkSession]:
    assert any("hadoop-aws" in j for j in ls.jars()), "run scripts/jars.sh"
    # a file system of this module's own (Hadoop caches one per bucket and user)
    conf = {**s3a_conf(plain), "spark.hadoop.fs.s3a.impl.disable.cache": "true"}
    session = start_session(conf=conf)
    try:
        yield session
    finally:
        stop_session()


def collected(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.select("id", "twice", "label", "bucket").collect())


def test_parquet_job_committed_tagged_read_at_tag(
    plain: Gateway, spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = plain.pool("spark")
    pool = plain.lake().file_pool(bucket)
    pool.branch("dev")
    df = spark.range(0, 5000).selectExpr(
        "id", "id * 2 AS twice", "concat('row-', id) AS label", "CAST(id % 3 AS INT) AS bucket"
    )
    want = collected(df)
    df.repartition(4).write.partitionBy("bucket").parquet(f"s3a://{bucket}/dev/out/")

    written = sorted(e.path for e in pool.iter_list("dev"))
    assert "out/_SUCCESS" in written
    assert not [p for p in written if "_temporary" in p]  # the committer cleaned up
    parts = [p for p in written if p.endswith(".parquet")]
    assert {p.split("/")[1] for p in parts} == {"bucket=0", "bucket=1", "bucket=2"}
    assert collected(spark.read.parquet(f"s3a://{bucket}/dev/out/")) == want

    limno(plain, monkeypatch, "commit", "-p", f"{bucket}@dev", "-m", "out, by Spark")
    limno(plain, monkeypatch, "tag", "-p", bucket, "v1", "--from", "dev")
    assert pool.uncommitted("dev") == []

    # the branch moves on: the job's output overwritten by a smaller one
    spark.range(0, 10).selectExpr(
        "id", "id AS twice", "'new' AS label", "CAST(7 AS INT) AS bucket"
    ).write.mode("overwrite").partitionBy("bucket").parquet(f"s3a://{bucket}/dev/out/")
    assert spark.read.parquet(f"s3a://{bucket}/dev/out/").count() == 10

    at_tag = spark.read.parquet(f"s3a://{bucket}/v1/out/")
    assert collected(at_tag) == want
    assert at_tag.filter("bucket = 1").count() == len([r for r in want if r[3] == 1])
    assert sorted(e.path for e in pool.iter_list("v1")) == written
