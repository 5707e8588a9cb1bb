"""Compaction's faster read path gives exactly what the plain one gives.

Three pieces, each against its reference: the k-way merge's cuts by ``searchsorted``
(a key of one integer-like field) against its cuts by Python key comparisons, a scan
whose objects are decoded a batch ahead in threads against a plain scan, and a
prefetch queue bounded in bytes.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Generator, Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import kway
from limno.data import scan as _scan
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.kway import merge_sorted, reverse_table
from limno.data.objects import DataObject, data_path
from limno.data.sort import prefetched
from limno.errors import NotFoundError
from limno.storage import Storage, open_storage

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: key types with the values each is drawn from: extremes, and few values (many ties)
PALETTES: list[tuple[pa.DataType, list[int]]] = [
    (pa.int8(), [-128, -1, 0, 1, 127]),
    (pa.int64(), [-(2**63), -1, 0, 1, 2, 2**63 - 1]),
    (pa.uint64(), [0, 1, 2, 2**63, 2**64 - 1]),
    (pa.timestamp("us", "UTC"), [-5, 0, 1, 2, 10**15]),
    (pa.duration("ns"), [-5, 0, 1, 2, 10**15]),
    (pa.date32(), [-3, 0, 1, 2, 50_000]),
    (pa.time32("s"), [0, 1, 2, 86_399]),
    (pa.time64("ns"), [0, 1, 2, 86_399_999_999_999]),
]


def keyed(values: list[int | None], typ: pa.DataType, first_id: int) -> pa.Table:
    """Rows with a key column ``k`` of type ``typ`` (None: keyless) and unique ids."""
    if pa.types.is_unsigned_integer(typ):
        column = pa.array(values, typ)
    else:
        base = pa.int32() if typ.bit_width <= 32 else pa.int64()
        column = pa.array(values, pa.int64()).cast(base).cast(typ)
    ids = pa.array(range(first_id, first_id + len(values)), pa.int64())
    return pa.table({"id": ids, "k": column})


def chunks(table: pa.Table, sizes: list[int]) -> list[pa.Table]:
    out, pos, i = [], 0, 0
    while pos < table.num_rows:
        out.append(table.slice(pos, sizes[i % len(sizes)]))
        pos += sizes[i % len(sizes)]
        i += 1
    return out


def ids(tables: Any) -> list[int]:
    return [i for t in tables for i in t.column("id").to_pylist()]


# -- merge: cuts by searchsorted ---------------------------------------------------------


@SETTINGS
@given(
    palette=st.sampled_from(PALETTES),
    data=st.data(),
    descending=st.booleans(),
    reverse=st.booleans(),
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3),
)
def test_integer_cuts_equal_general_cuts(
    palette: tuple[pa.DataType, list[int]],
    data: st.DataObject,
    descending: bool,
    reverse: bool,
    sizes: list[int],
) -> None:
    typ, palette_values = palette
    key = PoolKey.parse("k:desc" if descending else "k")
    value = st.one_of(st.none(), st.sampled_from(palette_values))
    lists = data.draw(st.lists(st.lists(value, max_size=25), min_size=2, max_size=5))
    sources, start = [], 0
    for values_ in lists:
        sources.append(key.sort(keyed(values_, typ, start)))
        start += len(values_)
    if reverse:
        # reversed chunks of reversed sources, in reverse source order (see merge_sorted)
        fed = [[reverse_table(c) for c in reversed(chunks(s, sizes))] for s in reversed(sources)]
    else:
        fed = [chunks(s, sizes) for s in sources]

    fast = ids(merge_sorted(fed, key, reverse=reverse))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kway, "_integer_cuts", lambda live, rising: None)
        general = ids(merge_sorted(fed, key, reverse=reverse))
    assert fast == general
    stable_sort = ids([key.sort(pa.concat_tables(sources))])
    assert fast == (stable_sort[::-1] if reverse else stable_sort)


def test_integer_cuts_serve_an_integer_key_and_not_others() -> None:
    calls: list[bool] = []
    real = kway._integer_cuts

    def spy(live: list[Any], rising: bool) -> list[int] | None:
        out = real(live, rising)
        calls.append(out is not None)
        return out

    key = PoolKey.parse("k")
    s0 = pa.table({"id": [0, 1, 2], "k": [1, 4, 6]})
    s1 = pa.table({"id": [3, 4, 5], "k": [2, 4, 9]})
    as_float = s1.set_column(1, "k", s1.column("k").cast(pa.float64()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kway, "_integer_cuts", spy)
        assert ids(merge_sorted([[s0], [s1]], key)) == [0, 3, 1, 4, 2, 5]
        assert calls and all(calls)
        calls.clear()
        # int64 and double keys in one merge: compared as Python keys
        assert ids(merge_sorted([[s0], [as_float]], key)) == [0, 3, 1, 4, 2, 5]
        assert calls and not any(calls)


# -- scan: objects decoded ahead ---------------------------------------------------------


SCAN_KEYS = ["a", "a:desc", "a,b:desc", "b"]


@st.composite
def object_rows(draw: st.DrawFn) -> pa.Table:
    """One object's rows: keys in a window (some objects overlap), keyless rows, ties."""
    n = draw(st.integers(1, 25))
    base = draw(st.integers(0, 12))
    a = draw(st.lists(st.one_of(st.none(), st.integers(base, base + 4)), min_size=n, max_size=n))
    b = draw(st.lists(st.sampled_from([None, -1.5, 0.0, 2.0]), min_size=n, max_size=n))
    return pa.table({"id": [0] * n, "a": pa.array(a, pa.int64()), "b": pa.array(b, pa.float64())})


def write_objects(store: Storage, key: PoolKey, tables: list[pa.Table]) -> list[DataObject]:
    """One object per table, rows numbered globally, in row groups of 2 rows."""
    objs: list[DataObject] = []
    start = 0
    for t in tables:
        t = key.sort(t.set_column(0, "id", pa.array(range(start, start + t.num_rows), pa.int64())))
        start += t.num_rows
        objs += _writer.write_sorted(store, "pool", [t], key, 10**9, row_group_rows=2)
    return objs


@SETTINGS
@given(
    key_text=st.sampled_from(SCAN_KEYS),
    tables=st.lists(object_rows(), min_size=2, max_size=6),
    order=st.sampled_from(["asc", "desc"]),
    lo=st.one_of(st.none(), st.integers(0, 16)),
    hi=st.one_of(st.none(), st.integers(0, 16)),
    limit=st.one_of(st.none(), st.integers(1, 30)),
)
def test_scan_read_ahead_equals_plain_scan(
    key_text: str,
    tables: list[pa.Table],
    order: str,
    lo: int | None,
    hi: int | None,
    limit: int | None,
) -> None:
    key = PoolKey.parse(key_text)
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    objs = write_objects(store, key, tables)
    if key_text == "b":
        lo = hi = None  # (a float key: integer bounds would not apply)
    low = None if lo is None else (lo,)
    high = None if hi is None else (hi,)
    plain = list(_scan.scan(store, "pool", objs, key, low, high, order, limit))
    ahead = list(_scan.scan(store, "pool", objs, key, low, high, order, limit, read_ahead=True))
    assert ids(ahead) == ids(plain)
    assert [t.num_rows for t in ahead] == [t.num_rows for t in plain]
    assert not _read_ahead_threads()


def _read_ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("limno-read-ahead")]


def test_scan_read_ahead_stopped_early_and_failing_leaves_no_threads() -> None:
    key = PoolKey.parse("a")
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    tables = [pa.table({"id": [0] * 40, "a": list(range(i, 160, 4))}) for i in range(4)]
    objs = write_objects(store, key, tables)
    scan = _scan.scan(store, "pool", objs, key, read_ahead=True)
    assert isinstance(scan, Generator)
    first = next(scan)
    assert first.column("a").to_pylist()[0] == 0
    scan.close()
    assert not _read_ahead_threads()
    store.delete(data_path("pool", objs[2].id))
    with pytest.raises(NotFoundError):
        list(_scan.scan(store, "pool", objs, key, read_ahead=True))
    assert not _read_ahead_threads()


# -- prefetch bounded in bytes -----------------------------------------------------------


class _Sized:
    def __init__(self, n: int) -> None:
        self.n = n
        self.nbytes = 10


class _Source:
    """Items of 10 bytes each; counts how many the producer pulled, and wakes waiters."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.pulled = 0
        self.closed = False
        self.changed = threading.Condition()

    def __iter__(self) -> Iterator[_Sized]:
        try:
            for i in range(self.count):
                with self.changed:
                    self.pulled += 1
                    self.changed.notify_all()
                yield _Sized(i)
        finally:
            self.closed = True

    def wait_pulled(self, n: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.pulled >= n, timeout=30)


def test_prefetch_holds_at_most_max_bytes_ahead() -> None:
    source = _Source(20)
    # 30 bytes: 3 items wait for the caller, a 4th is in the producer's hands
    items = prefetched(iter(source), depth=64, max_bytes=30)
    for i, item in enumerate(items):
        assert item.n == i
        ahead = min(source.count, i + 1 + 3 + 1)
        source.wait_pulled(ahead)
        assert source.pulled == ahead
    assert source.closed


def test_prefetch_stopped_while_the_producer_waits_for_room() -> None:
    source = _Source(100)
    items = prefetched(iter(source), depth=64, max_bytes=10)
    assert next(items).n == 0
    source.wait_pulled(3)  # one waiting for the caller, one waiting for room
    items.close()
    assert source.closed and source.pulled == 3
