"""Reading a snapshot in key order: range scans (merge-on-read) and point lookups.

Objects of an LSM pool overlap. :func:`plan` prunes objects by their recorded key
range and groups the rest into *clusters* of mutually overlapping objects; clusters
do not overlap each other, so a scan streams them one after another and merges only
within a cluster. Objects outside the plan are never opened.

Inside an object only the row groups whose statistics (of the first key field) can
hold keys in range are read, a few at a time, so a bounded scan or a lookup reads the
footer and a row group or two. Rows are cut to ``lo <= key < hi`` (in the pool's sort
order) by a binary search over the sorted rows, never a per-row Python loop.

Keyless rows: range scans skip them; a full scan returns them after every keyed row
(in object order). A descending scan is the exact reverse of the ascending one, so
there keyless rows come *first*. It streams too: objects are read backwards, row
group by row group, and merged with :func:`merge_sorted` in reverse mode.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from limno.data import key_search, keyset
from limno.data.keys import PoolKey, SortKey
from limno.data.kway import concat_unified, first_true, merge_sorted, reverse_table
from limno.data.objects import DataObject, data_path
from limno.data.parquet import open_parquet
from limno.data.scan_plan import Plan, plan
from limno.data.sort import sort_order, take_sorted
from limno.errors import InvalidInputError
from limno.storage import Storage

__all__ = ["Plan", "lookup", "plan", "scan"]

Key = tuple[Any, ...]

#: most row groups read at once from one object (~256K rows at 32K rows a group)
MAX_GROUPS_PER_READ = 8
#: ... when several objects are merged, each holds this many at most
MAX_GROUPS_PER_MERGED_READ = 2
#: most threads decoding the objects of one merge ahead of it (see :func:`scan`)
MAX_READ_AHEAD_THREADS = 4
#: a lookup reading at most this many row groups of an object decodes them on its own
#: thread (more, as for many keys at once, go to Arrow's thread pool)
SMALL_READ_GROUPS = 2
#: a lookup of this many keys or more matches each object's rows against all of them at
#: once (one pass an object) rather than binary-searching each key (measured: about
#: even at 8 keys over 50 disjoint objects; past 4 when the objects overlap)
MANY_KEYS = 8


def scan(
    storage: Storage,
    pool_id: str,
    objects: Sequence[DataObject] | Plan,
    key: PoolKey,
    lo: Key | None = None,
    hi: Key | None = None,
    order: str = "asc",
    limit: int | None = None,
    columns: Sequence[str] | None = None,
    read_ahead: bool = False,
) -> Iterator[pa.Table]:
    """Stream the rows of ``objects`` with ``lo <= key < hi`` in key order.

    ``lo`` is inclusive and ``hi`` exclusive in the pool's sort order (so with a
    descending field ``lo`` is the larger value); either may be a key prefix. Without
    bounds keyless rows come after all keyed rows; with ``order="desc"`` the whole
    output is reversed (keyless rows first). Ties keep the order of ``objects``.
    ``limit`` stops reading once that many rows are out; ``columns`` projects (key
    columns are still read to order rows). Yielded tables are never empty, and their
    schemas may differ from one another: callers unify.

    With ``read_ahead`` (for a scan that reads everything, such as a compaction's),
    each merged object's next row groups are decoded in a thread while the merge works
    on its current ones (one thread per batch: several batches decode at once): one
    more batch per object in memory, decoding off the merge's thread.
    """
    if order not in ("asc", "desc"):
        raise InvalidInputError(f"order must be asc or desc, not {order!r}")
    if limit is not None and limit <= 0:
        return
    planned = objects if isinstance(objects, Plan) else Plan(objects, key)
    clusters = planned.clusters(lo, hi, reverse=order == "desc")
    bounds = _KeyRange(key, lo, hi)
    cols = None if columns is None else list(columns)
    keyless: list[_Reader] = []
    if lo is None and hi is None:
        keyless = [_Reader(storage, pool_id, o, key, cols) for o in planned.tails]
    # readers of objects with keyless rows are reused: their footer is read only once
    readers = {id(r.obj): r for r in keyless}

    def reader(o: DataObject) -> _Reader:
        return readers.get(id(o)) or _Reader(storage, pool_id, o, key, cols)

    def stream() -> Generator[pa.Table, None, None]:
        reverse = order == "desc"
        if reverse:
            for r in reversed(keyless):
                yield from r.keyless_rows(reverse=True)
        for cluster in clusters:
            members = [reader(o) for o in cluster if o.min_key is not None]
            if not members:
                continue
            cap = MAX_GROUPS_PER_READ if len(members) == 1 else MAX_GROUPS_PER_MERGED_READ
            if reverse:
                members.reverse()
            sources = [r.keyed_rows(bounds.clipped(r.obj.clip), reverse, cap) for r in members]
            if read_ahead and len(sources) > 1:
                for r in members:
                    r.alone = True
                yield from _merged_ahead(sources, key, reverse)
            else:
                yield from merge_sorted(sources, key, reverse=reverse)
        if not reverse:
            for r in keyless:
                yield from r.keyless_rows(reverse=False)

    tables = stream()
    try:
        remaining = limit
        for table in tables:
            if cols is not None:
                table = table.select([c for c in cols if c in table.column_names])
            if remaining is not None and table.num_rows >= remaining:
                yield table.slice(0, remaining)
                return
            if remaining is not None:
                remaining -= table.num_rows
            yield table
    finally:
        tables.close()


def _merged_ahead(
    sources: list[Iterator[pa.Table]], key: PoolKey, reverse: bool
) -> Iterator[pa.Table]:
    """:func:`merge_sorted` of ``sources``, each read one batch ahead in a thread pool."""
    # whoever consumes the merge (a compaction's encoder) keeps a core busy: decoding
    # gets the others (measured on 2 cores: a second decoding thread only adds switching)
    cores = os.cpu_count() or 1
    workers = max(1, min(len(sources), cores - 1, MAX_READ_AHEAD_THREADS))
    # ... but nothing can be merged before every source's first batch is in, and until
    # then the consumer has nothing to do: those decode on every core
    starters = max(1, min(len(sources), cores, MAX_READ_AHEAD_THREADS))
    with (
        ThreadPoolExecutor(workers, thread_name_prefix="limno-read-ahead") as pool,
        ThreadPoolExecutor(starters, thread_name_prefix="limno-read-first") as first,
    ):
        ahead = [_ahead(s, pool, first) for s in sources]
        try:
            yield from merge_sorted(ahead, key, reverse=reverse)
        finally:
            for a in ahead:
                a.close()


_END = object()


def _ahead(
    items: Iterator[pa.Table], pool: ThreadPoolExecutor, first: ThreadPoolExecutor | None = None
) -> Generator[pa.Table, None, None]:
    """``items``, the next one produced in ``pool`` (the first one in ``first``, if
    given) while the caller has this one.

    One item at a time is in flight, so ``items`` never runs in two threads at once;
    closing this closes ``items`` once its item in flight is done.
    """
    pending = (first or pool).submit(next, items, _END)
    try:
        while True:
            item = pending.result()
            if item is _END:
                return
            pending = pool.submit(next, items, _END)
            yield item
    finally:
        if not pending.cancel():
            futures.wait([pending])
        close = getattr(items, "close", None)
        if close is not None:
            close()


def lookup(
    storage: Storage,
    pool_id: str,
    objects: Sequence[DataObject] | Plan,
    key: PoolKey,
    keys: Sequence[Key],
) -> pa.Table:
    """Every row whose full key equals one of ``keys``, in key order, then object order.

    Only objects whose key range covers a wanted key are opened, and in them only the
    row groups whose statistics cover it are read. Nothing found gives an empty table
    with an empty schema. Given a :class:`Plan`, only the objects of the clusters
    holding a wanted key are looked at, not every object.

    From :data:`MANY_KEYS` keys on, the keys are sorted once in Arrow and each object's
    rows matched against them all at once (``keyset.py``): one pass an object, not a
    binary search a key. Keys or columns of types that cannot be matched that way are
    looked up one at a time, with the same result.
    """
    many = keyset.key_set(keys, key) if len(keys) >= MANY_KEYS else None
    wanted = many.sort_keys if many is not None else _distinct(keys, key)
    near = objects.covering(wanted) if isinstance(objects, Plan) else enumerate(objects)
    found: list[tuple[int, int, pa.Table]] = []
    for oi, o in near:
        first, last = o.first_key(key), o.last_key(key)
        if first is None or last is None:
            continue
        a = bisect.bisect_left(wanted, first)
        b = bisect.bisect_right(wanted, last)
        if o.clip is not None and o.clip[1] is not None:  # [lo, hi): hi itself is out
            b = min(b, bisect.bisect_left(wanted, key.sort_key(o.clip[1])))
        if a >= b:
            continue
        reader = _Reader(storage, pool_id, o, key, None, small=many is None)
        rows = None if many is None else reader.members(wanted[a:b], many.table.slice(a, b - a))
        if rows is not None:
            found.append((a, oi, rows))  # in key order: sorted below with the rest
            continue
        for j, part in reader.matches(wanted[a:b]):
            found.append((a + j, oi, part))
    found = [f for f in found if f[2].num_rows]
    if not found:
        return pa.table({})
    if many is None:
        found.sort(key=lambda f: (f[0], f[1]))
        return concat_unified([rows for _, _, rows in found])
    # each object's rows are in key order; a stable sort of them in object order puts
    # the rows of a key in object order, as the one-at-a-time path does
    found.sort(key=lambda f: f[1])
    merged = concat_unified([rows for _, _, rows in found])
    return take_sorted(merged, sort_order(merged, key, runs=True))


def _distinct(keys: Sequence[Key], key: PoolKey) -> list[SortKey]:
    """``keys`` as SortKeys, sorted, without repeats."""
    wanted: list[SortKey] = []
    for k in sorted(key.sort_key(tuple(k)) for k in keys):
        if not wanted or wanted[-1] != k:
            wanted.append(k)
    return wanted


class _KeyRange:
    """``[lo, hi)`` in sort order (either end may be a key prefix, or open)."""

    def __init__(self, key: PoolKey, lo: Key | None, hi: Key | None) -> None:
        self.key = key
        self.active = lo is not None or hi is not None
        self.lo = None if lo is None else key.sort_key(lo)
        self.hi = None if hi is None else key.sort_key(hi)

    def clipped(self, clip: tuple[Key | None, Key | None] | None) -> _KeyRange:
        """These bounds narrowed to an object's clip range (see DataObject.clip)."""
        if clip is None:
            return self
        out = _KeyRange(self.key, None, None)
        lo = None if clip[0] is None else self.key.sort_key(clip[0])
        hi = None if clip[1] is None else self.key.sort_key(clip[1])
        out.lo = lo if self.lo is None or (lo is not None and self.lo < lo) else self.lo
        out.hi = hi if self.hi is None or (hi is not None and hi < self.hi) else self.hi
        out.active = out.lo is not None or out.hi is not None
        return out

    def may_hold(self, rng: _GroupRange | None) -> bool:
        """Whether a row group with key range ``rng`` (None: unknown) can hold keys in bounds."""
        if rng is None:
            return True
        if rng.empty:
            return False
        try:
            if self.lo is not None and rng.below(self.lo):
                return False
            return self.hi is None or rng.first < self.hi
        except TypeError:  # statistics of a type the bound does not compare with
            return True

    def cut(self, table: pa.Table) -> tuple[pa.Table, bool, bool]:
        """Rows of a sorted, keyed ``table`` in bounds; whether rows fell below/above."""
        n = table.num_rows
        if not self.active or not n:
            return table, False, False
        keys = self.key.key_table(table)

        def at(i: int) -> SortKey:
            return self.key.sort_key(self.key.row_key(keys, i))

        lo, hi = self.lo, self.hi
        start = 0 if lo is None else first_true(0, n, lambda i: not at(i) < lo)
        end = n if hi is None else first_true(start, n, lambda i: not at(i) < hi)
        return table.slice(start, end - start), start > 0, end < n


class _Reader:
    """One data object opened lazily; its footer is kept for later reads."""

    def __init__(
        self,
        storage: Storage,
        pool_id: str,
        obj: DataObject,
        key: PoolKey,
        columns: list[str] | None,
        small: bool = False,
    ) -> None:
        self.storage = storage
        self.path = data_path(pool_id, obj.id)
        self.obj = obj
        self.key = key
        self.columns = columns
        #: a lookup's reader: few row groups, read without pre-buffering
        self.small = small
        #: decode on the calling thread (a read-ahead thread: one of several at work)
        self.alone = False
        self.metadata: pq.FileMetaData | None = None
        self._ranges: list[_GroupRange | None] | None = None

    @contextlib.contextmanager
    def _open(self) -> Iterator[pq.ParquetFile]:
        pf = open_parquet(
            self.storage, self.path, self.obj.size or None, self.metadata, small_reads=self.small
        )
        try:
            self.metadata = pf.metadata
            yield pf
        finally:
            pf.close()

    def _read(self, pf: pq.ParquetFile, groups: list[int]) -> pa.Table:
        cols = None
        if self.columns is not None:
            names = pf.schema_arrow.names
            wanted = [*self.columns, *(f.path[0] for f in self.key.fields)]
            cols = [c for c in dict.fromkeys(wanted) if c in names]
        # a lookup's row group or two decode faster here than handed to Arrow's threads
        alone = self.alone or (self.small and len(groups) <= SMALL_READ_GROUPS)
        return pf.read_row_groups(groups, columns=cols, use_threads=not alone)

    def _groups(self, pf: pq.ParquetFile, keyed: bool) -> tuple[list[int], list[int]]:
        """Row groups holding keyed (or keyless) rows, and every group's first row."""
        md = pf.metadata
        starts, pos = [], 0
        for g in range(md.num_row_groups):
            starts.append(pos)
            pos += md.row_group(g).num_rows
        boundary = pos - self.obj.keyless
        groups = [
            g
            for g in range(md.num_row_groups)
            if md.row_group(g).num_rows
            and (
                (starts[g] < boundary)
                if keyed
                else (starts[g] + md.row_group(g).num_rows > boundary)
            )
        ]
        return groups, [*starts, pos]

    def keyed_rows(self, bounds: _KeyRange, reverse: bool, cap: int) -> Iterator[pa.Table]:
        """The object's keyed rows in bounds, sorted (backwards when ``reverse``)."""
        with self._open() as pf:
            groups, starts = self._groups(pf, keyed=True)
            if bounds.active:
                ranges = self._group_ranges(pf)
                if ranges is not None:
                    groups = [g for g in groups if bounds.may_hold(ranges[g])]
            boundary = starts[-1] - self.obj.keyless
            for batch in _batches(groups, reverse, cap):
                table = self._read(pf, batch)
                tail = starts[batch[-1] + 1] - boundary
                if tail > 0:
                    table = table.slice(0, table.num_rows - tail)
                table, below, above = bounds.cut(table)
                if table.num_rows:
                    yield reverse_table(table) if reverse else table
                if below if reverse else above:
                    return

    def keyless_rows(self, reverse: bool) -> Iterator[pa.Table]:
        """The object's keyless rows (its last ``keyless`` rows), in order or reversed."""
        with self._open() as pf:
            groups, starts = self._groups(pf, keyed=False)
            boundary = starts[-1] - self.obj.keyless
            for batch in _batches(groups, reverse, MAX_GROUPS_PER_READ):
                table = self._read(pf, batch)
                head = boundary - starts[batch[0]]
                if head > 0:
                    table = table.slice(head)
                if table.num_rows:
                    yield reverse_table(table) if reverse else table

    def matches(self, wanted: list[SortKey]) -> Iterator[tuple[int, pa.Table]]:
        """For each wanted key (sorted) that this object holds: its index and rows."""
        key = self.key
        with self._open() as pf:
            groups, starts = self._groups(pf, keyed=True)
            ranges = self._group_ranges(pf)
            if ranges is not None:
                groups = [g for g in groups if _covers_any(ranges[g], wanted)]
            if not groups:
                return
            table = self._read(pf, groups)
        keys = key.key_table(table)
        n = table.num_rows - keys.column(0).null_count

        found = key_search.spans(keys, key, n, wanted)
        if found is not None:
            for j, rows in enumerate(found):
                if rows:
                    yield j, table.slice(rows.start, len(rows))
            return

        def at(i: int) -> SortKey:
            return key.sort_key(key.row_key(keys, i))

        start = 0
        for j, w in enumerate(wanted):
            start = first_true(start, n, partial(_not_before, at, w))
            end = first_true(start, n, partial(_after, at, w))
            if end > start:
                yield j, table.slice(start, end - start)
            start = end

    def members(self, wanted: list[SortKey], table: pa.Table) -> pa.Table | None:
        """The object's rows whose key is one of ``wanted`` (sorted; ``table`` holds the
        same keys: see ``keyset.py``), in key order; None when they cannot be matched
        at once (then :meth:`matches` finds them)."""
        with self._open() as pf:
            groups, _ = self._groups(pf, keyed=True)
            ranges = self._group_ranges(pf)
            if ranges is not None:
                groups = [g for g in groups if _covers_any(ranges[g], wanted)]
            if not groups:
                return pa.table({})
            rows = self._read(pf, groups)
        return keyset.matching(rows, self.key.key_table(rows), table)

    def _group_ranges(self, pf: pq.ParquetFile) -> list[_GroupRange | None] | None:
        """Per row group, its key range from Parquet statistics (None: no statistics)."""
        if self._ranges is None:
            ident = (self.storage.uri, self.path, self.obj.size, str(self.key))
            self._ranges = key_search.remembered_ranges(ident, lambda: _ranges(pf, self.key) or [])
        return self._ranges or None


def _not_before(at: Callable[[int], SortKey], w: SortKey, i: int) -> bool:
    return not at(i) < w


def _after(at: Callable[[int], SortKey], w: SortKey, i: int) -> bool:
    return w < at(i)


def _covers_any(rng: _GroupRange | None, wanted: list[SortKey]) -> bool:
    """Whether a row group with key range ``rng`` can hold one of the (sorted) keys."""
    if rng is None:
        return True
    if rng.empty:
        return False
    try:
        i = bisect.bisect_left(wanted, rng.first)
        return i < len(wanted) and not rng.below(wanted[i])
    except TypeError:
        return True


def _batches(groups: list[int], reverse: bool, cap: int) -> Iterator[list[int]]:
    """Groups in reads of 1, 2, 4 ... ``cap`` groups: a limited scan reads little."""
    seq = groups[::-1] if reverse else groups
    size, i = 1, 0
    while i < len(seq):
        yield sorted(seq[i : i + size])
        i += size
        size = min(size * 2, cap)


class _GroupRange:
    """The keys a row group can hold, from its Parquet statistics.

    Column statistics bound each field independently, which bounds the key only
    through its leading fields: while a field is constant in the group (min == max)
    the next one narrows the range further (``tenant = 'acme'`` then ``n`` in
    ``[5, 900]``). ``first`` is a lower bound (a key prefix sorts before every key
    it starts); ``upper`` is a prefix every key of the group is at most, in the
    sense "starts with ``upper`` or sorts before it" (empty: unbounded).
    """

    __slots__ = ("empty", "first", "key", "upper")

    def __init__(self, key: PoolKey, first: Key, upper: Key, empty: bool = False) -> None:
        self.key = key
        self.first = key.sort_key(first)
        self.upper = upper
        self.empty = empty

    def below(self, bound: SortKey) -> bool:
        """Whether every key of the group sorts strictly before ``bound``."""
        assert bound.key is not None
        m = min(len(self.upper), len(bound.key))
        return m > 0 and self.key.sort_key(self.upper[:m]) < self.key.sort_key(bound.key[:m])


def _ranges(pf: pq.ParquetFile, key: PoolKey) -> list[_GroupRange | None] | None:
    """Row-group key ranges from Parquet statistics, or None when none are usable."""
    md = pf.metadata
    paths = {md.schema.column(i).path: i for i in range(md.num_columns)}
    columns: list[tuple[int, bool]] = []  # (column index, floating) of leading fields
    for field in key.fields:
        typ = _field_type(pf.schema_arrow, field.path)
        col = paths.get(".".join(field.path))
        if typ is None or col is None or not _prunable(typ):
            break
        columns.append((col, pa.types.is_floating(typ)))
    if not columns:
        return None
    out: list[_GroupRange | None] = []
    for g in range(md.num_row_groups):
        try:
            out.append(_group_range(key, md.row_group(g), columns))
        except (ValueError, TypeError, OverflowError, pa.ArrowException):
            out.append(None)
    return out


def _group_range(
    key: PoolKey, rg: pq.RowGroupMetaData, columns: list[tuple[int, bool]]
) -> _GroupRange | None:
    prefix: list[Any] = []
    for (col, floating), field in zip(columns, key.fields, strict=False):
        stats = rg.column(col).statistics
        if stats is None or not stats.has_min_max:
            all_null = stats is not None and stats.has_null_count and not stats.has_min_max
            if not prefix and all_null and stats.null_count >= rg.num_rows:
                return _GroupRange(key, (), (), empty=True)  # first field null throughout
            break
        low, high = stats.min, stats.max
        if field.descending:
            low, high = high, low
        if floating:
            # NaN is left out of statistics and sorts last in either direction
            return _GroupRange(key, (*prefix, low), tuple(prefix))
        if low != high:
            return _GroupRange(key, (*prefix, low), (*prefix, high))
        prefix.append(low)
    return _GroupRange(key, tuple(prefix), tuple(prefix))


def _field_type(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType | None:
    if path[0] not in schema.names:
        return None
    typ = schema.field(path[0]).type
    for part in path[1:]:
        if not pa.types.is_struct(typ) or typ.get_field_index(part) < 0:
            return None
        typ = typ.field(part).type
    return typ


_PRUNABLE: tuple[Callable[[pa.DataType], bool], ...] = (
    pa.types.is_integer,
    pa.types.is_float32,
    pa.types.is_float64,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_boolean,
    pa.types.is_timestamp,
    pa.types.is_date,
    pa.types.is_time,
    pa.types.is_decimal,
)


def _prunable(typ: pa.DataType) -> bool:
    """Types whose Parquet statistics come back as Python values comparable to keys.

    (Durations, for one, come back as bare integers, and nanosecond times of day as
    times truncated to the microsecond.)
    """
    if pa.types.is_time64(typ) and typ.unit == "ns":
        return False
    return any(check(typ) for check in _PRUNABLE)
