"""Search indexes (limno.pools.records.indexing, limno.data.indexes).

A lookup by an indexed field must give exactly what a scan filtered on the field gives
(same rows, same order, iterators applied), whatever the history did: loads, staged
commits, compactions, ``delete --where`` rewrites, splits, merges, reverts and drops.
Every committed snapshot must hold a sidecar per (object, index) (``verify`` checks),
and objects and row groups an index rules out must not be opened at all: the tests
overwrite those objects' bytes with garbage, which any read would fail on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import functools
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno import AlreadyExistsError, InvalidInputError, NotFoundError
from limno.api.local import LocalLake as Lake
from limno.api.local_pool import LocalPool
from limno.data import indexes
from limno.data.objects import data_path

STATUSES = ("new", "open", "done")


def rows(start: int, n: int, status: str | None = None) -> pa.Table:
    """Rows ``k = start..start+n-1`` with a low-cardinality ``status``, a unique ``uid``
    and a nested ``meta.team``."""
    ks = list(range(start, start + n))
    return pa.table(
        {
            "k": ks,
            "status": [status or STATUSES[k % 3] for k in ks],
            "uid": [f"u{k}" for k in ks],
            "meta": [{"team": f"t{k % 5}"} for k in ks],
        }
    )


def filtered(pool: LocalPool, field: str, values: list[Any], ref: str | None = None) -> list[Any]:
    """The reference answer: a scan's rows whose ``field`` equals one of ``values``."""
    path = field.split(".")

    def value(row: dict[str, Any]) -> Any:
        for p in path:
            row = row.get(p) if isinstance(row, dict) else None  # type: ignore[assignment]
        return row

    return [r for r in pool.scan(ref).to_pylist() if value(r) in values]


def sidecars(pool: LocalPool) -> list[str]:
    return sorted(n for n in os.listdir(pool_dir(pool)) if n.endswith(".idx"))


def pool_dir(pool: LocalPool) -> Path:
    local = pool.storage.local_path(f"{pool.id}/data")
    assert local is not None
    return Path(local)


def spoil(pool: LocalPool, keep: set[str]) -> None:
    """Overwrite every data object not in ``keep`` with garbage: a read of one fails."""
    for o in pool.objects():
        if o.id not in keep:
            path = pool.storage.local_path(data_path(pool.id, o.id))
            assert path is not None
            Path(path).write_bytes(b"not parquet" * (o.size // 11 + 1))


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


# -- the property: index lookups equal filtered scans, whatever the history -------------------

op = st.one_of(
    st.tuples(st.just("load"), st.integers(0, 40), st.integers(1, 12)),
    st.tuples(st.just("add"), st.integers(0, 40), st.integers(1, 12)),
    st.tuples(st.just("compact"), st.just(0), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, 40), st.integers(1, 10)),
    st.tuples(st.just("split"), st.just(0), st.just(0)),
    st.tuples(st.just("drop"), st.just(0), st.just(0)),
    st.tuples(st.just("create"), st.just(0), st.just(0)),
)
lookups = st.lists(
    st.tuples(
        st.sampled_from(["status", "uid", "meta.team"]),
        st.lists(
            st.sampled_from([*STATUSES, "none", "u0", "u7", "u33", "u40", "t1", "t4"]),
            min_size=1,
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=8), asked=lookups, dedup=st.booleans())
def test_lookups_equal_filtered_scans_through_any_history(
    ops: list[tuple[str, int, int]], asked: list[tuple[str, list[str]]], dedup: bool
) -> None:
    lake = Lake.init(f"memory://{uuid.uuid4().hex}")
    pool = lake.create_pool("p", key="k", iterators=["dedup"] if dedup else ())
    pool.load([rows(0, 5)])
    pool.create_index(["status", "uid", "meta.team"])
    indexed = True
    for i, (kind, start, n) in enumerate(ops):
        if kind == "load":  # overlapping keys: with dedup, newer versions win
            pool.load([rows(start, n, STATUSES[i % 3])])
        elif kind == "add":
            pool.add([rows(start, n)])
            pool.commit()
        elif kind == "compact" and len(pool.objects()) > 1:
            pool.compact([o.id for o in pool.objects()])
        elif kind == "delete":
            with contextlib.suppress(InvalidInputError):  # no rows there
                pool.delete_where(f"k >= {start} AND k < {start + n}")
        elif kind == "split":
            leaf = pool.partitions().leaves()[0]
            pool.split(leaf.id)
        elif kind == "drop" and indexed:
            pool.drop_index(["uid"])
            indexed = False
        elif kind == "create" and not indexed:
            pool.create_index(["uid"])
            indexed = True
    assert list(lake.verify()) == []
    for field, values in asked:
        assert pool.search(field, values).to_pylist() == filtered(pool, field, values)


def test_every_writer_keeps_the_sidecars(lake: Lake) -> None:
    """Loads, staged commits, compactions and delete-where rewrites index what they write."""
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 30)])
    pool.create_index(["status"])
    spec = pool.indexes()[0]
    pool.load([rows(30, 30)])
    pool.add([rows(60, 30)])
    pool.commit()
    assert len(pool.objects()) == 3
    pool.compact([o.id for o in pool.objects()])
    pool.delete_where("k < 5")
    for o in pool.objects():
        assert (pool_dir(pool) / f"{o.id}.{spec.id}.idx").is_file()
    assert list(lake.verify()) == []
    assert pool.search("status", ["open"]).to_pylist() == filtered(pool, "status", ["open"])


def test_only_objects_and_row_groups_that_may_match_are_read(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    for start in range(0, 40, 10):
        pool.load([rows(start, 10, "rare" if start == 20 else "common")])
    pool.create_index(["status", "uid"])
    want = filtered(pool, "status", ["rare"])
    holder = {o.id for o in pool.objects() if o.min_key == (20,)}
    spoil(pool, keep=holder)
    assert pool.search("status", ["rare"]).to_pylist() == want
    assert pool.search("uid", ["u25"]).column("k").to_pylist() == [25]
    assert pool.search("uid", ["u99", "nobody"]).num_rows == 0
    with pytest.raises(Exception, match="(?i)damaged|corrupt|parquet"):
        pool.search("meta.team", ["t1"])  # not indexed: every object is read


def test_a_high_cardinality_sidecar_is_read_one_row_group_at_a_time(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    n = 70_000  # two data row groups (65,536 rows each)
    pool.load([pa.table({"k": list(range(n)), "uid": [f"id-{i:06d}" for i in range(n)]})])
    pool.create_index(["uid"])
    (obj,) = pool.objects()
    spec = pool.indexes()[0]
    sidecar = pq.ParquetFile(pool_dir(pool) / f"{obj.id}.{spec.id}.idx")
    assert sidecar.metadata.num_row_groups == -(-n // indexes.SIDECAR_GROUP_ROWS)
    assert sidecar.metadata.num_rows == n
    probe = functools.partial(indexes.probe, pool.storage, pool.id, obj.id, spec.id)
    assert probe(["id-012345"]) == [0]
    assert probe(["id-066000", "id-000001"]) == [0, 1]
    assert probe(["id-x"]) == []
    assert pool.search("uid", ["id-066000"]).column("k").to_pylist() == [66000]


def test_values_are_read_in_the_fields_type(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    when = [dt.datetime(2024, 1, 1 + i % 3) for i in range(9)]
    pool.load([pa.table({"k": list(range(9)), "n": [i % 4 for i in range(9)], "at": when})])
    pool.create_index(["n", "at"])
    assert pool.search("n", ["2"]).column("k").to_pylist() == [2, 6]
    assert pool.search("n", [2, 3.0]).column("k").to_pylist() == [2, 3, 6, 7]
    assert pool.search("n", [2.5]).num_rows == 0  # no integer equals it
    assert pool.search("at", ["2024-01-02"]).column("k").to_pylist() == [1, 4, 7]
    with pytest.raises(InvalidInputError, match="not a valid"):
        pool.search("n", ["two"])


def test_dedup_returns_a_keys_newest_version_only(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k", iterators=["dedup"])
    pool.load([rows(0, 10, "open")])
    pool.create_index(["status"])
    pool.load([rows(0, 5, "done")])  # keys 0..4 are done now
    assert pool.search("status", ["open"]).column("k").to_pylist() == [5, 6, 7, 8, 9]
    assert pool.search("status", ["done"]).column("k").to_pylist() == [0, 1, 2, 3, 4]


def test_an_aggregated_field_is_filtered_after_aggregation(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k", iterators=["sum(n)"])
    pool.load([pa.table({"k": [1, 2], "n": [1, 2]})])
    pool.load([pa.table({"k": [1, 2], "n": [2, 5]})])
    pool.create_index(["n"])
    assert pool.search("n", [3]).to_pylist() == [{"k": 1, "n": 3}]  # no row holds 3


UPPER = """
import pyarrow as pa
import pyarrow.compute as pc


class Upper:
    def __init__(self, key_fields, options):
        pass

    def apply(self, batches):
        for b in batches:
            t = pa.Table.from_batches([b])
            at = t.schema.get_field_index("status")
            yield t.set_column(at, "status", pc.utf8_upper(t.column("status")))
"""


def test_a_user_iterator_s_output_is_what_a_lookup_filters(lake: Lake) -> None:
    """A user iterator may change any value but the key: ``status`` reads FAILED where
    the objects hold ``failed``, so a lookup filters the scan, as for an aggregation."""
    pool = lake.create_pool("p", key="k")
    pool.set_iterators(["python(Upper)"], UPPER, "upper.py")
    pool.load([pa.table({"k": [1, 2], "status": ["failed", "ok"]})])
    assert pool.search("status", ["FAILED"]).to_pylist() == [{"k": 1, "status": "FAILED"}]
    pool.create_index(["status"])
    assert pool.search("status", ["FAILED"]).to_pylist() == [{"k": 1, "status": "FAILED"}]
    assert pool.search("status", ["failed"]).num_rows == 0


def test_drop_keeps_history_and_vacuum_frees_what_nothing_holds(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 20)])
    created = pool.create_index(["status", "uid"])
    dropped = pool.drop_index(["uid"])
    assert [s.field for s in pool.indexes()] == ["status"]
    assert [s.field for s in pool.indexes(created.id)] == ["status", "uid"]
    assert dropped.actions[0].op == "delete"
    assert pool.search("uid", ["u3"]).column("k").to_pylist() == [3]  # read whole
    assert len(sidecars(pool)) == 2
    later = dt.timedelta(hours=1)
    pool.vacuum(grace=dt.timedelta(0), retention=None)
    assert len(sidecars(pool)) == 2  # history still holds the uid index
    report = pool.vacuum(grace=-later, retention=dt.timedelta(0))
    status_id = pool.indexes()[0].id
    assert [n.split(".")[1] for n in sidecars(pool)] == [status_id]
    assert any(p.endswith(".idx") for p, _ in report.removed)
    pool.delete_objects([o.id for o in pool.objects()])
    pool.vacuum(grace=-later, retention=dt.timedelta(0))
    assert sidecars(pool) == []
    assert list(lake.verify()) == []


def test_revert_undoes_an_index_and_brings_it_back(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 6)])
    created = pool.create_index(["status"])
    pool.revert(created.id)
    assert pool.indexes() == []
    again = pool.revert(pool.log(limit=1)[0].id)
    assert [s.field for s in pool.indexes()] == ["status"]
    assert again.actions[0].key == "~index/status"
    assert list(lake.verify()) == []


def test_merges_index_what_the_other_side_wrote(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 10)])
    pool.branch("dev")
    pool.create_index(["uid"], branch="dev")
    pool.load([rows(10, 10)])  # main: not indexed here
    pool.load([rows(20, 10)], branch="dev")
    pool.merge("dev", "main")
    assert [s.field for s in pool.indexes("main")] == ["uid"]
    assert list(lake.verify()) == []
    assert pool.search("uid", ["u15", "u25"]).column("k").to_pylist() == [15, 25]


def test_concurrent_loads_and_create_keep_every_sidecar(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 5)])
    errors: list[BaseException] = []

    def loads() -> None:
        try:
            mine = lake.pool("p")
            for i in range(1, 6):
                mine.load([rows(i * 10, 5)])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    thread = threading.Thread(target=loads)
    thread.start()
    lake.pool("p").create_index(["status"])
    thread.join(120)
    assert not thread.is_alive() and errors == []
    assert list(lake.verify()) == []
    spec = pool.indexes()[0]
    assert all((pool_dir(pool) / f"{o.id}.{spec.id}.idx").is_file() for o in pool.objects())


def test_sql_equality_prunes_objects_an_index_rules_out(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    for start in range(0, 40, 10):
        pool.load([rows(start, 10, "rare" if start == 20 else "common")])
    sql = "SELECT k FROM p WHERE status = 'rare' ORDER BY k"
    want = lake.query(sql).column("k").to_pylist()
    assert want == list(range(20, 30))
    pool.create_index(["status"])
    spoil(pool, keep={o.id for o in pool.objects() if o.min_key == (20,)})
    assert lake.query(sql).column("k").to_pylist() == want
    both = "SELECT count(*) AS n FROM p WHERE status IN ('rare', 'gone') AND k >= 25"
    assert lake.query(both).column("n").to_pylist() == [5]
    with pytest.raises(Exception, match="(?i)damaged|corrupt|parquet"):
        lake.query("SELECT count(*) FROM p WHERE status <> 'rare'")  # no pruning


def test_verify_reports_a_missing_sidecar(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 5)])
    pool.create_index(["status"])
    (name,) = sidecars(pool)
    (pool_dir(pool) / name).unlink()
    faults = list(lake.verify())
    assert len(faults) == 1
    assert "sidecar" in faults[0].problem and "index drop/create" in faults[0].fix
    # the answer does not depend on the sidecar: the object is read whole
    assert pool.search("status", ["new"]).to_pylist() == filtered(pool, "status", ["new"])


def test_meta_table_log_and_diff_show_indexes(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 5)])
    made = pool.create_index(["status", "meta.team"])
    table = lake.query('SELECT field FROM "p:indexes" ORDER BY field')
    assert table.column("field").to_pylist() == ["meta.team", "status"]
    assert {a.key for a in made.actions} == {"~index/status", "~index/meta.team"}
    assert all(a.op == "create" for a in made.actions)
    diff = pool.diff("main~1", "main")
    assert sorted(e.key for e in diff) == ["~index/meta.team", "~index/status"]


def test_refusals(lake: Lake) -> None:
    pool = lake.create_pool("p", key="k")
    pool.load([rows(0, 5)])
    pool.create_index(["status"])
    with pytest.raises(AlreadyExistsError, match="already has an index on status"):
        pool.create_index(["status"])
    with pytest.raises(NotFoundError, match="no index on uid"):
        pool.drop_index(["uid"])
    for bad in ("", "a,b", "a:b", "a..b", "a/b"):
        with pytest.raises(InvalidInputError, match="invalid index field"):
            pool.create_index([bad])
    with pytest.raises(InvalidInputError, match="at least one value"):
        pool.search("status", [])
    assert [s.field for s in pool.indexes()] == ["status"]


def test_coerce_and_sql_values_only_keep_exact_equals() -> None:
    assert indexes.coerce(["5", 6, 7.0, 7.5, True, None], pa.int64()) == [5, 6, 7]
    assert indexes.coerce([5, "x"], pa.string()) == ["x"]  # a number equals no text
    assert indexes.coerce(["a"], pa.null()) == []
    assert indexes.sql_values(["x"], pa.string()) == ["x"]
    assert indexes.sql_values([5], pa.string()) is None
    assert indexes.sql_values([1.5], pa.int64()) is None  # a float: SQL may round
    assert indexes.sql_values([dt.date(2024, 1, 2)], pa.date32()) == [dt.date(2024, 1, 2)]
    assert indexes.sql_values(["x"], pa.float64()) is None


def test_integer_constants_find_decimals_and_wide_unsigned_values(lake: Lake) -> None:
    """An integer met a decimal(10,2) only through int64 -> decimal (precision 19 + 2:
    refused, so every object was pruned) and a uint64 beyond int64 overflowed."""
    pool = lake.create_pool("p", key="k")
    big = 2**63 + 5
    price = pa.array([decimal.Decimal("7.00"), decimal.Decimal("1.10")], pa.decimal128(10, 2))
    pool.load([pa.table({"k": [1, 2], "d": price, "u": pa.array([big, 1], pa.uint64())})])
    pool.create_index(["d", "u"])
    assert lake.query("SELECT k FROM p WHERE d = 7").column("k").to_pylist() == [1]
    assert lake.query(f"SELECT k FROM p WHERE u = {big}").column("k").to_pylist() == [1]
    assert pool.search("d", [7]).column("k").to_pylist() == [1]
    assert pool.search("u", [big]).column("k").to_pylist() == [1]
    assert pool.search("u", [str(big)]).column("k").to_pylist() == [1]


def test_sql_does_not_prune_a_column_it_compares_as_doubles(lake: Lake) -> None:
    """An int64 object unified with a float64 one (or a decimal with one wider than 38
    digits) is a DOUBLE to DuckDB: a constant may equal a rounded value no sidecar holds."""
    pool = lake.create_pool("p", key="k")
    wide = pa.array([decimal.Decimal("1.1") + decimal.Decimal(10) ** -40], pa.decimal256(45, 41))
    pool.load([pa.table({"k": [1], "x": [2**53 + 1], "d": wide})])
    pool.load([pa.table({"k": [2], "x": [0.5], "d": pa.array([decimal.Decimal("2")])})])
    queries = ["SELECT k FROM p WHERE x = 9007199254740992", "SELECT k FROM p WHERE d = 1.1"]
    want = [lake.query(q).column("k").to_pylist() for q in queries]
    assert want == [[1], [1]]
    pool.create_index(["x", "d"])
    assert [lake.query(q).column("k").to_pylist() for q in queries] == want


def test_float_lookups_find_negative_zero_and_nan(lake: Lake) -> None:
    """-0.0 equals 0.0 (as a scan filtered in Python or SQL finds), but Arrow's is_in
    and the sidecar's distinct values tell them apart; a NaN (found without an index)
    lies outside the sidecar's Parquet statistics, which leave NaNs out."""
    pool = lake.create_pool("p", key="k")
    pool.load([pa.table({"k": [1, 2, 3, 4], "f": [-0.0, 0.0, 1.5, float("nan")]})])
    assert pool.search("f", ["0"]).column("k").to_pylist() == [1, 2]
    assert pool.search("f", ["nan"]).column("k").to_pylist() == [4]
    pool.create_index(["f"])
    assert pool.search("f", [0]).column("k").to_pylist() == [1, 2]
    assert pool.search("f", ["-0.0"]).column("k").to_pylist() == [1, 2]
    assert pool.search("f", ["nan"]).column("k").to_pylist() == [4]


def test_sql_does_not_prune_on_an_index_of_a_field_no_object_holds(lake: Lake) -> None:
    """An index on ``status`` of objects holding ``Status`` has empty sidecars, but DuckDB
    finds ``status`` by any case; and an unqualified column of a joined table is not the
    pool's: neither may prune the pool's objects away."""
    pool = lake.create_pool("p", key="k")
    pool.load([pa.table({"k": [1, 2], "Status": ["failed", "ok"]})])
    other = lake.create_pool("o", key="k")
    other.load([pa.table({"k": [1, 2], "team": ["a", "b"]})])
    pool.create_index(["status", "team"])
    sql = "SELECT k FROM p WHERE status = 'failed'"
    assert lake.query(sql).column("k").to_pylist() == [1]
    joined = "SELECT p.k FROM p JOIN o ON p.k = o.k WHERE team = 'b'"
    assert lake.query(joined).column("k").to_pylist() == [2]
