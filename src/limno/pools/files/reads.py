"""What a file pool reads: entries, bytes, listings and diffs of a ref, and a branch's
staged changes (read-after-write: a branch's view is its head with its staging area
over it). A mixin of :class:`~limno.pools.files.pool.FilePool`, apart from its writes
because every write judges its conditions on these same views."""

from __future__ import annotations

import builtins
import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import Any

from limno.core.refs import Resolved
from limno.core.staging import Judged
from limno.core.versioning import Versioned
from limno.errors import ConflictError, NotFoundError
from limno.pools.files import blobs
from limno.pools.files.entries import FileChange, FileEntry, entry_of, file_change
from limno.pools.files.listing import Cursor, Listing, ListingToken, iter_entries, list_page
from limno.pools.files.paths import validate_path, validate_prefix
from limno.pools.registry import PoolConfig
from limno.storage import Storage

__all__ = ["Docs", "FileReads"]

#: staged docs by path: (value, gc ticket)
Docs = dict[str, tuple[dict[str, Any], int | None]]


class FileReads:
    """Mixin of :class:`~limno.pools.files.pool.FilePool`: its reads."""

    storage: Storage
    config: PoolConfig
    versioned: Versioned

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def id(self) -> str:
        return self.config.id

    def _docs(self, branch: str, prefix: str, judged: dict[str, Judged] | None = None) -> Docs:
        """The staged docs of ``branch`` under ``prefix`` (``judged``: see
        :meth:`~limno.core.staging.Staging.staged_docs`)."""
        validate_prefix(prefix)
        docs = self.versioned.staged_docs(branch, judged)
        if prefix:
            docs = {k: d for k, d in docs.items() if k.startswith(prefix)}
        return docs

    def uncommitted(self, branch: str = "main", prefix: str = "") -> list[FileChange]:
        """The staged changes of ``branch`` under ``prefix``, by path."""
        return self.diff_paths(branch, None, prefix)

    def _cursor(self, resolved: Resolved, prefix: str) -> Cursor:
        """The view of ``resolved``: its commit's snapshot, and on a branch its staged
        changes under ``prefix`` (read now)."""
        snapshot = self.versioned.commits.get(resolved.commit).snapshot
        staged = None
        if resolved.branch is not None:
            staged = {k: d[0] for k, d in self._docs(resolved.branch, prefix).items()}
        return Cursor(self.versioned.snapshots, snapshot, staged)

    def _current(self, branch: str, path: str) -> FileEntry | None:
        """``path`` on ``branch`` with its staged change, or None."""
        return self._current_and_staged(branch, path)[0]

    def _current_and_staged(
        self, branch: str, path: str
    ) -> tuple[FileEntry | None, dict[str, Any] | None, dict[str, Any] | None]:
        """:meth:`_current`, the staged value it comes from (None: none staged), and when
        none is, the committed value it comes from (None: none)."""
        staged = self.versioned.staged_doc(branch, path)
        if staged is not None:
            return entry_of(path, staged[0]), staged[0], None
        snapshot = self.versioned.commits.get(self.versioned.head(branch)).snapshot
        committed = self.versioned.snapshots.get(snapshot, path)
        return entry_of(path, committed), None, committed

    def _stat(self, path: str, resolved: Resolved, ref: str | None) -> FileEntry:
        validate_path(path)
        if resolved.branch is not None:
            found = self._current(resolved.branch, path)
        else:
            snapshot = self.versioned.commits.get(resolved.commit).snapshot
            found = entry_of(path, self.versioned.snapshots.get(snapshot, path))
        if found is None:
            raise NotFoundError(f"no file {path!r} in {self.name}@{ref or 'main'}")
        return found

    def stat(
        self, path: str, ref: str | None = None, as_of: dt.datetime | None = None
    ) -> FileEntry:
        """The entry of ``path`` at ``ref`` (on a branch, with its staged changes): two
        bisections and one range read. NotFoundError if there is none."""
        return self._stat(path, self.versioned.resolve(ref, as_of), ref)

    def read(
        self,
        path: str,
        ref: str | None = None,
        as_of: dt.datetime | None = None,
        start: int = 0,
        end: int | None = None,
    ) -> Iterator[bytes]:
        """The bytes ``[start, end)`` of ``path`` (clipped at its size), in chunks. The entry
        is looked up now (NotFoundError here); the bytes are read as the caller iterates."""
        entry = self.stat(path, ref, as_of)
        return self._read(entry, start, end)

    def _read(self, entry: FileEntry, start: int, end: int | None) -> Iterator[bytes]:
        try:
            yield from blobs.read_blob(self.storage, self.id, entry, start, end)
        except NotFoundError:
            from limno.core.gc import expired_path  # writers' module: reads rarely need it

            if entry.object and self.storage.exists(expired_path(self.id, entry.object)):
                raise NotFoundError(
                    f"the bytes of {entry.path!r} were removed by vacuum: this commit is"
                    " outside the retention window"
                ) from None
            raise

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
        """One page of the paths under ``prefix`` after ``start_after``, in path order
        (see :func:`~limno.pools.files.listing.list_page`). ``token``, a previous page's
        ``next_token``, asks for the next page of the same commit instead (ConflictError
        if ``ref`` is a branch whose head moved since: see :mod:`~limno.pools.files.listing`
        for why, and the read-after-write rule of staged changes)."""
        validate_prefix(prefix)
        delimiter = delimiter or None
        resolved = self.versioned.resolve(ref, as_of)
        if token is not None:
            pinned = ListingToken.decode(token, ref or "", prefix, delimiter or "")
            start_after = pinned.after
            if pinned.commit != resolved.commit:
                if resolved.branch is not None:
                    raise ConflictError(
                        f"{self.name}@{resolved.branch} moved from commit {pinned.commit} to"
                        f" {resolved.commit} since this listing began: list it again (or list"
                        f" {self.name}@{pinned.commit}, which does not move)"
                    )
                resolved = Resolved(self.versioned.commits.get(pinned.commit).id)
        page = list_page(self._cursor(resolved, prefix), prefix, delimiter, start_after, limit)
        next_token = None
        if page.truncated and page.next_after is not None:
            next_token = ListingToken(
                resolved.commit, page.next_after, ref or "", prefix, delimiter or ""
            ).encode()
        return dataclasses.replace(page, commit=resolved.commit, next_token=next_token)

    def iter_list(
        self, ref: str | None = None, prefix: str = "", as_of: dt.datetime | None = None
    ) -> Iterator[FileEntry]:
        """Every entry under ``prefix``, in path order, streamed (ranges are read as the
        caller goes)."""
        validate_prefix(prefix)
        return iter_entries(self._cursor(self.versioned.resolve(ref, as_of), prefix), prefix)

    def diff_paths(
        self, old_ref: str, new_ref: str | None = None, prefix: str = ""
    ) -> builtins.list[FileChange]:
        """Paths added, removed or changed from ``old_ref`` to ``new_ref`` (commits: ranges
        both share are skipped, so the cost follows the change); with ``new_ref`` None,
        from the branch ``old_ref``'s head to its staged state (its uncommitted changes)."""
        validate_prefix(prefix)
        v = self.versioned
        if new_ref is None:
            head = v.head(old_ref)
            snapshot = v.commits.get(head).snapshot
            out = []
            for path, (value, _) in sorted(self._docs(old_ref, prefix).items()):
                old = entry_of(path, v.snapshots.get(snapshot, path))
                new = entry_of(path, value)
                if old != new:
                    out.append(file_change(path, old, new))
            return out
        a, b = v.resolve(old_ref).commit, v.resolve(new_ref).commit
        return [
            file_change(d.key, entry_of(d.key, d.old), entry_of(d.key, d.new))
            for d in v.diff(a, b)
            if d.key.startswith(prefix)
        ]
