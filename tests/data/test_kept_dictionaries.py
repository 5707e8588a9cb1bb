"""A load keeps a Parquet input's small text dictionaries up to the encoder
(``read_records(dictionaries=True)``, ``parquet_input._OneDictionary``, the
``ObjectWriter``'s stored Arrow schema): the objects must hold exactly what the plain
path writes (rows, types, file metadata, statistics), whatever the input (view types,
nulls, binary, group dictionaries in other orders or with new values, a fallback to
plain pages, an order that breaks mid-file, a dictionary key column, a bad value), and
every reader (pyarrow, DuckDB, ``verify --deep``) must read them back alike."""

from __future__ import annotations

import glob
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import limno.data.ingest as ingest
from limno.data import readers
from limno.data.encoding import ObjectWriter
from limno.errors import InvalidInputError
from limno.lake import Lake

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = ["AIR", "MAIL", "SHIP", "TRUCK", "", "é", "RAIL", "FOB"]
PLAIN_READ = readers.read_records


def _plain_read(path: str, fmt: str | None = None, **kw: Any) -> Iterator[pa.RecordBatch]:
    """The load's read as it was before: every column decoded to its stored form."""
    kw["dictionaries"] = False
    return PLAIN_READ(path, fmt, **kw)


def _load(
    root: Path, name: str, paths: list[Path], key: str, plain: bool, mp: pytest.MonkeyPatch
) -> tuple[Lake, list[str]]:
    """A new lake with ``paths`` loaded into pool ``p``; the objects' files."""
    mp.setattr(ingest, "read_records", _plain_read if plain else PLAIN_READ)
    lake = Lake.init(str(root / name))
    lake.create_pool("p", key=key).load([str(p) for p in paths])
    mp.setattr(ingest, "read_records", PLAIN_READ)
    return lake, sorted(glob.glob(str(root / name / "**" / "*.parquet"), recursive=True))


def _file_facts(files: list[str]) -> list[Any]:
    """What a reader may rely on in the objects: schema, metadata, row groups, statistics."""
    out: list[Any] = []
    for path in files:
        meta = pq.ParquetFile(path).metadata
        schema = meta.schema
        columns = [schema.column(i) for i in range(meta.num_columns)]
        leaves = [(c.path, c.physical_type, str(c.logical_type)) for c in columns]
        out.append((meta.metadata, meta.num_rows, leaves))
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for i in range(group.num_columns):
                c = group.column(i)
                stats = c.statistics.to_dict() if c.statistics is not None else None
                out.append((g, i, group.num_rows, c.compression, stats))
                out.append((c.has_column_index, c.has_offset_index, c.has_dictionary_page))
    return out


def _same_loads(tmp: Path, paths: list[Path], key: str, mp: pytest.MonkeyPatch) -> pa.Table:
    """Load ``paths`` kept and plain; assert the two lakes hold the same; the rows."""
    kept, kept_files = _load(tmp, "kept", paths, key, False, mp)
    plain, plain_files = _load(tmp, "plain", paths, key, True, mp)
    got, expected = kept.pool("p").table(), plain.pool("p").table()
    assert got.equals(expected)
    assert got.schema.equals(expected.schema, check_metadata=True)
    assert _file_facts(kept_files) == _file_facts(plain_files)
    assert list(kept.verify(deep=True)) == []
    with duckdb.connect() as con:
        kept_rows = con.sql(f"FROM read_parquet({kept_files!r}) ORDER BY ALL").to_arrow_table()
        plain_rows = con.sql(f"FROM read_parquet({plain_files!r}) ORDER BY ALL").to_arrow_table()
        assert kept_rows.equals(plain_rows)
    return got


def _write_groups(path: Path, groups: list[pa.Table], **options: Any) -> None:
    """One row group per table (each with its own dictionary, in its own order)."""
    with pq.ParquetWriter(str(path), groups[0].schema, **options) as w:
        for g in groups:
            w.write_table(g)


@st.composite
def inputs(draw: st.DrawFn) -> tuple[list[pa.Table], dict[str, Any]]:
    sizes = draw(st.lists(st.integers(1, 700), min_size=1, max_size=4))
    groups, start = [], 0
    for n in sizes:
        words = draw(st.permutations(WORDS))[: draw(st.integers(1, len(WORDS)))]
        pick = st.sampled_from([*words, None])
        codes = draw(st.lists(pick, min_size=n, max_size=n))
        groups.append(
            pa.table(
                {
                    "k": pa.array(range(start, start + n), pa.int64()),
                    "code": pa.array(codes, pa.string()),
                    "code_view": pa.array(codes, pa.string_view()),
                    "flag": pa.array([c.encode() if c else None for c in codes], pa.binary()),
                    "note": pa.array([f"note {start + i}" for i in range(n)], pa.string()),
                }
            )
        )
        start += n
    options = {
        "use_dictionary": draw(st.sampled_from([True, ["code", "flag"]])),
        # a tiny limit makes the writer fall back to plain pages within a column
        "dictionary_pagesize_limit": draw(st.sampled_from([1 << 20, 16])),
    }
    return groups, options


@SETTINGS
@given(inputs())
def test_kept_dictionaries_write_what_the_plain_path_writes(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[list[pa.Table], dict[str, Any]]
) -> None:
    groups, options = case
    tmp = tmp_path_factory.mktemp("kept")
    _write_groups(tmp / "in.parquet", groups, **options)
    with pytest.MonkeyPatch.context() as mp:
        got = _same_loads(tmp, [tmp / "in.parquet"], "k", mp)
    assert got.column("code").to_pylist() == pa.concat_tables(groups).column("code").to_pylist()
    assert got.schema.field("code_view").type == pa.string()


def _lineitem_like(start: int, n: int, order: list[str]) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(range(start, start + n), pa.int64()),
            "mode": pa.array([order[i % len(order)] for i in range(n)], pa.string_view()),
            "flag": pa.array([None if i % 7 == 0 else order[i % 2] for i in range(n)]),
        }
    )


def test_the_encoder_gets_dictionaries_and_one_per_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the second group's dictionary is in another order and brings a new value
    groups = [_lineitem_like(0, 5000, WORDS[:4]), _lineitem_like(5000, 5000, WORDS[4:0:-1])]
    _write_groups(tmp_path / "in.parquet", groups)
    seen: list[pa.ChunkedArray] = []
    add = ObjectWriter.add

    def spy(self: ObjectWriter, piece: pa.Table) -> None:
        seen.append(piece.column("mode"))
        add(self, piece)

    monkeypatch.setattr(ObjectWriter, "add", spy)
    got = _same_loads(tmp_path, [tmp_path / "in.parquet"], "k", monkeypatch)
    kept = [c for c in seen if pa.types.is_dictionary(c.type)]
    assert kept  # the plain path hands the encoder decoded text
    dictionaries = {tuple(chunk.dictionary.to_pylist()) for c in kept for chunk in c.chunks}
    # the first group's, then grown by the value the second brought (not reordered)
    assert dictionaries == {tuple(WORDS[:4]), tuple(WORDS[:5])}
    assert got.column("mode").to_pylist() == pa.concat_tables(groups).column("mode").to_pylist()


def test_an_order_broken_mid_file_is_sorted_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = [
        _lineitem_like(0, 3000, WORDS[:3]),
        _lineitem_like(6000, 3000, WORDS[2:5]),
        _lineitem_like(3000, 3000, WORDS[1:4]),  # behind the group before: sorted
    ]
    _write_groups(tmp_path / "in.parquet", groups)
    got = _same_loads(tmp_path, [tmp_path / "in.parquet"], "k", monkeypatch)
    assert got.column("k").to_pylist() == list(range(9000))
    assert got.schema.field("mode").type == pa.string()


def test_a_dictionary_key_and_a_plain_file_beside_a_kept_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = [_lineitem_like(0, 4000, WORDS[:3]), _lineitem_like(4000, 4000, WORDS[:3])]
    _write_groups(tmp_path / "a.parquet", groups)
    _write_groups(tmp_path / "b.parquet", [_lineitem_like(8000, 2000, WORDS)], use_dictionary=False)
    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    got = _same_loads(tmp_path, paths, "mode,k", monkeypatch)  # the key holds text codes
    assert got.num_rows == 10000
    assert got.column("mode").to_pylist() == sorted(got.column("mode").to_pylist())


def test_a_bad_value_in_a_dictionary_fails_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 3000
    table = pa.table(
        {"k": pa.array(range(n)), "mode": pa.array(["SHIP", "ZZZZ", "AIR"] * (n // 3))}
    )
    path = tmp_path / "in.parquet"
    pq.write_table(table, str(path), row_group_size=1000, compression="none")
    raw = bytearray(path.read_bytes())
    meta = pq.ParquetFile(str(path)).metadata.row_group(1).column(1)
    start = meta.dictionary_page_offset
    at = raw.index(b"ZZZZ", start, meta.data_page_offset)
    raw[at : at + 2] = b"\xff\xfe"  # not UTF-8, in the second group's dictionary page
    path.write_bytes(bytes(raw))
    errors = []
    for plain in (False, True):
        monkeypatch.setattr(ingest, "read_records", _plain_read if plain else PLAIN_READ)
        lake = Lake.init(str(tmp_path / f"lake-{plain}"))
        pool = lake.create_pool("p", key="k")
        with pytest.raises(InvalidInputError) as e:
            pool.load([str(path)])
        errors.append(str(e.value))
        assert pool.table().num_rows == 0  # nothing committed
        assert glob.glob(str(tmp_path / f"lake-{plain}" / "**" / "*.parquet"), recursive=True) == []
    assert errors[0] == errors[1]
    assert "row 1001: invalid UTF-8 in field 'mode'" in errors[0]
