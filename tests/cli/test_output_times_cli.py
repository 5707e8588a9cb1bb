"""Every ``-f`` format writes a timestamp (with or without a zone), a date, a time and a
decimal as the same text: ISO 8601, a zoned timestamp with its offset (``+01:00``), in
the table, NDJSON, JSON and CSV formats alike (CSV wrote ``2024-01-02 04:04:05+0100``
and ``...Z`` before); Parquet and Arrow keep the types themselves."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_scenarios import Lk

INSTANT = dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)
TYPES = {
    "paris": pa.timestamp("us", tz="Europe/Paris"),
    "utc": pa.timestamp("ms", tz="UTC"),
    "naive": pa.timestamp("us"),
    "day": pa.date32(),
    "clock": pa.time64("us"),
    "amount": pa.decimal128(10, 2),
}
#: each column's one value as every text format must write it
TEXT = {
    "paris": "2024-01-02T04:04:05.123456+01:00",
    "utc": "2024-01-02T03:04:05+00:00",
    "naive": "2024-01-02T03:04:05.123456",
    "day": "2024-01-02",
    "clock": "03:04:05.123456",
    "amount": "12.30",
}


def times_pool(lk: Lk) -> None:
    values = {
        "paris": INSTANT,
        "utc": INSTANT.replace(microsecond=0),
        "naive": INSTANT.replace(tzinfo=None),
        "day": INSTANT.date(),
        "clock": INSTANT.time(),
        "amount": decimal.Decimal("12.30"),
    }
    columns = {"k": pa.array([1])}
    columns |= {name: pa.array([values[name]], t) for name, t in TYPES.items()}
    data = lk.tmp / "times.parquet"
    pq.write_table(pa.table(columns), data)
    lk.ok("create", "times", "-k", "k")
    lk.ok("load", "-p", "times", str(data))


def test_every_text_format_writes_the_same_iso_text(lk: Lk) -> None:
    times_pool(lk)
    scan = ("scan", "-p", "times")
    rows = [
        lk.ok("-f", "ndjson", *scan).rows()[0],
        json.loads(lk.ok("-f", "json", *scan).text)[0],
        next(csv.DictReader(io.StringIO(lk.ok("-f", "csv", *scan).text))),
    ]
    for row in rows:
        assert {n: str(row[n]) for n in TEXT if n != "amount"} == {
            n: t for n, t in TEXT.items() if n != "amount"
        }, row
    for fmt in ("ndjson", "json", "csv"):  # the decimal's own digits, not 12.3
        assert "12.30" in lk.ok("-f", fmt, *scan).text
    table = lk.ok("-f", "table", *scan).text
    assert all(text in table for text in TEXT.values()), table


def test_binary_formats_keep_the_types(lk: Lk) -> None:
    times_pool(lk)
    scan = ("scan", "-p", "times")
    parquet = pq.read_table(io.BytesIO(lk.ok("-f", "parquet", *scan).out))
    arrow = ipc.open_stream(io.BytesIO(lk.ok("-f", "arrow", *scan).out)).read_all()
    for table in (parquet, arrow):
        assert {n: table.schema.field(n).type for n in TYPES} == TYPES
        assert table.column("paris")[0].as_py() == INSTANT


#: named zones with half-hour and 45-minute offsets, DST both ways, offsets in seconds
NAMED_ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"]
NAMED_ZONES += ["Europe/Dublin", "America/St_Johns", "Pacific/Apia"]


@settings(max_examples=150, deadline=None)
@given(
    unit=st.sampled_from(["s", "ms", "us", "ns"]),
    tz=st.sampled_from([None, "UTC", "Etc/UTC", "+05:30", "-03:00", *NAMED_ZONES]),
    seconds=st.lists(st.integers(-9_000_000_000, 9_000_000_000) | st.none(), max_size=40),
    fractions=st.lists(st.integers(0, 10**9 - 1), min_size=40, max_size=40),
)
def test_csv_timestamps_are_the_json_formats_text(
    unit: str, tz: str | None, seconds: list[int | None], fractions: list[int]
) -> None:
    """The CSV text of a timestamp column, made by Arrow, is what the JSON formats
    write from Python's datetime for each value (fraction trimmed as ``isoformat``
    trims it, the offset as ``+05:30``, a named zone's offset at that instant, as
    ``+00:09:21`` where it had seconds; years 1685-2255, so past 2037 too, where
    Python's rules are used)."""
    from limno.cli._output import _csv_ready, _csv_text

    scale = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    ticks = [
        None if s is None else s * scale + (f % scale if f % 3 else f % scale // 1000 * 1000)
        for s, f in zip(seconds, fractions, strict=False)
    ]
    col = pa.chunked_array([pa.array(ticks, pa.timestamp(unit, tz))])
    got = _csv_ready(pa.table({"t": col})).column(0).to_pylist()
    assert got == [_csv_text(v) for v in col.to_pylist()]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("tz", NAMED_ZONES)
def test_named_zones_at_instants_where_offsets_are_odd(unit: str, tz: str) -> None:
    """Summers past 2037 (Arrow's rules end there: Python's offset is taken), local
    mean time (offsets in seconds), DST changes: the JSON formats' text each time."""
    from limno.cli._output import _csv_ready, _csv_text

    days = [(1850, 1, 1), (1890, 6, 1), (1911, 3, 11), (1970, 1, 1), (2024, 3, 31)]
    days += [(2024, 10, 27), (2036, 12, 31), (2037, 1, 1), (2050, 7, 1), (2200, 8, 15)]
    scale = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[unit]
    ticks: list[int | None] = [None]
    for y, m, d in days:
        for hour in (0, 1, 2, 3, 13):
            at = dt.datetime(y, m, d, hour, 30, 5, tzinfo=dt.UTC)
            ticks.append(int(at.timestamp()) * scale + (7 * scale // 1000 if hour % 2 else 0))
    col = pa.chunked_array([pa.array(ticks, pa.timestamp(unit, tz))])
    got = _csv_ready(pa.table({"t": col})).column(0).to_pylist()
    assert got == [_csv_text(v) for v in col.to_pylist()]
