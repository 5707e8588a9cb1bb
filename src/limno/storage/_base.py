"""The object store interface every backend implements.

Eight operations are all the lake needs (and conditional ones, with defaults). Paths
are relative to the store's root, use ``/`` separators, and never start with ``/``.
Every write is atomic: a reader sees the whole new object or nothing.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ListResult", "ObjectInfo", "Storage"]


@dataclass(frozen=True)
class ObjectInfo:
    """What a store knows about one object without reading it."""

    path: str
    size: int
    last_modified: dt.datetime
    etag: str | None = None


@dataclass(frozen=True)
class ListResult:
    """A listing: objects directly matched, and common prefixes when delimited."""

    objects: list[ObjectInfo] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)


class Storage(ABC):
    """An object store: a flat namespace of immutable-by-convention blobs."""

    #: the URI this store was opened from (``file:///...``, ``memory://x``, ``s3://b/p``)
    uri: str

    @abstractmethod
    def get(self, path: str) -> bytes:
        """The whole object. Raises NotFoundError."""

    @abstractmethod
    def get_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (clipped at its end)."""

    @abstractmethod
    def head(self, path: str) -> ObjectInfo:
        """Metadata of the object. Raises NotFoundError."""

    @abstractmethod
    def put(self, path: str, data: bytes) -> ObjectInfo:
        """Write (or atomically replace) the object."""

    @abstractmethod
    def put_if_absent(self, path: str, data: bytes) -> ObjectInfo:
        """Create the object only if no object exists there. Raises AlreadyExistsError."""

    def delete_if_equal(self, path: str, data: bytes) -> bool:
        """Delete the object only if its bytes are exactly ``data``; whether it did (False:
        missing, or other bytes: a newer write, which stays). A local store does it
        atomically (:class:`~limno.storage._obstore.ObStorage`); this default, which the
        memory and S3 stores use (obstore offers no conditional delete), reads,
        compares and deletes: it narrows the window rather than closing it."""
        from limno.errors import NotFoundError

        try:
            if self.get(path) != data:
                return False
        except NotFoundError:
            return False
        self.delete(path)
        return True

    def replace_if_equal(self, path: str, data: bytes, expected: bytes) -> bool:
        """Replace the object with ``data`` only if its bytes are exactly ``expected``, as
        one compare-and-swap; whether it did (False: missing, other bytes, or another
        writer replaced it first: nothing was written). Of writers racing with the same
        ``expected`` exactly one wins, and readers see the old object or the new one,
        never no object. Every :class:`~limno.storage._obstore.ObStorage` does it
        atomically (local: a locked compare and an atomic exchange; memory and S3: a
        put conditional on the ETag of the version compared, ``If-Match``); this
        default, for stores that cannot, reads, compares and writes."""
        from limno.errors import NotFoundError

        try:
            if self.get(path) != expected:
                return False
        except NotFoundError:
            return False
        self.put(path, data)
        return True

    @abstractmethod
    def put_file(self, path: str, local_file: str) -> ObjectInfo:
        """Upload a local file (atomic; large files stream instead of loading in memory)."""

    @abstractmethod
    def list(self, prefix: str = "", delimiter: str | None = None) -> ListResult:
        """Objects under ``prefix``; with ``delimiter="/"`` one level, plus sub-prefixes.

        ``prefix`` is a directory-like prefix: ``"a/b"`` lists ``a/b/...``. Results are
        sorted by path.
        """

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove the object. Deleting a missing object is not an error."""

    @abstractmethod
    def copy(self, src: str, dst: str) -> None:
        """Server-side copy (replaces ``dst``). Raises NotFoundError for ``src``."""

    def exists(self, path: str) -> bool:
        """Whether an object exists at ``path``."""
        from limno.errors import NotFoundError

        try:
            self.head(path)
        except NotFoundError:
            return False
        return True

    def walk(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object under ``prefix``, recursively, sorted by path."""
        yield from self.list(prefix).objects

    def list_partial(self, prefix: str = "") -> Sequence[ObjectInfo]:
        """Hidden partial objects under ``prefix``: files a writer was still writing when
        it died, which :meth:`list` never shows. Sorted by path; empty where a store has
        none (an S3 upload is invisible until complete; abandoned multipart uploads are
        for a bucket lifecycle rule)."""
        return []

    def delete_partial(self, path: str) -> None:
        """Remove a partial object found by :meth:`list_partial` (missing: no error)."""
        from limno.errors import InvalidInputError

        raise InvalidInputError(f"not a partial object: {path!r}")

    def staging_file(self, path: str) -> str | None:
        """A new empty local file that :meth:`move_file` can publish as ``path`` by a
        rename (same filesystem), or None where the store is not local."""
        return None

    def move_file(self, path: str, local_file: str) -> ObjectInfo:
        """Publish a local file as ``path`` atomically and give it up (it is gone
        afterwards). By default an upload followed by removing the file."""
        import contextlib
        import os

        info = self.put_file(path, local_file)
        with contextlib.suppress(OSError):
            os.unlink(local_file)
        return info

    def local_path(self, path: str) -> str | None:
        """A filesystem path for the object when the store is local, else None.

        Engines use it to let DuckDB or Spark read files directly.
        """
        return None

    def arrow_filesystem(self) -> tuple[Any, str] | None:
        """A ``pyarrow.fs.FileSystem`` that reads this store's objects, and the root
        to put before an object's path in it; None when there is none (a local store
        has :meth:`local_path`, a memory store nothing an engine could reach).

        Engines use it to scan a remote lake's Parquet objects in place.
        """
        return None
