"""A file pool of a lake in this process: the pool layer's own, under the interface.

:class:`LocalFilePool` is :class:`limno.pools.files.pool.FilePool` (whose methods the
interface :class:`~limno.api.base_files.FilePool` mirrors one to one) declared as the
interface's, so scripts and the server's routes reach every lower-level method too
(``stage_entry`` for the S3 gateway's copies and multipart uploads). Apart from
:mod:`limno.api.local` so that commands which never open a pool load none of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from limno.api.base_files import FilePool
from limno.pools.files.entries import FileEntry
from limno.pools.files.multipart import Multipart
from limno.pools.files.pool import FilePool as EngineFilePool
from limno.pools.reviews import Reviews

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["LocalFilePool"]


class LocalFilePool(EngineFilePool, Reviews, FilePool):
    """A file pool of a lake in this process."""

    def status(
        self, ref: str | None = None, limit: int = 20, rows: int | None = None
    ) -> dict[str, pa.Table]:
        from limno.pools.files.status import file_status

        return file_status(self, ref, limit, rows)

    def multipart(self) -> Multipart:
        """This pool's multipart uploads (the S3 gateway serves them)."""
        return Multipart(self)

    def read_entry(
        self, entry: FileEntry, start: int = 0, end: int | None = None
    ) -> Iterator[bytes]:
        """The bytes ``[start, end)`` of an entry already looked up (:meth:`stat`): a GET's
        headers and bytes are then of the same object, whatever is written meanwhile."""
        return self._read(entry, start, end)
