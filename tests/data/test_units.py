"""One notation for sizes and durations (limno.units), everywhere a user writes one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from clirunner import fail, ok
from limno import Lake
from limno.data.iterators import age_off_seconds
from limno.errors import InvalidInputError
from limno.units import format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1000", 1000),
        ("64k", 64_000),
        ("256MB", 256_000_000),
        ("256MiB", 256 * 2**20),
        ("1GB", 10**9),
        ("1gib", 2**30),
        ("1.5GB", 1_500_000_000),
        ("2T", 2 * 10**12),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "x", "1 XB", "-1MB", "1e9", "MB"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(InvalidInputError, match="invalid size"):
        parse_size(text)


def test_format_size_round_trips() -> None:
    for n in (256 * 2**20, 10**9, 1234, 2**40):
        assert parse_size(format_size(n)) == n


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("90", 90),
        ("90s", 90),
        ("15m", 900),
        ("1d12h", 129600),
        ("1.5h", 5400),
        ("2w", 1209600),
        ("500ms", 0.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "x", "1y", "inf", "nan", "-1s", "1d12", "1 d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InvalidInputError, match="invalid duration"):
        parse_duration(text)


def test_the_same_duration_works_for_vacuum_and_age_off(tmp_path: Path) -> None:
    # the issue: 'vacuum --grace 1d12h' failed where 'age-off(ts,1d12h)' worked
    lake = str(tmp_path / "lake")
    ok("--lake", lake, "init")
    ok("--lake", lake, "create", "p", "-k", "ts", "--iterator", "age-off(ts,1d12h)")
    ok("--lake", lake, "create", "q", "-k", "ts", "--target-size", "64MiB")
    assert age_off_seconds("1d12h") == 129600
    ok("--lake", lake, "vacuum", "-p", "p", "--grace", "1d12h", "--retention", "1.5h")
    err = fail("--lake", lake, "vacuum", "-p", "p", "--grace", "soon").err
    assert "invalid duration 'soon'" in err
    err = fail("--lake", lake, "create", "r", "-k", "ts", "--target-size", "big").err
    assert "invalid size 'big'" in err
    rows = ok("--lake", lake, "query", 'SELECT name FROM ":pools" ORDER BY name').rows()
    assert [r["name"] for r in rows] == ["p", "q"]
    assert Lake.open(lake).pool("q").config.target_size == 64 * 2**20
