"""SQL over pools reads Parquet objects in place: the same answers as a merged read.

The reference is the old way, still :func:`resolve_table`: the whole snapshot
merged into one Arrow table by limno, then queried by DuckDB. Every shape of
snapshot is checked against it: overlapping loads, iterators, clipped objects
after a split, schema evolution, types Parquet cannot hold as they are, and
key-range pruning under generated conditions (Hypothesis).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.api.local import LocalLake as Lake
from limno.data.sql_ranges import key_conditions
from limno.engines.local import query, reads_alike, resolve_table
from limno.pools.records.compaction import CompactionJob, run_jobs
from limno.pools.records.sql_source import snapshot_source


def reference(lake: Lake, sql: str) -> pa.Table:
    """What ``sql`` answers over fully merged snapshots."""
    con = duckdb.connect()
    try:
        for name in duckdb.get_table_names(sql):
            con.register(name, resolve_table(lake, name))
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()


def same(lake: Lake, sql: str) -> pa.Table:
    got = query(lake, sql)
    want = reference(lake, sql)
    assert got.schema.names == want.schema.names
    assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, want.to_pylist())), sql
    return got


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


def load(lake: Lake, pool: str, start: int, count: int, **extra: list[object]) -> None:
    rows = {"id": list(range(start, start + count)), "v": [i * 10 for i in range(count)]}
    lake.pool(pool).load([pa.table({**rows, **extra})])


def test_overlapping_loads_are_read_in_place(lake: Lake) -> None:
    lake.create_pool("t", key="id")
    load(lake, "t", 0, 100)
    load(lake, "t", 50, 100)  # overlaps: without iterators both versions are rows
    source = snapshot_source(lake.pool("t"))
    assert len(source.files) == 2 and source.merged is None
    got = same(lake, "SELECT id, count(*) AS n FROM t GROUP BY id HAVING n > 1 ORDER BY id")
    assert got.column("id").to_pylist() == list(range(50, 100))
    assert same(lake, "SELECT sum(v) AS s FROM t").column("s")[0].as_py() == 2 * 4950 * 10


def test_iterators_are_merged_by_limno(lake: Lake) -> None:
    lake.create_pool("t", key="id", iterators=["dedup"])
    load(lake, "t", 0, 100)
    load(lake, "t", 50, 100)
    source = snapshot_source(lake.pool("t"))
    assert source.files == () and source.merged is not None
    got = same(lake, "SELECT count(*) AS n FROM t")
    assert got.column("n")[0].as_py() == 150


def test_clipped_objects_after_a_split_are_merged(lake: Lake) -> None:
    lake.create_pool("t", key="id")
    load(lake, "t", 0, 1000)
    load(lake, "t", 0, 1000)
    pool = lake.pool("t")
    ids = [o.id for o in pool.objects()]
    assert pool.split("root", at=500) is not None
    left, _ = pool.partitions().leaves()
    # compact the left leaf's share only: both objects stay, clipped to the right leaf
    run_jobs(pool, "main", [CompactionJob("j1", left.id, tuple(ids))])
    load(lake, "t", 2000, 10)
    source = snapshot_source(pool)
    assert source.merged is not None and source.merged.num_rows == 1000  # the clipped halves
    assert len(source.files) == 2  # the compacted left half and the last load
    got = same(lake, "SELECT count(*) AS n, count(DISTINCT id) AS d FROM t")
    assert got.to_pylist() == [{"n": 2010, "d": 1010}]


def test_schema_evolution_keeps_limno_widening(lake: Lake) -> None:
    lake.create_pool("t", key="id")
    lake.pool("t").load([pa.table({"id": [1, 2], "v": pa.array([1, 2], pa.int32())})])
    lake.pool("t").load([pa.table({"id": [3], "v": pa.array([3], pa.int64()), "w": ["x"]})])
    source = snapshot_source(lake.pool("t"))
    assert source.schema.names == ["id", "v", "w"]
    assert len(source.files) == 1 and source.merged is not None  # the old shape is merged
    got = same(lake, "SELECT * FROM t ORDER BY id")
    assert got.column("w").to_pylist() == [None, None, "x"]


def test_types_parquet_changes_are_merged(lake: Lake) -> None:
    lake.create_pool("t", key="id")
    lake.pool("t").load(
        [
            pa.table(
                {
                    "id": [1, 2],
                    "took": pa.array([dt.timedelta(seconds=3), None], pa.duration("ms")),
                    "at": pa.array([dt.datetime(2024, 1, 1), None], pa.timestamp("s")),
                }
            )
        ]
    )
    assert snapshot_source(lake.pool("t"), readable=reads_alike).files == ()
    same(lake, "SELECT * FROM t")


def test_safe_mode_reads_the_snapshot_files_and_nothing_else(lake: Lake) -> None:
    lake.create_pool("t", key="id")
    load(lake, "t", 0, 10)
    got = query(lake, "SELECT count(*) AS n FROM t", safe=True)
    assert got.to_pylist() == [{"n": 10}]
    with pytest.raises(Exception, match="read_parquet|not allowed|file"):
        path = snapshot_source(lake.pool("t")).files[0]
        query(lake, f"SELECT * FROM t, read_parquet('{path}')", safe=True)


def test_pruning_leaves_out_objects_that_cannot_match(lake: Lake) -> None:
    lake.create_pool("t", key="id")
    for start in range(0, 500, 100):
        load(lake, "t", start, 100)
    pool = lake.pool("t")
    sql = "SELECT * FROM t WHERE id = 250"
    source = snapshot_source(pool, conditions=key_conditions(sql, "t", "id"))
    assert len(source.files) == 1
    assert same(lake, sql).column("id").to_pylist() == [250]
    assert same(lake, "SELECT count(*) AS n FROM t WHERE id > 1000").to_pylist() == [{"n": 0}]


def test_key_conditions_only_where_they_cannot_change_the_answer() -> None:
    def conds(sql: str) -> list[tuple[str, object]]:
        return key_conditions(sql, "t", "id")

    assert conds("SELECT * FROM t WHERE id = 5") == [("=", 5)]
    assert conds("SELECT * FROM t x WHERE x.id BETWEEN 1 AND 9 AND 3 < id") == [
        (">=", 1),
        ("<=", 9),
        (">", 3),
    ]
    assert conds("SELECT * FROM t WHERE id IN (1, 2) AND v = 3") == [("in", (1, 2))]
    assert conds("SELECT * FROM a JOIN t ON a.k = t.id WHERE t.id >= 7") == [(">=", 7)]
    assert conds("SELECT * FROM t WHERE d >= DATE '1995-01-01'") == []
    assert key_conditions("SELECT * FROM t WHERE d < DATE '1995-01-01'", "t", "d") == [
        ("<", dt.date(1995, 1, 1))
    ]
    # none: a disjunction, the table twice, another table's column, a function of the key
    assert conds("SELECT * FROM t WHERE id = 5 OR v = 1") == []
    assert conds("SELECT * FROM t a JOIN t b ON a.v = b.v WHERE a.id = 5") == []
    assert conds("SELECT * FROM t JOIN u ON t.v = u.v WHERE u.id = 5") == []
    assert conds("SELECT * FROM t WHERE id + 1 = 5") == []
    assert conds("SELECT * FROM (SELECT * FROM t) s WHERE s.id = 5") == []
    assert conds("not sql at all") == []


KEYS = st.integers(-50, 250)
OPS = st.sampled_from(["=", "<", "<=", ">", ">=", "<>"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    loads=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 40)), min_size=1, max_size=4),
    terms=st.lists(st.tuples(OPS, KEYS), min_size=1, max_size=3),
    desc=st.booleans(),
    use_in=st.booleans(),
)
def test_pruned_queries_match_the_merged_answer(
    tmp_path_factory: pytest.TempPathFactory,
    loads: list[tuple[int, int]],
    terms: list[tuple[str, int]],
    desc: bool,
    use_in: bool,
) -> None:
    lake = Lake.init(str(tmp_path_factory.mktemp("lake") / "lake"))
    lake.create_pool("t", key="id:desc" if desc else "id")
    for start, count in loads:
        load(lake, "t", start, count)
    where = " AND ".join(f"id {op} {value}" for op, value in terms)
    if use_in:
        where += f" AND id IN ({terms[0][1]}, {terms[0][1] + 3})"
    same(lake, f"SELECT id, v FROM t WHERE {where}")
    same(lake, f"SELECT count(*) AS n FROM t t1 WHERE {where.replace('id', 't1.id')}")


@pytest.mark.s3
def test_an_s3_lake_is_scanned_in_place_through_pyarrow(s3_uri: str) -> None:
    lake = Lake.init(s3_uri)
    lake.create_pool("t", key="id")
    load(lake, "t", 0, 300)
    load(lake, "t", 200, 300)
    source = snapshot_source(lake.pool("t"), readable=reads_alike)
    assert source.filesystem is not None and len(source.files) == 2
    assert source.merged is None
    got = same(lake, "SELECT id, count(*) AS n FROM t WHERE v >= 100 GROUP BY id")
    assert got.num_rows == 490
    safe = query(lake, "SELECT count(*) AS n FROM t WHERE id BETWEEN 250 AND 260", safe=True)
    assert safe.to_pylist() == [{"n": 22}]


def test_joins_on_using_and_natural_name_their_pools(lake: Lake) -> None:
    """DuckDB's own table-name lookup fails on ``JOIN ... USING`` (it binds the
    columns against tables it does not have): the pools are found in the parse tree,
    a CTE's name is not taken for a pool."""
    lake.create_pool("a", key="id")
    lake.create_pool("b", key="id")
    load(lake, "a", 0, 5)
    lake.pool("b").load([pa.table({"id": [3, 4, 9], "w": ["x", "y", "z"]})])
    for sql in (
        "SELECT id, v, w FROM a JOIN b USING (id) ORDER BY id",
        "SELECT id, v, w FROM a NATURAL JOIN b ORDER BY id",
        "SELECT a.id, v, w FROM a JOIN b ON a.id = b.id ORDER BY a.id",
    ):
        assert query(lake, sql).to_pylist() == [
            {"id": 3, "v": 30, "w": "x"},
            {"id": 4, "v": 40, "w": "y"},
        ], sql
    got = query(lake, "WITH c AS (SELECT 4 AS id) SELECT id, w FROM c JOIN b USING (id)")
    assert got.to_pylist() == [{"id": 4, "w": "y"}]
