"""Gathering rows through views (:class:`limno.data.sort.RowGather`) equals Arrow's ``take``.

A large unsorted load gathers its text and binary columns as 16-byte views and casts
them back. Whatever the values (nulls, empty values, values inlined in their view
and longer ones, any bytes in binary), the slices and chunks of the input, and
whatever the order, the gathered table must be ``take``'s, in the same types; and a
load that takes this path must read back its input sorted. The row threshold is
lowered so that small examples take it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import sort
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.kway import concat_unified
from limno.data.objects import data_path
from limno.data.parquet import open_parquet
from limno.data.sort import Gathered, RowGather
from limno.storage import open_storage

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: texts of up to 12 bytes live in their view; longer ones point into the data buffer
TEXTS = st.one_of(st.none(), st.text(max_size=4), st.text(min_size=12, max_size=30))
BYTES = st.one_of(st.none(), st.binary(max_size=4), st.binary(min_size=13, max_size=30))


@SETTINGS
@given(
    rows=st.lists(st.tuples(TEXTS, BYTES), min_size=1, max_size=60),
    data=st.data(),
)
def test_gather_equals_take(
    rows: list[tuple[str | None, bytes | None]], data: st.DataObject
) -> None:
    table = pa.table(
        {
            "s": pa.array([r[0] for r in rows], pa.string()),
            "b": pa.array([r[1] for r in rows], pa.binary()),
            "i": pa.array(range(len(rows)), pa.int64()),
        }
    )
    start = data.draw(st.integers(0, len(rows) - 1))
    table = table.slice(start)  # offsets into the buffers
    order = np.array(data.draw(st.permutations(range(table.num_rows))), dtype=np.int64)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sort, "VIEW_GATHER_MIN_ROWS", 0)
        rows_ = RowGather(table)
        assert sorted(rows_.views) == [0, 1]  # both text columns go through views
        got = rows_.take(order)
    got.validate(full=True)
    assert got.schema.equals(table.schema)
    assert got.equals(table.take(order))
    assert rows_.take(order[:1]).equals(table.take(order[:1]))


def test_gather_chunked_and_other_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text column in several chunks (a run of many input batches) goes through views
    too; other types (large text, lists) are taken as Arrow takes them."""
    monkeypatch.setattr(sort, "VIEW_GATHER_MIN_ROWS", 0)
    chunked = pa.chunked_array([["a", "bbbbbbbbbbbbbbbbbb"], [None, "c"]])
    table = pa.table(
        {
            "chunked": chunked,
            "list": pa.array([[1], None, [2, 3], []]),
            "big": pa.array(["x" * 20, None, "", "y"], pa.large_string()),
        }
    )
    rows = RowGather(table)
    assert list(rows.views) == [0]
    order = np.array([3, 1, 0, 2])
    assert rows.take(order).equals(table.take(order))


def test_gathered_slices_share_one_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices of one run gathered from one RowGather: together, the whole sorted run."""
    monkeypatch.setattr(sort, "VIEW_GATHER_MIN_ROWS", 0)
    monkeypatch.setattr(sort, "CHUNK_ROWS", 7)
    n = 50
    rng = np.random.default_rng(3)
    table = pa.table(
        {
            "k": rng.permutation(n),
            "s": [None if i % 5 == 0 else f"text number {i:04d}" for i in range(n)],
        }
    )
    order = np.argsort(table.column("k").to_numpy(), kind="stable")
    rows = RowGather(table)
    parts = [Gathered(rows, order, 0, 23), Gathered(rows, order, 23, n)]
    got = pa.concat_tables([t for part in parts for t in part])
    assert got.equals(table.take(order))


def test_unsorted_load_through_views_reads_back_sorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unsorted rows with text, binary and nulls, sorted and written by two threads
    gathering through views: the objects hold the input, sorted by key."""
    monkeypatch.setattr(sort, "VIEW_GATHER_MIN_ROWS", 0)
    monkeypatch.setattr(sort, "CHUNK_ROWS", 1000)
    monkeypatch.setattr(_writer, "SMALL_INPUT_BYTES", 0)
    monkeypatch.setattr(_writer, "_parallel_parts", lambda nbytes: 2)
    n = 20_000
    rng = np.random.default_rng(7)
    keys = rng.permutation(n)
    table = pa.table(
        {
            "k": keys,
            "s": [None if k % 7 == 0 else f"v{k}" * (1 + k % 5) for k in keys],
            "b": [bytes([k % 256]) * (k % 20) for k in keys],
        }
    )
    store = open_storage(str(tmp_path / "lake"), create=True)
    key = PoolKey.parse("k")
    objs = _writer.sort_and_write(store, "p", table.to_batches(5000), key, 100_000)
    assert len(objs) > 2
    stored = concat_unified([open_parquet(store, data_path("p", o.id)).read() for o in objs])
    assert stored.equals(key.sort(table))


def test_text_too_large_to_cast_back_whole_is_taken_as_arrow_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A text column whose bytes a 32-bit offset could not span once gathered whole
    (lowered here to 10 bytes) keeps Arrow's ``take``."""
    monkeypatch.setattr(sort, "VIEW_GATHER_MIN_ROWS", 0)
    monkeypatch.setattr(sort, "_MAX_TEXT_BYTES", 10)
    table = pa.table({"s": ["a long enough value", "b", None], "t": ["x", "y", "z"]})
    rows = RowGather(table)
    assert list(rows.views) == []
    order = np.array([2, 0, 1])
    assert rows.take(order).equals(table.take(order))
