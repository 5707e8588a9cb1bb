"""File pools: arbitrary files by path, under branches, commits and merges.

A :class:`FilePool` binds a pool config of kind ``files`` to the versioning core. An
entry is keyed by its path and its value says where the bytes are (a blob limno wrote
under ``<pool-id>/data/<ksuid>``, or an imported object it did not write); see
:mod:`~limno.pools.files.entries`. Writes go to the branch's staging area, so they are
read-after-write on that branch and a commit seals them (all, or under a prefix) in one
atomic commit; the git operations come from :class:`~limno.pools.branching.Branching`
and act on paths as they act on a record pool's objects (a merge conflicts per path).

Vacuum and writers agree on *blob ids*, not paths (``Versioned.object_keys``): a path
rewritten, copied or deleted moves references between blobs, and a blob's bytes are
freed only when no retained entry, staged entry or write in flight names it. Imported
entries name no blob, so vacuum never touches bytes limno did not write.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

from limno.core.commits import Commit
from limno.core.staging import TOMBSTONE, Judged, is_tombstone
from limno.core.versioning import Versioned
from limno.errors import (
    InvalidInputError,
    LimnoError,
    PreconditionFailedError,
)
from limno.pools.branching import Branching, BranchView, check_limit, transaction
from limno.pools.files import blobs
from limno.pools.files.entries import (
    DEFAULT_CONTENT_TYPE,
    FileChange,
    FileEntry,
    blob_keys,
    now_mtime,
    user_metadata,
)
from limno.pools.files.listing import Listing
from limno.pools.files.paths import validate_path, validate_prefix
from limno.pools.files.reads import FileReads
from limno.pools.registry import PoolConfig, PoolRegistry
from limno.pools.vacuum import DEFAULT_GRACE, Retention, VacuumReport, vacuum
from limno.storage import Storage

if TYPE_CHECKING:
    from limno.faults import Fault

__all__ = ["FileChange", "FileEntry", "FilePool", "Listing"]


class FilePool(FileReads, Branching):
    """A file pool of a lake (see the module docstring)."""

    def __init__(self, storage: Storage, config: PoolConfig, registry: PoolRegistry) -> None:
        if config.kind != "files":
            raise InvalidInputError(f"pool {config.name!r} is not a file pool")
        self.storage = storage
        self.config = config
        self.registry = registry
        self.versioned = Versioned(storage, config.id, config.name)
        self.versioned.hooks.specs = self.hook_specs()
        self.versioned.object_keys = blob_keys

    # -- refs and history ----------------------------------------------------------
    def resolve(self, ref: str | None = None, as_of: dt.datetime | None = None) -> str:
        """The commit id a ref (default ``main``) names."""
        return self.versioned.resolve(ref, as_of).commit

    def log(
        self,
        ref: str | None = None,
        limit: int | None = None,
        first_parent: bool = False,
        *,
        as_of: dt.datetime | None = None,
    ) -> list[Commit]:
        """Commits reachable from ``ref``, newest first."""
        check_limit(limit)
        out: list[Commit] = []
        head = self.resolve(ref, as_of)
        for commit in self.versioned.commits.log([head], first_parent=first_parent):
            if limit is not None and len(out) >= limit:
                break
            out.append(commit)
        return out

    def revert(
        self, commit_id: str, branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        """A new commit on ``branch`` that puts back what ``commit_id`` changed (see
        :func:`~limno.pools.files.history.revert`)."""
        from limno.pools.files.history import revert

        return revert(self, commit_id, branch, message, author)

    @contextlib.contextmanager
    def transaction(
        self,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        strategy: str = "fail",
    ) -> Iterator[BranchView]:
        """Write to a throw-away branch; on success commit what the block staged there and
        merge it into ``branch`` atomically (see :func:`limno.pools.branching.transaction`)."""
        with transaction(self, branch, message, author, strategy) as view:
            yield view
            if self.versioned.staged(view.branch):
                self.commit(view.branch, message or f"transaction {view.branch}", author)

    # -- writing ---------------------------------------------------------------------
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
        late_metadata: Callable[[], Mapping[str, str]] | None = None,
    ) -> FileEntry:
        """Write ``data`` as ``path`` on ``branch``'s staging area (read-after-write there).

        ``if_match``: the path's current ETag must be this one; ``if_none_match``: the
        path must not exist; both raise PreconditionFailedError, checked before any
        byte is written and again before the entry is staged (two requests apart: the
        store has no transaction spanning them). ``max_size``: more bytes than this is
        InvalidInputError, and nothing is kept. ``late_metadata``: more metadata known
        only once ``data`` has ended (the S3 gateway's trailer checksums), asked for
        after the last byte and staged with the entry, in its one stage (a second stage
        could undo a newer write of the path).
        """
        validate_path(path)
        meta = user_metadata(metadata)
        self.versioned.writable_head(branch)  # a protected branch: refused before any byte
        self._preconditions(branch, path, if_match, if_none_match)
        with self.versioned.writing("put") as since:
            blob = blobs.write_blob(self.storage, self.id, data, max_size=max_size)
            if late_metadata is not None:
                try:
                    meta.update(user_metadata(late_metadata()))
                except BaseException:
                    blobs.delete_blob(self.storage, self.id, blob.id)  # named by nothing
                    raise
            return self._stage_blob(
                branch, path, blob, content_type, meta, since, if_match, if_none_match
            )

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
        validate_path(path)
        meta = user_metadata(metadata)
        self.versioned.writable_head(branch)
        with self.versioned.writing("put") as since:
            blob = blobs.write_blob_file(self.storage, self.id, local_file)
            return self._stage_blob(branch, path, blob, content_type, meta, since, None, False)

    def _stage_blob(
        self,
        branch: str,
        path: str,
        blob: blobs.Blob,
        content_type: str | None,
        metadata: dict[str, str],
        since: int,
        if_match: str | None,
        if_none_match: bool,
    ) -> FileEntry:
        entry = FileEntry(
            path=path,
            size=blob.size,
            etag=blob.md5,
            content_type=content_type or DEFAULT_CONTENT_TYPE,
            mtime=now_mtime(),
            metadata=metadata,
            object=blob.id,
        )
        # a failed stage may still have landed (a lost reply): the blob stays for vacuum,
        # which frees it past the grace period if no staging entry names it
        if if_match is None and not if_none_match:
            self.versioned.stage(branch, path, entry.to_value(), since)
            return entry
        try:
            self._stage_if(branch, path, entry.to_value(), since, if_match, if_none_match)
        except PreconditionFailedError:
            blobs.delete_blob(self.storage, self.id, blob.id)  # named by nothing
            raise
        return entry

    def _stage_if(
        self,
        branch: str,
        path: str,
        value: Mapping[str, Any],
        since: int | None,
        if_match: str | None,
        if_none_match: bool,
    ) -> None:
        """Stage a conditional write as one step among writers of the path: the staged
        entry its conditions were judged against is replaced only if it is still there,
        a new one is created put-if-absent (:meth:`Staging.stage_replacing`)."""
        current, checked, committed = self._current_and_staged(branch, path)
        self._judge(branch, path, current, if_match, if_none_match)
        if not self.versioned.stage_replacing(branch, path, value, since, checked, committed):
            what = "If-None-Match" if if_none_match else "If-Match"  # another writer won
            raise PreconditionFailedError(f"{self.name}@{branch}/{path} changed meanwhile ({what})")

    def _preconditions(
        self, branch: str, path: str, if_match: str | None, if_none_match: bool
    ) -> None:
        if if_match is not None or if_none_match:
            self._judge(branch, path, self._current(branch, path), if_match, if_none_match)

    def _judge(
        self, branch: str, path: str, current: FileEntry | None, if_match: str | None, none: bool
    ) -> None:
        if none and current is not None:
            raise PreconditionFailedError(f"{self.name}@{branch}/{path} exists (If-None-Match)")
        if if_match is not None:
            wanted = if_match.strip('"')
            if current is None or (wanted != "*" and current.etag != wanted):
                raise PreconditionFailedError(
                    f"{self.name}@{branch}/{path}: ETag does not match (If-Match)"
                )

    def stage_entry(
        self,
        branch: str,
        entry: FileEntry,
        since: int | None = None,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> FileEntry:
        """Stage an entry whose bytes exist already (a copy names the same blob or URI; a
        completed multipart upload its new blob). ``since`` is the gc ticket read before
        those bytes were written or read (None: the commit checks them against vacuum's
        tombstones). ``if_none_match``: only if the path is absent; ``if_match``: only if
        its ETag is this one (``*``: any); either way one step among writers, one wins."""
        validate_path(entry.path)
        value = entry.to_value()
        FileEntry.from_value(entry.path, value)  # exactly one of object / uri
        if not if_none_match and if_match is None:
            self.versioned.stage(branch, entry.path, value, since)
        else:
            self._stage_if(branch, entry.path, value, since, if_match, if_none_match)
        if entry.object is not None:
            # no lease covers bytes written (or read) before: make sure vacuum has not
            # taken them meanwhile, else take the entry back (see core.gc.Gc.confirm)
            try:
                self.versioned.gc.confirm(lambda: {entry.object or ""}, since)
            except BaseException:
                # unconfirmed: take it back (best effort; a caller that then frees the
                # bytes must know the entry is gone, so failing to unstage says so)
                with contextlib.suppress(LimnoError):
                    self.versioned.unstage(branch, [entry.path], expect={entry.path: value})
                raise
        return entry

    def copy(
        self,
        src_ref: str,
        src_path: str,
        branch: str,
        dst_path: str,
        *,
        metadata: Mapping[str, str] | None = None,
        content_type: str | None = None,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> FileEntry:
        """Stage ``dst_path`` on ``branch`` naming the bytes of ``src_path`` at ``src_ref``
        (any ref; a branch with its staged changes): no byte is copied. Metadata and
        content type are the source's unless given; the mtime is now. ``if_none_match``:
        only if ``dst_path`` does not exist on the branch, ``if_match``: only if its ETag
        is this one (PreconditionFailedError, as :meth:`put`'s)."""
        validate_path(dst_path)
        self.versioned.writable_head(branch)
        ticket = self.versioned.gc.ticket()  # before reading what will be referenced again
        resolved = self.versioned.resolve(src_ref)
        src = self._stat(src_path, resolved, src_ref)
        entry = FileEntry(
            path=dst_path,
            size=src.size,
            etag=src.etag,
            content_type=content_type or src.content_type,
            mtime=now_mtime(),
            metadata=src.metadata if metadata is None else user_metadata(metadata),
            object=src.object,
            uri=src.uri,
        )
        since = self.versioned.trusted_ticket(ticket, resolved)
        return self.stage_entry(
            branch, entry, since, if_none_match=if_none_match, if_match=if_match
        )

    def remove(self, branch: str, paths: Sequence[str]) -> list[str]:
        """Stage the removal of ``paths`` on ``branch``; those that existed, in order.

        A path only staged is unstaged; a committed one gets a staged tombstone, which
        hides it on the branch until the commit deletes it.
        """
        for path in paths:
            validate_path(path)
        head = self.versioned.writable_head(branch)
        snapshot = self.versioned.commits.get(head).snapshot
        removed = []
        for path in dict.fromkeys(paths):
            committed = self.versioned.snapshots.get(snapshot, path)
            staged = self.versioned.staged_doc(branch, path)
            gone = staged[0] if staged is not None else committed
            if gone is None or is_tombstone(gone):
                continue  # no such path on the branch
            if committed is None:
                assert staged is not None
                self.versioned.unstage(branch, [path], expect={path: staged[0]})
            else:
                self.versioned.stage(branch, path, TOMBSTONE, None)
            removed.append(path)
        return removed

    def remove_if(self, branch: str, path: str, if_match: str) -> None:
        """Stage the removal of ``path`` on ``branch`` only if it exists with the ETag
        ``if_match`` (``*``: any), else PreconditionFailedError. Its tombstone is staged
        as a conditional write's entry is: one step among writers, and its commit refused
        if another write of the path was committed after the condition was judged
        (:meth:`commit`), so a version the condition never saw is never deleted."""
        validate_path(path)
        self._stage_if(branch, path, TOMBSTONE, None, if_match, False)

    def remove_prefix(self, branch: str, prefix: str) -> list[str]:
        """Stage the removal of every path under ``prefix`` (a recursive rm)."""
        validate_prefix(prefix)
        paths = [e.path for e in self.iter_list(branch, prefix)]
        return self.remove(branch, paths)

    def commit(
        self,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        prefix: str | None = None,
        writes: Collection[str] | None = None,
    ) -> Commit:
        """Commit everything staged on ``branch`` (or only under ``prefix``) in one atomic
        commit: a staged entry is an ``add``, a tombstone a ``delete`` of the committed
        entry. InvalidInputError if nothing is staged there. ``writes``: only these paths.
        A staged conditional write (If-Match, If-None-Match; a conditional delete too) is
        committed only if no other write of its path was committed since its condition
        was judged, else PreconditionFailedError names the paths and nothing is committed
        (:meth:`~limno.core.staging.Staging.judged_check`): whoever commits, the
        gateway's autocommit or a ``limno commit``, a conditional write overwrites only
        the version it was judged against."""
        v = self.versioned
        judged: dict[str, Judged] = {}
        docs = self._docs(branch, prefix or "", judged)
        if writes is not None:
            docs = {k: d for k, d in docs.items() if k in writes}
        where = f" under {prefix!r}" if prefix else ""
        if not docs:
            raise InvalidInputError(f"nothing staged on branch {branch!r}{where}")
        actions = v.staged_actions(branch, docs)
        if not actions:  # only tombstones of paths gone meanwhile
            v.unstage(branch, docs, expect={k: d[0] for k, d in docs.items()})
            raise InvalidInputError(f"nothing staged on branch {branch!r}{where}")
        tickets = [since for value, since in docs.values() if not is_tombstone(value)]
        since = (
            None if None in tickets else min((t for t in tickets if t is not None), default=None)
        )
        adds = sum(a.op == "add" for a in actions)
        guards = {k: g for k, g in judged.items() if k in docs}
        commit = v.commit(
            branch,
            actions,
            message=message or f"commit {adds} written, {len(actions) - adds} removed path(s)",
            author=author,
            meta=meta,
            since=since,
            validate=v.judged_check(guards) if guards else None,
        )
        # landed: a failure now must not report it failed; what stays staged is dropped
        # when next read (Staging._drop_landed). A path staged again meanwhile stays.
        with contextlib.suppress(LimnoError):
            v.unstage(branch, docs, expect={k: d[0] for k, d in docs.items()})
        return commit

    def discard(self, branch: str = "main", prefix: str = "") -> int:
        """Drop the staged changes of ``branch`` under ``prefix``; how many (their blobs
        are freed by vacuum)."""
        self.versioned.head(branch)  # NotFoundError for no branch
        docs = self._docs(branch, prefix)
        self.versioned.unstage(branch, docs, expect={k: d[0] for k, d in docs.items()})
        return len(docs)

    def take_back(self, branch: str, staged: Mapping[str, Mapping[str, Any]]) -> None:
        """Unstage the paths of ``staged`` (path -> the value a write staged: an entry's,
        or a delete's tombstone) whose staged value is still that one: a write whose
        commit failed is taken back, a newer write of a path stays (best effort: see
        :meth:`~limno.core.staging.Staging.unstage`)."""
        self.versioned.unstage(branch, list(staged), expect=staged)

    def import_from(
        self,
        source: str,
        branch: str = "main",
        prefix: str = "",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        """Register every object under ``source`` (see :mod:`~limno.pools.files.imports`)."""
        from limno.pools.files.imports import import_objects

        return import_objects(self, source, branch, prefix, message, author)

    # -- maintenance -----------------------------------------------------------------
    def vacuum(
        self,
        grace: dt.timedelta | None = None,
        dry_run: bool = False,
        retention: Retention = None,
    ) -> VacuumReport:
        """Free the blobs no branch, tag, staging area, retained commit or write in flight
        names, past the grace period, and the multipart uploads idle for longer than it
        (abandoned; each reported as its directory and the bytes of its parts). Imported
        objects are never touched: they are not under the pool's ``data/``, and no entry
        names them as a blob. A completed upload's blob is under ``data/`` like any other."""
        from limno.pools.files.multipart import expired_uploads

        grace = DEFAULT_GRACE if grace is None else grace
        if retention is None:
            retention = self.retention()
        report = vacuum(self.versioned, f"{self.id}/{blobs.BLOB_DIR}", grace, dry_run, retention)
        expired = expired_uploads(self, grace, dry_run=dry_run)
        report.removed += [(e.path, e.size) for e in expired]
        return report

    def retention(self) -> dict[str, dt.timedelta] | None:
        """The pool's configured retention windows by branch glob (None: keep all)."""
        return dict(self.config.settings.retention) or None

    def verify(self) -> Iterator[Fault]:
        """Every broken invariant of this pool (see :mod:`~limno.pools.files.checks`)."""
        from limno.pools.files.checks import verify_file_pool

        return verify_file_pool(self)
