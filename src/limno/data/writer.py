"""Writing data objects: sorted Parquet files cut at the pool's target size.

:func:`write_sorted` turns an already sorted stream into objects; :func:`sort_and_write`
sorts arbitrary input first, in bounded memory (sorted runs spilled to local Parquet
files and merged back with :func:`~limno.data.kway.merge_sorted`). Each object is
encoded and published atomically by :mod:`.encoding`. Nothing written here is
referenced until a commit names it, but a failed write still deletes what it uploaded
so that vacuum has less to do.

Speed (measured by ``bench/``, the ``ingest_sorted`` benchmark): sorting and
gathering are in :mod:`.sort`, encoding in :mod:`.encoding`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from limno.data.encoding import ROW_GROUP_ROWS, ObjectWriter, Removed, Uploader
from limno.data.keys import PoolKey
from limno.data.kway import concat_unified, first_true, merge_sorted
from limno.data.objects import DataObject, data_path
from limno.data.sketches import sketch_path
from limno.data.sort import Gathered, prefetched, sort_order, take_sorted
from limno.errors import StorageError, decode_reason, os_errors
from limno.storage import Storage

__all__ = ["ROW_GROUP_ROWS", "Removed", "delete_objects", "sort_and_write", "write_sorted"]

#: a sorted run is written by several threads (one per core, at most MAX_WRITERS)
#: when each gets at least this many bytes (Arrow size) of it
PARALLEL_MIN_BYTES = 64 * 2**20
MAX_WRITERS = 4


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

    ``is_removed(object_id)`` tells whether vacuum removed an object that failed to
    publish (its write had lost its lease): the failure is then a ConflictError
    that says so.
    """
    if target_size <= 0:
        raise ValueError(f"target_size must be positive, not {target_size}")
    with Uploader(storage, row_group_rows, is_removed) as uploader:
        objects: list[DataObject] = []
        writer: ObjectWriter | None = None
        try:
            for piece, last in _cut_stream(tables, target_size, _Cuts(key, bounds)):
                if writer is None:
                    writer = uploader.open(pool_id, key, piece.schema)
                with os_errors("write", uploader.shown(writer)):  # a full disk, a read-only lake
                    writer.add(piece)
                    if last:
                        objects.append(uploader.close(writer))
                        writer = None
        finally:
            if writer is not None:
                writer.discard()
        uploader.finish()
        return objects


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
    also for ``is_removed``).

    Input is gathered into runs of about ``memory_limit`` bytes (Arrow size); a single
    run is sorted and written directly. Otherwise each sorted run is spilled to a
    temporary Parquet file (under ``spill_dir``, removed afterwards even on error)
    and the runs are merged back in small batches. Key type errors surface from
    :class:`PoolKey` before anything is written.
    """
    run: list[pa.Table] = []
    run_bytes = 0
    spills: list[_Spill] = []
    spill_root: str | None = None
    try:
        for batch in batches:
            table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
            if not table.num_rows:
                continue
            key.key_table(table.slice(0, 0))  # rejects unsortable key types early
            run.append(table)
            run_bytes += table.nbytes
            if run_bytes >= memory_limit:
                if spill_root is None:
                    with os_errors("write", spill_dir or tempfile.gettempdir()):
                        spill_root = tempfile.mkdtemp(prefix="limno-sort-", dir=spill_dir)
                spills.append(_spill(_sort_run(run, key), spill_root, len(spills), memory_limit))
                run, run_bytes = [], 0
        if not spills:
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
        if run:
            assert spill_root is not None
            spills.append(_spill(_sort_run(run, key), spill_root, len(spills), memory_limit))
        run = []
        merged = prefetched(merge_sorted([s.read() for s in spills], key), "limno-merge")
        return write_sorted(
            storage, pool_id, merged, key, target_size, bounds=bounds, is_removed=is_removed
        )
    finally:
        if spill_root is not None:
            shutil.rmtree(spill_root, ignore_errors=True)


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
    with ThreadPoolExecutor(max_workers=parts, thread_name_prefix="limno-write") as pool:
        futures = [
            pool.submit(
                write_sorted,
                storage,
                pool_id,
                Gathered(table, order, cuts[i], cuts[i + 1]),
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


def _sort_run(tables: list[pa.Table], key: PoolKey) -> pa.Table:
    table = concat_unified(tables)
    return take_sorted(table, sort_order(table, key))


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
