"""The bytes of a file pool: immutable blobs under ``<pool-id>/data/<id>``.

A blob is written once under a fresh KSUID and never changed, so entries on many
branches and commits can share it and vacuum can free it once nothing refers to it.
Writing streams: the bytes go to a local file (beside the final object on a local
store, so publishing is one rename; a temporary file elsewhere), hashed as they pass,
and are published with one atomic store call. Memory stays bounded whatever the size,
and a reader never sees a partial blob. Small blobs on a remote store skip the
temporary file and go up in one put.

The caller holds the pool's gc lease (``versioned.writing``) while writing, so that a
vacuum running meanwhile does not free a blob before an entry refers to it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, Generic, Protocol, TypeVar, cast

from limno.errors import CorruptError, InvalidInputError, NotFoundError
from limno.ksuid import ksuid
from limno.storage import Storage, open_storage

if TYPE_CHECKING:
    from limno.pools.files.entries import FileEntry

_D = TypeVar("_D", bound="_Updatable")

__all__ = [
    "BLOB_DIR",
    "Blob",
    "BlobWriter",
    "ThreadedDigest",
    "blob_path",
    "delete_blob",
    "read_blob",
    "write_blob",
    "write_blob_file",
]

BLOB_DIR = "data"

#: how much is read from a source, or kept in memory, at a time
CHUNK = 1 << 20
#: below this size a blob for a remote store stays in memory and goes up in one put
SPOOL_LIMIT = 8 << 20


def blob_path(pool_id: str, object_id: str) -> str:
    """The store path of a blob limno wrote for a pool."""
    return f"{pool_id}/{BLOB_DIR}/{object_id}"


@dataclass(frozen=True)
class Blob:
    """A published blob: its id, size and the md5 hex of its bytes ("" when not hashed)."""

    id: str
    size: int
    md5: str


def _new_md5() -> hashlib._Hash:
    return hashlib.md5(usedforsecurity=False)


#: chunks at least this large are hashed in a worker thread (hashlib and zlib let go
#: of the GIL over large buffers, so the hashing overlaps the caller's own work)
THREADED_HASH = 1 << 16
_hashers: concurrent.futures.ThreadPoolExecutor | None = None
_hashers_lock = threading.Lock()


def _hash_threads() -> concurrent.futures.ThreadPoolExecutor:
    global _hashers
    with _hashers_lock:
        if _hashers is None:
            _hashers = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="limno-hash")
        return _hashers


class _Updatable(Protocol):
    def update(self, data: bytes, /) -> None: ...


class ThreadedDigest(Generic[_D]):
    """A running digest (anything with ``update``) fed in order, large chunks in a
    worker thread: :meth:`update` returns once the previous chunk is hashed, so
    hashing chunk n overlaps what the caller does with chunk n + 1 (receiving,
    checking, writing it), and several digests of one stream run side by side.
    :meth:`result` waits for the last chunk and gives the digest back."""

    def __init__(self, digest: _D) -> None:
        self._digest = digest
        self._pending: concurrent.futures.Future[None] | None = None

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._wait()
        if not isinstance(data, bytes) and not (
            isinstance(data, memoryview) and isinstance(data.obj, bytes)
        ):
            data = bytes(data)  # the caller may reuse a mutable buffer once we return
        piece = cast(bytes, data)  # bytes, or a view of bytes: every digest takes buffers
        if len(piece) < THREADED_HASH:
            self._digest.update(piece)
        else:
            self._pending = _hash_threads().submit(self._digest.update, piece)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def result(self) -> _D:
        self._wait()
        return self._digest


class BlobWriter:
    """One blob being written: :meth:`write` chunks (or :meth:`append_file`), then
    :meth:`publish`. Used as a context manager, leaving the block without publishing
    (an error, a size overflow) removes everything written so far.

    ``hashed=False`` skips the md5 (a multipart completion needs only the part md5s,
    and skipping it lets a local store copy parts without reading them). ``at`` puts
    the blob in another directory than the pool's ``data/`` (a multipart upload's parts).
    """

    def __init__(
        self,
        storage: Storage,
        pool_id: str,
        *,
        max_size: int | None = None,
        hashed: bool = True,
        at: str | None = None,
    ) -> None:
        if max_size is not None and max_size < 0:  # else "too large: more than -1 bytes"
            raise InvalidInputError(f"max_size must be 0 or more (bytes), not {max_size}")
        self.storage = storage
        self.id = ksuid()
        self.path = blob_path(pool_id, self.id) if at is None else f"{at}/{self.id}"
        self.max_size = max_size
        self.size = 0
        self._md5 = ThreadedDigest(_new_md5()) if hashed else None
        self._local = storage.staging_file(self.path)  # on the store's filesystem, or None
        self._tmp: str | None = self._local
        self._file: BinaryIO | None = open(self._local, "wb") if self._local else None  # noqa: SIM115
        self._memory: list[bytes] | None = None if self._local else []
        self._done = False

    # -- writing -----------------------------------------------------------------------
    def _grow(self, n: int) -> None:
        if self.max_size is not None and self.size + n > self.max_size:
            raise InvalidInputError(f"object too large: more than {self.max_size} bytes")
        self.size += n

    def _spill(self) -> BinaryIO:
        """The local file to write to, made (and fed what memory held) when first needed."""
        if self._file is None:
            fd, self._tmp = tempfile.mkstemp(prefix="limno-blob-")
            self._file = os.fdopen(fd, "wb")
            for piece in self._memory or ():
                self._file.write(piece)
            self._memory = None
        return self._file

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes at the end of the blob."""
        if self._done:
            raise InvalidInputError("blob already published")
        n = len(data)
        if not n:
            return
        self._grow(n)
        if self._md5 is not None:
            self._md5.update(data)
        if self._memory is not None and self.size <= SPOOL_LIMIT:
            self._memory.append(bytes(data))
            return
        self._spill().write(data)

    def append_file(self, local_file: str, start: int = 0, end: int | None = None) -> None:
        """Add bytes ``[start, end)`` of a local file at the end of the blob.

        When nothing is hashed and the blob is on the same local filesystem, the kernel
        copies them (``copy_file_range``, which may share extents) without passing
        them through this process.
        """
        length = os.path.getsize(local_file) if end is None else end
        length = max(0, length - start)
        if self._md5 is None and self._local is not None and self._file is not None:
            self._grow(length)
            self._file.flush()
            with open(local_file, "rb") as src:
                if _kernel_copy(src.fileno(), self._file.fileno(), start, length):
                    self._file.seek(0, os.SEEK_END)
                    return
                self.size -= length
        with open(local_file, "rb") as src:
            src.seek(start)
            left = length
            while left > 0:
                piece = src.read(min(CHUNK, left))
                if not piece:
                    break
                self.write(piece)
                left -= len(piece)

    def write_from(self, data: bytes | BinaryIO | Iterable[bytes]) -> None:
        """Add everything a source yields: bytes, a binary file object, or chunks."""
        if isinstance(data, bytes | bytearray | memoryview):
            view = memoryview(data)
            for i in range(0, len(view), CHUNK):
                self.write(view[i : i + CHUNK])
            return
        read = getattr(data, "read", None)
        if read is not None:
            while True:
                piece = read(CHUNK)
                if not piece:
                    return
                self.write(piece)
        for piece in data:
            self.write(piece)

    # -- finishing -----------------------------------------------------------------------
    def publish(self) -> Blob:
        """Make the blob visible under its path, atomically; the writer is done after."""
        if self._done:
            raise InvalidInputError("blob already published")
        self._done = True
        try:
            if self._file is not None:
                self._file.close()
            if self._tmp is None:
                self.storage.put(self.path, b"".join(self._memory or ()))
            else:
                tmp, self._tmp = self._tmp, None
                try:
                    self.storage.move_file(self.path, tmp)
                finally:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)  # gone already when published
        except BaseException:
            self._done = False
            self.discard()
            raise
        md5 = self._md5.result().hexdigest() if self._md5 is not None else ""
        return Blob(self.id, self.size, md5)

    def discard(self) -> None:
        """Drop what was written (nothing is published; a published blob stays)."""
        if self._done:
            return
        self._done = True
        self._memory = None
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = None

    def __enter__(self) -> BlobWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.discard()


def _kernel_copy(src: int, dst: int, start: int, length: int) -> bool:
    """Copy ``length`` bytes from offset ``start`` of ``src`` to the end of ``dst`` in
    the kernel; False (nothing copied that counts) where the system cannot."""
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is None:
        return False
    offset_out = os.lseek(dst, 0, os.SEEK_END)
    begin = offset_out
    done = 0
    try:
        while done < length:
            n = copy_range(src, dst, length - done, start + done, offset_out)
            if n == 0:
                break
            done += n
            offset_out += n
    except OSError:
        done = -1
    if done != length:
        os.ftruncate(dst, begin)  # a partial kernel copy is undone; the caller reads instead
        os.lseek(dst, begin, os.SEEK_SET)
        return False
    return True


def write_blob(
    storage: Storage,
    pool_id: str,
    data: bytes | BinaryIO | Iterable[bytes],
    *,
    max_size: int | None = None,
) -> Blob:
    """Write a new blob from bytes, a binary file object or an iterable of chunks.

    InvalidInputError when more than ``max_size`` bytes come; on any failure nothing
    is left behind. The caller holds the gc lease.
    """
    with BlobWriter(storage, pool_id, max_size=max_size) as writer:
        writer.write_from(data)
        return writer.publish()


def write_blob_file(storage: Storage, pool_id: str, local_file: str) -> Blob:
    """Write a new blob from a local file (an upload from the CLI).

    A remote store gets the file itself (hashed first, then uploaded by the store's
    own streaming put), not a temporary copy. If the file changes in between, its
    size no longer matches and the upload is refused.
    """
    if storage.local_path(blob_path(pool_id, "x")) is None:
        size = 0
        md5 = _new_md5()
        with open(local_file, "rb") as f:
            while piece := f.read(CHUNK):
                md5.update(piece)
                size += len(piece)
        object_id = ksuid()
        path = blob_path(pool_id, object_id)
        info = storage.put_file(path, local_file)
        if info.size != size:
            storage.delete(path)
            raise InvalidInputError(f"{local_file} changed while it was uploaded")
        return Blob(object_id, size, md5.hexdigest())
    with open(local_file, "rb") as f:
        return write_blob(storage, pool_id, f)


def delete_blob(storage: Storage, pool_id: str, object_id: str) -> None:
    """Remove a blob (missing: no error). Only vacuum and failed writes do this."""
    storage.delete(blob_path(pool_id, object_id))


def read_blob(
    storage: Storage,
    pool_id: str,
    entry: FileEntry,
    start: int = 0,
    end: int | None = None,
    chunk: int = CHUNK,
) -> Iterator[bytes]:
    """The bytes ``[start, end)`` of an entry (clipped at its size), in chunks.

    An own blob is read from ``storage``; an imported one (``uri``) from the store its
    URI's directory names. NotFoundError when the bytes are gone, CorruptError when
    fewer remain than the entry says.
    """
    if start < 0 or (end is not None and end < start) or chunk <= 0:
        raise InvalidInputError(f"invalid range [{start}, {end}) of {entry.path!r}")
    stop = entry.size if end is None else min(end, entry.size)
    if start >= stop:
        return
    if entry.object is not None:
        store, path = storage, blob_path(pool_id, entry.object)
    elif entry.uri is not None:
        try:
            store, path = _imported(entry.uri)
        except NotFoundError:  # a local directory that is gone
            raise NotFoundError(f"the bytes of {entry.path!r} are gone ({entry.uri})") from None
    else:
        raise CorruptError(f"file entry {entry.path!r} has neither object nor uri")
    yield from _read(store, path, entry, start, stop, chunk)


def _read(
    store: Storage, path: str, entry: FileEntry, start: int, stop: int, chunk: int
) -> Iterator[bytes]:
    where = entry.uri or path
    local = store.local_path(path)
    if local is not None:  # one open file: a plain read, and a stable view if it is replaced
        try:
            f: BinaryIO = open(local, "rb")  # noqa: SIM115
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise NotFoundError(f"the bytes of {entry.path!r} are gone ({where})") from None
        with f:
            f.seek(start)
            pos = start
            while pos < stop:
                piece = f.read(min(chunk, stop - pos))
                if not piece:
                    raise CorruptError(f"{where} is shorter than {entry.path!r}'s {entry.size}")
                pos += len(piece)
                yield piece
        return
    pos = start
    while pos < stop:
        want = min(chunk, stop - pos)
        try:
            piece = store.get_range(path, pos, pos + want)
        except NotFoundError:
            raise NotFoundError(f"the bytes of {entry.path!r} are gone ({where})") from None
        if len(piece) != want:
            raise CorruptError(f"{where} is shorter than {entry.path!r}'s {entry.size} bytes")
        pos += want
        yield piece


def _imported(uri: str) -> tuple[Storage, str]:
    """The store of an imported object's directory, and the object's name in it."""
    scheme, sep, rest = uri.partition("://")
    parent, slash, name = rest.rpartition("/")
    if not sep or not slash or not name or not (parent or scheme.lower() == "file"):
        raise CorruptError(f"not an object URI: {uri!r}")
    if scheme.lower() == "file":
        from urllib.parse import unquote

        name = unquote(name)
        parent = parent or "/"
    return _open_parent(f"{scheme}://{parent}"), name


@functools.lru_cache(maxsize=32)
def _open_parent(uri: str) -> Storage:
    return open_storage(uri)
