"""CSV's null rule: an empty unquoted field is null in every column, strings included
(a CSV row with an empty key field is keyless, as the same row in JSON with ``null``),
a quoted ``""`` is an empty string, and words such as ``NA`` are values."""

from __future__ import annotations

from pathlib import Path

from limno.api.local import LocalLake as Lake


def test_empty_unquoted_fields_are_null_and_quoted_ones_are_text(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    src = tmp_path / "e.csv"
    src.write_bytes(b'k,v,n\n,missing,1\nb,x,\n"",q,2\nc,NA,3\nnull,null,4\n')
    pool.load([str(src)])
    rows = sorted(pool.scan().to_pylist(), key=lambda r: (r["k"] is not None, r["k"] or ""))
    assert rows == [
        {"k": None, "v": "missing", "n": 1},
        {"k": "", "v": "q", "n": 2},
        {"k": "b", "v": "x", "n": None},
        {"k": "c", "v": "NA", "n": 3},
        {"k": "null", "v": "null", "n": 4},
    ]
    # the keyless row is in full scans only, not in key ranges
    assert [r["k"] for r in pool.scan(end="b").to_pylist()] == [""]
