"""Text columns stored as small dictionaries are read as dictionary indices and decoded
(``parquet_input.small_dictionaries``): a load must keep exactly what reading the
same file as usual keeps, whatever the writer did (dictionaries or not, a fallback to
plain pages, view types, nulls, binary), and a damaged file must fail as before."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.data.parquet_input import row_groups, small_dictionaries
from limno.data.plain_types import plain_batch
from limno.lake import Lake

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = ["AIR", "MAIL", "SHIP", "TRUCK", "", "é", "RAIL"]


def _unreadable(what: str, e: BaseException) -> Exception:
    return RuntimeError(what)


def _read(path: Path, dictionaries: bool, monkeypatch: pytest.MonkeyPatch) -> pa.Table:
    """Every row group of ``path`` as a load reads it, with or without the shortcut."""
    if not dictionaries:
        monkeypatch.setattr("limno.data.parquet_input.small_dictionaries", lambda f: [])
    with pa.OSFile(str(path)) as fh:
        groups = list(row_groups(pq.ParquetFile(fh), str(path), None, _unreadable, "t"))
    monkeypatch.undo()
    return pa.concat_tables(groups)


@st.composite
def files(draw: st.DrawFn) -> tuple[pa.Table, dict[str, object]]:
    n = draw(st.integers(1, 1500))
    codes = draw(st.lists(st.sampled_from([*WORDS, None]), min_size=n, max_size=n))
    distinct = [f"comment {i} {'x' * (i % 50)}" for i in range(n)]
    columns = {
        "code": pa.array(codes, pa.string()),
        "code_view": pa.array(codes, pa.string_view()),
        "flag": pa.array([None if c is None else c.encode() for c in codes], pa.binary()),
        "big": pa.array(codes, pa.large_string()),
        "comment": pa.array(distinct, pa.string()),
        "n": pa.array(range(n), pa.int64()),
    }
    options = {
        "row_group_size": draw(st.sampled_from([7, 500, 5000])),
        "use_dictionary": draw(st.sampled_from([True, False, ["code", "comment"]])),
        # a tiny limit makes the writer fall back to plain pages within a column
        "dictionary_pagesize_limit": draw(st.sampled_from([None, 64])),
    }
    return pa.table(columns), options


@SETTINGS
@given(files())
def test_the_shortcut_reads_what_the_usual_read_reads(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[pa.Table, dict[str, object]]
) -> None:
    table, options = case
    path = tmp_path_factory.mktemp("dict") / "t.parquet"
    kwargs = {k: v for k, v in options.items() if v is not None}
    pq.write_table(table, str(path), **kwargs)
    with pytest.MonkeyPatch.context() as mp:
        fast = _read(path, True, mp)
        usual = _read(path, False, mp)
    assert fast.equals(usual)
    assert fast.schema.equals(usual.schema, check_metadata=True)
    assert usual.equals(plain_batch(pq.read_table(str(path))))
    one_group = options["row_group_size"] == 5000
    if table.num_rows >= 500 and one_group and options["use_dictionary"] is True:
        assert "code" in small_dictionaries(pq.ParquetFile(str(path)))  # the shortcut ran


def test_which_columns_take_the_shortcut(tmp_path: Path) -> None:
    n = 5000
    table = pa.table(
        {
            "mode": pa.array([WORDS[i % 4] for i in range(n)], pa.string_view()),
            "comment": pa.array([f"unique comment number {i:08d}" for i in range(n)]),
            "n": pa.array(range(n)),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, str(path), row_group_size=1000, dictionary_pagesize_limit=16384)
    assert small_dictionaries(pq.ParquetFile(str(path))) == ["mode"]  # comment fell back
    pq.write_table(table, str(path), use_dictionary=False)
    assert small_dictionaries(pq.ParquetFile(str(path))) == []


def test_a_load_keeps_the_rows_and_the_types(tmp_path: Path) -> None:
    n = 3000
    table = pa.table(
        {
            "k": pa.array(range(n)),
            "mode": pa.array([WORDS[i % 5] for i in range(n)], pa.string_view()),
            "flag": pa.array([None if i % 7 == 0 else b"F" for i in range(n)], pa.binary()),
        }
    )
    path = tmp_path / "in.parquet"
    pq.write_table(table, str(path), row_group_size=500)
    pool = Lake.init(str(tmp_path / "lake")).create_pool("p", key="k")
    pool.load([str(path)])
    back = pool.table().sort_by("k")
    assert back.schema.field("mode").type == pa.string()  # views are stored plain
    assert back.column("mode").to_pylist() == table.column("mode").to_pylist()
    assert back.column("flag").to_pylist() == table.column("flag").to_pylist()


def test_a_damaged_group_fails_as_before(tmp_path: Path) -> None:
    n = 2000
    table = pa.table({"mode": pa.array([WORDS[i % 3] for i in range(n)]), "k": range(n)})
    path = tmp_path / "t.parquet"
    pq.write_table(table, str(path), row_group_size=1000, compression="none")
    meta = pq.ParquetFile(str(path)).metadata
    chunk = meta.row_group(1).column(0)
    raw = bytearray(path.read_bytes())
    for i in range(chunk.data_page_offset, chunk.data_page_offset + 40):
        raw[i] ^= 0xFF  # the second group's pages of the dictionary column
    path.write_bytes(bytes(raw))
    assert small_dictionaries(pq.ParquetFile(str(path))) == ["mode"]
    with pa.OSFile(str(path)) as fh, pytest.raises(RuntimeError, match="row group 1 "):
        list(row_groups(pq.ParquetFile(fh), str(path), None, _unreadable, "t"))
