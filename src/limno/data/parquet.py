"""Opening data objects as Parquet files, local or remote, without downloading them whole.

A scan or a point lookup reads the footer and then only the row groups (and columns)
it needs. On a local store that is an ordinary file; on S3 (or in memory) a small
seekable adapter turns every read Arrow makes into one ranged GET, so a lookup in a
256 MB object costs a footer read plus a row group or two.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from limno.errors import (
    CorruptError,
    LimnoError,
    NotFoundError,
    damaged_object,
    decode_reason,
    storage_error,
)
from limno.storage import Storage

__all__ = ["ObjectFile", "RangeFile", "open_parquet"]

#: parsed footers of local objects kept for reuse (most recently used first out last)
FOOTER_CACHE_SIZE = 256


class _FooterCache:
    """Parsed Parquet footers of local files, by path, valid while the file is unchanged.

    Data objects are immutable, so a footer parsed once serves every later lookup
    or scan of the object (parsing it is a good part of a point lookup). An entry
    is used only while the file's inode, size and modification time are those it
    was parsed from, so a replaced or rewritten file is parsed afresh.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, tuple[tuple[int, int, int], pq.FileMetaData]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, path: str, ident: tuple[int, int, int]) -> pq.FileMetaData | None:
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or entry[0] != ident:
                return None
            self._entries.move_to_end(path)
            return entry[1]

    def put(self, path: str, ident: tuple[int, int, int], metadata: pq.FileMetaData) -> None:
        with self._lock:
            self._entries[path] = (ident, metadata)
            self._entries.move_to_end(path)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


_footers = _FooterCache(FOOTER_CACHE_SIZE)


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over one stored object, served by ranged reads."""

    def __init__(self, storage: Storage, path: str, size: int | None = None) -> None:
        super().__init__()
        self._storage = storage
        self._path = path
        self._size = storage.head(path).size if size is None else size
        self._pos = 0
        #: ranged reads made (tests and benchmarks look at it)
        self.requests = 0

    @property
    def name(self) -> str:
        return self._path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._pos + size, self._size)
        if end <= self._pos:
            return b""
        data = self._storage.get_range(self._path, self._pos, end)
        self.requests += 1
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


def open_parquet(
    storage: Storage,
    path: str,
    size: int | None = None,
    metadata: pq.FileMetaData | None = None,
    small_reads: bool = False,
) -> pq.ParquetFile:
    """The Parquet file of a stored object (NotFoundError when it does not exist).

    ``size`` (the object's size, when the caller knows it) saves a HEAD request, and
    ``metadata`` (a footer read before) saves reading the footer again. Remote files
    pre-buffer: the column chunks of one read are coalesced into a few large ranged
    requests instead of one request per column chunk. Footers of local files are
    parsed once and reused (see :class:`_FooterCache`). ``small_reads`` (a lookup's
    row group or two) reads local files without pre-buffering, whose I/O threads
    cost more than they save there (a busy machine makes a lookup's read twice as slow).

    Opening it and reading from it raise limno's errors only (see :class:`ObjectFile`):
    bytes that fail to decode name the object, its pool and ``limno verify``.
    """
    local = storage.local_path(path)
    with _decoding(storage, path):
        if local is not None:
            buffered = not small_reads
            if metadata is not None:
                return ObjectFile(storage, path, local, metadata=metadata, pre_buffer=buffered)
            stat = os.stat(local)
            ident = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            cached = _footers.get(local, ident)
            pf = ObjectFile(storage, path, local, metadata=cached, pre_buffer=buffered)
            if cached is None:
                _footers.put(local, ident, pf.metadata)
            return pf
        source = pa.PythonFile(RangeFile(storage, path, size), mode="r")
        return ObjectFile(storage, path, source, metadata=metadata, pre_buffer=True)


class ObjectFile(pq.ParquetFile):
    """A data object's Parquet file whose reads raise limno's errors, naming the object.

    Bytes are decoded lazily (a row group when it is read), so a damaged object is
    often found only by a read well after the footer parsed: every read method maps
    its errors, wherever the file is read from (scans, lookups, whole-object reads,
    ``verify``, the Spark engine).
    """

    def __init__(self, storage: Storage, path: str, source: Any, **options: Any) -> None:
        self._storage = storage
        self._object_path = path
        super().__init__(source, **options)

    def read(self, *args: Any, **kwargs: Any) -> pa.Table:
        with _decoding(self._storage, self._object_path):
            return super().read(*args, **kwargs)

    def read_row_group(self, *args: Any, **kwargs: Any) -> pa.Table:
        with _decoding(self._storage, self._object_path):
            return super().read_row_group(*args, **kwargs)

    def read_row_groups(self, *args: Any, **kwargs: Any) -> pa.Table:
        with _decoding(self._storage, self._object_path):
            return super().read_row_groups(*args, **kwargs)

    def iter_batches(self, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        with _decoding(self._storage, self._object_path):
            yield from super().iter_batches(*args, **kwargs)


@contextlib.contextmanager
def _decoding(storage: Storage, path: str) -> Iterator[None]:
    """Map what opening or reading the object ``path`` raises to limno's errors.

    A missing file is NotFoundError; an OS error with an errno (permission, I/O) is
    StorageError; anything Arrow raises otherwise, including its errno-less
    ``OSError`` for a page that fails to decompress, means the bytes are damaged.
    """
    try:
        yield
    except LimnoError:
        raise
    except FileNotFoundError as e:
        raise NotFoundError(f"object not found: {path}") from e
    except OSError as e:
        if e.errno is None:
            raise _damaged(storage, path, e) from e
        where = storage.local_path(path) or f"{storage.uri.rstrip('/')}/{path}"
        raise storage_error("read", where, e) from e
    except pa.ArrowException as e:
        raise _damaged(storage, path, e) from e


def _damaged(storage: Storage, path: str, err: BaseException) -> CorruptError:
    """Named by the pool id: the pool layer, which knows the name, says it instead."""
    return damaged_object(path, path.split("/")[0], decode_reason(err))
