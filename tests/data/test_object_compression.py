"""Columns LZ4 cannot shrink are stored uncompressed; every other column keeps LZ4.

The choice is made per object on its first rows (``column_encodings._compressions``). What a
reader gets must not change: the same rows and types, pages that verify, and DuckDB
reading the objects as it did.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from limno.data import column_encodings
from limno.data.objects import data_path
from limno.lake import Lake

ROWS = 100_000


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    keys = np.arange(rows, dtype=np.int64)
    rng.shuffle(keys)
    digits = pc.cast(pa.array(rng.integers(0, 10**9, rows, dtype=np.int64)), pa.string())
    return pa.table(
        {
            "k": keys,
            "noise": rng.random(rows),  # random doubles: nothing for LZ4 to find
            "hash": rng.integers(-(2**63), 2**63 - 1, rows, dtype=np.int64),
            "label": pc.binary_join_element_wise("val-", digits, ""),  # unique, compressible
            "kind": pa.array(["red", "green", "blue", None] * (rows // 4)),  # a dictionary
        }
    )


def _load(tmp_path: Path, table: pa.Table) -> tuple[Lake, list[str]]:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    pool.load([table])
    # a local lake: each object is a file (local_path is None only elsewhere)
    return lake, [str(pool.storage.local_path(data_path(pool.id, o.id))) for o in pool.objects()]


def _codecs(path: str) -> dict[str, set[str]]:
    md = pq.ParquetFile(path).metadata
    out: dict[str, set[str]] = {}
    for g in range(md.num_row_groups):
        for i in range(md.num_columns):
            column = md.row_group(g).column(i)
            out.setdefault(column.path_in_schema, set()).add(column.compression)
    return out


def test_incompressible_columns_are_stored_uncompressed(tmp_path: Path) -> None:
    table = _table(ROWS)
    lake, files = _load(tmp_path, table)
    assert len(files) == 1
    assert _codecs(files[0]) == {
        "k": {"LZ4"},
        "noise": {"UNCOMPRESSED"},
        "hash": {"UNCOMPRESSED"},
        "label": {"LZ4"},
        "kind": {"LZ4"},
    }
    expected = table.sort_by("k")
    got = lake.pool("p").table()
    assert got.equals(expected)
    assert list(lake.verify(deep=True)) == []
    with duckdb.connect() as con:
        read = con.sql(f"SELECT * FROM read_parquet('{files[0]}') ORDER BY k").to_arrow_table()
    assert read.cast(expected.schema).equals(expected)


def test_a_small_object_keeps_lz4_everywhere(tmp_path: Path) -> None:
    # too few bytes to judge a column by (LZ4 finds matches differently in small inputs)
    _, files = _load(tmp_path, _table(4000))
    assert set().union(*_codecs(files[0]).values()) == {"LZ4"}


def test_the_probe_reads_a_sliced_columns_own_values() -> None:
    values = pa.array([f"{i:08d}" for i in range(40_000)])
    piece = pa.chunked_array([values.slice(1234)])
    probe = column_encodings._probe(piece)
    assert probe is not None
    expected = "".join(f"{i:08d}" for i in range(1234, 40_000)).encode()
    assert probe.to_pybytes() == expected[: column_encodings.COMPRESSION_PROBE_BYTES]
    numbers = pa.chunked_array([pa.array(np.arange(50_000, dtype=np.int64)).slice(100)])
    probe = column_encodings._probe(numbers)
    assert probe is not None
    assert np.array_equal(np.frombuffer(probe.to_pybytes(), np.int64)[:3], [100, 101, 102])
