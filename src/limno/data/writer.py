"""Writing data objects: sorted Parquet files cut at the pool's target size.

:func:`write_sorted` turns an already sorted stream into objects; :func:`sort_and_write`
sorts arbitrary input first, in bounded memory (sorted runs spilled to local Parquet
files and merged back with :func:`~limno.data.kway.merge_sorted`).

Objects are written to a local temporary file and published with one atomic step, so
a reader never sees a partial object: on a local lake the file is written next to its
final name (a ``#<digits>`` staging name that listings skip) and renamed into place;
elsewhere it is uploaded with ``put_file`` in a background thread while the next
object is encoded. Objects carry small row groups with statistics and a page index: a
point lookup then reads the footer and one row group. Nothing written here is
referenced until a commit names it, but a failed write still deletes what it uploaded
so that vacuum has less to do.

Speed (measured by ``bench/``, the ``ingest_sorted`` benchmark): sorting and
gathering are in :mod:`._sort`; dictionary encoding is kept only for columns whose
values repeat (judged on a sample): for unique values it costs time and makes files
larger.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from limno.data.keys import PoolKey
from limno.data.kway import concat_unified, first_true, merge_sorted
from limno.data.objects import DataObject, data_path, schema_to_b64
from limno.data.sketches import SketchBuilder, sketch_path
from limno.data.sort import Gathered, prefetched, sort_order, take_sorted
from limno.errors import ConflictError, LimnoError, StorageError, decode_reason, os_errors
from limno.ksuid import ksuid
from limno.storage import Storage

__all__ = ["ROW_GROUP_ROWS", "delete_objects", "sort_and_write", "write_sorted"]

#: rows per Parquet row group of a data object: small enough that a point lookup
#: decodes little, large enough that scans stay fast
ROW_GROUP_ROWS = 32768
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 1
#: a sorted run is written by several threads (one per core, at most MAX_WRITERS)
#: when each gets at least this many bytes (Arrow size) of it
PARALLEL_MIN_BYTES = 64 * 2**20
MAX_WRITERS = 4
#: rows looked at to decide whether a column's values repeat enough for a dictionary
DICTIONARY_SAMPLE_ROWS = 16384
#: ... and the fewest rows for which that is worth looking at
DICTIONARY_MIN_ROWS = 4096


#: tells whether vacuum removed the object of this id (see :func:`write_sorted`)
Removed = Callable[[str], bool]

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
    with _Uploader(storage, row_group_rows, is_removed) as uploader:
        objects: list[DataObject] = []
        writer: _ObjectWriter | None = None
        try:
            for piece, last in _cut_stream(tables, target_size, _Bounds(key, bounds)):
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


class _Bounds:
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
    tables: Iterable[pa.Table], target_size: int, bounds: _Bounds | None = None
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


# -- encoding and publishing objects ---------------------------------------------------

#: one thread for every writer's key-sketch updates (first in, first done)
_SKETCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="limno-sketch")


class _ObjectWriter:
    """One object being encoded: pieces go to the Parquet writer in whole row groups.

    Pieces normally share one schema and are encoded as they arrive. A piece of
    another schema (a merge of objects of different shapes) turns the object
    *mixed*: what was encoded is read back and every piece is kept until
    :meth:`close` unifies them by the widening rule and encodes them at once.
    """

    def __init__(
        self,
        pool_id: str,
        object_id: str,
        path: str,
        tmp: str,
        key: PoolKey,
        schema: pa.Schema,
        row_group_rows: int,
    ) -> None:
        self.pool_id = pool_id
        self.object_id = object_id
        self.path = path
        self.tmp = tmp
        self.key = key
        self.schema = schema
        self.row_group_rows = row_group_rows
        self.rows = 0
        self.keyless = 0
        self.min_key: tuple[Any, ...] | None = None
        self.max_key: tuple[Any, ...] | None = None
        self.key_types: tuple[str, ...] = ()
        self.sketch = SketchBuilder()
        self._sketching: list[Future[None]] = []
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._mixed: list[pa.Table] | None = None

    def add(self, piece: pa.Table) -> None:
        """Append sorted rows (after any added before)."""
        if not piece.num_rows:
            return
        self._note_keys(piece)
        if self._mixed is None and not piece.schema.equals(self.schema):
            self._mixed = self._read_back() + self._pending
            self._pending, self._pending_rows = [], 0
        if self._mixed is not None:
            self._mixed.append(piece)
            return
        if self._writer is None:
            self._writer = self._open(self.schema, piece)
        self._pending.append(piece)
        self._pending_rows += piece.num_rows
        if self._pending_rows >= self.row_group_rows:
            whole = self._pending_rows // self.row_group_rows * self.row_group_rows
            table = pa.concat_tables(self._pending) if len(self._pending) > 1 else piece
            self._writer.write_table(table.slice(0, whole), row_group_size=self.row_group_rows)
            rest = table.slice(whole)
            self._pending = [rest] if rest.num_rows else []
            self._pending_rows = rest.num_rows

    def _open(self, schema: pa.Schema, sample: pa.Table) -> pq.ParquetWriter:
        return pq.ParquetWriter(
            self.tmp,
            schema,
            compression=COMPRESSION,
            compression_level=COMPRESSION_LEVEL,
            use_dictionary=_dictionary_columns(sample),
            write_statistics=True,
            write_page_index=True,
            write_page_checksum=True,  # verify --deep checks them
        )

    def _read_back(self) -> list[pa.Table]:
        """Close the file and return its rows (to be encoded again, unified)."""
        if self._writer is None:
            return []
        self._writer.close()
        self._writer = None
        table = pq.read_table(self.tmp)
        return [table] if table.num_rows else []

    def _note_keys(self, piece: pa.Table) -> None:
        keys = self.key.key_table(piece)
        # keyless rows have every key column null and sit at the end (PoolKey.key_table)
        nulls = keys.column(0).null_count
        keyed = piece.num_rows - nulls
        if keyed:
            if self.min_key is None:
                self.min_key = self.key.row_key(keys, 0)
            self.max_key = self.key.row_key(keys, keyed - 1)
        self.keyless += nulls
        self.rows += piece.num_rows
        # KLL updates hold the GIL but not the encoder: they run beside it, in order
        self._sketching.append(_SKETCHER.submit(self.sketch.add, keys.column(0)))
        self.key_types = tuple(str(t) for t in keys.schema.types)

    def close(self) -> DataObject:
        """Finish the file; the object's metadata."""
        self._sketched()
        if self._mixed is not None:
            table = concat_unified(self._mixed)
            self._mixed = None
            keys = self.key.key_table(table)
            self.key_types = tuple(str(t) for t in keys.schema.types)
            keyed = table.num_rows - keys.column(0).null_count
            if keyed:  # in the unified key type
                self.min_key = self.key.row_key(keys, 0)
                self.max_key = self.key.row_key(keys, keyed - 1)
            self.sketch = SketchBuilder()  # of the unified key column
            self.sketch.add(keys.column(0))
            self._writer = self._open(table.schema, table)
            self._writer.write_table(table, row_group_size=self.row_group_rows)
            self._writer.close()
        elif self._writer is None:  # no rows (never the case for a cut stream)
            empty = self.schema.empty_table()
            pq.write_table(empty, self.tmp, compression=COMPRESSION)
            self.key_types = tuple(str(t) for t in self.key.key_table(empty).schema.types)
        else:
            if self._pending:
                table = pa.concat_tables(self._pending)
                self._writer.write_table(table, row_group_size=self.row_group_rows)
                self._pending = []
            self._writer.close()
        schema = pq.read_schema(self.tmp).remove_metadata()
        return DataObject(
            id=self.object_id,
            rows=self.rows,
            size=os.path.getsize(self.tmp),
            min_key=self.min_key,
            max_key=self.max_key,
            keyless=self.keyless,
            schema_b64=schema_to_b64(schema),
            key_types=self.key_types,
            created=dt.datetime.now(dt.UTC).isoformat(),
        )

    def _sketched(self) -> None:
        """Wait for this object's sketch updates (re-raising their error)."""
        pending, self._sketching = self._sketching, []
        for f in pending:
            f.result()

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self._sketched()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


def _dictionary_columns(sample: pa.Table) -> bool | list[str]:
    """Columns worth dictionary encoding, judged on the first rows of an object.

    Dictionary encoding pays when values repeat; for (nearly) unique values it costs
    time and makes the file larger. Only top-level primitive columns whose sample has
    more than half distinct values go without; nested columns keep the default.
    """
    if sample.num_rows < DICTIONARY_MIN_ROWS:
        return True  # too small to matter either way
    sample = sample.slice(0, DICTIONARY_SAMPLE_ROWS)
    plain = []
    for name, column in zip(sample.column_names, sample.columns, strict=True):
        if not _flat(column.type):
            continue
        valid = len(column) - column.null_count
        if valid and pc.count_distinct(column).as_py() * 2 > valid:
            plain.append(name)
    if not plain:
        return True
    paths = _leaf_paths(sample.schema)
    enabled = [p for p in paths if p not in plain]
    return enabled or False


def _flat(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_temporal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


def _leaf_paths(schema: pa.Schema) -> list[str]:
    """The Parquet column paths a schema is written as (``a.list.element``...)."""
    if all(_flat(t) or pa.types.is_boolean(t) for t in schema.types):
        return list(schema.names)
    buf = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), buf)
    md = pq.ParquetFile(pa.BufferReader(buf.getvalue())).metadata
    return [md.schema.column(i).path for i in range(md.num_columns)]


class _Uploader:
    """Encodes objects in the caller's thread and publishes them.

    On a local lake an object is encoded under a staging name beside its final path
    and renamed into place; elsewhere it is encoded into a local temporary file and
    uploaded in a background thread while the next object is encoded.
    """

    def __init__(
        self, storage: Storage, row_group_rows: int, is_removed: Removed | None = None
    ) -> None:
        self.storage = storage
        self.row_group_rows = row_group_rows
        self.is_removed = is_removed
        self.uploaded: list[str] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="limno-upload")
        self._inflight: Future[None] | None = None
        self._temps: list[str] = []
        self._local = storage.local_path("x") is not None

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

    def open(self, pool_id: str, key: PoolKey, schema: pa.Schema) -> _ObjectWriter:
        """Start encoding one object (see :meth:`close`)."""
        object_id = ksuid()
        path = data_path(pool_id, object_id)
        tmp: str | None = None
        if self._local:
            tmp = self.storage.staging_file(path)
        if tmp is None:
            with os_errors("write", tempfile.gettempdir()):
                fd, tmp = tempfile.mkstemp(prefix="limno-object-", suffix=".parquet")
            os.close(fd)
        self._temps.append(tmp)
        return _ObjectWriter(pool_id, object_id, path, tmp, key, schema, self.row_group_rows)

    def shown(self, writer: _ObjectWriter) -> str:
        """The file an error line names for an object being written: its final path on a
        local lake (not the staging name), else the local temporary file."""
        return (self._local and self.storage.local_path(writer.path)) or writer.tmp

    def close(self, writer: _ObjectWriter) -> DataObject:
        """Finish an object and publish it; its metadata."""
        try:
            obj = writer.close()
            sketch, type_text = writer.sketch.finish()
            self.finish()  # at most one upload in flight: bounded temp space
            path = sketch_path(writer.pool_id, writer.object_id)
            self.uploaded.append(path)
            self.storage.put(path, sketch.to_bytes(type_text))
            if self._local:
                self.storage.move_file(writer.path, writer.tmp)
                self.uploaded.append(writer.path)
            else:
                self._inflight = self._pool.submit(self._upload, writer.path, writer.tmp)
        except (LimnoError, OSError) as e:
            if self.is_removed is not None and self.is_removed(writer.object_id):
                raise ConflictError(
                    f"object {writer.object_id} was removed by vacuum while it was being"
                    " written (the write's lease had died: a process stalled for longer than"
                    " the lease TTL?); nothing was committed"
                ) from e
            raise
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
