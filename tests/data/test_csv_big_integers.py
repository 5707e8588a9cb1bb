"""CSV integers beyond int64 stay exact, as they do in JSON: a column of integer
literals that int64 cannot hold is decimal(38, 0) up to 38 digits, else text, never a
float64 that rounds them (pyarrow's CSV inference falls back to double)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from limno.api.local import LocalLake as Lake


def _loaded(tmp_path: Path, text: bytes, name: str = "big.csv") -> pa.Table:
    """The records of one input ``text`` named ``name``, loaded into a pool keyed on id."""
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="id")
    src = tmp_path / name
    src.write_bytes(text)
    pool.load([str(src)])
    return pool.scan()


def test_integers_beyond_int64_are_exact_decimals(tmp_path: Path) -> None:
    table = _loaded(
        tmp_path, b"id,big\n1,12345678901234567890123\n2,-5\n3,\n4,18446744073709551615\n"
    )
    assert table.schema.field("big").type == pa.decimal128(38, 0)
    assert table.column("big").to_pylist() == [
        Decimal("12345678901234567890123"),
        Decimal(-5),
        None,
        Decimal("18446744073709551615"),
    ]


def test_an_integer_key_beyond_int64_is_exact_and_sorted(tmp_path: Path) -> None:
    table = _loaded(tmp_path, b"id,v\n99999999999999999999,a\n99999999999999999998,b\n")
    assert table.column("id").to_pylist() == [
        Decimal("99999999999999999998"),
        Decimal("99999999999999999999"),
    ]


def test_integers_of_more_than_38_digits_are_text_and_floats_stay_floats(
    tmp_path: Path,
) -> None:
    huge = "1" + "0" * 40
    text = f"id,huge,f,e\n1,{huge},1.5,1e3\n2,7,12345678901234567890.5,2\n".encode()
    table = _loaded(tmp_path, text)
    assert table.column("huge").to_pylist() == [huge, "7"]
    assert table.schema.field("f").type == pa.float64()
    assert table.schema.field("e").type == pa.float64()
    assert table.column("f").to_pylist() == [1.5, 12345678901234567890.5]


def test_tsv_integers_beyond_int64_are_exact(tmp_path: Path) -> None:
    table = _loaded(tmp_path, b"id\tbig\n1\t-98765432109876543210\n", "big.tsv")
    assert table.column("big").to_pylist() == [Decimal("-98765432109876543210")]
