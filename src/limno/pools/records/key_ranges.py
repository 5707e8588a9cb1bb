"""Several key ranges in one scan (Sleeper's range queries): written, normalized, read.

A scan may ask for any number of ranges ``[from, to)`` at once (``--range A:B``
repeated, ``scan(ranges=[(a, b), (c, d)])``). They are normalized first: bounds
read in the key's types, empty ranges dropped, the rest sorted and overlapping or
touching ones merged, so the ranges left are disjoint and in key order. Reading
them one after another in that order (in the reverse one for a descending scan) is
then a single sorted pass in which no row comes twice, and each range prunes the
objects it reads by their key ranges as a ``--from/--to`` scan does: an object that
overlaps no range is never opened.

A range open on both sides (``:``), alone or once merged, is the full scan,
keyless records included, exactly as a scan without ``--from/--to``; any other
ranges leave keyless records out, as a key-range scan does.

On the command line a range is ``FROM:TO``; each side is empty (open), bare text
without ``:`` (read like ``--from``: split at commas for a key of several fields),
a JSON array (``["acme", 5]``: one value per key field) or a JSON string (for a
value that holds a ``:``, such as a time: ``"2024-01-01T10:00":"2024-01-02"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.data.keys import PoolKey, SortKey
from limno.errors import InvalidInputError
from limno.pools.records.key_bounds import key_bound

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data.objects import DataObject
    from limno.pools.records.pool import RecordPool

__all__ = ["Bounds", "chained", "checked_ranges", "normalize", "parse_range", "scan"]

Key = tuple[Any, ...]
#: one range as key tuples: ``(from, to)``, None for an open side
Bounds = tuple[Key | None, Key | None]

_EXAMPLE = 'write it as FROM:TO, e.g. 3:7, :7, 3: or \'"2024-01-01T10:00":"2024-01-02"\''


def parse_range(text: str) -> tuple[str | None, str | None]:
    """``FROM:TO`` as the two bounds' texts (None for an open side), each to be read in
    the key's types like ``--from``; see the module docstring for the forms."""
    lo, rest = _side(text, 0)
    if not rest.startswith(":"):
        extra = "more than one" if ":" in rest else "no"
        raise InvalidInputError(f"range {text!r}: {extra} ':' between FROM and TO; {_EXAMPLE}")
    start = len(text) - len(rest) + 1
    hi, tail = _side(text, start)
    if tail:
        raise InvalidInputError(
            f"range {text!r}: more than one ':'; quote a value holding ':' as JSON ({_EXAMPLE})"
        )
    return lo, hi


def _side(text: str, at: int) -> tuple[str | None, str]:
    """One side of a range starting at ``text[at]``: its bound text, and what follows it."""
    rest = text[at:]
    if rest.startswith(("[", '"')):
        try:
            value, end = json.JSONDecoder().raw_decode(text, at)
        except ValueError as e:
            raise InvalidInputError(f"range {text!r}: invalid JSON at position {at}") from e
        # an array stays text: the key's own bound parsing reads it (types and all)
        bound = value if isinstance(value, str) else text[at:end]
        return bound, text[end:]
    cut = rest.find(":")
    bare = rest if cut < 0 else rest[:cut]
    return (bare or None), rest[len(bare) :]


def checked_ranges(ranges: Iterable[Any]) -> list[tuple[Any, Any]]:
    """``ranges`` as ``(from, to)`` pairs; InvalidInputError for anything else."""
    if isinstance(ranges, str | bytes):
        raise InvalidInputError("ranges must be a list of (from, to) pairs, not text")
    out = []
    for r in ranges:
        if not isinstance(r, tuple | list) or len(r) != 2:
            raise InvalidInputError(f"each range is a (from, to) pair, not {r!r:.80}")
        out.append((r[0], r[1]))
    return out


@dataclass(frozen=True)
class _Span:
    lo: Key | None
    hi: Key | None
    lo_sort: SortKey | None
    hi_sort: SortKey | None


def normalize(key: PoolKey, ranges: Iterable[Bounds]) -> list[Bounds]:
    """The union of ``ranges`` as disjoint, non-touching ranges in the key's order.

    Bounds compare as the pool sorts keys (a key prefix before every key it starts),
    so a key is in the result exactly when it is in one of ``ranges``. Empty ranges
    (``from >= to``) are dropped.
    """
    spans = []
    for lo, hi in ranges:
        lo_sort = None if lo is None else key.sort_key(lo)
        hi_sort = None if hi is None else key.sort_key(hi)
        if lo_sort is not None and hi_sort is not None and not lo_sort < hi_sort:
            continue
        spans.append(_Span(lo, hi, lo_sort, hi_sort))
    # an open start first; ties in any order (merging takes the furthest end)
    spans.sort(key=lambda s: (s.lo_sort is not None, s.lo_sort))
    merged: list[_Span] = []
    for s in spans:
        last = merged[-1] if merged else None
        if last is None or (
            last.hi_sort is not None and s.lo_sort is not None and last.hi_sort < s.lo_sort
        ):
            merged.append(s)  # a gap before it
        elif last.hi_sort is not None and (s.hi_sort is None or last.hi_sort < s.hi_sort):
            merged[-1] = _Span(last.lo, s.hi, last.lo_sort, s.hi_sort)
    return [(s.lo, s.hi) for s in merged]


def chained(
    ranges: Sequence[Bounds],
    order: str,
    limit: int | None,
    scan: Callable[[Key | None, Key | None, int | None], Iterator[pa.Table]],
) -> Iterator[pa.Table]:
    """``scan(from, to, limit)`` of each normalized range in the scan's order, at most
    ``limit`` rows in all (``scan`` keeps to the limit it is given)."""
    left = limit
    for lo, hi in reversed(ranges) if order == "desc" else ranges:
        if left is not None and left <= 0:
            return
        for table in scan(lo, hi, left):
            if left is not None:
                left -= table.num_rows
            yield table


def scan(
    pool: RecordPool,
    objs: Sequence[DataObject],
    ranges: Iterable[Any],
    start: Any,
    end: Any,
    order: str,
    limit: int | None,
) -> Iterator[pa.Table]:
    """The union of ``ranges`` over ``objs`` of ``pool`` in one sorted pass (bounds read
    in the key's types over ``objs``); ``start``/``end`` must be unset."""
    if start is not None or end is not None:
        raise InvalidInputError("a scan takes ranges or start/end bounds, not both")
    types = pool.key_types(objs)
    parsed = [
        (key_bound(pool.key, a, types), key_bound(pool.key, b, types))
        for a, b in checked_ranges(ranges)
    ]

    def one(lo: Key | None, hi: Key | None, left: int | None) -> Iterator[pa.Table]:
        return pool.scan_objects(objs, lo, hi, order, left)

    yield from chained(normalize(pool.key, parsed), order, limit, one)
