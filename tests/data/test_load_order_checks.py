"""Two choices of the load path that must not change what is stored.

``is_sorted`` decides, batch by batch, whether a load's input still streams in key
order; it must say exactly what ``sort_order`` would (None: already in order) without
sorting. And the encoder writes an ascending integer or temporal column (a pool key
such as TPC-H ``l_orderkey``) delta-encoded, without a dictionary: the values read
back the same in pyarrow and in DuckDB (every width, nulls, steps that overflow), and
columns whose values repeat in no order keep theirs.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.api.local import LocalLake as Lake
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.data.objects import data_path
from limno.data.sort import is_sorted, sort_order
from limno.pools.records.sql_source import snapshot_source
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


def test_ascending_integer_and_date_columns_are_delta_encoded() -> None:
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
    encodings = {
        columns.column(i).path_in_schema: columns.column(i).encodings
        for i in range(columns.num_columns)
    }
    assert {name: "RLE_DICTIONARY" in e for name, e in encodings.items()} == {
        "k": False,
        "day": False,
        "flag": True,
        "qty": True,
    }
    assert {name: "DELTA_BINARY_PACKED" in e for name, e in encodings.items()} == {
        "k": True,
        "day": True,
        "flag": False,
        "qty": False,
    }
    assert pf.read().equals(table)
    assert (objs[0].min_key, objs[0].max_key) == ((0,), ((n - 1) // 4,))


def test_delta_encoded_columns_read_back_in_pyarrow_and_duckdb(tmp_path: Path) -> None:
    n = 20_000
    top = 2**64 - 1
    table = pa.table(
        {
            "k": pa.array(range(n), pa.int64()),
            # steps of 2**63 and more: the encoder's deltas wrap around
            "wide": pa.array([-(2**63)] * 5000 + [0] * 5000 + [2**63 - 1] * (n - 10_000)),
            "u": pa.array([None if i % 9 == 0 else top - n + i for i in range(n)], pa.uint64()),
            "tiny": pa.array([-128 + i * 255 // n for i in range(n)], pa.int8()),
            "at": pa.array(
                [
                    dt.datetime(2020, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i)
                    for i in range(n)
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "day": pa.array([dt.date(1969, 12, 1) + dt.timedelta(days=i // 100) for i in range(n)]),
        }
    )
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("t", key="k").load([table])
    (path,) = snapshot_source(lake.pool("t")).files
    pf = pq.ParquetFile(path)
    columns = pf.metadata.row_group(0)
    assert all(
        "DELTA_BINARY_PACKED" in columns.column(i).encodings for i in range(columns.num_columns)
    )
    assert pf.read().equals(table)
    # DuckDB names UTC "Etc/UTC": the same instants
    assert lake.query("SELECT * FROM t ORDER BY k").cast(table.schema).equals(table)
