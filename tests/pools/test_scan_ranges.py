"""Several key ranges in one scan (limno.pools.records.key_ranges), against reference models.

The property tests compare ``scan(ranges=...)`` of a real pool (overlapping objects,
duplicate keys, keyless records) with the plain model: the full sorted scan filtered
by the union of the ranges, reversed for ``desc``, cut at the limit. Range membership
in the model is Python tuple comparison of keys mapped to ascending order, which is
independent of limno's SortKey.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from limno import InvalidInputError, NotFoundError
from limno.api.local import LocalLake
from limno.api.local_pool import LocalPool
from limno.data.keys import PoolKey
from limno.data.objects import data_path
from limno.pools.records.key_ranges import normalize, parse_range

# -- the text form -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bounds"),
    [
        ("3:7", ("3", "7")),
        (":7", (None, "7")),
        ("3:", ("3", None)),
        (":", (None, None)),
        ("a,1:a,5", ("a,1", "a,5")),
        ('["a:b", 1]:["a:b", 5]', ('["a:b", 1]', '["a:b", 5]')),
        ('"2024-01-01T10:00":"2024-01-02T00:00"', ("2024-01-01T10:00", "2024-01-02T00:00")),
        ('"2024-01-01T10:00":', ("2024-01-01T10:00", None)),
        (':"10:00"', (None, "10:00")),
        ('2024-01-01:"2024-01-02T10:00"', ("2024-01-01", "2024-01-02T10:00")),
    ],
)
def test_range_text_forms(text: str, bounds: tuple[str | None, str | None]) -> None:
    assert parse_range(text) == bounds


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("5", "no ':'"),
        ("2024-01-01T10:00:2024-01-02", "more than one ':'"),
        ("1:2:3", "more than one ':'"),
        ('"a":"b"x', "more than one ':'"),
        ('["a", 1:', "invalid JSON"),
        ('"a"', "no ':'"),
    ],
)
def test_bad_range_text_is_refused_clearly(text: str, says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        parse_range(text)


# -- normalization alone ------------------------------------------------------------

INT_KEY = PoolKey.parse("k")
int_bound = st.none() | st.integers(-5, 25)
int_ranges = st.lists(st.tuples(int_bound, int_bound), max_size=6)


def _inside(v: float, lo: int | None, hi: int | None) -> bool:
    return (lo is None or lo <= v) and (hi is None or v < hi)


@settings(max_examples=300, deadline=None)
@given(ranges=int_ranges)
def test_normalized_ranges_are_sorted_disjoint_and_cover_the_union(
    ranges: list[tuple[int | None, int | None]],
) -> None:
    out = normalize(INT_KEY, [(_t(a), _t(b)) for a, b in ranges])
    flat = [(None if a is None else a[0], None if b is None else b[0]) for a, b in out]
    for lo, hi in flat:
        assert lo is None or hi is None or lo < hi  # no empty range is left
    for (_, hi), (lo, _) in zip(flat, flat[1:], strict=False):
        assert hi is not None and lo is not None and hi < lo  # a gap between neighbours
    for v in [x / 2 for x in range(-14, 54)]:  # halves: between and on the bounds
        want = any(_inside(v, a, b) for a, b in ranges)
        assert want == any(_inside(v, a, b) for a, b in flat), (v, ranges, flat)


def _t(v: int | None) -> tuple[int] | None:
    return None if v is None else (v,)


def test_normalize_merges_touching_and_drops_empty_ranges() -> None:
    assert normalize(INT_KEY, [((5,), (9,)), ((1,), (5,)), ((7,), (7,))]) == [((1,), (9,))]
    assert normalize(INT_KEY, [((3,), (1,))]) == []
    assert normalize(INT_KEY, [(None, (2,)), ((1,), None)]) == [(None, None)]


# -- scans of a real pool against the model ------------------------------------------


def _lake() -> LocalLake:
    return LocalLake.init(f"memory://{uuid.uuid4().hex}")


@pytest.fixture(scope="module")
def int_pool() -> LocalPool:
    """Key ``ts``: four overlapping loads with repeated keys, and keyless records."""
    pool = _lake().create_pool("p", key="ts", target_size=4096)
    n = 0
    for step in (3, 5, 7, 2):
        ts = [(i * step) % 41 for i in range(30)]
        pool.load([pa.table({"ts": ts, "n": list(range(n, n + len(ts)))})])
        n += len(ts)
    pool.load([pa.table({"other": [1, 2], "n": [n, n + 1]})])  # keyless
    return pool


@pytest.fixture(scope="module")
def pair_pool() -> LocalPool:
    """Key ``tenant,ts:desc``: three tenants in three overlapping loads."""
    pool = _lake().create_pool("q", key="tenant,ts:desc")
    n = 0
    for shift in (0, 1, 2):
        rows = [{"tenant": "abc"[(i + shift) % 3], "ts": (i * 7 + shift) % 10} for i in range(24)]
        for r in rows:
            r["n"] = n
            n += 1
        pool.load([pa.Table.from_pylist(rows)])
    return pool


def _covers_all(ranges: Sequence[tuple[Any, Any]]) -> bool:
    """Whether the union of ``ranges`` (bounds None or comparable) is the whole line."""
    lo_of = [(0,) if a is None else (1, a) for a, _ in ranges]
    hi_of = [(2,) if b is None else (1, b) for _, b in ranges]
    reach: tuple[Any, ...] = (0,)
    for lo, hi in sorted(zip(lo_of, hi_of, strict=True)):
        if reach < lo:
            return False
        reach = max(reach, hi)
    return reach == (2,)


def _model(
    full: list[dict[str, Any]],
    sortable: Any,
    ranges: Sequence[tuple[Any, Any]],
    order: str,
    limit: int | None,
) -> list[dict[str, Any]]:
    if _covers_all(ranges):
        rows = full
    else:
        rows = [
            r
            for r in full
            if (k := sortable(r)) is not None
            and any((a is None or a <= k) and (b is None or k < b) for a, b in ranges)
        ]
    if order == "desc":
        rows = rows[::-1]
    return rows if limit is None else rows[:limit]


orders = st.sampled_from(["asc", "desc"])
limits = st.none() | st.integers(0, 40)


@settings(max_examples=120, deadline=None)
@given(
    ranges=st.lists(st.tuples(st.none() | st.integers(-2, 43), st.none() | st.integers(-2, 43))),
    as_text=st.booleans(),
    order=orders,
    limit=limits,
)
def test_scan_of_several_ranges_is_the_full_scan_filtered(
    int_pool: LocalPool,
    ranges: list[tuple[int | None, int | None]],
    as_text: bool,
    order: str,
    limit: int | None,
) -> None:
    full = int_pool.scan().to_pylist()
    want = _model(full, lambda r: r["ts"], ranges, order, limit)
    texts = [(None if a is None else str(a), None if b is None else str(b)) for a, b in ranges]
    asked: list[tuple[Any, Any]] = [*(texts if as_text else ranges)]
    got = int_pool.scan(ranges=asked, order=order, limit=limit)
    assert got.to_pylist() == want
    chunks = list(int_pool.iter_scan(ranges=ranges, order=order, limit=limit))
    assert [r for t in chunks for r in t.to_pylist()] == want
    if got.num_rows:
        assert got.column_names == int_pool.scan().column_names


tenants = st.sampled_from(["a", "b", "c", "bb", ""])
pair_bound = st.none() | st.tuples(tenants) | st.tuples(tenants, st.integers(-1, 11))


def _ascending(bound: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    """A bound of key ``tenant,ts:desc`` as a tuple that Python orders as the pool does."""
    if bound is None:
        return None
    return (bound[0],) if len(bound) == 1 else (bound[0], -bound[1])


@settings(max_examples=120, deadline=None)
@given(ranges=st.lists(st.tuples(pair_bound, pair_bound), max_size=4), order=orders, limit=limits)
def test_prefix_bounds_of_a_descending_composite_key(
    pair_pool: LocalPool,
    ranges: list[tuple[Any, Any]],
    order: str,
    limit: int | None,
) -> None:
    full = pair_pool.scan().to_pylist()
    model_ranges = [(_ascending(a), _ascending(b)) for a, b in ranges]
    want = _model(full, lambda r: (r["tenant"], -r["ts"]), model_ranges, order, limit)
    got = pair_pool.scan(ranges=ranges, order=order, limit=limit)
    assert got.to_pylist() == want


# -- what the ranges read, and what they refuse ---------------------------------------


def test_objects_outside_every_range_are_never_opened(tmp_path: Path) -> None:
    lake = LocalLake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="ts")
    for lo in (0, 100, 200):
        pool.load([pa.table({"ts": list(range(lo, lo + 10))})])
    middle = next(o for o in pool.objects() if o.min_key and o.min_key[0] == 100)
    os.remove(tmp_path / "lake" / data_path(pool.id, middle.id))  # opening it would fail
    got = pool.scan(ranges=[(205, None), (None, 3), (2, 5)], order="desc")
    assert got.column("ts").to_pylist() == [209, 208, 207, 206, 205, 4, 3, 2, 1, 0]
    with pytest.raises(NotFoundError):
        pool.scan(ranges=[(0, 3), (105, 106)])


def test_ranges_of_a_pool_with_dedup_keep_the_last_write() -> None:
    pool = _lake().create_pool("d", key="k", iterators=["dedup"])
    pool.load([pa.table({"k": [1, 2, 3, 4, 5, 6], "v": ["old"] * 6})])
    pool.load([pa.table({"k": [2, 5], "v": ["new", "new"]})])
    got = pool.scan(ranges=[(4, 7), (1, 3), (2, 3)], limit=4)
    assert got.to_pylist() == [
        {"k": 1, "v": "old"},
        {"k": 2, "v": "new"},
        {"k": 4, "v": "old"},
        {"k": 5, "v": "new"},
    ]


def test_ranges_are_refused_with_bounds_and_in_other_shapes(int_pool: LocalPool) -> None:
    with pytest.raises(InvalidInputError, match="not both"):
        int_pool.scan(start=1, ranges=[(1, 2)])
    with pytest.raises(InvalidInputError, match="pair"):
        int_pool.scan(ranges=[(1, 2, 3)])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="not text"):
        int_pool.scan(ranges="1:2")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="not a valid"):
        int_pool.scan(ranges=[("x", None)])
    assert int_pool.scan(ranges=[]).num_rows == 0
    assert int_pool.scan(ranges=[(5, 5), (9, 2)]).num_rows == 0
