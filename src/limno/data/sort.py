"""Sorting a table by the pool key fast, and gathering it in sorted order.

A single primitive key field (integers and temporal types) is sorted with numpy: key
and row number packed into one ``uint64`` and sorted as plain integers when the key's
span allows, else a stable ``argsort``; distinct keys dense in their range (ids,
sequence numbers) are not sorted but placed, each row in its key's slot, in linear
time; input already in key order is not sorted at all. Other keys use Arrow's
``sort_indices`` (:meth:`PoolKey.sort_indices`). All are stable. A sorted table is
then gathered (``take``; text through views, :class:`RowGather`) chunk by chunk in a
background thread while the Parquet encoder writes the previous chunk, so the two overlap.
Measured by ``bench/`` (``ingest_sorted``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from limno.data.keys import PoolKey
from limno.data.numpy_view import from_values
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow.compute as pc
else:
    pc = lazy_module("pyarrow.compute")  # 40 ms to import, and a point lookup needs none

__all__ = [
    "CHUNK_ROWS",
    "Gathered",
    "RowGather",
    "in_key_order",
    "is_sorted",
    "numpy_values",
    "prefetched",
    "sort_order",
    "take_sorted",
]

T = TypeVar("T")

#: rows gathered at a time when a sorted table streams to the encoder
CHUNK_ROWS = 1 << 17
#: fewest rows per thread of a parallel sort
PARALLEL_SORT_MIN_ROWS = 1 << 19
ARANGE_ROWS = 1 << 18
#: distinct integer keys spanning fewer than this many values per row are ordered by
#: placing each row in its key's slot (:func:`_dense_order`), not by a sort
DENSE_SPAN = 2
#: rows compared first when checking whether keys are in order (see :func:`_in_order`)
IN_ORDER_PROBE_ROWS = 4096
#: a table of at least this many rows gathers its text columns through views
#: (:class:`RowGather`); a smaller one fits in the caches, where ``take`` is as fast
VIEW_GATHER_MIN_ROWS = 1 << 18
#: the fixed-size type a view is gathered as (16 bytes, moved as they are)
_CELL = pa.decimal128(38, 0)
#: the longest value a view holds in itself (a longer one points into a buffer)
_INLINE_BYTES = 12
#: text of 32-bit offsets holds less than this many bytes
_MAX_TEXT_BYTES = 2**31 - 1


def sort_order(
    table: pa.Table, key: PoolKey, keys: pa.Table | None = None, *, runs: bool = False
) -> np.ndarray | pa.Array | None:
    """Indices that sort ``table`` by ``key`` stably (keyless rows last, in order).

    None when the table is already in key order. Equal to :meth:`PoolKey.sort_indices`
    (``keys``, the table's :meth:`PoolKey.key_table` when the caller has it, saves
    extracting it again). ``runs`` says the table is a few sorted runs end to end
    (a merge's round): a run-aware sort (timsort) is then several times faster.
    """
    if table.num_rows <= 1:
        return None
    fast = _numpy_order(table, key, runs)
    if fast is not False:
        return fast
    if keys is None:
        keys = key.key_table(table)
    if in_key_order(keys, key):
        return None
    return pc.sort_indices(keys, sort_keys=key.sort_keys())


def in_key_order(keys: pa.Table, key: PoolKey) -> bool:
    """Whether a :meth:`PoolKey.key_table` is in key order already (keyless rows last).

    A few vectorized comparisons of each row with the one before, field by field
    (a later field decides only where the earlier ones tie): much cheaper than a sort.
    False also when a float field holds NaN (the sort decides where it goes).
    """
    n = keys.num_rows
    if n < 2:
        return True
    first = keys.column(0)
    keyed = n - first.null_count  # keyless rows have every field null (key_table)
    if keyed < n and first.slice(0, keyed).null_count:
        return False
    if keyed < 2:
        return True
    tied: pa.ChunkedArray | pa.Array | None = None  # rows whose earlier fields tie
    for column, field in zip(keys.columns, key.fields, strict=True):
        column = column.slice(0, keyed)
        if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
            return False
        this, before = column.slice(1), column.slice(0, keyed - 1)
        wrong = pc.greater(this, before) if field.descending else pc.less(this, before)
        if tied is not None:
            wrong = pc.and_(wrong, tied)
        if pc.any(wrong).as_py():
            return False
        same = pc.equal(this, before)
        tied = same if tied is None else pc.and_(tied, same)
        if not pc.any(tied).as_py():
            return True
    return True


def is_sorted(table: pa.Table, key: PoolKey, keys: pa.Table | None = None) -> bool:
    """Whether ``table`` is in key order already (:func:`sort_order` would return None),
    found without sorting it: a stream that is checked batch by batch (a load's input)
    must not pay for a sort it then throws away."""
    if table.num_rows <= 1:
        return True
    prepared = _numpy_key(table, key)
    if prepared is not None:
        values, valid_mask = prepared
        return _numpy_in_order(values, valid_mask, key.fields[0].descending)
    if keys is None:
        keys = key.key_table(table)
    return in_key_order(keys, key)


def _numpy_order(table: pa.Table, key: PoolKey, runs: bool) -> np.ndarray | None | bool:
    """:func:`sort_order` for one integer-like key field; False for any other key."""
    prepared = _numpy_key(table, key)
    if prepared is None:
        return False
    values, valid_mask = prepared
    descending = key.fields[0].descending
    if _numpy_in_order(values, valid_mask, descending):
        return None
    if valid_mask is not None:
        rows = np.flatnonzero(valid_mask)
        keyed = rows[_stable_argsort(values[rows], descending, runs)]
        return np.concatenate([keyed, np.flatnonzero(~valid_mask)])
    return _stable_argsort(values, descending, runs)


def _numpy_key(table: pa.Table, key: PoolKey) -> tuple[np.ndarray, np.ndarray | None] | None:
    """A single integer-like key field's values as int64 or uint64 (nulls as 0) and its
    validity mask (None without nulls); None for any other key."""
    if len(key.fields) != 1:
        return None
    column = key.key_columns(table)[0]
    typ = column.type
    if pa.types.is_integer(typ):
        pass
    elif pa.types.is_timestamp(typ) or pa.types.is_duration(typ) or pa.types.is_date64(typ):
        column = column.cast(pa.int64())
    elif pa.types.is_date32(typ) or pa.types.is_time32(typ):
        column = column.cast(pa.int32())
    elif pa.types.is_time64(typ):
        column = column.cast(pa.int64())
    else:
        return None
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    valid_mask = None
    if column.null_count:
        valid_mask = numpy_values(pc.cast(column.is_valid(), pa.uint8())).astype(np.bool_)
        column = column.fill_null(0)
    values = numpy_values(column)
    if values.dtype.kind == "i":
        return values.astype(np.int64, copy=False), valid_mask
    return values.astype(np.uint64, copy=False), valid_mask


def _numpy_in_order(values: np.ndarray, valid_mask: np.ndarray | None, descending: bool) -> bool:
    """Whether the values are in order, keyless rows (False in ``valid_mask``) last."""
    if valid_mask is None:
        return _in_order(values, descending)
    valid = int(valid_mask.sum())
    return bool(valid_mask[:valid].all()) and _in_order(values[:valid], descending)


def numpy_values(arr: pa.Array) -> np.ndarray:
    """The values of a primitive array without nulls (numbers, ``uint8`` for flags),
    as a numpy view of its buffer: pyarrow's ``to_numpy`` imports pandas where it is
    installed, which takes half a second."""
    dtype = np.dtype(arr.type.to_pandas_dtype())
    return np.frombuffer(
        arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize
    )


def _in_order(values: np.ndarray, descending: bool) -> bool:
    """Whether the values never decrease (never increase if ``descending``).

    The first rows are looked at first: shuffled input (the common case of a sort)
    is told apart there, without comparing all of its rows."""
    if len(values) > IN_ORDER_PROBE_ROWS and not _in_order(
        values[:IN_ORDER_PROBE_ROWS], descending
    ):
        return False
    if descending:
        return bool(np.all(values[1:] <= values[:-1]))
    return bool(np.all(values[1:] >= values[:-1]))


def _stable_argsort(values: np.ndarray, descending: bool, runs: bool = False) -> np.ndarray:
    """Stable argsort of int64 or uint64 values (ties keep their order either way).

    Each value becomes its distance from the first value in sort order (an unsigned
    integer); when that span and the row numbers fit in 64 bits together, distance
    and row number are packed into one integer and sorted plainly (much faster than
    ``argsort``, and stable because the row number breaks ties).
    """
    n = len(values)
    if n == 0:
        return np.empty(0, np.int64)
    lo, hi = values.min(), values.max()
    # modular arithmetic: the distance is right as an unsigned integer even where the
    # signed subtraction wraps around
    if int(hi) - int(lo) < DENSE_SPAN * n:
        dense = _dense_order(values, lo, hi, descending)
        if dense is not None:
            return dense
    distance = (hi - values) if descending else (values - lo)
    distance = distance.view(np.uint64)
    row_bits = max(1, (n - 1).bit_length())
    if (int(hi) - int(lo)).bit_length() + row_bits > 64:
        return np.argsort(distance, kind="stable")
    distance <<= np.uint64(row_bits)
    for start in range(0, n, ARANGE_ROWS):  # in pieces: no second array of n rows
        stop = min(n, start + ARANGE_ROWS)
        distance[start:stop] |= np.arange(start, stop, dtype=np.uint64)
    if runs:
        distance.sort(kind="stable")
    else:
        _parallel_sort(distance)
    distance &= np.uint64((1 << row_bits) - 1)
    return distance.view(np.int64)


def _dense_order(values: np.ndarray, lo: Any, hi: Any, descending: bool) -> np.ndarray | None:
    """The order of distinct keys that fill much of their span, in linear time; None
    when some key repeats (the caller sorts then).

    Each row's number is written to the slot of its key's distance from the first key
    (keys such as ids and sequence numbers, dense in their range, need a slot array
    no larger than the packed sort's own); the filled slots read in order are the sorted
    rows. Two rows of one key would share a slot, so fewer filled slots than rows
    means a repeated key. Distinct keys have no ties, so the order is stable.

    The first rows are placed first (a key repeated among them gives up early); the
    rest are placed by one thread per core (numpy writes without the GIL; threads
    that meet a repeated key write one slot twice, which the count of filled slots
    finds). This is the one step of a load that no other step overlaps: everything
    waits for the order.
    """
    n = len(values)
    index: type[np.signedinteger[Any]] = np.int32 if n < 2**31 else np.int64
    slots: np.ndarray[Any, np.dtype[np.signedinteger[Any]]] = np.full(
        int(hi) - int(lo) + 1, -1, dtype=index
    )

    def place(start: int, stop: int) -> bool:
        """Place rows ``[start, stop)``; False if a key repeats among the first ones."""
        for piece in range(start, stop, ARANGE_ROWS):  # in pieces: no second array of n
            end = min(stop, piece + ARANGE_ROWS)
            part = values[piece:end]
            # the distance from the first key in sort order: below the span, so it fits
            positions = ((hi - part) if descending else (part - lo)).astype(np.int64)
            rows = np.arange(piece, end, dtype=index)
            slots[positions] = rows
            if not piece and not np.array_equal(slots[positions], rows):
                return False  # a key repeats in the first rows: give up early
        return True

    first = min(n, ARANGE_ROWS)
    if not place(0, first):
        return None
    threads = min(os.cpu_count() or 1, 8, (n - first) // PARALLEL_SORT_MIN_ROWS)
    if threads < 2:
        place(first, n)
    else:
        cuts = [first + (n - first) * i // threads for i in range(threads + 1)]
        with ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="limno-sort") as pool:
            futures = [pool.submit(place, cuts[i], cuts[i + 1]) for i in range(1, threads)]
            place(cuts[0], cuts[1])
            for f in futures:
                f.result()
    if len(slots) == n:  # a permutation of the span, unless a key repeats (a slot empty)
        return slots if int(slots.min()) >= 0 else None
    order = slots[slots >= 0]
    if len(order) != n:
        return None
    return order


def _parallel_sort(values: np.ndarray) -> None:
    """Sort in place: parts in threads (numpy sorts without the GIL), then one merge.

    The merge is numpy's stable sort (timsort), which finds the sorted parts as runs
    and merges them in one or two linear passes.
    """
    n = len(values)
    parts = min(os.cpu_count() or 1, 8, n // PARALLEL_SORT_MIN_ROWS)
    if parts < 2:
        values.sort()
        return
    bounds = [n * i // parts for i in range(parts + 1)]
    with ThreadPoolExecutor(max_workers=parts - 1, thread_name_prefix="limno-sort") as pool:
        futures = [pool.submit(values[bounds[i] : bounds[i + 1]].sort) for i in range(1, parts)]
        values[: bounds[1]].sort()
        for f in futures:
            f.result()
    values.sort(kind="stable")


def take_sorted(table: pa.Table, order: np.ndarray | pa.Array | None) -> pa.Table:
    if order is None:
        return table
    return table.take(order if isinstance(order, pa.Array) else from_values(order))


class RowGather:
    """Gathers rows of a table in any order, text and binary columns through views.

    Arrow's ``take`` of a text column in random order misses the cache twice per row
    (its offsets, then its bytes): in a 5M-row table it costs ten times a take in
    order. Here a large text column is cast once to views (16 bytes a value, pointing
    into its bytes, which stay where they are), the views are gathered as fixed-size
    cells, and each gathered chunk is cast back: a miss for the cell and one for the
    bytes, and values of up to 12 bytes live in their cell (the ``ingest_sorted``
    benchmark's text column: about 30% less CPU for its take). The result equals ``take``.
    """

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        #: column index -> (views as 16-byte cells, the views' data buffers, view type)
        self.views: dict[int, tuple[pa.Array, list[pa.Buffer], pa.DataType]] = {}
        if table.num_rows < VIEW_GATHER_MIN_ROWS:
            return
        for j, column in enumerate(table.columns):
            t = column.type
            if not column.num_chunks or not (pa.types.is_string(t) or pa.types.is_binary(t)):
                continue
            if column.nbytes >= _MAX_TEXT_BYTES:  # all of it cast back at once would overflow
                continue
            view_type = pa.string_view() if pa.types.is_string(t) else pa.binary_view()
            self.views[j] = (*_view_cells(column, view_type), view_type)

    def take(self, indices: np.ndarray | pa.Array) -> pa.Table:
        """The rows at ``indices`` (as ``table.take(indices)``)."""
        if not self.views:
            return self.table.take(indices)
        columns = []
        for j, column in enumerate(self.table.columns):
            found = self.views.get(j)
            if found is None:
                columns.append(column.take(indices))
                continue
            cells, data, view_type = found
            taken = cells.take(indices)
            validity, gathered = taken.buffers()
            views = pa.Array.from_buffers(
                view_type, len(taken), [validity, gathered, *data], taken.null_count, taken.offset
            )
            columns.append(views.cast(column.type))
        return pa.Table.from_arrays(columns, schema=self.table.schema)


def _view_cells(
    column: pa.ChunkedArray, view_type: pa.DataType
) -> tuple[pa.Array, list[pa.Buffer]]:
    """A text column's values as views in 16-byte cells, and the buffers they point into.

    Each chunk is cast to views on its own bytes (no copy of them); the views of a later
    chunk are renumbered to its buffers' place in the list (Arrow's ``concat_arrays``
    of views is a hundred times slower than this: it copies every chunk's bytes).
    """
    parts: list[np.ndarray] = []
    data: list[pa.Buffer] = []
    for chunk in column.chunks:
        view = chunk.cast(view_type)
        _, cells, *buffers = view.buffers()
        # a view is (length, prefix, buffer index, offset) as int32; up to 12 bytes inline
        words = np.frombuffer(cells, np.int32).reshape(-1, 4)[view.offset : view.offset + len(view)]
        if data:
            words = words.copy()
            words[words[:, 0] > _INLINE_BYTES, 2] += len(data)
        parts.append(words)
        data += buffers
    words = parts[0] if len(parts) == 1 else np.concatenate(parts)
    validity = None
    if column.null_count:
        valid = pa.concat_arrays([chunk.is_valid() for chunk in column.chunks])
        validity = valid.buffers()[1]
    cells = pa.Array.from_buffers(
        _CELL, len(words), [validity, pa.py_buffer(words)], column.null_count
    )
    return cells, data


class Gathered:
    """The rows of a run in sorted order, gathered chunk by chunk in a background thread.

    Iterating yields the chunks; the next ones are gathered while the caller encodes
    (``take`` and the Parquet encoder both run without the GIL).
    """

    def __init__(
        self,
        table: pa.Table | RowGather,
        order: np.ndarray | pa.Array | None,
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        # (a RowGather: shared by the Gathered of several slices of one run)
        self.rows = table if isinstance(table, RowGather) else None
        self.table = table.table if isinstance(table, RowGather) else table
        self.order = order
        self.start = start
        self.stop = self.table.num_rows if stop is None else stop

    def __iter__(self) -> Iterator[pa.Table]:
        """Sorted positions ``[start, stop)``, chunk by chunk."""
        lo, hi = self.start, self.stop
        order = self.order
        if order is None:
            for i in range(lo, hi, CHUNK_ROWS):
                yield self.table.slice(i, min(CHUNK_ROWS, hi - i))
            return
        rows = self.rows or RowGather(self.table)
        if hi - lo <= CHUNK_ROWS:
            yield rows.take(order[lo:hi])
            return
        chunks = (rows.take(order[i : min(i + CHUNK_ROWS, hi)]) for i in range(lo, hi, CHUNK_ROWS))
        yield from prefetched(chunks, "limno-gather")


_DONE = object()


def prefetched(
    items: Iterable[T],
    name: str = "limno-prefetch",
    depth: int = 2,
    max_bytes: int | None = None,
) -> Generator[T, None, None]:
    """``items``, produced by a background thread up to ``depth`` items ahead.

    For pipelines whose stages release the GIL (Parquet decoding, sorting, ``take``,
    Parquet encoding): the producer's next items are made while the caller works on
    the current one. An error in the producer is raised to the caller; when the
    caller stops early the producer stops after its current item, and a generator
    source is closed in its own thread.

    With ``max_bytes``, items waiting for the caller also total at most that many
    bytes (their ``nbytes``; one item alone may be larger): a deep queue that absorbs
    the uneven pace of two stages without holding more than that.
    """
    out: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    room = threading.Condition()
    waiting = 0  # bytes of the items in ``out``

    def size(item: Any) -> int:
        return int(getattr(item, "nbytes", 0)) if max_bytes is not None else 0

    def produce() -> None:
        nonlocal waiting
        it = iter(items)
        try:
            while not stop.is_set():
                try:
                    item = next(it)
                except StopIteration:
                    out.put(_DONE)
                    return
                n = size(item)
                if max_bytes is not None:
                    with room:
                        while waiting and waiting + n > max_bytes and not stop.is_set():
                            room.wait()
                        waiting += n
                out.put(item)
        except BaseException as e:  # handed to the consumer
            out.put(_Failure(e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = out.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            if max_bytes is not None:
                with room:
                    waiting -= size(item)
                    room.notify()
            yield item
    finally:
        stop.set()
        with room:
            room.notify()  # a producer waiting for room sees the stop
        while thread.is_alive():  # unblock a producer waiting for room
            with contextlib.suppress(queue.Empty):
                while True:
                    out.get_nowait()
            thread.join(0.01)


class _Failure:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error
