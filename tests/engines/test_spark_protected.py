"""The Spark engine's writes respect protected branches: a bulk load, ``write(df)`` and
``df.write.format("limno")`` into a protected branch are refused before any work, with
the same error as a local write, and leave the lake's files as they were; Spark
compaction (maintenance) still works there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from limno.api.local import LocalLake as Lake
from limno.api.local_pool import LocalPool
from limno.engines import spark as spark_engine
from limno.errors import ProtectedBranchError
from spark_support import module_session

pytestmark = pytest.mark.spark

REFUSED = (
    "branch 'main' of pool 'logs' is protected: only merges may move it"
    " (limno branch unprotect -p logs main)"
)


@pytest.fixture(scope="module")
def spark() -> Any:
    yield from module_session("local[2]")


@pytest.fixture
def pool(tmp_path: Path) -> LocalPool:
    p = Lake.init(str(tmp_path / "lake")).create_pool("logs", key="ts")
    p.load([pa.table({"ts": [1, 2]})])
    p.load([pa.table({"ts": [3]})])
    p.protect("main")
    return p


def files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_spark_writes_are_refused(spark: SparkSession, pool: LocalPool, tmp_path: Path) -> None:
    data = tmp_path / "in.ndjson"
    data.write_text('{"ts": 4}\n')
    df = spark.createDataFrame([(5,)], "ts long")
    head, before = pool.resolve("main"), files(tmp_path / "lake")
    with pytest.raises(ProtectedBranchError) as refused:
        spark_engine.load(pool, [str(data)], spark=spark)
    assert str(refused.value) == REFUSED
    with pytest.raises(ProtectedBranchError) as refused:
        spark_engine.write(df, pool, spark=spark)
    assert str(refused.value) == REFUSED
    with pytest.raises(Exception, match="is protected: only merges may move it"):
        df.write.format("limno").option("lake", pool.storage.uri).mode("append").save("logs")
    assert files(tmp_path / "lake") == before and pool.resolve("main") == head
    pool.unprotect("main")
    spark_engine.write(df, pool, spark=spark)
    assert pool.scan().column("ts").to_pylist() == [1, 2, 3, 5]


def test_spark_compaction_works_on_a_protected_branch(spark: SparkSession, pool: LocalPool) -> None:
    commit, results = pool.compact([o.id for o in pool.objects()], engine="spark")
    assert commit is not None and results and pool.resolve("main") == commit.id
    assert pool.scan().column("ts").to_pylist() == [1, 2, 3]
    assert pool.protected() == ["main"]
