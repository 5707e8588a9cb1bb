"""The Spark engine's Python API and CLI: DataFrames in and out of pools, key-range
pruning, failed task attempts, SQL errors, ``--engine`` on ``load`` and ``query``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from clirunner import fail, ok
from limno.api.local import LocalLake as Lake
from limno.data.objects import DataObject
from limno.engines import spark as ls
from limno.engines.local import query as local_query
from limno.errors import InvalidInputError, NotFoundError
from spark_support import module_session, rows

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Any:
    # two task attempts per task, so a failed first attempt is retried
    yield from module_session("local[2,2]")


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


def test_write_dataframe_is_one_commit_of_sorted_non_overlapping_objects(
    spark: SparkSession, lake: Lake
) -> None:
    pool = lake.create_pool("nums", key="k", target_size=64 * 1024)
    df = spark.range(0, 20000).selectExpr(
        "(id * 7919) % 20000 AS k", "cast(id % 13 AS string) AS tag", "id * 0.5 AS half"
    )
    before = pool.resolve()
    commit = ls.write(df, pool, message="bulk", meta={"src": "test"}, partitions=3)
    assert commit.parents == (before,)
    assert commit.message == "bulk" and dict(commit.meta) == {"src": "test"}
    objs = pool.objects()
    assert len(objs) == len(commit.actions) >= 3
    ordered = sorted(objs, key=lambda o: o.min_key or ())
    for a, b in zip(ordered, ordered[1:], strict=False):
        assert a.max_key is not None and b.min_key is not None and a.max_key < b.min_key
    assert sum(o.rows for o in objs) == 20000
    assert [r["k"] for r in pool.scan(limit=5).to_pylist()] == [0, 1, 2, 3, 4]
    assert list(lake.verify()) == []
    # and back: the snapshot as a DataFrame, equal to the local read
    back = ls.read(pool, spark=spark)
    assert back.count() == 20000
    assert back.schema.fieldNames() == ["k", "tag", "half"]
    local = sorted(rows(pool.table()), key=lambda r: r["k"])
    assert sorted(rows(back.toArrow()), key=lambda r: r["k"]) == local


def test_read_prunes_objects_by_key_range(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("r", key="k")
    for lo in range(0, 400, 100):
        pool.load([pa.table({"k": list(range(lo, lo + 100)), "v": [lo] * 100})])
    df = ls.read(pool, start=150, end=260, spark=spark)
    paths = set(df.inputFiles())
    assert len(paths) == 2  # only the objects of [100, 200) and [200, 300) are scanned
    assert sorted(r["k"] for r in rows(df.toArrow())) == list(range(150, 260))
    assert rows(ls.read("r@main", lake=lake, start="390", spark=spark).toArrow()) == [
        {"k": k, "v": 300} for k in range(390, 400)
    ]


def test_read_widens_mixed_shapes_like_the_local_engine(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("m", key="k")
    pool.load([pa.table({"k": [1, 2], "x": pa.array([1, 2], pa.int32()), "s": [{"a": 1}, None]})])
    pool.load([pa.table({"k": [3], "x": [2.5], "s": [{"a": 2, "b": "z"}], "extra": [True]})])
    pool.load([pa.table({"k": [4], "x": ["text"], "d": pa.array([19000], pa.date32())})])
    df = ls.read(pool, spark=spark)
    local = pool.table()
    assert df.schema.fieldNames() == local.column_names
    assert sorted(rows(df.toArrow()), key=lambda r: r["k"]) == sorted(
        rows(local), key=lambda r: r["k"]
    )


def test_failed_task_attempts_are_never_referenced(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    pool = lake.create_pool("f", key="k")
    marks = tmp_path / "attempts"
    marks.mkdir()

    def fail_first_attempt(obj: DataObject) -> None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        (marks / f"{ctx.partitionId()}-{ctx.attemptNumber()}-{obj.id}").touch()
        if ctx.attemptNumber() == 0:
            raise RuntimeError("injected failure after the object was uploaded")

    df = spark.range(0, 1000).selectExpr("id AS k")
    commit = ls.write(df, pool, partitions=2, spark=spark, _hook=fail_first_attempt)
    attempts = [m.name.split("-") for m in marks.iterdir()]
    failed = {oid for _, attempt, oid in attempts if attempt == "0"}
    kept = {a.key for a in commit.actions}
    assert failed and not failed & kept
    assert {oid for _, attempt, oid in attempts if attempt == "1"} == kept
    assert pool.scan().num_rows == 1000
    assert list(lake.verify()) == []


def test_failed_job_commits_nothing(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("g", key="k")
    head = pool.resolve()

    def always_fail(obj: DataObject) -> None:
        raise InvalidInputError(f"object {obj.id} rejected")

    with pytest.raises(InvalidInputError, match="rejected"):
        ls.write(spark.range(10).selectExpr("id AS k"), pool, spark=spark, _hook=always_fail)
    assert pool.resolve() == head
    assert list(lake.verify()) == []


def test_unsortable_key_and_missing_branch(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("u", key="k")
    with pytest.raises(InvalidInputError, match="cannot be sorted"):
        ls.write(spark.range(3).selectExpr("array(id) AS k"), pool, spark=spark)
    with pytest.raises(NotFoundError):
        ls.write(spark.range(3).selectExpr("id AS k"), pool, "nope", spark=spark)


def test_sql_errors_and_unknown_tables(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("q", key="k")
    pool.load([pa.table({"k": [1, 2, 3]})])
    with pytest.raises(NotFoundError):
        ls.query(lake, "SELECT * FROM nosuchpool", spark)
    with pytest.raises(InvalidInputError, match="SQL"):
        ls.query(lake, "SELECT nosuchcolumn FROM q", spark)
    with pytest.raises(InvalidInputError, match="SQL"):
        ls.query(lake, "SELEKT 1", spark)
    # a CTE is not a pool; names the DuckDB parser misses are found through Spark
    sql = "WITH t AS (SELECT k FROM q WHERE k > 1) SELECT count(*) AS n FROM t"
    assert rows(ls.query(lake, sql, spark)) == rows(local_query(lake, sql)) == [{"n": 2}]


def test_compaction_groups_run_as_spark_tasks(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("c", key="k")
    for i in range(4):
        pool.load([pa.table({"k": [i, i + 10, i + 20], "v": [i] * 3})])
    objs = pool.objects()
    out = ls.merge_groups(pool, [objs[:2], objs[2:]], spark=spark)
    assert [sum(o.rows for o in g) for g in out] == [6, 6]
    merged = [pool.read_object(o) for o in out[0]]
    keys = [k for t in merged for k in t.column("k").to_pylist()]
    assert keys == sorted(keys)


# -- the CLI ------------------------------------------------------------------------------


def test_cli_load_and_query_on_spark(
    spark: SparkSession, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIMNO_LAKE", lake.uri)
    data = tmp_path / "in.ndjson"
    data.write_text("".join(json.dumps({"ts": i, "v": i % 3}) + "\n" for i in range(50, 0, -1)))
    ok("create", "p", "-k", "ts")
    res = ok("load", "-p", "p", "--engine", "spark", "-m", "spark load", str(data))
    commit = res.text.strip()
    assert "committed" in res.err and "50 record(s)" in res.err
    pool = lake.pool("p")
    assert pool.resolve() == commit and pool.scan().num_rows == 50
    sql = "SELECT v, count(*) AS n FROM p GROUP BY v ORDER BY v"
    spark_out = ok("-f", "json", "query", "--engine", "spark", sql).text
    local_out = ok("-f", "json", "query", "--engine", "local", sql).text
    assert (
        json.loads(spark_out)
        == json.loads(local_out)
        == [
            {"v": 0, "n": 16},
            {"v": 1, "n": 17},
            {"v": 2, "n": 17},
        ]
    )
    # auto: Spark from the threshold on
    monkeypatch.setenv("LIMNO_SPARK_THRESHOLD", "1")
    ok("load", "-p", "p", str(data))
    assert pool.log()[0].message == "load 50 record(s)"
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"ts": 1}\n{"ts": \n')
    res = fail("load", "-p", "p", "--engine", "spark", str(bad))
    assert "bad.ndjson: line 2" in res.err
    assert os.environ["LIMNO_SPARK_THRESHOLD"] == "1"
