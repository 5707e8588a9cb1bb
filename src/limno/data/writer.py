"""Writing data objects: sorted Parquet files cut at the pool's target size.

:func:`write_sorted` turns an already sorted stream into objects; :func:`sort_and_write`
streams input that comes in key order straight to it, and sorts any other input
first, in bounded memory (sorted runs spilled to local Parquet files and merged back
with :func:`~limno.data.kway.merge_sorted`). Each object is
encoded and published atomically by :mod:`.encoding`. Nothing written here is
referenced until a commit names it, but a failed write still deletes what it uploaded
so that vacuum has less to do.

Speed (measured by ``bench/``, the ``ingest_sorted`` benchmark): sorting and
gathering are in :mod:`.sort`, encoding in :mod:`.encoding`, decoding Parquet input
in :mod:`.parquet_input`. A load's time is decoding its input and encoding its
objects, both in pyarrow without the GIL, so both run on every core at once: row
groups decode in threads, and consecutive objects encode in threads of their own.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from limno.data.encoding import (
    ROW_GROUP_ROWS,
    Backlog,
    ObjectFeed,
    ObjectWriter,
    Removed,
    StreamFailed,
    Uploader,
)
from limno.data.keys import PoolKey, SortKey
from limno.data.kway import concat_unified, first_true, merge_sorted
from limno.data.objects import DataObject, data_path
from limno.data.parquet import open_parquet
from limno.data.plain_types import plain_batch
from limno.data.sketches import sketch_path
from limno.data.sort import Gathered, RowGather, is_sorted, prefetched, sort_order, take_sorted
from limno.errors import StorageError, decode_reason, os_errors
from limno.storage import Storage

__all__ = ["ROW_GROUP_ROWS", "Removed", "delete_objects", "sort_and_write", "write_sorted"]

#: a single input table up to this size is sorted and written on the caller's thread
#: (a big one goes to the parallel path: decode, sort and encode on every core)
SMALL_INPUT_BYTES = 16 * 2**20
#: a sorted run is written by several threads (one per core, at most MAX_WRITERS)
#: when each gets at least this many bytes (Arrow size) of it
PARALLEL_MIN_BYTES = 64 * 2**20
MAX_WRITERS = 4
#: bytes (Arrow size) of a sorted stream that may wait for its encoders
BACKLOG_BYTES = 256 * 2**20


# -- sorted stream -> objects ------------------------------------------------------


def write_sorted(
    storage: Storage,
    pool_id: str,
    tables: Iterable[pa.Table],
    key: PoolKey,
    target_size: int,
    *,
    row_group_rows: int = ROW_GROUP_ROWS,
    bounds: Sequence[tuple[Any, ...]] = (),
    is_removed: Removed | None = None,
    writers: int = 1,
    backlog: int = BACKLOG_BYTES,
) -> list[DataObject]:
    """Write a stream already sorted by ``key`` as objects of at most ``target_size``.

    Size is Arrow's in-memory size (``nbytes``) of the object's rows; an object holds
    at least one row even when that row alone is larger. ``bounds`` (keys in the
    pool's order: the lower bounds of the leaf partitions but the first) also end
    an object, so that each object lies in one leaf partition. Every object gets
    its key sketch sidecar. Returns the objects in key order. On failure every
    object this call uploaded is deleted (best effort).

    Each object is encoded as its pieces arrive (while the stream is still being
    merged or gathered); an object whose pieces differ in schema is unified first.
    With ``writers`` > 1, each object is encoded in a thread of its own
    (:class:`ObjectFeed`), up to ``writers`` at once, while the stream goes on: up to
    ``backlog`` bytes (Arrow size) of rows wait for the encoders, so that an encoder
    that falls behind does not hold up the next object's.

    ``is_removed(object_id)`` tells whether vacuum removed an object that failed to
    publish (its write had lost its lease): the failure is then a ConflictError
    that says so.
    """
    if target_size <= 0:
        raise ValueError(f"target_size must be positive, not {target_size}")
    pieces = _cut_stream(tables, target_size, _Cuts(key, bounds))
    with Uploader(storage, row_group_rows, is_removed) as uploader:
        if writers > 1:
            objects = _write_concurrently(uploader, pool_id, key, pieces, writers, backlog)
        else:
            objects = []
            writer: ObjectWriter | None = None
            try:
                for piece, last in pieces:
                    if writer is None:
                        writer = uploader.open(pool_id, key, piece.schema)
                    # a full disk, a read-only lake
                    with os_errors("write", uploader.shown(writer)):
                        writer.add(piece)
                        if last:
                            objects.append(uploader.close(writer))
                            writer = None
            finally:
                if writer is not None:
                    writer.discard()
        uploader.finish()
        return objects


def _write_concurrently(
    uploader: Uploader,
    pool_id: str,
    key: PoolKey,
    pieces: Iterable[tuple[pa.Table, bool]],
    writers: int,
    backlog: int,
) -> list[DataObject]:
    """:func:`write_sorted`'s objects, each encoded by an :class:`ObjectFeed`."""
    waiting = Backlog(backlog)
    feeds: list[ObjectFeed] = []
    current: ObjectFeed | None = None
    with ThreadPoolExecutor(max_workers=writers, thread_name_prefix="limno-encode") as pool:
        try:
            for piece, last in pieces:
                if current is None:
                    writer = uploader.open(pool_id, key, piece.schema)
                    current = ObjectFeed(uploader, writer, pool, waiting)
                    feeds.append(current)
                current.put(piece)
                if last:
                    current.end()
                    current = None
            return [f.future.result() for f in feeds]
        except BaseException as e:
            for f in feeds:
                f.abort()
            errors = [f.future.exception() for f in feeds]
            if isinstance(e, StreamFailed):  # the first encoder's own error says why
                first = (x for x in errors if x and not isinstance(x, StreamFailed))
                raise next(first, e) from None
            raise


class _Cuts:
    """Keys at which the sorted stream must start a new object (leaf partition bounds)."""

    def __init__(self, key: PoolKey, bounds: Sequence[tuple[Any, ...]]) -> None:
        self.key = key
        self.bounds = sorted(key.sort_key(b) for b in bounds)
        self.next = 0

    def rows_before(self, table: pa.Table) -> int:
        """How many leading rows of ``table`` sort before the next bound."""
        n = table.num_rows
        if self.next >= len(self.bounds) or not n:
            return n
        bound = self.bounds[self.next]
        keys = self.key.key_table(table)

        def at_or_past(i: int) -> bool:
            return not self.key.sort_key(self.key.row_key(keys, i)) < bound

        return first_true(0, n, at_or_past)

    def advance(self) -> None:
        self.next += 1


def _cut_stream(
    tables: Iterable[pa.Table], target_size: int, bounds: _Cuts | None = None
) -> Iterator[tuple[pa.Table, bool]]:
    """The stream as slices, each with whether it ends its object.

    An object's slices total at most ``target_size`` bytes (``nbytes``), except that
    an object holds at least one row, and an object ends before each of ``bounds``.
    A slice comes out once the next one is known, so that its flag is right.
    """
    held: pa.Table | None = None  # the open object's last slice; None: no object open
    size = 0
    for table in tables:
        start = 0
        while start < table.num_rows:
            stop = table.num_rows
            if bounds is not None:
                stop = start + bounds.rows_before(table.slice(start))
                if stop == start:  # the next row is past the bound: the object ends
                    if held is not None:
                        yield held, True
                        held, size = None, 0
                    bounds.advance()
                    continue
            rest = table.slice(start, stop - start)
            room = target_size - size
            rest_size = rest.nbytes
            if rest_size <= room:
                if held is not None:
                    yield held, False
                held = rest
                size += rest_size
                start = stop
                continue
            n = _rows_fitting(rest, room, rest_size)
            if n == 0 and held is not None:
                yield held, True
                held, size = None, 0
                continue
            if held is not None:
                yield held, False
            n = max(n, 1)
            yield rest.slice(0, n), True
            held, size = None, 0
            start += n
    if held is not None:
        yield held, True


def _rows_fitting(table: pa.Table, room: int, total: int) -> int:
    """The most leading rows of ``table`` whose ``nbytes`` is at most ``room``.

    A binary search over slice sizes (slicing is O(1) and ``nbytes`` of a slice only
    looks at its buffers' ends), seeded with the average row size.
    """
    if room <= 0:
        return 0
    rows = table.num_rows
    guess = min(rows - 1, max(1, room * rows // max(total, 1)))
    lo, hi = 0, rows - 1  # the answer lies in [lo, hi]; all rows do not fit
    if table.slice(0, guess).nbytes <= room:
        lo = guess
    else:
        hi = guess - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if table.slice(0, mid).nbytes <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


# -- arbitrary input -> sorted objects -----------------------------------------------


def sort_and_write(
    storage: Storage,
    pool_id: str,
    batches: Iterable[pa.RecordBatch | pa.Table],
    key: PoolKey,
    target_size: int,
    memory_limit: int = 512 * 2**20,
    spill_dir: str | None = None,
    bounds: Sequence[tuple[Any, ...]] = (),
    is_removed: Removed | None = None,
) -> list[DataObject]:
    """Sort arbitrary (heterogeneous) input by ``key`` and write it as objects.

    Objects are cut at the target size and at ``bounds`` (see :func:`write_sorted`,
    also for ``is_removed``). Key type errors surface from :class:`PoolKey` before
    anything is written.

    Input is read ahead in a background thread. While it comes in key order (each
    batch in order, starting at or after where the previous one ended), it streams
    straight to the encoders, one object per thread
    (:func:`write_sorted` with ``writers``): a sorted input of any size is written in
    one pass, in little memory. From the first batch that breaks the order on, input
    is gathered into runs of about ``memory_limit`` bytes (Arrow size); a single run
    is sorted and written directly. Otherwise each sorted run is spilled to a
    temporary Parquet file (under ``spill_dir``, removed afterwards even on error)
    and the runs are merged back in small batches. The objects of the ordered part
    are one more run: they are read back into the merge, and deleted once it is
    written. Either way the objects hold the input in key order (ties in input order).
    """
    batches = iter(batches)
    head = list(itertools.islice(batches, 2))
    if len(head) < 2:
        # all the input is one small table: there is nothing to read ahead, and it makes
        # one object, so threads would only add hand-offs (a small load, such as a
        # 1,000-row append, would spend more on them than on its work)
        single = [plain_batch(_as_table(b, key)) for b in head]
        if not single or single[0].nbytes <= min(SMALL_INPUT_BYTES, target_size, memory_limit):
            ordered = [take_sorted(t, sort_order(t, key)) for t in single if t.num_rows]
            return write_sorted(
                storage, pool_id, ordered, key, target_size, bounds=bounds, is_removed=is_removed
            )
    tables = prefetched(
        (_as_table(b, key) for b in itertools.chain(head, batches)), "limno-read", depth=4
    )
    try:
        prefix = _OrderedPrefix(tables, key)
        written = write_sorted(
            storage,
            pool_id,
            prefix,
            key,
            target_size,
            bounds=bounds,
            is_removed=is_removed,
            writers=_writers(),
            backlog=memory_limit,
        )
        if prefix.rest is None:
            return written
        try:
            first = _read_back(storage, pool_id, written, memory_limit) if written else None
            out = _sort_and_write_runs(
                storage,
                pool_id,
                prefix.rest,
                key,
                target_size,
                memory_limit,
                spill_dir,
                bounds,
                is_removed,
                first,
            )
        finally:
            delete_objects(storage, pool_id, written)  # merged into ``out``, or failed
        return out
    finally:
        tables.close()  # stops the reader if the write failed


def _as_table(batch: pa.RecordBatch | pa.Table, key: PoolKey) -> pa.Table:
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    key.key_table(table.slice(0, 0))  # rejects unsortable key types early
    return table


class _OrderedPrefix:
    """The tables of a stream while they come in key order; :attr:`rest` (None until
    then) holds the stream from the first table that breaks the order (that is out of
    order itself, or starts before the previous one ended)."""

    def __init__(self, tables: Iterator[pa.Table], key: PoolKey) -> None:
        self.tables = tables
        self.key = key
        self.last: SortKey | None = None  # the key the previous table ended with
        self.rest: Iterator[pa.Table] | None = None

    def __iter__(self) -> Iterator[pa.Table]:
        key = self.key
        for table in self.tables:
            if not table.num_rows:
                continue
            keys = key.key_table(table)
            first = key.sort_key(key.row_key(keys, 0))
            behind = self.last is not None and first < self.last
            if behind or not is_sorted(table, key, keys):
                # sorted, spilled and merged as stored (no dictionaries from the input)
                rest = itertools.chain([table], self.tables)
                self.rest = (plain_batch(t) for t in rest)
                return
            self.last = key.sort_key(key.row_key(keys, table.num_rows - 1))
            yield table


def _sort_and_write_runs(
    storage: Storage,
    pool_id: str,
    tables: Iterable[pa.Table],
    key: PoolKey,
    target_size: int,
    memory_limit: int,
    spill_dir: str | None,
    bounds: Sequence[tuple[Any, ...]],
    is_removed: Removed | None,
    first: Iterator[pa.Table] | None = None,
) -> list[DataObject]:
    """:func:`sort_and_write` of input in no particular order: sorted runs, spilled
    and merged when there are several. ``first`` is a sorted run of rows that came
    before these: where keys tie, its rows come first."""
    run: list[pa.Table] = []
    run_bytes = 0
    spills: list[_Spill] = []
    spill_root: str | None = None
    try:
        for table in tables:
            if not table.num_rows:
                continue
            run.append(table)
            run_bytes += table.nbytes
            if run_bytes >= memory_limit:
                if spill_root is None:
                    with os_errors("write", spill_dir or tempfile.gettempdir()):
                        spill_root = tempfile.mkdtemp(prefix="limno-sort-", dir=spill_dir)
                spills.append(
                    _spill(_sort_run(run, key, views=False), spill_root, len(spills), memory_limit)
                )
                run, run_bytes = [], 0
        if not spills and first is None:
            if not run:
                return []
            table = concat_unified(run)
            run = []
            order = sort_order(table, key)
            parts = _parallel_parts(table.nbytes)
            if parts > 1:
                return _write_parts(
                    storage, pool_id, table, order, key, target_size, bounds, parts, is_removed
                )
            gathered = Gathered(table, order)
            return write_sorted(
                storage, pool_id, gathered, key, target_size, bounds=bounds, is_removed=is_removed
            )
        runs: list[Iterable[pa.Table]] = [] if first is None else [first]
        runs += [s.read() for s in spills]
        if run and not spills:
            runs.append([_sort_run(run, key)])  # fits in memory: no need to spill it
        elif run:
            assert spill_root is not None
            spills.append(
                _spill(_sort_run(run, key, views=False), spill_root, len(spills), memory_limit)
            )
            runs.append(spills[-1].read())
        run = []
        merged = prefetched(merge_sorted(runs, key), "limno-merge")
        return write_sorted(
            storage, pool_id, merged, key, target_size, bounds=bounds, is_removed=is_removed
        )
    finally:
        if spill_root is not None:
            shutil.rmtree(spill_root, ignore_errors=True)


def _writers() -> int:
    """How many objects a stream is encoded into at once: one per core, at most
    :data:`MAX_WRITERS`."""
    return max(1, min(os.cpu_count() or 1, MAX_WRITERS))


def _parallel_parts(nbytes: int) -> int:
    """How many threads write a sorted run of ``nbytes`` (one per core, each with at
    least :data:`PARALLEL_MIN_BYTES`): pyarrow encodes one file on one thread."""
    return max(1, min(os.cpu_count() or 1, MAX_WRITERS, nbytes // PARALLEL_MIN_BYTES))


def _write_parts(
    storage: Storage,
    pool_id: str,
    table: pa.Table,
    order: np.ndarray | pa.Array | None,
    key: PoolKey,
    target_size: int,
    bounds: Sequence[tuple[Any, ...]],
    parts: int,
    is_removed: Removed | None,
) -> list[DataObject]:
    """Write a sorted run as ``parts`` consecutive slices at once, each its own objects.

    Each slice goes through :func:`write_sorted` (cut at the target size and the
    bounds) in its own thread, so a large load is encoded on every core. If any
    slice fails, the objects of the others are deleted too.
    """
    n = table.num_rows
    cuts = [n * i // parts for i in range(parts + 1)]
    rows = RowGather(table)
    with ThreadPoolExecutor(max_workers=parts, thread_name_prefix="limno-write") as pool:
        futures = [
            pool.submit(
                write_sorted,
                storage,
                pool_id,
                Gathered(rows, order, cuts[i], cuts[i + 1]),
                key,
                target_size,
                bounds=bounds,
                is_removed=is_removed,
            )
            for i in range(parts)
        ]
        done: list[list[DataObject]] = []
        error: BaseException | None = None
        for f in futures:
            try:
                done.append(f.result())
            except BaseException as e:
                error = error or e
    if error is not None:
        delete_objects(storage, pool_id, [o for objs in done for o in objs])
        raise error
    return [o for objs in done for o in objs]


def delete_objects(storage: Storage, pool_id: str, objs: Iterable[DataObject]) -> None:
    """Delete written (uncommitted) objects and their sketches, best effort: whatever
    is left is unreferenced, and vacuum reclaims it."""
    for o in objs:
        for path in (sketch_path(pool_id, o.id), data_path(pool_id, o.id)):
            with contextlib.suppress(Exception):
                storage.delete(path)


def _read_back(
    storage: Storage, pool_id: str, objs: Sequence[DataObject], memory_limit: int
) -> Iterator[pa.Table]:
    """The rows of objects just written (in key order), in batches of about 1/64 of the
    memory limit, as a run to merge."""
    for o in objs:
        pf = open_parquet(storage, data_path(pool_id, o.id))
        row_bytes = max(1, o.size // max(o.rows, 1)) * 4  # Arrow rows are larger than encoded
        rows = max(16, min(65536, memory_limit // 64 // row_bytes))
        for batch in pf.iter_batches(batch_size=rows):
            yield pa.Table.from_batches([batch])


def _sort_run(tables: list[pa.Table], key: PoolKey, views: bool = True) -> pa.Table:
    """``tables`` as one sorted table; a run about to spill (``views`` False) is
    gathered by plain ``take``: the spill bounds memory, and views add 16 bytes a row
    of each text column (:class:`RowGather`)."""
    table = concat_unified(tables)
    order = sort_order(table, key)
    if order is None:
        return table
    return RowGather(table).take(order) if views else table.take(order)


class _Spill:
    """A sorted run in a local Parquet file, read back in row-group batches."""

    def __init__(self, path: str, batch_rows: int) -> None:
        self.path = path
        self.batch_rows = batch_rows

    def read(self) -> Iterator[pa.Table]:
        try:
            with os_errors("read", self.path), pq.ParquetFile(self.path) as pf:
                for batch in pf.iter_batches(batch_size=self.batch_rows):
                    yield pa.Table.from_batches([batch])
        except (pa.ArrowException, OSError) as e:  # our own file, written moments ago
            raise StorageError(f"cannot read {self.path}: {decode_reason(e)}") from e


def _spill(table: pa.Table, root: str, n: int, memory_limit: int) -> _Spill:
    """Write a sorted run; row groups sized so that all runs' batches fit in memory.

    With one row group per run a merge would hold each run whole; a row group of
    about 1/64 of the memory limit keeps a merge of many runs within bounds.
    """
    row_bytes = max(1, table.nbytes // max(table.num_rows, 1))
    rows = max(16, min(65536, memory_limit // 64 // row_bytes))
    path = os.path.join(root, f"run-{n:06d}.parquet")
    with os_errors("write", path):
        pq.write_table(table, path, row_group_size=rows, compression="lz4")
    return _Spill(path, rows)
