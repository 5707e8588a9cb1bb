"""The native bulk-import path: Spark's own Parquet writer writes the sorted ranges,
a second job describes and publishes them. Its objects must be what limno's Python
writer would have made of the same rows (same schema, same scan, same metadata),
it must honour leaf partitions, and a failed job must leave nothing referenced."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from limno.api.local import LocalLake as Lake
from limno.data import encoding
from limno.data.objects import DataObject, data_path
from limno.data.parquet import open_parquet
from limno.data.typed_schema import TypedSchema
from limno.engines import spark as ls
from limno.engines.spark import _native, _write
from limno.errors import InvalidInputError
from s3_support import make_bucket
from spark_support import module_session

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(s3_endpoint: str) -> Iterator[SparkSession]:
    # two attempts per task (a failed first attempt is retried); s3a reaches the
    # loopback S3 server (the session reads the AWS_* settings its fixture exported)
    yield from module_session("local[2,2]")


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


def writer_of(pool: Any, obj: DataObject) -> str:
    """``spark`` for an object Spark's Parquet writer wrote, ``limno`` for pyarrow's."""
    created_by = open_parquet(pool.storage, data_path(pool.id, obj.id)).metadata.created_by
    return "spark" if "parquet-mr" in created_by else "limno"


def data_files(pool: Any) -> set[str]:
    """What is under the pool's data prefix (paths relative to it)."""
    prefix = f"{pool.id}/data/"
    return {info.path[len(prefix) :] for info in pool.storage.walk(prefix.rstrip("/"))}


def both_ways(lake: Lake, df: DataFrame, key: str, partitions: int = 3) -> tuple[Any, Any]:
    """``df`` written natively and with limno's writer, into two pools keyed ``key``."""
    n = len(lake.list_pools())
    native = lake.create_pool(f"native{n}", key=key)
    python = lake.create_pool(f"python{n}", key=key)
    ls.write(df, native, partitions=partitions, keep_order=True)
    ls.write(df, python, partitions=partitions, keep_order=True, native=False)
    assert {writer_of(native, o) for o in native.objects()} == {"spark"}
    assert {writer_of(python, o) for o in python.objects()} == {"limno"}
    assert_disjoint(native)
    assert_disjoint(python)
    return native, python


def assert_disjoint(pool: Any) -> None:
    """The objects of one bulk import hold disjoint key ranges, keyless rows last."""
    sk = pool.key.sort_key
    objs = pool.objects()
    keyed = sorted((o for o in objs if o.min_key is not None), key=lambda o: sk(o.min_key))
    for a, b in zip(keyed, keyed[1:], strict=False):
        assert sk(a.max_key) < sk(b.min_key), (a.max_key, b.min_key)
    keyless = [o.id for o in objs if o.keyless]
    assert len(keyless) <= 1 and (not keyless or not keyed or keyless == [keyed[-1].id])


def plain(value: Any) -> Any:
    """``value`` with NaN as a string, so that equal rows compare equal."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def assert_same(native: Any, python: Any) -> None:
    a, b = native.objects(), python.objects()
    assert {o.schema_b64 for o in a} == {o.schema_b64 for o in b}
    assert {o.key_types for o in a} == {o.key_types for o in b}
    assert sum(o.rows for o in a) == sum(o.rows for o in b)
    assert sum(o.keyless for o in a) == sum(o.keyless for o in b)
    got, want = native.scan(), python.scan()
    assert got.schema == want.schema
    assert plain(got.to_pylist()) == plain(want.to_pylist())
    desc = native.scan(order="desc").to_pylist()
    assert plain(desc) == plain(python.scan(order="desc").to_pylist())


# -- the same objects as limno's writer -------------------------------------------------------


def test_int_and_string_keys_with_keyless_rows(spark: SparkSession, lake: Lake) -> None:
    df = spark.range(0, 3000).selectExpr(
        "if(id % 97 = 0, null, (id * 7919) % 3000) AS k",
        "concat('s', cast((id * 31) % 1000 AS string), if(id % 5 = 0, 'é', '')) AS s",
        "cast(id AS double) / 3 AS x",
        "if(id % 11 = 0, null, id % 4) AS g",
    )
    native, python = both_ways(lake, df, "k")
    assert_same(native, python)
    assert sum(o.keyless for o in native.objects()) == 31
    # string keys: byte order (Spark's and Arrow's), duplicates in input order
    native, python = both_ways(lake, df, "s")
    assert_same(native, python)
    assert list(lake.verify()) == []


def test_descending_multi_field_and_nested_keys(spark: SparkSession, lake: Lake) -> None:
    df = spark.range(0, 2000).selectExpr(
        "if(id % 50 = 0, null, cast(id % 7 AS string)) AS tenant",
        "if(id % 61 = 0, null, (id * 13) % 500) AS n",
        "named_struct('ts', if(id % 43 = 0, null, (id * 17) % 900), 'tag', cast(id AS string))"
        " AS meta",
        "if(id % 77 = 0, null, named_struct('z', if(id % 5 = 0, null, id))) AS other",
        "id AS v",
    )
    for key in ("n:desc", "tenant,n:desc", "meta.ts", "tenant:desc,meta.ts"):
        native, python = both_ways(lake, df, key)
        assert_same(native, python)
    assert list(lake.verify()) == []


def test_float_keys_sort_nan_like_arrow(spark: SparkSession, lake: Lake) -> None:
    # Arrow puts NaN after every number in both directions (Spark: first when descending)
    df = spark.range(0, 2000).selectExpr(
        "if(id % 9 = 0, cast('NaN' AS double), cast((id * 3) % 101 AS double)) AS f",
        "if(id % 61 = 0, null, (id * 13) % 500) AS n",
        "id AS v",
    )
    for key in ("f:desc", "f", "f,n", "n,f:desc"):
        native, python = both_ways(lake, df, key)
        assert_same(native, python)
        for o in native.objects():  # (verify's own check compares NaN as unequal)
            table = native.read_object(o)
            order = native.key.sort_indices(table).to_pylist()
            assert order == list(range(table.num_rows))


def test_timestamps_dates_decimals_structs_and_lists(spark: SparkSession, lake: Lake) -> None:
    df = spark.range(0, 1500).selectExpr(
        "timestamp_seconds(1700000000 + (id * 7919) % 1500 * 60) AS ts",
        "cast(timestamp_seconds(1700000000 + id) AS timestamp_ntz) AS ntz",
        "date_add(date'2024-01-01', cast(id % 400 AS int)) AS d",
        "cast(id / 7 AS decimal(12, 3)) AS dec",
        "cast(id AS decimal(30, 0)) AS big",
        "cast(id % 100 AS tinyint) AS b",
        "cast(id AS smallint) AS sm",
        "cast(id AS int) AS i",
        "cast(id AS float) AS fl",
        "id % 3 = 0 AS flag",
        "cast(cast(id AS string) AS binary) AS raw",
        "named_struct('a', id, 'b', named_struct('c', cast(id AS string))) AS st",
        "array(id, id + 1) AS arr",
        "array(named_struct('q', id)) AS arrst",
        "cast(null AS string) AS nothing",
    )
    for key in ("ts", "ts:desc", "d,ntz:desc", "dec:desc"):
        native, python = both_ways(lake, df, key)
        assert_same(native, python)
    # what the native path expects to find is what limno's writer stores
    assert {o.schema_b64 for o in python.objects()} == {
        _native.schema_to_b64(_native.expected_schema(df.schema))
    }
    assert list(lake.verify()) == []


def test_get_and_key_ranges_on_native_objects(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("g", key="k")
    df = spark.range(0, 50000).selectExpr("(id * 7919) % 50000 AS k", "id AS v", "'x' AS s")
    ls.write(df, pool, partitions=4)
    objs = pool.objects()
    assert len(objs) == 4 and {writer_of(pool, o) for o in objs} == {"spark"}
    ordered = sorted(objs, key=lambda o: o.min_key or ())
    for a, b in zip(ordered, ordered[1:], strict=False):
        assert a.max_key is not None and b.min_key is not None and a.max_key < b.min_key
    assert [o.min_key for o in ordered][0] == (0,) and ordered[-1].max_key == (49999,)
    got = pool.get([12345, 0, 49999])
    assert sorted(got.column("k").to_pylist()) == [0, 12345, 49999]
    assert pool.scan(start="100", end="105").column("k").to_pylist() == list(range(100, 105))
    # small row groups with statistics and a page index: a lookup reads little
    md = pq.ParquetFile(pool.storage.local_path(data_path(pool.id, objs[0].id))).metadata
    assert md.row_group(0).column(0).is_stats_set and md.row_group(0).column(0).has_column_index
    assert md.row_group(0).num_rows <= _native.ROW_GROUP_ROWS
    # compressed as limno's own writer compresses (pyarrow names LZ4_RAW "LZ4")
    assert md.row_group(0).column(0).compression == encoding.COMPRESSION.upper()
    # the staging directory is gone: only objects and their sketches remain
    names = data_files(pool)
    assert names == {f"{o.id}.parquet" for o in objs} | {f"{o.id}.sketch" for o in objs}
    assert list(lake.verify()) == []


def test_keep_order_of_equal_keys(spark: SparkSession, lake: Lake) -> None:
    df = spark.range(0, 4000, 1, 4).selectExpr("id % 10 AS k", "id AS v")
    for native in (True, False):
        pool = lake.create_pool(f"o{native}", key="k")
        ls.write(df, pool, partitions=3, keep_order=True, native=native)
        rows = pool.scan().to_pylist()
        assert [(r["k"], r["v"]) for r in rows] == sorted((r["k"], r["v"]) for r in rows)
    # a pool with iterators keeps the DataFrame's order by default: the newest row wins
    dedup = lake.create_pool("d", key="k", iterators=["dedup"])
    ls.write(df, dedup, partitions=3)
    assert dedup.scan().to_pylist() == [{"k": k, "v": 3990 + k} for k in range(10)]


def test_load_uses_the_native_path(spark: SparkSession, lake: Lake, tmp_path: Path) -> None:
    files = []
    for i in range(3):
        path = tmp_path / f"in{i}.parquet"
        pq.write_table(pa.table({"k": [5, 3, 5, 1], "v": [i * 10 + j for j in range(4)]}), path)
        files.append(str(path))
    pool = lake.create_pool("l", key="k")
    ls.load(pool, files, spark=spark, partitions=2)
    assert {writer_of(pool, o) for o in pool.objects()} == {"spark"}
    # ties keep the input order, as the local load does
    local = lake.create_pool("local", key="k")
    local.load(files)
    assert pool.scan().to_pylist() == local.scan().to_pylist()
    assert list(lake.verify()) == []


# -- partitions -------------------------------------------------------------------------------


@pytest.mark.parametrize("sampled", [True, False])
def test_objects_reference_the_leaves_they_lie_in(
    spark: SparkSession, lake: Lake, monkeypatch: pytest.MonkeyPatch, sampled: bool
) -> None:
    if not sampled:  # no row estimate: Spark's range partitioner, rows carry their leaf
        monkeypatch.setattr(_write, "estimated_rows", lambda df: None)
    pool = lake.create_pool("p", key="k")
    pool.load([pa.table({"k": list(range(0, 1000, 3))})])
    assert pool.split("root", at=500) is not None
    left = [p for p in pool.partitions().leaves() if p.hi == (500,)][0]
    assert pool.split(left.id, at=200) is not None
    leaves = pool.partitions().leaves()
    assert len(leaves) == 3
    before = {o.id for o in pool.objects()}
    df = spark.range(0, 1000).selectExpr("if(id % 40 = 0, null, (id * 7) % 1000) AS k", "id AS v")
    ls.write(df, pool, partitions=2)
    objs, tree = pool.snapshot()
    new = [o for o in objs if o.id not in before]
    assert {writer_of(pool, o) for o in new} == {"spark"}
    by_id = {p.id: p for p in leaves}
    seen = set()
    for o in new:
        assert len(o.partitions) == 1 and o.partitions[0] in by_id
        leaf = by_id[o.partitions[0]]
        assert tree.leaves_of(o) == [leaf]
        seen.add(leaf.id)
        if o.keyless:
            assert leaf.hi is None  # keyless rows live in the last leaf
        if o.min_key is not None and o.max_key is not None:
            assert leaf.lo is None or pool.key.sort_key(leaf.lo) <= pool.key.sort_key(o.min_key)
            assert leaf.hi is None or pool.key.sort_key(o.max_key) < pool.key.sort_key(leaf.hi)
    assert seen == set(by_id)
    assert sum(o.keyless for o in new) == 25 and sum(o.rows for o in new) == 1000
    assert list(lake.verify()) == []
    # limno's writer splits its ranges at the leaves the same way
    other = lake.create_pool("q", key="k")
    other.load([pa.table({"k": list(range(0, 1000, 3))})])
    assert other.split("root", at=500) is not None
    before = {o.id for o in other.objects()}
    ls.write(df, other, partitions=2, native=False)
    objs, tree = other.snapshot()
    new = [o for o in objs if o.id not in before]
    assert {writer_of(other, o) for o in new} == {"limno"}
    assert all(len(tree.leaves_of(o)) == 1 == len(o.partitions) for o in new)
    assert list(lake.verify()) == []


# -- fallbacks --------------------------------------------------------------------------------


def test_falls_back_to_limnos_writer_where_spark_would_differ(
    spark: SparkSession, lake: Lake
) -> None:
    maps = spark.range(0, 100).selectExpr("id AS k", "map('a', id) AS m")
    pool = lake.create_pool("maps", key="k")
    ls.write(maps, pool)
    assert {writer_of(pool, o) for o in pool.objects()} == {"limno"}
    # a typed schema casts and checks rows in limno's writer
    schema = TypedSchema.from_json({"row_keys": [{"name": "k", "type": "int64"}]})
    typed = lake.create_pool("typed", key="k", schema=schema)
    ls.write(spark.range(0, 10).selectExpr("id AS k"), typed)
    assert {writer_of(typed, o) for o in typed.objects()} == {"limno"}
    # timestamps reach limno's writer in the session time zone: not Spark's UTC
    tz = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    spark.conf.set("spark.sql.session.timeZone", "Europe/Paris")
    try:
        zoned = lake.create_pool("zoned", key="k")
        ls.write(spark.range(0, 10).selectExpr("id AS k", "timestamp_seconds(id) AS ts"), zoned)
        assert {writer_of(zoned, o) for o in zoned.objects()} == {"limno"}
    finally:
        spark.conf.set("spark.sql.session.timeZone", tz)
    # a schema found to differ after the write: everything removed, limno's writer used
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native, "expected_schema", lambda schema: pa.schema([("other", pa.int8())]))
        odd = lake.create_pool("odd", key="k")
        ls.write(spark.range(0, 100).selectExpr("id AS k"), odd, partitions=2)
    objs = odd.objects()
    assert {writer_of(odd, o) for o in objs} == {"limno"}
    assert data_files(odd) == {f"{o.id}.{ext}" for o in objs for ext in ("parquet", "sketch")}
    assert list(lake.verify()) == []


def test_empty_dataframe_is_no_records(spark: SparkSession, lake: Lake) -> None:
    pool = lake.create_pool("e", key="k")
    with pytest.raises(InvalidInputError, match="no records"):
        ls.write(spark.range(0, 100).selectExpr("id AS k").where("k < 0"), pool)
    assert data_files(pool) == set()


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where", ["local", pytest.param("s3", marks=[pytest.mark.s3, pytest.mark.slow])]
)
def test_failed_job_is_never_referenced_and_vacuum_reclaims_it(
    spark: SparkSession,
    tmp_path: Path,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    uri = f"s3://{make_bucket(s3_endpoint)}/lake" if where == "s3" else str(tmp_path / "lake")
    lake = Lake.init(uri)
    # a successful write leaves only objects and their sketches
    ok = lake.create_pool("ok", key="k")
    ls.write(spark.range(0, 3000).selectExpr("(id * 7) % 3000 AS k", "id AS v"), ok, partitions=2)
    objs = ok.objects()
    assert len(objs) == 2 and {writer_of(ok, o) for o in objs} == {"spark"}
    assert data_files(ok) == {f"{o.id}.{ext}" for o in objs for ext in ("parquet", "sketch")}
    assert [v * 7 % 3000 for v in ok.get([1234]).column("v").to_pylist()] == [1234]
    pool = lake.create_pool("f", key="k")
    pool.load([pa.table({"k": [1, 2, 3]})])
    head, before = pool.resolve(), pool.scan()
    kept = data_files(pool)
    # a task that raises on some row: the job fails, nothing changes
    bad = spark.range(0, 5000).select(
        F.col("id").alias("k"),
        F.when(F.col("id") == 4321, F.raise_error(F.lit("row 4321 is bad")))
        .otherwise(1)
        .alias("v"),
    )
    with pytest.raises(Exception, match="row 4321 is bad"):
        ls.write(bad, pool, partitions=2)
    assert pool.resolve() == head and data_files(pool) == kept

    # a job dying after Spark wrote its parts and its tasks published objects (the
    # executors' Python workers die right after publishing, the driver before cleaning
    # up): nothing is referenced, and vacuum reclaims it all
    def die(obj: DataObject) -> None:
        os._exit(1)

    # One partition: one task, which publishes and dies. With two, the job failed with
    # the first task's death while the second could still publish after the vacuum.
    monkeypatch.setattr(_native, "remove_tree", lambda storage, prefix: None)
    good = spark.range(0, 5000).selectExpr("id AS k", "id AS v")
    with pytest.raises(Exception, match="(?i)python worker"):
        ls.write(good, pool, partitions=1, _hook=die)
    assert pool.resolve() == head
    assert pool.scan().equals(before)
    assert list(lake.verify()) == []
    leftovers = data_files(pool) - kept
    assert any(".spark/" in p for p in leftovers)  # the staged parts
    assert any(p.endswith(".parquet") and "/" not in p for p in leftovers)  # published ones
    assert not any(Path(p).name.startswith(".") for p in leftovers)  # no .crc files
    report = pool.vacuum(grace=dt.timedelta(0))
    assert report.removed
    assert data_files(pool) == kept
    assert pool.scan().equals(before) and list(lake.verify()) == []
