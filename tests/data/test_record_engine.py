"""The record engine's write path: streaming merge of sorted runs, sort-and-write.

The reference model throughout is the obvious one: concatenate everything in input
order and sort it stably with :meth:`PoolKey.sort`. Every row carries a unique ``id``
so comparing id sequences checks order *and* stability (ties keep input order).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import encoding
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.kway import concat_unified, merge_sorted, reverse_table
from limno.data.objects import DataObject, data_path
from limno.data.parquet import open_parquet
from limno.data.schema import conform, unify
from limno.errors import InvalidInputError, StorageError
from limno.storage import ObjectInfo, Storage, open_storage

KEYS = ["a", "a:desc", "a,b:desc", "b:desc,a", "g.x,a", "b"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- data ------------------------------------------------------------------------------


@st.composite
def tables(draw: st.DrawFn, max_rows: int = 30, float_a: bool = False) -> pa.Table:
    """Rows with few distinct key values (many ties), nulls (keyless rows) and NaN."""
    n = draw(st.integers(0, max_rows))
    ints = st.one_of(st.none(), st.integers(-3, 3))
    a = draw(st.lists(ints, min_size=n, max_size=n))
    floats = st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 2.0, math.nan]))
    b = draw(st.lists(floats, min_size=n, max_size=n))
    g = draw(
        st.lists(st.one_of(st.none(), st.fixed_dictionaries({"x": ints})), min_size=n, max_size=n)
    )
    return pa.table(
        {
            "id": pa.array([0] * n, pa.int64()),
            "a": pa.array(a, pa.float64() if float_a else pa.int64()),
            "b": pa.array(b, pa.float64()),
            "g": pa.array(g, pa.struct([("x", pa.int64())])),
        }
    )


def number(tables: list[pa.Table]) -> list[pa.Table]:
    """Give every row of ``tables`` a unique ``id``, in order."""
    out, start = [], 0
    for t in tables:
        ids = pa.array(range(start, start + t.num_rows), pa.int64())
        out.append(t.set_column(0, "id", ids))
        start += t.num_rows
    return out


def chunked(table: pa.Table, sizes: list[int]) -> Iterator[pa.Table]:
    """``table`` cut into chunks of the given sizes (cycled), with empty chunks between."""
    pos, i = 0, 0
    while pos < table.num_rows:
        size = sizes[i % len(sizes)]
        i += 1
        yield table.slice(pos, size)
        pos += size


def ids(tables: Iterator[pa.Table] | list[pa.Table]) -> list[int]:
    return [i for t in tables for i in t.column("id").to_pylist()]


def reference(tables: list[pa.Table], key: PoolKey) -> pa.Table:
    """Stable sort of the concatenation: the order every engine path must produce."""
    schema = unify(t.schema for t in tables)
    return key.sort(pa.concat_tables([conform(t, schema) for t in tables]))


# -- merge -----------------------------------------------------------------------------


@SETTINGS
@given(
    key_text=st.sampled_from(KEYS),
    data=st.lists(tables(), min_size=1, max_size=5),
    float_source=st.integers(0, 4),
    sizes=st.lists(st.integers(0, 9), min_size=1, max_size=4).filter(any),
)
def test_merge_equals_stable_sort(
    key_text: str, data: list[pa.Table], float_source: int, sizes: list[int]
) -> None:
    key = PoolKey.parse(key_text)
    data = number(data)
    if float_source < len(data):  # int + float keys widen to float64 and still interleave
        t = data[float_source]
        data[float_source] = t.set_column(1, "a", t.column("a").cast(pa.float64()))
    sources = [key.sort(t) for t in data]
    out = list(merge_sorted([chunked(s, sizes) for s in sources], key))
    expected = reference(sources, key)
    assert ids(out) == expected.column("id").to_pylist()
    assert all(t.num_rows for t in out)
    if out:
        # (the schema may be narrower: sources whose rows never came out do not count)
        assert concat_unified(out).column_names == expected.column_names
        assert concat_unified(out).column("a").to_pylist() == expected.column("a").to_pylist()


@SETTINGS
@given(
    key_text=st.sampled_from(KEYS),
    data=st.lists(tables(), min_size=1, max_size=4),
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=3),
)
def test_reverse_merge_is_exact_reverse(
    key_text: str, data: list[pa.Table], sizes: list[int]
) -> None:
    key = PoolKey.parse(key_text)
    sources = [key.sort(t) for t in number(data)]
    forward = ids(merge_sorted([chunked(s, sizes) for s in sources], key))
    backward_sources = [
        [reverse_table(c) for c in reversed(list(chunked(s, sizes)))] for s in reversed(sources)
    ]
    backward = ids(merge_sorted(backward_sources, key, reverse=True))
    assert backward == forward[::-1]


def test_merge_keyless_rows_come_last_in_source_order() -> None:
    key = PoolKey.parse("k")
    s0 = pa.table({"id": [0, 1, 2], "k": [1, 5, None]})
    s1 = pa.table({"id": [3, 4, 5], "k": [2, None, None]})
    s2 = pa.table({"id": [6], "k": [9]})
    out = list(merge_sorted([[s0.slice(0, 2), s0.slice(2)], [s1], [s2]], key))
    assert ids(out) == [0, 3, 1, 6, 2, 4, 5]


def test_merge_stability_across_chunk_boundaries() -> None:
    """Source 0's tied rows spread over two chunks still all come before source 1's."""
    key = PoolKey.parse("k")
    s0 = [pa.table({"id": [0, 1], "k": [1, 5]}), pa.table({"id": [2, 3], "k": [5, 6]})]
    s1 = [pa.table({"id": [4, 5], "k": [5, 9]})]
    assert ids(merge_sorted([s0, s1], key)) == [0, 1, 2, 4, 3, 5]


def test_merge_single_source_passes_tables_through() -> None:
    key = PoolKey.parse("k")
    t = pa.table({"k": [1, 2, 3]})
    empty = t.slice(0, 0)
    out = list(merge_sorted([[empty, t, empty]], key))
    assert len(out) == 1 and out[0] is t
    assert list(merge_sorted([], key)) == []
    assert list(merge_sorted([[], [empty]], key)) == []


def test_merge_unifies_schemas_of_sources() -> None:
    key = PoolKey.parse("k")
    s0 = pa.table({"k": [1, 3], "v": [10, 30]})
    s1 = pa.table({"k": [2, 4], "v": ["b", "d"], "w": [True, False]})
    out = concat_unified(list(merge_sorted([[s0], [s1]], key)))
    assert out.column("k").to_pylist() == [1, 2, 3, 4]
    assert out.column("v").to_pylist() == ["10", "b", "30", "d"]
    assert out.column("w").to_pylist() == [None, True, None, False]


def test_merge_reads_sources_lazily() -> None:
    """Bounded memory: a source is pulled one chunk at a time, as the merge needs it."""
    key = PoolKey.parse("k")
    pulled: list[int] = []

    def source(n: int) -> Iterator[pa.Table]:
        for i in range(100):
            pulled.append(n)
            yield pa.table({"k": [2 * i + n, 2 * i + n]})

    merged = merge_sorted([source(0), source(1)], key)
    first = next(merged)
    assert first.column("k").to_pylist()[0] == 0
    assert len(pulled) <= 4
    assert sum(t.num_rows for t in merged) + first.num_rows == 400


# -- write_sorted ------------------------------------------------------------------------


def memory_store() -> Storage:
    return open_storage(f"memory://{uuid.uuid4().hex}")


def read_objects(store: Storage, objs: list[DataObject]) -> list[pa.Table]:
    return [open_parquet(store, data_path("pool", o.id)).read() for o in objs]


def check_metadata(store: Storage, key: PoolKey, obj: DataObject, table: pa.Table) -> None:
    keys = key.key_table(table)
    keyed = [key.row_key(keys, i) for i in range(table.num_rows)]
    present = [k for k in keyed if k is not None]
    assert obj.rows == table.num_rows >= 1
    assert obj.keyless == len(keyed) - len(present)
    assert keyed[len(present) :] == [None] * obj.keyless  # keyless rows sit at the end
    if present:
        assert repr(obj.min_key) == repr(present[0])
        assert repr(obj.max_key) == repr(present[-1])
    else:
        assert obj.min_key is None and obj.max_key is None
    assert obj.schema == table.schema
    assert obj.key_types == tuple(str(t) for t in keys.schema.types)
    assert obj.size == store.head(data_path("pool", obj.id)).size
    assert dt.datetime.fromisoformat(obj.created).tzinfo is not None


def test_write_sorted_cuts_at_target_size() -> None:
    store = memory_store()
    key = PoolKey.parse("k")
    table = pa.table(
        {"k": pa.array(range(1000), pa.int64()), "v": pa.array(range(1000), pa.float64())}
    )
    pieces = [table.slice(0, 123), table.slice(123, 400), table.slice(523)]
    objs = _writer.write_sorted(store, "pool", pieces, key, target_size=16 * 100 + 15)
    assert [o.rows for o in objs] == [100] * 10
    assert [o.min_key for o in objs] == [(100 * i,) for i in range(10)]
    assert [o.max_key for o in objs] == [(100 * i + 99,) for i in range(10)]
    back = read_objects(store, objs)
    assert pa.concat_tables(back).equals(table)
    for o, t in zip(objs, back, strict=True):
        check_metadata(store, key, o, t)
    raw = pq.ParquetFile(pa.BufferReader(store.get(data_path("pool", objs[0].id))))
    assert raw.metadata.row_group(0).column(0).statistics.has_min_max
    assert raw.metadata.row_group(0).column(0).compression == encoding.COMPRESSION.upper()


def test_write_sorted_row_bigger_than_target_gets_its_own_object() -> None:
    store = memory_store()
    key = PoolKey.parse("k")
    table = pa.table({"k": [1, 2, 3], "v": ["x", "y" * 5000, "z"]})
    objs = _writer.write_sorted(store, "pool", [table], key, target_size=100)
    assert [o.rows for o in objs] == [1, 1, 1]
    assert [o.min_key for o in objs] == [(1,), (2,), (3,)]


def test_write_sorted_row_groups_and_page_index() -> None:
    store = memory_store()
    key = PoolKey.parse("k")
    table = pa.table({"k": range(100)})
    (obj,) = _writer.write_sorted(store, "pool", [table], key, 10**9, row_group_rows=16)
    pf = open_parquet(store, data_path("pool", obj.id))
    assert pf.metadata.num_row_groups == 7
    assert pf.metadata.row_group(0).column(0).statistics.max == 15
    assert pf.metadata.row_group(0).column(0).has_column_index


def test_write_sorted_all_keyless_and_nested_key() -> None:
    store = memory_store()
    key = PoolKey.parse("kafka.offset")
    table = pa.table({"kafka": [{"offset": 5}, {"offset": 7}, None, {"offset": None}]})
    (obj,) = _writer.write_sorted(store, "pool", [table], key, 10**9)
    assert (obj.min_key, obj.max_key, obj.keyless) == ((5,), (7,), 2)
    assert obj.key_types == ("int64",)
    (obj,) = _writer.write_sorted(store, "pool", [pa.table({"x": [1, 2]})], key, 10**9)
    assert (obj.min_key, obj.max_key, obj.keyless, obj.key_types) == (None, None, 2, ("null",))


# -- sort_and_write ----------------------------------------------------------------------


@SETTINGS
@given(
    key_text=st.sampled_from(KEYS),
    data=st.lists(tables(max_rows=40), min_size=1, max_size=6),
    memory_limit=st.sampled_from([1, 300, 2000, 10**9]),
    target_size=st.sampled_from([1, 400, 3000, 10**9]),
)
def test_sort_and_write_equals_in_memory_sort(
    key_text: str, data: list[pa.Table], memory_limit: int, target_size: int
) -> None:
    key = PoolKey.parse(key_text)
    data = number(data)
    store = memory_store()
    batches = [b for t in data for b in t.to_batches(max_chunksize=7)]
    objs = _writer.sort_and_write(
        store, "pool", batches, key, target_size, memory_limit=memory_limit
    )
    expected = reference(data, key)
    back = read_objects(store, objs)
    assert ids(back) == expected.column("id").to_pylist()
    for obj, table in zip(objs, back, strict=True):
        check_metadata(store, key, obj, table)
        if obj.rows > 1:  # a lone oversized row is the only excuse
            assert table.nbytes <= target_size + 8 * table.num_columns
    sizes = [t.nbytes for t in back]
    assert len(objs) <= 2 * sum(sizes) / target_size + 2
    assert len({o.id for o in objs}) == len(objs)
    # each object and its key sketch, nothing else
    paths = sorted(o.path for o in store.list("pool/data").objects)
    assert paths == sorted(f"pool/data/{o.id}.{ext}" for o in objs for ext in ("parquet", "sketch"))


def test_sort_and_write_spills_and_cleans_up(tmp_path: Path) -> None:
    store = memory_store()
    key = PoolKey.parse("k:desc")
    batches = [pa.table({"k": [(i * 7919 + j) % 1000 for j in range(100)]}) for i in range(30)]
    spill = tmp_path / "spill"
    spill.mkdir()
    objs = _writer.sort_and_write(
        store, "pool", batches, key, 4000, memory_limit=2000, spill_dir=str(spill)
    )
    assert os.listdir(spill) == []
    values = [v for t in read_objects(store, objs) for v in t.column("k").to_pylist()]
    assert values == sorted((v for t in batches for v in t.column("k").to_pylist()), reverse=True)
    assert all(o.rows <= 500 for o in objs)


def test_sort_and_write_heterogeneous_input() -> None:
    store = memory_store()
    key = PoolKey.parse("k")
    batches = [
        pa.table({"k": [3, 1], "v": [1, 2]}),
        pa.table({"k": [2.5], "v": ["x"], "extra": [True]}),
        pa.table({"k": [None], "v": [None]}),
    ]
    for memory_limit in (1, 10**9):
        (obj,) = _writer.sort_and_write(store, "pool", batches, key, 10**9, memory_limit)
        (table,) = read_objects(store, [obj])
        assert table.column("k").to_pylist() == [1.0, 2.5, 3.0, None]
        assert table.column("v").to_pylist() == ["2", "x", "1", None]
        assert obj.schema.field("v").type == pa.string()
        assert obj.keyless == 1 and obj.min_key == (1.0,) and obj.max_key == (3.0,)


@pytest.mark.parametrize("memory_limit", [1, 10**9])
def test_sort_and_write_bad_key_type_writes_nothing(memory_limit: int, tmp_path: Path) -> None:
    store = memory_store()
    key = PoolKey.parse("k")
    batches = [pa.table({"k": [1, 2]}), pa.table({"k": [{"x": 1}]})]
    with pytest.raises(InvalidInputError, match="cannot be sorted"):
        _writer.sort_and_write(
            store, "pool", batches, key, 10, memory_limit, spill_dir=str(tmp_path)
        )
    assert store.list("pool").objects == []
    assert os.listdir(tmp_path) == []


class FailingStore(Storage):
    """A store whose ``put_file`` fails after ``ok`` successful uploads."""

    def __init__(self, inner: Storage, ok: int) -> None:
        self.inner = inner
        self.ok = ok
        self.uri = inner.uri

    def put_file(self, path: str, local_file: str) -> ObjectInfo:
        if self.ok <= 0:
            raise StorageError("disk full")
        self.ok -= 1
        return self.inner.put_file(path, local_file)

    def get(self, path: str) -> bytes:
        return self.inner.get(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self.inner.get_range(path, start, end)

    def head(self, path: str) -> ObjectInfo:
        return self.inner.head(path)

    def put(self, path: str, data: bytes) -> ObjectInfo:
        return self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> ObjectInfo:
        return self.inner.put_if_absent(path, data)

    def list(self, prefix: str = "", delimiter: str | None = None) -> Any:
        return self.inner.list(prefix, delimiter)

    def delete(self, path: str) -> None:
        self.inner.delete(path)

    def copy(self, src: str, dst: str) -> None:
        self.inner.copy(src, dst)


def test_failed_write_deletes_what_it_uploaded(tmp_path: Path) -> None:
    inner = memory_store()
    store = FailingStore(inner, ok=3)
    key = PoolKey.parse("k")
    batches = [pa.table({"k": range(i * 100, i * 100 + 100)}) for i in range(10)]
    with pytest.raises(StorageError, match="disk full"):
        _writer.sort_and_write(
            store, "pool", batches, key, 800, memory_limit=3000, spill_dir=str(tmp_path)
        )
    assert inner.list("pool").objects == []
    assert os.listdir(tmp_path) == []


def test_failure_in_input_after_uploads_deletes_them() -> None:
    store = memory_store()
    key = PoolKey.parse("k")

    def stream() -> Iterator[pa.Table]:
        for i in range(5):
            yield pa.table({"k": range(i * 100, i * 100 + 100)})
        raise ValueError("reader broke")

    with pytest.raises(ValueError, match="reader broke"):
        _writer.write_sorted(store, "pool", stream(), key, 800)
    assert store.list("pool").objects == []


def test_sort_and_write_empty_input() -> None:
    store = memory_store()
    key = PoolKey.parse("k")
    assert _writer.sort_and_write(store, "pool", [], key, 100) == []
    assert (
        _writer.sort_and_write(store, "pool", [pa.table({"k": pa.array([], pa.int64())})], key, 100)
        == []
    )


@pytest.mark.parametrize("parts", [2, 3])
def test_parallel_parts_write_like_one_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: int
) -> None:
    """A large run is written by several threads: same rows, same order, same cuts."""
    from limno.storage import open_storage

    store = open_storage(str(tmp_path / "lake"), create=True)
    key = PoolKey.parse("k:desc")
    n = 20_000
    ks = [(i * 7919) % 5000 for i in range(n)]  # ties across the parts' seams
    table = pa.table({"k": ks, "i": list(range(n))})
    bounds = [(3000,), (1000,)]
    monkeypatch.setattr(_writer, "_parallel_parts", lambda nbytes: parts)
    objs = _writer.sort_and_write(store, "p", [table], key, 64 * 1024, bounds=bounds)
    assert sum(o.rows for o in objs) == n
    rows = concat_unified([open_parquet(store, data_path("p", o.id)).read() for o in objs])
    assert rows.equals(key.sort(table))  # stable: equal keys keep input order
    assert all(o.size <= 3 * 64 * 1024 for o in objs)
    # no object crosses a bound (descending: keys above 3000, then down to 1001, then
    # the rest; an object's min_key is its first key in the pool's order)
    for o in objs:
        assert o.min_key is not None and o.max_key is not None
        for (b,) in bounds:
            assert not (o.min_key[0] > b >= o.max_key[0]), (o.min_key, o.max_key)
    assert len(objs) > parts


def test_parallel_parts_failure_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from limno.storage import open_storage

    store = open_storage(str(tmp_path / "lake"), create=True)
    real = _writer.write_sorted
    calls = []

    def flaky(*args: Any, **kwargs: Any) -> list[DataObject]:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(_writer, "_parallel_parts", lambda nbytes: 2)
    monkeypatch.setattr(_writer, "write_sorted", flaky)
    table = pa.table({"k": list(range(10_000))[::-1]})
    batches = table.to_batches(max_chunksize=5_000)  # out of order: sorted in memory
    with pytest.raises(OSError, match="disk full"):
        _writer.sort_and_write(store, "p", batches, PoolKey.parse("k"), 10**9)
    assert store.list("p").objects == []
