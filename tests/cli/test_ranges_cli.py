"""``limno scan --range FROM:TO`` (repeatable): several key ranges in one sorted pass, on a
lake's path and through a server (``mode``); and ``Pool.scan(ranges=...)`` the same way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import limno
from clirunner import Result, fail, ok

pytestmark = pytest.mark.usefixtures("isolated_home")


def _ndjson(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _load(lake: str, pool: str, path: Path, rows: list[dict[str, Any]]) -> None:
    ok("--lake", lake, "load", "-p", pool, _ndjson(path, rows))


def _ts(r: Result) -> list[Any]:
    return [row.get("ts") for row in r.rows()]


@pytest.fixture
def numbers(lake: str, tmp_path: Path) -> str:
    """Pool ``n`` (key ts): 0..19 in two overlapping loads, and one keyless record."""
    ok("--lake", lake, "create", "n", "-k", "ts")
    _load(lake, "n", tmp_path / "a.ndjson", [{"ts": i} for i in range(0, 20, 2)])
    _load(lake, "n", tmp_path / "b.ndjson", [{"ts": i} for i in range(1, 20, 2)] + [{"x": 1}])
    return lake


def test_several_ranges_in_key_order_once_each(numbers: str) -> None:
    scan = ("--lake", numbers, "scan", "-p", "n")
    assert _ts(ok(*scan, "--range", "3:6", "--range", "15:")) == [3, 4, 5, 15, 16, 17, 18, 19]
    # unsorted, overlapping and touching ranges: merged, no row twice
    merged = ok(*scan, "--range", "12:14", "--range", ":2", "--range", "1:3", "--range", "13:15")
    assert _ts(merged) == [0, 1, 2, 12, 13, 14]
    desc = ok(*scan, "--range", "3:6", "--range", "15:", "--order", "desc", "--limit", "6")
    assert _ts(desc) == [19, 18, 17, 16, 15, 5]
    assert _ts(ok(*scan, "--range", "3:6", "--range", "15:", "--limit", "4")) == [3, 4, 5, 15]
    assert _ts(ok(*scan, "--range", "6:3")) == []


def test_an_open_range_is_the_full_scan_with_keyless_records(numbers: str) -> None:
    scan = ("--lake", numbers, "scan", "-p", "n")
    full = ok(*scan).rows()
    assert ok(*scan, "--range", ":").rows() == full
    assert ok(*scan, "--range", ":10", "--range", "5:").rows() == full
    assert full[-1] == {"ts": None, "x": 1}
    assert None not in _ts(ok(*scan, "--range", ":10", "--range", "11:"))


def test_range_errors_are_one_line(numbers: str) -> None:
    scan = ("--lake", numbers, "scan", "-p", "n")
    assert "cannot be combined with --from/--to" in fail(*scan, "--range", "1:2", "--from", "1").err
    assert "cannot be combined" in fail(*scan, "--range", "1:2", "--to", "5").err
    assert "no ':'" in fail(*scan, "--range", "5").err
    assert "more than one ':'" in fail(*scan, "--range", "1:2:3").err
    assert "not a valid int64" in fail(*scan, "--range", "a:b").err


def test_composite_keys_and_values_holding_colons(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "ev", "-k", "tenant,ts")
    rows = [{"tenant": t, "ts": i} for t in ("a", "b:x", "c") for i in range(4)]
    _load(lake, "ev", tmp_path / "ev.ndjson", rows)
    scan = ("--lake", lake, "scan", "-p", "ev")

    def got(*args: str) -> list[tuple[str, int]]:
        return [(r["tenant"], r["ts"]) for r in ok(*scan, *args).rows()]

    # text split at commas (prefixes allowed), JSON arrays, JSON strings holding ':'
    assert got("--range", "a,1:a,3", "--range", "c:") == [
        ("a", 1),
        ("a", 2),
        ("c", 0),
        ("c", 1),
        ("c", 2),
        ("c", 3),
    ]
    assert got("--range", '["b:x", 2]:["c"]') == [("b:x", 2), ("b:x", 3)]
    assert got("--range", '"b:x":"b:y"', "--order", "desc", "--limit", "2") == [
        ("b:x", 3),
        ("b:x", 2),
    ]


def test_time_keys_with_quoted_bounds(lake: str, tmp_path: Path) -> None:
    ok("--lake", lake, "create", "t", "-k", "ts")
    times = [f"2024-01-01T{h:02d}:30:00" for h in range(6)]
    path = tmp_path / "t.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    stamps = pa.array([pa.scalar(t).cast(pa.timestamp("s")) for t in times])
    pq.write_table(pa.table({"ts": stamps}), path)
    ok("--lake", lake, "load", "-p", "t", str(path))
    r = ok(
        "--lake", lake, "scan", "-p", "t", "-f", "json",
        "--range", '"2024-01-01T01:00":"2024-01-01T02:00"',
        "--range", '"2024-01-01T04:30":',
    )  # fmt: skip
    assert [row["ts"][11:16] for row in json.loads(r.text)] == ["01:30", "04:30", "05:30"]
    bare = "2024-01-01T01:00:2024-01-01T02:00"
    assert "more than one ':'" in fail("--lake", lake, "scan", "-p", "t", "--range", bare).err


@pytest.fixture
def opened(numbers: str) -> Iterator[limno.Lake]:
    lake = limno.Lake.open(numbers)
    try:
        yield lake
    finally:
        close = getattr(lake, "close", None)
        if close is not None:
            close()


def test_python_api_ranges_locally_and_through_a_server(opened: limno.Lake) -> None:
    pool = opened.pool("n")
    got = pool.scan(ranges=[(15, None), ("3", "6"), (4, 5)], order="desc")
    assert got.column("ts").to_pylist() == [19, 18, 17, 16, 15, 5, 4, 3]
    chunks = pool.iter_scan(ranges=[(None, 2), (18, None)], limit=3)
    assert [v for t in chunks for v in t.column("ts").to_pylist()] == [0, 1, 18]
    assert pool.scan(ranges=[(None, None)]).num_rows == 21
    assert pool.scan(ranges=[((3,), (5,)), ((9,), "10")]).column("ts").to_pylist() == [3, 4, 9]
    with pytest.raises(limno.InvalidInputError, match="not both"):
        pool.scan(start=1, ranges=[(1, 2)])
    with pytest.raises(limno.InvalidInputError, match="pair"):
        pool.scan(ranges=[(1, 2, 3)])  # type: ignore[list-item]
