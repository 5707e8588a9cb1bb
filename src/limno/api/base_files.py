"""A file pool of the lake interface: paths mapped to immutable objects, under git.

:class:`FilePool` is to arbitrary files what :class:`~limno.api.base.Pool` is to
records: the git operations come from :class:`~limno.api.base_versioned.VersionedPool`,
and the methods here write, read and list paths. Writes go to a branch's staging area
(read-after-write on that branch) until :meth:`FilePool.commit` seals them; reads take
any ref (branch, tag, commit id, ``~N``, ``as_of``) and, on a branch, see its staged
changes. The in-process implementation is :mod:`limno.api.local_files`, the client of
``limno serve`` :mod:`limno.api.remote_files`; both mirror
:class:`limno.pools.files.pool.FilePool` method for method.

Data moves in bounded memory both ways: :meth:`FilePool.put` takes bytes, a binary
file or an iterable of chunks, :meth:`FilePool.read` yields chunks (of a byte range),
:meth:`FilePool.iter_list` streams a listing of any length.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

from limno.api.base_versioned import VersionedPool
from limno.errors import ConflictError, InvalidInputError

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.core.commits import Commit
    from limno.pools.branching import BranchView
    from limno.pools.files.entries import FileChange, FileEntry
    from limno.pools.files.listing import Listing
    from limno.pools.registry import PoolConfig

__all__ = ["FilePool", "not_files", "not_records"]


def not_records(config: PoolConfig) -> InvalidInputError:
    """The error of a record operation on a file pool (one line, the same everywhere)."""
    return InvalidInputError(
        f"pool {config.name!r} is a file pool: this works on record pools only"
        " (files: 'limno fs ...'; git commands work on both kinds)"
    )


def not_files(config: PoolConfig) -> InvalidInputError:
    """The error of a file operation on a record pool."""
    return InvalidInputError(
        f"pool {config.name!r} is a record pool: this works on file pools only"
        " ('limno create NAME --kind files')"
    )


class FilePool(VersionedPool):
    """A pool of files (``kind == "files"``): see the module docstring."""

    @contextlib.contextmanager
    def transaction(
        self,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        strategy: str = "fail",
    ) -> Iterator[BranchView]:
        """Write to a throw-away branch; on success commit what the block staged there and
        merge it into ``branch`` atomically (nothing becomes visible on a failure)."""
        from limno.pools.branching import transaction

        with transaction(self, branch, message, author, strategy) as view:
            yield view
            if self.uncommitted(view.branch):
                self.commit(view.branch, message or f"transaction {view.branch}", author)

    # -- writing (to a branch's staging area) -----------------------------------------
    @abstractmethod
    def put(
        self,
        branch: str,
        path: str,
        data: bytes | BinaryIO | Iterable[bytes],
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
        max_size: int | None = None,
    ) -> FileEntry:
        """Write ``data`` as ``path`` on ``branch`` (staged). ``if_match``: the path's
        current ETag must be this one; ``if_none_match``: the path must not exist
        (PreconditionFailedError otherwise, before any byte is kept); ``max_size``:
        refuse (InvalidInputError) more bytes than this."""

    @abstractmethod
    def put_file(
        self,
        branch: str,
        path: str,
        local_file: str,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> FileEntry:
        """Write the local file ``local_file`` as ``path`` on ``branch`` (staged)."""

    @abstractmethod
    def copy(
        self,
        src_ref: str,
        src_path: str,
        branch: str,
        dst_path: str,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> FileEntry:
        """Stage ``dst_path`` on ``branch`` as the object of ``src_path`` at ``src_ref``
        (any branch): no bytes are copied."""

    @abstractmethod
    def remove(self, branch: str, paths: Sequence[str]) -> builtins.list[str]:
        """Stage the removal of ``paths``; those that existed."""

    @abstractmethod
    def remove_prefix(self, branch: str, prefix: str) -> builtins.list[str]:
        """Stage the removal of every path under ``prefix`` (a recursive rm)."""

    @abstractmethod
    def commit(
        self,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        prefix: str | None = None,
    ) -> Commit:
        """Commit everything staged on ``branch`` (or only under ``prefix``) in one
        atomic commit; InvalidInputError if nothing is staged."""

    @abstractmethod
    def uncommitted(self, branch: str = "main", prefix: str = "") -> builtins.list[FileChange]:
        """The staged changes of ``branch`` (under ``prefix``), by path."""

    @abstractmethod
    def discard(self, branch: str = "main", prefix: str = "") -> int:
        """Drop the staged changes of ``branch`` (under ``prefix``); how many."""

    @abstractmethod
    def import_from(
        self,
        source: str,
        branch: str = "main",
        prefix: str = "",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        """Register every object under ``source`` (``s3://bucket/prefix/`` or a local
        directory: of the machine the lake is opened on) as paths under ``prefix``, in
        one commit, without copying a byte; vacuum never deletes them."""

    # -- reading (any ref; on a branch, with its staged changes) --------------------------
    @abstractmethod
    def stat(
        self, path: str, ref: str | None = None, as_of: dt.datetime | None = None
    ) -> FileEntry:
        """The entry of ``path`` (NotFoundError if there is none)."""

    @abstractmethod
    def read(
        self,
        path: str,
        ref: str | None = None,
        as_of: dt.datetime | None = None,
        start: int = 0,
        end: int | None = None,
    ) -> Iterator[bytes]:
        """The bytes of ``path`` from ``start`` to ``end`` (exclusive; None: its end)."""

    @abstractmethod
    def list(
        self,
        ref: str | None = None,
        prefix: str = "",
        delimiter: str | None = None,
        start_after: str = "",
        limit: int = 1000,
        as_of: dt.datetime | None = None,
        *,
        token: str | None = None,
    ) -> Listing:
        """One page of the paths under ``prefix`` after ``start_after``, in path order;
        with ``delimiter`` (``/``), the paths past it are rolled up into prefixes. A
        truncated page's ``next_after`` is the ``start_after`` of the next, and its
        ``next_token`` the ``token`` of the next page *of the same commit* (a branch
        whose head moved meanwhile: ConflictError; see
        :mod:`limno.pools.files.listing`)."""

    def pages(
        self,
        ref: str | None = None,
        prefix: str = "",
        delimiter: str | None = None,
        as_of: dt.datetime | None = None,
        limit: int = 1000,
    ) -> Iterator[Listing]:
        """Every page of a listing, pinned to one commit by ``next_token`` while it can
        be. A branch that commits between two pages does not fail it (a busy branch would
        never let a long listing finish): the listing goes on after the last path
        returned, at the branch as it is then, as S3 listings do."""
        token: str | None = None
        after = ""
        while True:
            try:
                page = self.list(ref, prefix, delimiter, after, limit, as_of, token=token)
            except ConflictError:
                if token is None:
                    raise
                token = None
                continue
            yield page
            if not page.truncated or page.next_after is None:
                return
            after, token = page.next_after, page.next_token

    @abstractmethod
    def iter_list(
        self, ref: str | None = None, prefix: str = "", as_of: dt.datetime | None = None
    ) -> Iterator[FileEntry]:
        """Every entry under ``prefix``, in path order, streamed."""

    @abstractmethod
    def diff_paths(
        self, old_ref: str, new_ref: str | None = None, prefix: str = ""
    ) -> builtins.list[FileChange]:
        """Paths added, removed or changed from ``old_ref`` to ``new_ref``; with
        ``new_ref`` None, from ``old_ref``'s committed head to its staged state."""

    @abstractmethod
    def status(
        self, ref: str | None = None, limit: int = 20, rows: int | None = None
    ) -> dict[str, pa.Table]:
        """``limno status``'s reports of a file pool: ``branches`` (files, staged changes
        and open uploads of each branch, or of branch ``ref``) and ``uploads`` (the first
        ``limit`` open multipart uploads); see :mod:`limno.pools.files.status`."""
