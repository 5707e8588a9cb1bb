"""Streaming k-way merge of tables that are each sorted by the pool key.

Merge-on-read (overlapping objects of a scan) and external sorting (spilled runs of
a large load) both need to interleave several sorted streams without holding any of
them whole. A per-row heap would cost a Python step per record; instead the merge
works chunk-wise with a *watermark*:

* hold the current chunk of every live source;
* the watermark is the smallest last key of those chunks: no source can produce a
  row below it later, because every source's next chunk starts at or after its
  current last key;
* from every chunk take the prefix up to the watermark (a binary search over a few
  rows), concatenate the prefixes, sort them with Arrow (stable), emit, refill.

Each round exhausts at least one chunk, so the loop makes progress; memory is one
chunk per source plus one round of output. A round of a single integer-like key
field that rises in the output holds about :data:`ROUND_ROWS` rows at most: its
watermark is lowered to a key that every source's chunk passes (then each source's
rows up to it, ties included, are all in hand). Unbounded, the first round would
hold every source's first chunk up to the watermark (a compaction of ten objects: an
eighth of all rows), and whoever consumes the merge (an encoder) would wait for all
of it. Ties keep source order: at the watermark only sources up to the first one
whose chunk *ends* at the watermark give their tied rows (that source may hold more
of them in its next chunk, and later sources must wait for those). Keyless rows sit
at the end of every sorted source and all come out after every keyed row, source by
source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from limno.data.keys import PoolKey, SortKey
from limno.data.schema import conform, unify
from limno.data.sort import numpy_values, sort_order, take_sorted
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy_module("pyarrow.compute")  # 40 ms to import, and a point lookup needs none

__all__ = ["concat_unified", "descending_indices", "first_true", "merge_sorted", "reverse_table"]

#: most rows of a round (an integer key's; see the module docstring)
ROUND_ROWS = 1 << 17

#: ``[size-1, ..., 1, 0]``, grown on demand
_descending: pa.Array | None = None


def descending_indices(n: int) -> pa.Array:
    """``[n-1, ..., 1, 0]`` as an int64 array, sliced from a cached array (no Python loop)."""
    global _descending
    cached = _descending
    if cached is None or len(cached) < n:
        size = max(n, 2 * (0 if cached is None else len(cached)), 1024)
        values = np.arange(size - 1, -1, -1, dtype=np.int64)
        # wrapped, not converted: pa.array() of anything has pyarrow import pandas (half
        # a second) when it is installed, to check whether the input is a pandas object
        cached = pa.Array.from_buffers(pa.int64(), size, [None, pa.py_buffer(values)])
        _descending = cached
    return cached.slice(len(cached) - n)


def reverse_table(table: pa.Table) -> pa.Table:
    """``table`` with its rows in reverse order."""
    if table.num_rows <= 1:
        return table
    return table.take(descending_indices(table.num_rows))


def concat_unified(tables: Sequence[pa.Table]) -> pa.Table:
    """Concatenate tables whose schemas may differ (widened by the unification rule)."""
    if len(tables) == 1:
        return tables[0]
    first = tables[0].schema
    if all(t.schema.equals(first) for t in tables[1:]):
        return pa.concat_tables(tables)
    schema = unify(t.schema for t in tables)
    return pa.concat_tables([conform(t, schema) for t in tables])


class _Source:
    """One input stream and the unconsumed keyed rows ``[pos, end)`` of its chunk.

    ``values``: for a key of one integer-like field, the chunk's key values as numpy
    integers (their order is the key's), so that a round finds its cuts with
    ``searchsorted`` instead of comparing Python keys; ``value_type`` is their Arrow type.
    """

    __slots__ = ("it", "table", "keys", "pos", "end", "index", "values", "value_type")

    def __init__(self, it: Iterator[pa.Table], index: int) -> None:
        self.it = it
        self.index = index
        self.table: pa.Table | None = None
        self.keys: pa.Table | None = None
        self.pos = 0
        self.end = 0
        self.values: np.ndarray | None = None
        self.value_type: pa.DataType | None = None

    def next_chunk(self) -> pa.Table | None:
        for table in self.it:
            if table.num_rows:
                return table
        return None


def merge_sorted(
    sources: Sequence[Iterable[pa.Table]], key: PoolKey, *, reverse: bool = False
) -> Iterator[pa.Table]:
    """Merge streams each sorted by ``key`` into one stream in global key order.

    Stable: rows with equal keys come out in source order. Keyless rows (which every
    sorted source holds at its end) come out last, source by source.

    With ``reverse`` every source runs backwards (reverse key order, keyless rows
    first) and so does the output; ties still keep source order. Feeding reversed
    sources in reverse source order gives exactly the reverse of the forward merge,
    which is how descending scans stream without materializing anything.

    Yielded tables may have different schemas; each is unified within itself.
    """
    if len(sources) == 1:
        for table in sources[0]:
            if table.num_rows:
                yield table
        return
    if not sources:
        return
    srcs = [_Source(iter(s), i) for i, s in enumerate(sources)]
    if reverse:
        yield from _keyless_prefixes(srcs, key)
        yield from _keyed_rounds(srcs, key, reverse=True)
    else:
        yield from _keyed_rounds(srcs, key, reverse=False)
        yield from _keyless_tails(srcs)


def _load(src: _Source, table: pa.Table, key: PoolKey, reverse: bool, start: int = 0) -> None:
    src.table = table
    src.keys = key.key_table(table)
    src.pos = start
    # keyless rows have every key column null (see PoolKey.key_table)
    keyless = src.keys.column(0).null_count
    src.end = table.num_rows if reverse else table.num_rows - keyless
    src.values, src.value_type = None, None
    if len(key.fields) == 1:
        column = src.keys.column(0)
        as_int = _integer_view(column.type)
        if as_int is not None and column.num_chunks == 1:
            chunk = column.chunk(0)
            # the values of null slots are never looked at: they lie outside [pos, end)
            src.values = numpy_values(chunk if as_int == column.type else chunk.view(as_int))
            src.value_type = column.type


def _integer_view(t: pa.DataType) -> pa.DataType | None:
    """The integer type whose order is that of values of type ``t`` (None: no such)."""
    if pa.types.is_integer(t):
        return t
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if (
        pa.types.is_timestamp(t)
        or pa.types.is_date64(t)
        or pa.types.is_time64(t)
        or pa.types.is_duration(t)
    ):
        return pa.int64()
    return None


def _keyless_prefixes(srcs: list[_Source], key: PoolKey) -> Iterator[pa.Table]:
    """Reverse mode: emit every source's leading keyless rows, park its first keyed chunk."""
    for src in srcs:
        while (table := src.next_chunk()) is not None:
            keyless = key.key_table(table).column(0).null_count
            if keyless:
                yield table.slice(0, keyless)
            if keyless < table.num_rows:
                _load(src, table, key, reverse=True, start=keyless)
                break


def _keyless_tails(srcs: list[_Source]) -> Iterator[pa.Table]:
    """Forward mode: after all keyed rows, every source's remaining (keyless) rows."""
    for src in srcs:
        if src.table is not None and src.pos < src.table.num_rows:
            yield src.table.slice(src.pos)
        src.table = src.keys = None
        while (table := src.next_chunk()) is not None:
            yield table


def _keyed_rounds(srcs: list[_Source], key: PoolKey, reverse: bool) -> Iterator[pa.Table]:
    def sort_key(src: _Source, i: int) -> SortKey:
        assert src.keys is not None
        return key.sort_key(key.row_key(src.keys, i))

    # ``before(a, b)``: ``a`` comes strictly before ``b`` in the output order
    before: Callable[[SortKey, SortKey], bool] = (
        (lambda a, b: b < a) if reverse else (lambda a, b: a < b)
    )

    def refill(src: _Source) -> bool:
        """Make ``src`` hold keyed rows; False when its keyed rows are exhausted."""
        while src.table is None or src.pos >= src.end:
            if src.table is not None and src.end < src.table.num_rows:
                return False  # reached the keyless tail: parked for _keyless_tails
            table = src.next_chunk()
            if table is None:
                src.table = src.keys = None
                return False
            _load(src, table, key, reverse)
        return True

    def cuts(live: list[_Source]) -> list[int]:
        """Where each source's rows of this round end (any key)."""
        lasts = [sort_key(s, s.end - 1) for s in live]
        mark = lasts[0]
        for last in lasts[1:]:
            if before(last, mark):
                mark = last
        # the first source whose chunk ends at the watermark takes its tied rows; later
        # ones keep theirs (it may have more in its next chunk)
        first_at_mark = next(
            i for i, last in enumerate(lasts) if not before(mark, last) and not before(last, mark)
        )
        out = []
        for i, src in enumerate(live):
            if i == first_at_mark:
                out.append(src.end)
            else:
                after = _after(src, mark, sort_key, before, i < first_at_mark)
                out.append(first_true(src.pos, src.end, after))
        return out

    # in output order, values of one integer-like key field rise, or fall
    rising = key.fields[0].descending == reverse
    live = [s for s in srcs if refill(s)]
    while live:
        if len(live) == 1:
            yield from _drain(live[0], key, reverse, refill)
            return
        ends = _integer_cuts(live, rising)
        if ends is None:
            ends = cuts(live)
        pieces: list[pa.Table] = []
        key_pieces: list[pa.Table] = []
        for src, cut in zip(live, ends, strict=True):
            if cut > src.pos:
                assert src.table is not None and src.keys is not None
                pieces.append(src.table.slice(src.pos, cut - src.pos))
                key_pieces.append(src.keys.slice(src.pos, cut - src.pos))
                src.pos = cut
        yield _sorted(pieces, key_pieces, key, reverse)
        live = [s for s in live if refill(s)]


def _integer_cuts(live: list[_Source], rising: bool) -> list[int] | None:
    """The round's cuts (as in :func:`_keyed_rounds`) with ``searchsorted``, for a key
    of one integer-like field of one type in every source; None otherwise."""
    first = live[0].value_type
    if first is None or any(s.value_type != first for s in live[1:]):
        return None
    columns = [s.values for s in live if s.values is not None]
    if len(columns) < len(live):
        return None
    lasts = [int(values[s.end - 1]) for values, s in zip(columns, live, strict=True)]
    mark = min(lasts) if rising else max(lasts)
    if rising:
        per = max(1, ROUND_ROWS // len(live))
        pairs = zip(columns, live, strict=True)
        capped = min(int(values[min(s.pos + per, s.end - 1)]) for values, s in pairs)
        if capped < mark:
            # every chunk goes on past ``capped``: each source's rows up to it (ties too,
            # in source order) are all here, and the source of the least has some
            return [
                s.pos + int(np.searchsorted(values[s.pos : s.end], capped, "right"))
                for values, s in zip(columns, live, strict=True)
            ]
    first_at_mark = lasts.index(mark)
    out = []
    for i, (values, src) in enumerate(zip(columns, live, strict=True)):
        if i == first_at_mark:
            out.append(src.end)
            continue
        # sources before the first one at the watermark give their rows equal to it too
        with_ties = i < first_at_mark
        window = values[src.pos : src.end]
        if rising:
            taken = int(np.searchsorted(window, mark, "right" if with_ties else "left"))
        else:  # falling: count from the end of the rising reversed window
            rest = np.searchsorted(window[::-1], mark, "left" if with_ties else "right")
            taken = len(window) - int(rest)
        out.append(src.pos + taken)
    return out


def _after(
    src: _Source,
    mark: SortKey,
    sort_key: Callable[[_Source, int], SortKey],
    before: Callable[[SortKey, SortKey], bool],
    inclusive: bool,
) -> Callable[[int], bool]:
    """Predicate: row ``j`` of ``src`` lies past the watermark (or at it, if exclusive)."""
    if inclusive:
        return lambda j: before(mark, sort_key(src, j))
    return lambda j: not before(sort_key(src, j), mark)


def _drain(
    src: _Source, key: PoolKey, reverse: bool, refill: Callable[[_Source], bool]
) -> Iterator[pa.Table]:
    """The last live source: its keyed rows pass through unchanged."""
    while True:
        assert src.table is not None
        yield src.table.slice(src.pos, src.end - src.pos)
        src.pos = src.end
        if not refill(src):
            return


def first_true(lo: int, hi: int, after: Callable[[int], bool]) -> int:
    """The first index in ``[lo, hi)`` where the monotone ``after`` holds (``hi`` if none)."""
    if hi > lo and not after(hi - 1):
        return hi
    while lo < hi:
        mid = (lo + hi) // 2
        if after(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _sorted(
    pieces: list[pa.Table], key_pieces: list[pa.Table], key: PoolKey, reverse: bool
) -> pa.Table:
    """Stable sort of one round's prefixes (in output order, ties in source order)."""
    if len(pieces) == 1:
        return pieces[0]
    data = concat_unified(pieces)
    first = key_pieces[0].schema
    if all(k.schema.equals(first) for k in key_pieces[1:]):
        keys = pa.concat_tables(key_pieces)
    else:
        keys = key.key_table(data)
    n = keys.num_rows
    if not reverse:
        return take_sorted(data, sort_order(data, key, keys, runs=True))
    # A stable sort of the reversed rows, read backwards, is the stable reverse sort.
    desc = descending_indices(n)
    order = pc.sort_indices(keys.take(desc), sort_keys=key.sort_keys())
    return data.take(pc.subtract(pa.scalar(n - 1, pa.int64()), order.take(desc)))
