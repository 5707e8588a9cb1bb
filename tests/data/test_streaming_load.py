"""The fast path of a load: input in key order streams to concurrent encoders.

``sort_and_write`` writes input that comes in key order as it reads it (no sort, no
spill), each object encoded in a thread of its own; from the first batch out of order
it falls back to sorting, and merges what it had written back in. Either way the
result must equal a stable sort of the input, and a failure must leave nothing. The
vectorized order check (``in_key_order``) must agree with Arrow's sort, and Parquet
row groups decoded in parallel must come out whole, in order, and fail in order.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
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
from limno.data.objects import DataObject, data_path
from limno.data.parquet import open_parquet
from limno.data.readers import read_records
from limno.data.sort import in_key_order
from limno.errors import InvalidInputError
from limno.storage import Storage, open_storage

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ["a", "a:desc", "a,b", "a:desc,b", "b,a:desc"]


def memory_store() -> Storage:
    return open_storage(f"memory://{uuid.uuid4().hex}")


def table_of(rows: list[tuple[Any, Any]], first_id: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + len(rows)), pa.int64()),
            "a": pa.array([r[0] for r in rows], pa.int64()),
            "b": pa.array([r[1] for r in rows], pa.float64()),
        }
    )


def written(store: Storage, objs: list[DataObject]) -> list[int]:
    """The ids of the objects' rows, objects in the order given."""
    out: list[int] = []
    for o in objs:
        out += open_parquet(store, data_path("pool", o.id)).read().column("id").to_pylist()
    return out


def stored_objects(store: Storage) -> set[str]:
    return {i.path for i in store.list("pool").objects if i.path.endswith(".parquet")}


rows_strategy = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(-3, 3)), st.sampled_from([None, 1.5, 2.5])),
    max_size=40,
)


@SETTINGS
@given(key_text=st.sampled_from(KEYS), rows=rows_strategy)
def test_in_key_order_agrees_with_the_sort(key_text: str, rows: list[tuple[Any, Any]]) -> None:
    key = PoolKey.parse(key_text)
    keys = key.key_table(table_of(rows))
    by_sort = keys.take(key.sort_indices(table_of(rows))) if rows else keys
    assert in_key_order(keys, key) == (by_sort.to_pylist() == keys.to_pylist())


@SETTINGS
@given(
    key_text=st.sampled_from(KEYS),
    rows=rows_strategy,
    cuts=st.lists(st.integers(1, 9), min_size=1, max_size=5),
    disorder=st.one_of(st.none(), st.integers(0, 39)),
    target_size=st.sampled_from([1, 300, 10**9]),
    memory_limit=st.sampled_from([1, 10**9]),
)
def test_sorted_prefix_then_anything_equals_a_stable_sort(
    key_text: str,
    rows: list[tuple[Any, Any]],
    cuts: list[int],
    disorder: int | None,
    target_size: int,
    memory_limit: int,
) -> None:
    """Input in key order up to a point (everything, or a random row on), in batches."""
    key = PoolKey.parse(key_text)
    table = table_of(rows)
    ordered = table.take(key.sort_indices(table)) if rows else table
    if disorder is not None and disorder < len(rows):  # move one row to the end
        rest = [i for i in range(len(rows)) if i != disorder]
        ordered = ordered.take(pa.array([*rest, disorder], pa.int64()))
    ordered = ordered.set_column(0, "id", pa.array(range(len(rows)), pa.int64()))
    batches, pos, i = [], 0, 0
    while pos < ordered.num_rows:
        batches.append(ordered.slice(pos, cuts[i % len(cuts)]))
        pos, i = pos + cuts[i % len(cuts)], i + 1
    store = memory_store()
    objs = _writer.sort_and_write(
        store, "pool", batches, key, target_size, memory_limit=memory_limit
    )
    expected = ordered.take(key.sort_indices(ordered)).column("id").to_pylist() if rows else []
    assert written(store, objs) == expected
    assert stored_objects(store) == {data_path("pool", o.id) for o in objs}


def test_sorted_input_streams_through_concurrent_encoders(monkeypatch: pytest.MonkeyPatch) -> None:
    feeds: list[int] = []
    real = encoding.ObjectFeed.__init__

    def counted(self: encoding.ObjectFeed, *args: Any) -> None:
        feeds.append(1)
        real(self, *args)

    monkeypatch.setattr(encoding.ObjectFeed, "__init__", counted)
    monkeypatch.setattr(_writer, "_writers", lambda: 3)
    key = PoolKey.parse("a,b")
    rows = [(i // 3, float(i % 3)) for i in range(3000)]
    batches = table_of(rows).to_batches(max_chunksize=250)
    store = memory_store()
    objs = _writer.sort_and_write(store, "pool", batches, key, 8_000)
    assert len(objs) == len(feeds) > 3  # one feed per object
    assert written(store, objs) == list(range(3000))
    assert [o.min_key for o in objs] == sorted(o.min_key for o in objs)  # type: ignore[type-var]


@pytest.mark.parametrize("backlog", [10**9, 1])  # 1: the reader waits on every piece
def test_a_failing_encoder_leaves_nothing(monkeypatch: pytest.MonkeyPatch, backlog: int) -> None:
    calls: list[int] = []
    real = encoding.ObjectWriter.add

    def flaky(self: encoding.ObjectWriter, piece: pa.Table) -> None:
        calls.append(1)
        if len(calls) == 12:
            raise OSError("disk full")
        real(self, piece)

    monkeypatch.setattr(encoding.ObjectWriter, "add", flaky)
    monkeypatch.setattr(_writer, "_writers", lambda: 2)
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    batches = table_of([(i, 0.0) for i in range(2000)]).to_batches(max_chunksize=100)
    with ThreadPoolExecutor(1) as pool:  # a hang fails the test instead of the run
        load = pool.submit(
            _writer.sort_and_write,
            store,
            "pool",
            batches,
            PoolKey.parse("a"),
            3_000,
            memory_limit=backlog,
        )
        with pytest.raises(OSError, match="disk full"):
            load.result(timeout=120)
    assert store.list("pool").objects == []


def test_row_groups_decode_in_parallel_in_order(tmp_path: Path) -> None:
    table = table_of([(i, float(i)) for i in range(10_000)])
    path = tmp_path / "groups.parquet"
    pq.write_table(table, path, row_group_size=700)
    back = pa.Table.from_batches(list(read_records(str(path), batch_rows=300)))
    assert back.equals(table)


def test_a_bad_row_group_fails_first_in_file_order(tmp_path: Path) -> None:
    text = pa.array([b"ok"] * 1000, pa.binary())
    bad = [3, 5]  # row groups of 100 rows holding invalid UTF-8
    values = [b"\xff" if i // 100 in bad and i % 100 == 7 else b"ok" for i in range(len(text))]
    raw = pa.table({"s": pa.array(values, pa.binary())})
    path = tmp_path / "bad.parquet"
    pq.write_table(raw.cast(pa.schema([("s", pa.string())]), safe=False), path, row_group_size=100)
    with pytest.raises(InvalidInputError, match=r"row 308: invalid UTF-8 in field 's'"):
        list(read_records(str(path)))
