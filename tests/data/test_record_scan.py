"""The record engine's read path: planning, merge-on-read scans, point lookups.

Objects are written with tiny row groups so that row-group pruning is exercised, into
a memory store wrapped to record every read: scans must never touch objects (or, for
lookups, row groups) that cannot hold the keys asked for. The reference model is a
stable sort of all objects' rows (in object order) filtered in Python with
:class:`SortKey`.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import scan as _scan
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.kway import concat_unified
from limno.data.objects import DataObject, data_path
from limno.data.parquet import RangeFile, open_parquet
from limno.data.schema import conform, unify
from limno.errors import InvalidInputError, NotFoundError
from limno.storage import ObjectInfo, Storage, open_storage

KEYS = ["a", "a:desc", "a,b:desc", "b:desc,a", "g.x,a", "b", "g.x:desc"]
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FLOATS = [-1.5, 0.0, 1.0, 2.0]


class RecordingStore(Storage):
    """A memory store that records the path of every read (so nothing is local)."""

    def __init__(self) -> None:
        self.inner = open_storage(f"memory://{uuid.uuid4().hex}")
        self.uri = self.inner.uri
        self.reads: list[tuple[str, int]] = []

    def touched(self) -> set[str]:
        return {path for path, _ in self.reads}

    def bytes_read(self, path: str) -> int:
        return sum(n for p, n in self.reads if p == path)

    def get(self, path: str) -> bytes:
        data = self.inner.get(path)
        self.reads.append((path, len(data)))
        return data

    def get_range(self, path: str, start: int, end: int) -> bytes:
        data = self.inner.get_range(path, start, end)
        self.reads.append((path, len(data)))
        return data

    def head(self, path: str) -> ObjectInfo:
        self.reads.append((path, 0))
        return self.inner.head(path)

    def put(self, path: str, data: bytes) -> ObjectInfo:
        return self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> ObjectInfo:
        return self.inner.put_if_absent(path, data)

    def put_file(self, path: str, local_file: str) -> ObjectInfo:
        return self.inner.put_file(path, local_file)

    def list(self, prefix: str = "", delimiter: str | None = None) -> Any:
        return self.inner.list(prefix, delimiter)

    def delete(self, path: str) -> None:
        self.inner.delete(path)

    def copy(self, src: str, dst: str) -> None:
        self.inner.copy(src, dst)


# -- data ------------------------------------------------------------------------------


@st.composite
def object_tables(draw: st.DrawFn) -> pa.Table:
    """One object's rows: keys in a window (so some objects overlap, some do not)."""
    n = draw(st.integers(1, 25))
    base = draw(st.integers(0, 12))
    ints = st.one_of(st.none(), st.integers(base, base + 4))
    a = draw(st.lists(ints, min_size=n, max_size=n))
    b = draw(st.lists(st.sampled_from([None, math.nan, *FLOATS]), min_size=n, max_size=n))
    g = draw(
        st.lists(st.one_of(st.none(), st.fixed_dictionaries({"x": ints})), min_size=n, max_size=n)
    )
    return pa.table(
        {
            "id": pa.array([0] * n, pa.int64()),
            "a": pa.array(a, pa.int64()),
            "b": pa.array(b, pa.float64()),
            "g": pa.array(g, pa.struct([("x", pa.int64())])),
        }
    )


def write_objects(
    store: Storage, key: PoolKey, tables: list[pa.Table], rg: int = 3
) -> tuple[list[DataObject], list[pa.Table]]:
    """One object per table (rows numbered globally); the objects and their rows."""
    objs, written, start = [], [], 0
    for t in tables:
        t = key.sort(t.set_column(0, "id", pa.array(range(start, start + t.num_rows), pa.int64())))
        start += t.num_rows
        objs += _writer.write_sorted(store, "pool", [t], key, 10**9, row_group_rows=rg)
        written.append(t)
    return objs, written


def reference(
    key: PoolKey, tables: list[pa.Table], lo: tuple[Any, ...] | None, hi: tuple[Any, ...] | None
) -> list[int]:
    """Ids of a scan, computed the slow, obvious way."""
    schema = unify(t.schema for t in tables)
    table = key.sort(pa.concat_tables([conform(t, schema) for t in tables]))
    keys = key.key_table(table)
    out = []
    for i, row_id in enumerate(table.column("id").to_pylist()):
        k = key.row_key(keys, i)
        if lo is None and hi is None:
            out.append(row_id)
        elif k is not None:
            sk = key.sort_key(k)
            if (lo is None or not sk < key.sort_key(lo)) and (hi is None or sk < key.sort_key(hi)):
                out.append(row_id)
    return out


def values(key: PoolKey) -> list[st.SearchStrategy[Any]]:
    return [st.sampled_from(FLOATS) if f.name == "b" else st.integers(-1, 18) for f in key.fields]


def noise(n: int) -> list[str]:
    """Incompressible text, so that objects are much larger than a Parquet footer."""
    return [uuid.uuid4().hex for _ in range(n)]


def ids(tables: list[pa.Table]) -> list[int]:
    return [i for t in tables for i in t.column("id").to_pylist()]


# -- scan ------------------------------------------------------------------------------


@SETTINGS
@given(
    key_text=st.sampled_from(KEYS),
    tables=st.lists(object_tables(), min_size=1, max_size=6),
    order=st.sampled_from(["asc", "desc"]),
    data=st.data(),
)
def test_scan_matches_reference(
    key_text: str, tables: list[pa.Table], order: str, data: st.DataObject
) -> None:
    key = PoolKey.parse(key_text)
    store = RecordingStore()
    objs, written = write_objects(store, key, tables)
    strategies = values(key)

    def bound() -> tuple[Any, ...] | None:
        n = data.draw(st.integers(0, len(strategies)))
        return None if n == 0 else tuple(data.draw(s) for s in strategies[:n])

    lo, hi = bound(), bound()
    limit = data.draw(st.one_of(st.none(), st.integers(0, 30)))
    store.reads.clear()
    out = list(_scan.scan(store, "pool", objs, key, lo, hi, order, limit))
    expected = reference(key, written, lo, hi)
    if order == "desc":
        expected.reverse()
    if limit is not None:
        expected = expected[:limit]
    assert ids(out) == expected
    assert all(t.num_rows for t in out)
    planned = {data_path("pool", o.id) for c in _scan.plan(objs, key, lo, hi) for o in c}
    assert store.touched() <= planned
    if limit == 0:
        assert store.reads == []


def test_plan_clusters_and_pruning() -> None:
    key = PoolKey.parse("k")

    def obj(name: str, lo: int | None, hi: int | None, keyless: int = 0) -> DataObject:
        lo_key = None if lo is None else (lo,)
        hi_key = None if hi is None else (hi,)
        return DataObject(name, 10, 100, lo_key, hi_key, keyless)

    a, b, c, d, e = (
        obj("a", 0, 10),
        obj("b", 5, 20),
        obj("c", 20, 30),
        obj("d", 40, 50),
        obj("e", None, None, 10),
    )
    names = [[o.id for o in cl] for cl in _scan.plan([d, c, b, a, e], key, None, None)]
    assert names == [["c", "b", "a"], ["d"], ["e"]]  # touching ranges merge; input order kept
    assert [[o.id for o in cl] for cl in _scan.plan([a, b, c, d, e], key, (21,), (45,))] == [
        ["c"],
        ["d"],
    ]
    assert _scan.plan([a, b, c, d, e], key, (30,), (30,)) == []
    assert [[o.id for o in cl] for cl in _scan.plan([a, b, c, d, e], key, (31,), None)] == [["d"]]
    assert [[o.id for o in cl] for cl in _scan.plan([a, b, c, d, e], key, None, (5,))] == [["a"]]


def test_scan_never_opens_pruned_objects_and_prunes_row_groups() -> None:
    store = RecordingStore()
    key = PoolKey.parse("k")
    tables = [
        pa.table({"k": range(i * 10000, i * 10000 + 10000), "pad": noise(10000)}) for i in range(5)
    ]
    objs = [
        o
        for t in tables
        for o in _writer.write_sorted(store, "pool", [t], key, 10**9, row_group_rows=500)
    ]
    store.reads.clear()
    out = pa.concat_tables(_scan.scan(store, "pool", objs, key, (25000,), (25010,)))
    assert out.column("k").to_pylist() == list(range(25000, 25010))
    target = data_path("pool", objs[2].id)
    assert store.touched() == {target}
    assert store.bytes_read(target) < objs[2].size / 2  # footer and one row group
    store.reads.clear()
    out = pa.concat_tables(_scan.scan(store, "pool", objs, key, None, None, "desc", limit=3))
    assert out.column("k").to_pylist() == [49999, 49998, 49997]
    assert store.touched() == {data_path("pool", objs[4].id)}


def test_scan_keyless_rows_and_descending_key() -> None:
    store = RecordingStore()
    key = PoolKey.parse("ts:desc")
    t1 = pa.table({"id": [0, 0, 0, 0], "ts": [1, 5, None, 9]})
    t2 = pa.table({"id": [0, 0, 0], "ts": [None, 7, 5]})
    t3 = pa.table({"id": [0], "other": ["x"]})
    objs, _ = write_objects(store, key, [t1, t2, t3])

    def scan_ids(*args: Any, **kw: Any) -> list[int]:
        tables = list(_scan.scan(store, "pool", objs, key, *args, **kw))
        return ids(tables)

    # ids follow input order: 9 is id 3, 7 is id 5, the fives are ids 1 and 6 ...
    assert scan_ids() == [3, 5, 1, 6, 0, 2, 4, 7]
    assert scan_ids(order="desc") == [7, 4, 2, 0, 6, 1, 5, 3]
    assert scan_ids((7,), (1,)) == [5, 1, 6]  # from 7 down to (not including) 1
    assert scan_ids((7,), (1,), "desc") == [6, 1, 5]
    assert scan_ids(None, (5,)) == [3, 5]


def test_scan_heterogeneous_object_schemas_unify() -> None:
    store = RecordingStore()
    key = PoolKey.parse("k")
    t1 = pa.table({"id": [0, 0], "k": [1, 3], "v": [10, 30]})
    t2 = pa.table({"id": [0, 0], "k": [2.5, 4.0], "v": ["b", "d"], "w": [1.5, None]})
    objs, _ = write_objects(store, key, [t1, t2])
    out = concat_unified(list(_scan.scan(store, "pool", objs, key)))
    assert out.column("k").to_pylist() == [1.0, 2.5, 3.0, 4.0]
    assert out.column("v").to_pylist() == ["10", "b", "30", "d"]
    assert out.schema.field("w").type == pa.float64()
    projected = list(_scan.scan(store, "pool", objs, key, (2,), None, columns=["v"]))
    assert concat_unified(projected).column_names == ["v"]
    assert concat_unified(projected).column("v").to_pylist() == ["b", "30", "d"]


def test_scan_nested_key() -> None:
    store = RecordingStore()
    key = PoolKey.parse("kafka.offset")
    rows = [{"kafka": {"topic": "t", "offset": i}, "value": f"v{i}"} for i in range(100)]
    t1 = pa.Table.from_pylist(rows[::2])
    t2 = pa.Table.from_pylist(rows[1::2] + [{"kafka": None, "value": "lost"}])
    objs = [
        o
        for t in (t1, t2)
        for o in _writer.write_sorted(store, "pool", [t], key, 10**9, row_group_rows=8)
    ]
    out = concat_unified(list(_scan.scan(store, "pool", objs, key, (10,), (20,))))
    assert out.column("value").to_pylist() == [f"v{i}" for i in range(10, 20)]
    full = concat_unified(list(_scan.scan(store, "pool", objs, key)))
    assert full.column("value").to_pylist() == [f"v{i}" for i in range(100)] + ["lost"]
    found = _scan.lookup(store, "pool", objs, key, [(42,), (7,), (1000,)])
    assert found.column("value").to_pylist() == ["v7", "v42"]


def test_scan_rejects_bad_order() -> None:
    with pytest.raises(InvalidInputError):
        list(_scan.scan(RecordingStore(), "pool", [], PoolKey.parse("k"), order="up"))


def test_scan_missing_object_is_not_found() -> None:
    store = RecordingStore()
    key = PoolKey.parse("k")
    objs, _ = write_objects(store, key, [pa.table({"id": [0], "k": [1]})])
    store.delete(data_path("pool", objs[0].id))
    with pytest.raises(NotFoundError):
        list(_scan.scan(store, "pool", objs, key))


# -- lookup ------------------------------------------------------------------------------


@SETTINGS
@given(
    key_text=st.sampled_from(KEYS),
    tables=st.lists(object_tables(), min_size=1, max_size=5),
    data=st.data(),
)
def test_lookup_matches_reference(
    key_text: str, tables: list[pa.Table], data: st.DataObject
) -> None:
    key = PoolKey.parse(key_text)
    store = RecordingStore()
    objs, written = write_objects(store, key, tables)
    strategies = values(key)
    wanted = data.draw(st.lists(st.tuples(*strategies), max_size=6))
    store.reads.clear()
    found = _scan.lookup(store, "pool", objs, key, wanted)
    expected = []
    for k in sorted({key.sort_key(w) for w in wanted}):
        for t in written:
            keys = key.key_table(t)
            for i, row_id in enumerate(t.column("id").to_pylist()):
                if key.row_key(keys, i) is not None and key.sort_key(key.row_key(keys, i)) == k:
                    expected.append(row_id)
    assert (found.column("id").to_pylist() if found.num_columns else []) == expected
    covering = {
        data_path("pool", o.id)
        for o in objs
        for w in wanted
        if o.min_key is not None
        and o.max_key is not None
        and not key.sort_key(w) < key.sort_key(o.min_key)
        and not key.sort_key(o.max_key) < key.sort_key(w)
    }
    assert store.touched() <= covering


def test_lookup_reads_only_covering_objects_and_row_groups() -> None:
    store = RecordingStore()
    key = PoolKey.parse("tenant,n")
    tables = [
        pa.table({"tenant": [t] * 10000, "n": range(10000), "pad": noise(10000)})
        for t in ("acme", "beta", "corp")
    ]
    objs = [
        o
        for t in tables
        for o in _writer.write_sorted(store, "pool", [t], key, 10**9, row_group_rows=200)
    ]
    store.reads.clear()
    found = _scan.lookup(
        store, "pool", objs, key, [("beta", 1234), ("beta", 5), ("zzz", 1), ("beta", 99999)]
    )
    assert found.column("n").to_pylist() == [5, 1234]
    path = data_path("pool", objs[1].id)
    assert store.touched() == {path}
    assert store.bytes_read(path) < objs[1].size / 3
    empty = _scan.lookup(store, "pool", objs, key, [("nope", 1)])
    assert empty.num_rows == 0 and empty.num_columns == 0


def test_lookup_duplicates_across_objects_in_object_order() -> None:
    store = RecordingStore()
    key = PoolKey.parse("k")
    t1 = pa.table({"id": [0, 0], "k": [1, 2], "v": ["a", "b"]})
    t2 = pa.table({"id": [0, 0, 0], "k": [2, 2, 3], "v": ["c", "d", "e"]})
    objs, _ = write_objects(store, key, [t1, t2])
    found = _scan.lookup(store, "pool", objs, key, [(3,), (2,), (2,)])
    assert found.column("v").to_pylist() == ["b", "c", "d", "e"]


# -- remote reads ---------------------------------------------------------------------------


def test_open_parquet_reads_remote_objects_by_range() -> None:
    store = RecordingStore()
    key = PoolKey.parse("k")
    table = pa.table({"k": range(40000), "s": noise(40000)})
    (obj,) = _writer.write_sorted(store, "pool", [table], key, 10**9, row_group_rows=2000)
    path = data_path("pool", obj.id)
    store.reads.clear()
    pf = open_parquet(store, path)
    assert pf.read_row_group(7).column("k").to_pylist() == list(range(14000, 16000))
    assert 0 < store.bytes_read(path) < obj.size / 4
    assert pf.read().equals(table)
    with pytest.raises(NotFoundError):
        open_parquet(store, "pool/data/missing.parquet")
    f = RangeFile(store, path)
    assert f.seek(-4, 2) == obj.size - 4 and f.read() == b"PAR1" and f.read(10) == b""
    buf = bytearray(4)
    f.seek(0)
    assert f.readinto(buf) == 4 and bytes(buf) == b"PAR1"


def test_open_parquet_local_store(tmp_path: Any) -> None:
    store = open_storage(str(tmp_path / "lake"), create=True)
    key = PoolKey.parse("k")
    (obj,) = _writer.write_sorted(store, "pool", [pa.table({"k": [1, 2]})], key, 10**9)
    assert open_parquet(store, data_path("pool", obj.id)).read().column("k").to_pylist() == [1, 2]
    with pytest.raises(NotFoundError):
        open_parquet(store, "pool/data/missing.parquet")
    out = list(_scan.scan(store, "pool", [obj], key, (2,), None))
    assert out[0].column("k").to_pylist() == [2]
