"""Writing data objects: sorted Parquet files cut at the pool's target size.

:func:`write_sorted` turns an already sorted stream into objects; :func:`sort_and_write`
sorts arbitrary input first, in bounded memory (sorted runs spilled to local Parquet
files and merged back with :func:`~limno.pools.records._merge.merge_sorted`).

Objects are written to a local temporary file and uploaded with one atomic
``put_file``, so a reader never sees a partial object. Uploads run in a background
thread while the next object is encoded. Objects carry small row groups with
statistics and a page index: a point lookup then reads the footer and one row group.
Nothing written here is referenced until a commit names it, but a failed write still
deletes what it uploaded so that vacuum has less to do.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from limno.ksuid import ksuid
from limno.pools.records._merge import concat_unified, merge_sorted
from limno.pools.records.keys import PoolKey
from limno.pools.records.objects import DataObject, data_path, schema_to_b64
from limno.storage import Storage

__all__ = ["ROW_GROUP_ROWS", "sort_and_write", "write_sorted"]

#: rows per Parquet row group of a data object: small enough that a point lookup
#: decodes little, large enough that scans stay fast
ROW_GROUP_ROWS = 32768
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 1


# -- sorted stream -> objects ------------------------------------------------------


def write_sorted(
    storage: Storage,
    pool_id: str,
    tables: Iterable[pa.Table],
    key: PoolKey,
    target_size: int,
    *,
    row_group_rows: int = ROW_GROUP_ROWS,
) -> list[DataObject]:
    """Write a stream already sorted by ``key`` as objects of at most ``target_size``.

    Size is Arrow's in-memory size (``nbytes``) of the object's rows; an object holds
    at least one row even when that row alone is larger. Returns the objects in key
    order. On failure every object this call uploaded is deleted (best effort).
    """
    if target_size <= 0:
        raise ValueError(f"target_size must be positive, not {target_size}")
    with _Uploader(storage, row_group_rows) as uploader:
        objects: list[DataObject] = []
        for pieces in _cut(tables, target_size):
            objects.append(uploader.write(pool_id, concat_unified(pieces), key))
        uploader.finish()
        return objects


def _cut(tables: Iterable[pa.Table], target_size: int) -> Iterator[list[pa.Table]]:
    """Group the stream into lists of slices whose total ``nbytes`` fits the target."""
    pending: list[pa.Table] = []
    size = 0
    for table in tables:
        start = 0
        while start < table.num_rows:
            rest = table.slice(start)
            room = target_size - size
            rest_size = rest.nbytes
            if rest_size <= room:
                pending.append(rest)
                size += rest_size
                break
            n = _rows_fitting(rest, room, rest_size)
            if n == 0 and pending:
                yield pending
                pending, size = [], 0
                continue
            n = max(n, 1)
            pending.append(rest.slice(0, n))
            start += n
            yield pending
            pending, size = [], 0
    if pending:
        yield pending


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


class _Uploader:
    """Encodes objects in the caller's thread and uploads them in a background one."""

    def __init__(self, storage: Storage, row_group_rows: int) -> None:
        self.storage = storage
        self.row_group_rows = row_group_rows
        self.uploaded: list[str] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="limno-upload")
        self._inflight: Future[None] | None = None
        self._temps: list[str] = []

    def __enter__(self) -> _Uploader:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is not None:
                self._abort()
        finally:
            self._pool.shutdown(wait=True)
            for tmp in self._temps:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def write(self, pool_id: str, table: pa.Table, key: PoolKey) -> DataObject:
        """Encode ``table`` as one object and start its upload; its metadata."""
        object_id = ksuid()
        fd, tmp = tempfile.mkstemp(prefix="limno-object-", suffix=".parquet")
        os.close(fd)
        self._temps.append(tmp)
        pq.write_table(
            table,
            tmp,
            row_group_size=self.row_group_rows,
            compression=COMPRESSION,
            compression_level=COMPRESSION_LEVEL,
            write_statistics=True,
            write_page_index=True,
        )
        schema = pq.read_schema(tmp).remove_metadata()
        size = os.path.getsize(tmp)
        obj = _describe(object_id, table, key, schema, size)
        self.finish()  # at most one upload in flight: bounded temp space
        self._inflight = self._pool.submit(self._upload, data_path(pool_id, object_id), tmp)
        return obj

    def _upload(self, path: str, tmp: str) -> None:
        self.storage.put_file(path, tmp)
        self.uploaded.append(path)
        with contextlib.suppress(OSError):
            os.unlink(tmp)

    def finish(self) -> None:
        """Wait for the upload in flight (re-raising its error)."""
        if self._inflight is not None:
            inflight, self._inflight = self._inflight, None
            inflight.result()

    def _abort(self) -> None:
        if self._inflight is not None:
            with contextlib.suppress(Exception):
                self._inflight.result()
            self._inflight = None
        for path in self.uploaded:
            with contextlib.suppress(Exception):
                self.storage.delete(path)


def _describe(
    object_id: str, table: pa.Table, key: PoolKey, schema: pa.Schema, size: int
) -> DataObject:
    keys = key.key_table(table)
    rows = table.num_rows
    # keyless rows have every key column null and sit at the end (PoolKey.key_table)
    keyless = keys.column(0).null_count
    keyed = rows - keyless
    return DataObject(
        id=object_id,
        rows=rows,
        size=size,
        min_key=key.row_key(keys, 0) if keyed else None,
        max_key=key.row_key(keys, keyed - 1) if keyed else None,
        keyless=keyless,
        schema_b64=schema_to_b64(schema),
        key_types=tuple(str(t) for t in keys.schema.types),
        created=dt.datetime.now(dt.UTC).isoformat(),
    )


# -- arbitrary input -> sorted objects -----------------------------------------------


def sort_and_write(
    storage: Storage,
    pool_id: str,
    batches: Iterable[pa.RecordBatch | pa.Table],
    key: PoolKey,
    target_size: int,
    memory_limit: int = 512 * 2**20,
    spill_dir: str | None = None,
) -> list[DataObject]:
    """Sort arbitrary (heterogeneous) input by ``key`` and write it as objects.

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
                    spill_root = tempfile.mkdtemp(prefix="limno-sort-", dir=spill_dir)
                spills.append(_spill(_sort_run(run, key), spill_root, len(spills), memory_limit))
                run, run_bytes = [], 0
        if not spills:
            if not run:
                return []
            return write_sorted(storage, pool_id, [_sort_run(run, key)], key, target_size)
        if run:
            assert spill_root is not None
            spills.append(_spill(_sort_run(run, key), spill_root, len(spills), memory_limit))
        run = []
        merged = merge_sorted([s.read() for s in spills], key)
        return write_sorted(storage, pool_id, merged, key, target_size)
    finally:
        if spill_root is not None:
            shutil.rmtree(spill_root, ignore_errors=True)


def _sort_run(tables: list[pa.Table], key: PoolKey) -> pa.Table:
    return key.sort(concat_unified(tables))


class _Spill:
    """A sorted run in a local Parquet file, read back in row-group batches."""

    def __init__(self, path: str, batch_rows: int) -> None:
        self.path = path
        self.batch_rows = batch_rows

    def read(self) -> Iterator[pa.Table]:
        with pq.ParquetFile(self.path) as pf:
            for batch in pf.iter_batches(batch_size=self.batch_rows):
                yield pa.Table.from_batches([batch])


def _spill(table: pa.Table, root: str, n: int, memory_limit: int) -> _Spill:
    """Write a sorted run; row groups sized so that all runs' batches fit in memory.

    With one row group per run a merge would hold each run whole; a row group of
    about 1/64 of the memory limit keeps a merge of many runs within bounds.
    """
    row_bytes = max(1, table.nbytes // max(table.num_rows, 1))
    rows = max(16, min(65536, memory_limit // 64 // row_bytes))
    path = os.path.join(root, f"run-{n:06d}.parquet")
    pq.write_table(table, path, row_group_size=rows, compression="lz4")
    return _Spill(path, rows)
