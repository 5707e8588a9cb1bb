"""``spark.read.format("limno")`` / ``df.write.format("limno")``: the Python Data Source.

Reads must equal the local scan (merge-on-read, iterators, clipped objects); a write is
one commit of sorted objects cut at leaf partitions, ``overwrite`` replaces the
branch's objects in that commit, and a failed job commits nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from limno.api.local import LocalLake as Lake
from spark_support import module_session, rows

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Any:
    yield from module_session("local[2]")


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


def _read(spark: SparkSession, lake: Lake, ref: str) -> list[dict[str, Any]]:
    df = spark.read.format("limno").option("lake", lake.uri).load(ref)
    return [r.asDict(recursive=True) for r in df.collect()]


def test_read_equals_local_scan_with_iterators_and_clips(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("c", key="page", iterators=["sum(n)"])
    pool.load([pa.table({"page": ["/a", "/b", "/c"], "n": [1, 2, 3]})])
    pool.load([pa.table({"page": ["/a", "/c"], "n": [10, 30], "extra": ["x", "y"]})])
    pool.split("root", at="/b")  # both objects straddle: each leaf reads a clip
    pool.branch("dev")
    pool.load([pa.table({"page": ["/b"], "n": [100]})], branch="dev")
    want = rows(pool.table())
    got = _read(spark, lake, "c")
    assert sorted(got, key=lambda r: r["page"]) == sorted(want, key=lambda r: r["page"])
    assert {r["page"]: r["n"] for r in got} == {"/a": 11, "/b": 2, "/c": 33}
    dev = {r["page"]: r["n"] for r in _read(spark, lake, "c@dev")}
    assert dev == {"/a": 11, "/b": 102, "/c": 33}
    df = spark.read.format("limno").option("lake", lake.uri).load("c")
    assert df.schema.fieldNames() == ["page", "n", "extra"]


def test_write_append_and_overwrite_are_single_commits(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("nums", key="k", split_threshold=10**9)
    pool.load([pa.table({"k": [5, 15], "v": ["old", "old"]})])
    pool.split("root", at=10)
    heads = [pool.resolve()]
    df = spark.range(0, 20).selectExpr("(id * 7) % 20 AS k", "cast(id AS string) AS v")
    df.repartition(3).write.format("limno").option("lake", lake.uri).option(
        "message", "from spark"
    ).mode("append").save("nums@main")
    commit = pool.versioned.commits.get(pool.resolve())
    assert commit.parents == (heads[0],) and commit.message == "from spark"
    assert pool.scan().num_rows == 22
    ks = pool.scan().column("k").to_pylist()
    assert ks == sorted(ks)
    # every new object lies in one leaf partition
    objs, tree = pool.snapshot()
    new = [o for o in objs if o.id in {a.key for a in commit.actions}]
    assert new and all(len(tree.leaves_of(o)) == 1 for o in new)
    assert list(lake.verify()) == []
    # overwrite: one commit that deletes every old object and adds the new ones
    spark.range(0, 3).selectExpr("id AS k", "'new' AS v").write.format("limno").option(
        "lake", lake.uri
    ).mode("overwrite").save("nums")
    assert pool.scan().to_pylist() == [{"k": i, "v": "new"} for i in range(3)]
    assert pool.scan("main~1").num_rows == 22  # history kept
    assert list(lake.verify()) == []


def test_failed_write_commits_nothing(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([pa.table({"k": [1]})])
    head = pool.resolve()
    # an unsortable key type fails inside the tasks
    bad = spark.range(0, 4).selectExpr("map('a', id) AS k")
    with pytest.raises(Exception, match="cannot be sorted"):
        bad.write.format("limno").option("lake", lake.uri).mode("append").save("p")
    assert pool.resolve() == head
    with pytest.raises(Exception, match="no branch|not found|unknown"):
        spark.range(1).selectExpr("id AS k").write.format("limno").option("lake", lake.uri).mode(
            "append"
        ).save("p@nope")
    assert list(lake.verify()) == []


def test_keys_of_another_family_are_refused_unless_overwriting(
    spark: SparkSession, lake: Lake
) -> None:
    from limno.engines import spark as ls
    from limno.errors import InvalidInputError

    pool = lake.create_pool("p", key="k")
    pool.load([pa.table({"k": [1, 2]})])
    head = pool.resolve()
    text = spark.range(3).selectExpr("cast(id AS string) AS k")
    with pytest.raises(InvalidInputError, match="key field 'k' is string"):
        ls.write(text, pool)
    with pytest.raises(Exception, match="key field 'k' is string"):
        text.write.format("limno").option("lake", lake.uri).mode("append").save("p")
    assert pool.resolve() == head
    text.write.format("limno").option("lake", lake.uri).mode("overwrite").save("p")
    assert pool.scan().column("k").to_pylist() == ["0", "1", "2"]
    assert list(lake.verify()) == []
