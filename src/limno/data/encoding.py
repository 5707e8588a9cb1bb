"""Encoding and publishing data objects: one sorted Parquet file at a time.

An object is encoded into a local file and published with one atomic step, so a
reader never sees a partial object: on a local lake the file is written next to
its final name (a ``#<digits>`` staging name that listings skip) and renamed into
place; elsewhere it is uploaded with ``put_file`` in a background thread while the
next object is encoded. Objects carry small row groups with statistics, a page
index and CRC page checksums: a point lookup reads the footer and one row group,
``verify --deep`` checks every page. Dictionary encoding is kept only for columns
whose values repeat (judged on a sample): for unique values it costs time and
makes files larger; ascending integer and temporal columns (a sorted key) are
delta-encoded. Pages are LZ4, but a column that LZ4 cannot shrink (judged on its
first values) is stored uncompressed.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import os
import queue
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from limno.data import column_encodings
from limno.data.column_encodings import COMPRESSION
from limno.data.keys import PoolKey
from limno.data.kway import concat_unified
from limno.data.objects import DataObject, data_path, schema_to_b64
from limno.data.plain_types import empty_table, plain_batch
from limno.data.sketches import SketchBuilder, sketch_path
from limno.errors import ConflictError, LimnoError, os_errors
from limno.ksuid import ksuid
from limno.storage import Storage

__all__ = [
    "ROW_GROUP_ROWS",
    "Backlog",
    "ObjectFeed",
    "ObjectWriter",
    "Removed",
    "StreamFailed",
    "Uploader",
]

#: rows per Parquet row group of a data object: small enough that a point lookup
#: decodes little, large enough that an engine scanning the object in place (DuckDB,
#: Spark) does not pay its per-group cost too often (TPC-H at SF1: 32K-row groups were
#: 10-15% slower to scan than 64K, 128K ones 10% faster still but twice the lookup)
ROW_GROUP_ROWS = 65536
#: tells whether vacuum removed the object of this id (see :func:`write_sorted`)
Removed = Callable[[str], bool]


# -- encoding and publishing objects ---------------------------------------------------

#: one thread for every writer's key-sketch updates (first in, first done)
_SKETCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="limno-sketch")
#: a piece of at most this many rows is sketched in the writer's own thread when none
#: of its object's updates is pending (a small append's whole sketch takes less time
#: than handing it to that thread)
INLINE_SKETCH_ROWS = 16384


class ObjectWriter:
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
            self._mixed = [plain_batch(t) for t in self._read_back() + self._pending]
            self._pending, self._pending_rows = [], 0
        if self._mixed is not None:
            self._mixed.append(plain_batch(piece))  # unified as stored (no dictionaries)
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
        chosen = column_encodings.choose(sample)
        writer = pq.ParquetWriter(
            self.tmp,
            schema,
            compression=chosen.compression,
            use_dictionary=chosen.dictionary,
            column_encoding=dict.fromkeys(chosen.ascending, "DELTA_BINARY_PACKED") or None,
            # decimals of up to 18 digits as INT32/INT64, not fixed-size binary: smaller
            # and much faster to scan (what Spark and Arrow-rs write as well)
            store_decimal_as_integer=True,
            write_statistics=True,
            write_page_index=True,
            write_page_checksum=True,  # verify --deep checks them
        )
        stored = plain_batch(empty_table(schema)).schema
        if not stored.equals(schema, check_metadata=True):
            # text held as dictionaries (a Parquet input's, kept by the load): encoded
            # from their indices, but the file's Arrow schema is the stored one, byte
            # for byte what writing the plain columns records
            arrow_schema = base64.b64encode(stored.serialize().to_pybytes()).decode()
            writer.add_key_value_metadata({"ARROW:schema": arrow_schema})
        return writer

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
        if not self._sketching and piece.num_rows <= INLINE_SKETCH_ROWS:
            self.sketch.add(keys.column(0))
        else:
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
            empty = plain_batch(empty_table(self.schema))
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


class Uploader:
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
        self._publishing = threading.Lock()  # objects may be closed by several threads
        self._temps: list[str] = []
        self._local = storage.local_path("x") is not None

    def __enter__(self) -> Uploader:
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

    def open(self, pool_id: str, key: PoolKey, schema: pa.Schema) -> ObjectWriter:
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
        return ObjectWriter(pool_id, object_id, path, tmp, key, schema, self.row_group_rows)

    def shown(self, writer: ObjectWriter) -> str:
        """The file an error line names for an object being written: its final path on a
        local lake (not the staging name), else the local temporary file."""
        return (self._local and self.storage.local_path(writer.path)) or writer.tmp

    def close(self, writer: ObjectWriter) -> DataObject:
        """Finish an object and publish it; its metadata."""
        try:
            obj = writer.close()
            sketch, type_text = writer.sketch.finish()
            with self._publishing:
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


_END = object()  # a feed's last item: the object is complete


class Backlog:
    """Bytes (Arrow size) of rows queued to the encoders of a stream, at most ``limit``
    (a piece larger than that alone still goes): a reader faster than the encoders
    waits, and while one object's encoder catches up the next object's starts. Once
    an encoder fails the stream is over: nobody waits for room any more."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.failed = False
        self._changed = threading.Condition()

    def take(self, nbytes: int) -> bool:
        """Wait for room for ``nbytes`` and take it; False if the stream failed."""
        with self._changed:
            while self.used and self.used + nbytes > self.limit and not self.failed:
                self._changed.wait()
            if self.failed:
                return False
            self.used += nbytes
            return True

    def give(self, nbytes: int) -> None:
        with self._changed:
            self.used -= nbytes
            self._changed.notify_all()

    def fail(self) -> None:
        with self._changed:
            self.failed = True
            self._changed.notify_all()


class ObjectFeed:
    """One object encoded in a thread of its own, so that consecutive objects of a
    stream are encoded at once (pyarrow encodes one file on one thread).

    Pieces are queued to the encoder within the stream's :class:`Backlog`;
    :attr:`future` gives the published object.
    """

    def __init__(
        self, uploader: Uploader, writer: ObjectWriter, pool: ThreadPoolExecutor, backlog: Backlog
    ) -> None:
        self.uploader = uploader
        self.writer = writer
        self.backlog = backlog
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._aborted = threading.Event()
        self.future: Future[DataObject] = pool.submit(self._encode)

    def put(self, piece: pa.Table) -> None:
        """Queue the object's next rows; raises :class:`StreamFailed` once an encoder
        of the stream failed (the caller then finds out which, and why)."""
        if not self.backlog.take(piece.nbytes):
            raise StreamFailed
        self._queue.put(piece)

    def end(self) -> None:
        """The object has all its rows: finish and publish it."""
        self._queue.put(_END)

    def abort(self) -> None:
        """Stop encoding (after the current piece) and discard the object."""
        self._aborted.set()
        self._queue.put(_END)  # wakes an encoder waiting for rows

    def _encode(self) -> DataObject:
        try:
            while True:
                item = self._queue.get()
                if self._aborted.is_set():
                    if item is not _END:
                        self.backlog.give(item.nbytes)
                    raise StreamFailed
                with os_errors("write", self.uploader.shown(self.writer)):
                    if item is _END:
                        return self.uploader.close(self.writer)
                    try:
                        self.writer.add(item)
                    finally:
                        self.backlog.give(item.nbytes)
        except BaseException:
            self.backlog.fail()
            self.writer.discard()
            raise


class StreamFailed(Exception):
    """An encoder of the stream failed (this one, or another)."""
