"""Fields of structs are encoded by their values, as top-level columns are.

A Kafka or Debezium pool's records are nested (``kafka.offset``, ``value.after.ID``),
and its key is such a field. Each primitive leaf of a struct gets the top-level
rules (``limno.data.column_encodings``): ascending integers delta-encoded, unique
values plain, repeated ones a dictionary. What a reader gets must not change.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from limno.data import column_encodings
from limno.data.objects import data_path
from limno.lake import Lake

ROWS = 50_000


def _events(rows: int) -> pa.Table:
    rng = np.random.default_rng(3)
    ids = rng.permutation(rows).astype(np.int64)
    kafka = pa.StructArray.from_arrays(
        [pa.array(["orders"] * rows), pa.array(np.arange(rows, dtype=np.int64))],
        names=["topic", "offset"],
    )
    after = pa.StructArray.from_arrays(
        [pa.array(ids), pa.array(rng.choice(["ada", "bob", "cy"], rows))],
        names=["ID", "customer"],
        mask=pa.array(np.arange(rows) % 10 == 0),  # deletes: no ``after``
    )
    value = pa.StructArray.from_arrays([pa.array(["c"] * rows), after], names=["op", "after"])
    tags = pa.array([[f"t{i % 3}"] for i in range(rows)])  # a list: Arrow's defaults
    return pa.table({"kafka": kafka, "value": value, "tags": tags})


def _encodings(path: str) -> dict[str, set[str]]:
    md = pq.ParquetFile(path).metadata
    out: dict[str, set[str]] = {}
    for g in range(md.num_row_groups):
        for i in range(md.num_columns):
            column = md.row_group(g).column(i)
            out.setdefault(column.path_in_schema, set()).update(column.encodings)
    return out


def test_struct_fields_get_the_encoding_their_values_call_for(tmp_path: Path) -> None:
    table = _events(ROWS)
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("raw", key="kafka.offset")
    pool.load([table])
    (obj,) = pool.objects()
    path = str(pool.storage.local_path(data_path(pool.id, obj.id)))
    got = _encodings(path)
    assert "DELTA_BINARY_PACKED" in got["kafka.offset"]  # the key: ascending
    assert "RLE_DICTIONARY" in got["kafka.topic"]  # one value
    assert "RLE_DICTIONARY" in got["value.after.customer"]  # three values
    assert "RLE_DICTIONARY" not in got["value.after.ID"]  # unique, not sorted
    assert "PLAIN" in got["value.after.ID"]
    assert "RLE_DICTIONARY" in got["tags.list.element"]  # inside a list: the default
    assert pool.table().equals(table)
    assert list(lake.verify(deep=True)) == []
    with duckdb.connect() as con:
        read = con.sql(
            f"SELECT kafka.offset AS o, value.after.ID AS id FROM read_parquet('{path}') ORDER BY o"
        ).to_arrow_table()
    ids = table.column("value").combine_chunks().field("after").field("ID")
    expected = [None if i % 10 == 0 else v for i, v in enumerate(ids.to_pylist())]
    assert read.column("id").to_pylist() == expected


def test_a_dotted_column_name_keeps_struct_fields_out_of_the_choice(tmp_path: Path) -> None:
    # ``a.b`` beside a struct ``a`` with a field ``b`` would be one Parquet path: only
    # top-level columns are judged then, and what is stored reads back the same
    rows = 20_000
    unique = pa.array(np.random.default_rng(1).permutation(rows).astype(np.int64))
    nested = pa.StructArray.from_arrays([pa.array(np.arange(rows, dtype=np.int64))], ["b"])
    keys = pa.array(np.arange(rows, dtype=np.int64))
    dotted = pa.table({"k": keys, "a.b": unique, "a": nested})
    assert column_encodings.choose(dotted).ascending == ["k"]
    assert column_encodings.choose(dotted.drop_columns(["a.b"])).ascending == ["k", "a.b"]
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    pool.load([dotted])
    assert pool.table().equals(dotted)
    assert list(lake.verify(deep=True)) == []
