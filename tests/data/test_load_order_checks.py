"""Two choices of the load path that must not change what is stored.

``is_sorted`` decides, batch by batch, whether a load's input still streams in key
order; it must say exactly what ``sort_order`` would (None: already in order) without
sorting. And the encoder writes an ascending integer or temporal column (a pool key
such as TPC-H ``l_orderkey``) without a dictionary: the values read back the same,
and columns whose values repeat in no order keep theirs.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.objects import data_path
from limno.data.sort import is_sorted, sort_order
from limno.storage import open_storage

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ["a", "a:desc", "t", "t:desc", "a,b", "b,a:desc"]


def _table(rows: list[tuple[Any, Any]]) -> pa.Table:
    a = pa.array([r[0] for r in rows], pa.int64())
    return pa.table(
        {
            "a": a,
            "b": pa.array([r[1] for r in rows], pa.float64()),
            "t": a.cast(pa.timestamp("us", tz="UTC")),
        }
    )


def _rows(sorted_first: bool) -> Any:
    values = st.tuples(st.one_of(st.none(), st.integers(-4, 4)), st.sampled_from([None, 1.0, 2.0]))
    rows = st.lists(values, max_size=30)
    if not sorted_first:
        return rows
    # rows in order (nulls last) are the interesting case: is_sorted must say True
    return rows.map(lambda r: sorted(r, key=lambda x: (x[0] is None, x[0] or 0)))


@SETTINGS
@given(key_text=st.sampled_from(KEYS), rows=st.one_of(_rows(False), _rows(True)))
def test_is_sorted_says_what_sort_order_says(key_text: str, rows: list[tuple[Any, Any]]) -> None:
    key = PoolKey.parse(key_text)
    table = _table(rows)
    assert is_sorted(table, key) == (sort_order(table, key) is None)
    assert is_sorted(table, key, key.key_table(table)) == is_sorted(table, key)


def test_ascending_integer_and_date_columns_are_stored_without_a_dictionary() -> None:
    n = 40_000
    table = pa.table(
        {
            "k": pa.array([i // 4 for i in range(n)], pa.int64()),  # a key: 4 rows a value
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i // 500) for i in range(n)]),
            "flag": pa.array(["AF"[i % 2] + "NRO"[i % 3] for i in range(n)]),  # repeats, no order
            "qty": pa.array([(i * 7919) % 50 for i in range(n)], pa.int32()),
        }
    )
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    objs = _writer.sort_and_write(store, "pool", [table], PoolKey.parse("k"), 10**9)
    assert len(objs) == 1
    raw = store.get(data_path("pool", objs[0].id))
    pf = pq.ParquetFile(pa.BufferReader(raw))
    columns = pf.metadata.row_group(0)
    dictionary = {
        columns.column(i).path_in_schema: columns.column(i).has_dictionary_page
        for i in range(columns.num_columns)
    }
    assert dictionary == {"k": False, "day": False, "flag": True, "qty": True}
    assert pf.read().equals(table)
    assert (objs[0].min_key, objs[0].max_key) == ((0,), ((n - 1) // 4,))
