"""Many-key point lookups (``keyset.py``) give exactly what one key at a time gives.

From ``scan.MANY_KEYS`` keys on, a lookup sorts the keys once in Arrow and matches
each object's rows against all of them at once; below, it binary-searches each key.
The reference here is always the one-key path (a lookup of each key on its own), on
random overlapping objects with keyless rows, duplicate and absent keys, composite,
descending, text, date, timestamp, decimal and float keys (floats take the one-key
path inside the many-key lookup), with and without the pool's iterators.
"""

from __future__ import annotations

import datetime as dt
import decimal
import tempfile
import uuid
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import keyset
from limno.data import scan as _scan
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.kway import concat_unified
from limno.data.objects import DataObject
from limno.lake import Lake
from limno.storage import Storage, open_storage

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DAY = dt.date(2024, 3, 1)
MOMENT = dt.datetime(2024, 3, 1, 12, tzinfo=dt.UTC)
#: key field -> (Arrow type, values a key takes: few, so that objects overlap)
FIELDS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "k": (pa.int64(), list(range(-2, 14))),
    "s": (pa.string(), ["", "a", "b", "é", "zz"]),
    "d": (pa.date32(), [DAY + dt.timedelta(days=i) for i in range(4)]),
    "t": (pa.timestamp("us", "UTC"), [MOMENT + dt.timedelta(microseconds=i) for i in range(3)]),
    "m": (pa.decimal128(6, 2), [decimal.Decimal(v) for v in ("-1.50", "0.00", "2.25", "7.10")]),
    "f": (pa.float64(), [-1.5, 0.0, 2.0]),
}
KEYS = ["k", "k:desc", "s,k", "d:desc,k", "t", "m:desc", "s:desc,m,k", "f", "k,f:desc"]


@st.composite
def batches(draw: st.DrawFn, key: PoolKey, rows: int = 30) -> list[pa.Table]:
    """A few tables of rows over the key fields' few values (some keyless)."""
    out = []
    for _ in range(draw(st.integers(1, 5))):
        n = draw(st.integers(1, rows))
        cols: dict[str, pa.Array] = {}
        for name, (typ, choices) in FIELDS.items():
            in_key = name in key.names
            pick = st.one_of(st.none(), st.sampled_from(choices)) if in_key else st.none()
            cols[name] = pa.array(draw(st.lists(pick, min_size=n, max_size=n)), typ)
        cols["v"] = pa.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), pa.int64())
        out.append(pa.table(cols))
    return out


def wanted_keys(key: PoolKey) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Full keys, present or not, repeated (values one past the stored ones are absent)."""
    absent: dict[str, list[Any]] = {"k": [99], "s": ["nope"], "f": [9.5]}
    fields = [st.sampled_from([*FIELDS[f.name][1], *absent.get(f.name, [])]) for f in key.fields]
    return st.lists(st.tuples(*fields), min_size=_scan.MANY_KEYS, max_size=40)


def one_at_a_time(found: list[pa.Table]) -> list[dict[str, Any]]:
    tables = [t for t in found if t.num_rows]
    return concat_unified(tables).to_pylist() if tables else []


def _write(store: Storage, key: PoolKey, tables: list[pa.Table]) -> list[DataObject]:
    """One object per table, in row groups of 3 rows (so row-group pruning is exercised)."""
    objs: list[DataObject] = []
    for t in tables:
        objs += _writer.write_sorted(store, "pool", [key.sort(t)], key, 10**9, row_group_rows=3)
    return objs


@SETTINGS
@given(key_text=st.sampled_from(KEYS), data=st.data())
def test_many_key_lookup_equals_one_key_lookups(key_text: str, data: st.DataObject) -> None:
    key = PoolKey.parse(key_text)
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    objs = _write(store, key, data.draw(batches(key)))
    wanted = data.draw(wanted_keys(key))
    plan = _scan.Plan(objs, key)
    found = _scan.lookup(store, "pool", plan, key, wanted)
    distinct = sorted({key.sort_key(w): w for w in wanted}.items())
    expected = one_at_a_time([_scan.lookup(store, "pool", objs, key, [w]) for _, w in distinct])
    assert (found.to_pylist() if found.num_columns else []) == expected
    assert _scan.lookup(store, "pool", objs, key, wanted).equals(found)  # with or without a plan


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key_text=st.sampled_from(KEYS),
    iterators=st.sampled_from([[], ["dedup"], ["sum(v)"]]),
    data=st.data(),
)
def test_pool_get_of_many_keys_equals_gets_of_one(
    key_text: str, iterators: list[str], data: st.DataObject
) -> None:
    key = PoolKey.parse(key_text)
    tables = data.draw(batches(key, rows=15))
    wanted = data.draw(wanted_keys(key))
    with tempfile.TemporaryDirectory() as root:
        pool = Lake.init(root).create_pool("p", key=key_text, iterators=iterators)
        for t in tables:  # one load, one object each: they overlap
            pool.load([t])
        found = pool.get(wanted)
        distinct = sorted({key.sort_key(w): w for w in wanted}.items())
        expected = one_at_a_time([pool.get([w]) for _, w in distinct])
        assert (found.to_pylist() if found.num_columns else []) == expected


def test_key_set_sorts_dedupes_and_refuses_what_arrow_compares_otherwise() -> None:
    key = PoolKey.parse("s,k:desc")
    got = keyset.key_set([("b", 1), ("a", 1), ("b", 2), ("a", 1), ("c", None)], key)
    assert got is not None
    assert got.table.to_pylist() == [
        {"__k0": "a", "__k1": 1},
        {"__k0": "b", "__k1": 2},
        {"__k0": "b", "__k1": 1},
    ]
    assert [k.key for k in got.sort_keys] == [("a", 1), ("b", 2), ("b", 1)]
    one = PoolKey.parse("k")
    assert keyset.key_set([(1.5,), (2.0,)], one) is None  # floats: NaN, -0.0
    assert keyset.key_set([(1,), ("1",)], one) is None  # mixed types
    naive, aware = dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert keyset.key_set([(naive,), (aware,)], one) is None
    ints = keyset.key_set([(5,), (6,)], one)
    assert ints is not None
    rows = pa.table({"k": pa.array(["5", "6"])})
    assert keyset.matching(rows, one.key_table(rows), ints.table) is None  # no 5 == "5"


def test_covering_with_more_keys_than_clusters() -> None:
    key = PoolKey.parse("k")
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    spans = [(0, 10), (5, 20), (30, 40), (50, 60), (70, 80)]
    objs = _write(store, key, [pa.table({"k": list(range(a, b))}) for a, b in spans])
    plan = _scan.Plan(objs, key)
    few = [key.sort_key((k,)) for k in (25, 55)]
    many = [key.sort_key((k,)) for k in (-5, 3, 25, 26, 27, 35, 36, 90, 91)]
    assert [i for i, _ in plan.covering(few)] == [3]
    assert [i for i, _ in plan.covering(many)] == [0, 1, 2]


def test_objects_that_cannot_be_matched_at_once_are_searched_key_by_key() -> None:
    """Integer keys against an object whose key column is float (or a decimal key finer
    than a column's scale) fall back to the one-key search for that object only."""
    key = PoolKey.parse("k")
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    ints = pa.table({"k": pa.array([1, 2, 3, 4], pa.int64()), "v": ["i1", "i2", "i3", "i4"]})
    floats = pa.table({"k": pa.array([2.0, 2.5, 4.0], pa.float64()), "v": ["f2", "f2.5", "f4"]})
    objs = _write(store, key, [ints, floats])
    wanted = [(k,) for k in (4, 2, 9, 2, 0, 3, 7, 8)]
    assert keyset.key_set(wanted, key) is not None
    found = _scan.lookup(store, "pool", objs, key, wanted)
    assert found.column("v").to_pylist() == ["i2", "f2", "i3", "i4", "f4"]
    dec_key = PoolKey.parse("m")
    cents = pa.table({"m": pa.array([decimal.Decimal("1.00"), decimal.Decimal("1.01")])})
    objs = _write(store, dec_key, [cents.cast(pa.schema([("m", pa.decimal128(5, 2))]))])
    amounts = [(decimal.Decimal(t),) for t in ("1.005", "1.01", "1", "0.5", "3", "4", "5", "6")]
    found = _scan.lookup(store, "pool", objs, dec_key, amounts)
    assert found.column("m").to_pylist() == [decimal.Decimal("1.00"), decimal.Decimal("1.01")]
