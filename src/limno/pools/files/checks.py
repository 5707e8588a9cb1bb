"""``verify`` for file pools: every invariant the write path promises.

- the branch journal verifies, and every branch and tag names an existing commit;
- every reachable commit exists and is readable, its parents exist, its snapshot's
  ranges are present, hash to their ids and are sorted, and its snapshot equals its
  first parent's with its actions applied;
- every entry a commit adds (every entry of a root) is a well-formed file entry
  (exactly one of a blob and a URI) under a valid path;
- every blob an entry names exists with the recorded size. A blob may be missing only
  if vacuum removed it on purpose (a tombstone says so) *and* no branch head, tag or
  retained commit names it;
- every staged entry is well-formed and its blob exists.

Imported objects (a ``uri``) are not fetched: they live outside the lake, and their
owner may move them; reading such a path says so.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from limno.core.committed import EMPTY, RangeRef
from limno.core.gc import expired_path
from limno.core.staging import is_tombstone
from limno.errors import CorruptError, InvalidInputError, LimnoError, NotFoundError
from limno.faults import Fault
from limno.pools.files.blobs import blob_path
from limno.pools.files.entries import FileEntry
from limno.pools.files.paths import validate_path
from limno.pools.reviews import verify_reviews
from limno.pools.vacuum import retained_keys

if TYPE_CHECKING:
    from limno.pools.files.pool import FilePool

__all__ = ["verify_file_pool"]

RESTORE = (
    "restore the blob from a backup; else remove the path from the refs that hold it"
    " (limno fs rm) and upload it again"
)


def verify_file_pool(pool: FilePool) -> Iterator[Fault]:
    """Every broken invariant of one file pool (see the module docstring)."""
    v = pool.versioned
    journal_faults = list(v.refs.journal.verify())
    yield from journal_faults
    if journal_faults:
        return
    yield from verify_reviews(v.storage, pool.id)  # merge requests
    heads = {f"branch {n}": c for n, c in v.refs.branches().items()}
    heads.update({f"tag {n}": c for n, c in v.refs.tags().items()})
    if not heads:
        yield Fault(f"{pool.id}/branches", "pool has no branches")
    todo = []
    for label, cid in heads.items():
        if v.commits.exists(cid):
            todo.append(cid)
        else:
            yield Fault(v.commits.path(cid), f"{label} points at a missing commit")
    needed = _needed_blobs(pool, todo)
    seen: set[str] = set()
    checked: set[str] = set()
    verified: set[RangeRef] = set()
    while todo:
        cid = todo.pop()
        if cid in seen:
            continue
        seen.add(cid)
        try:
            commit = v.commits.get(cid)
        except (NotFoundError, CorruptError) as e:
            yield Fault(v.commits.path(cid), str(e))
            continue
        snap_faults = list(v.snapshots.verify(commit.snapshot, verified))
        yield from snap_faults
        if snap_faults:
            continue
        if not commit.parents and commit.snapshot != EMPTY:
            yield Fault(v.commits.path(cid), "root commit has a non-empty snapshot")
        for p in commit.parents:
            if v.commits.exists(p):
                todo.append(p)
            else:
                yield Fault(v.commits.path(cid), f"parent {p} is missing")
        if commit.parents and v.commits.exists(commit.parents[0]):
            yield from _explained(pool, cid)
        for a in commit.actions:
            if a.op != "delete":
                yield from _check_entry(pool, a.key, a.value, v.commits.path(cid), needed, checked)
    yield from _check_staged(pool, checked)


def _explained(pool: FilePool, cid: str) -> Iterator[Fault]:
    """The commit's snapshot is its first parent's with its actions applied (compared
    by a diff, which skips shared ranges: the cost follows the change)."""
    v = pool.versioned
    commit = v.commits.get(cid)
    net: dict[str, dict[str, Any] | None] = {}
    for a in commit.actions:
        net[a.key] = None if a.op == "delete" else dict(a.value)
    parent = v.commits.get(commit.parents[0]).snapshot
    changed = {k: new for k, _, new in v.snapshots.diff(parent, commit.snapshot)}
    explained = all(k in net and net[k] == new for k, new in changed.items())
    if not explained or any(v.snapshots.get(commit.snapshot, k) != val for k, val in net.items()):
        yield Fault(
            v.commits.path(cid),
            "snapshot does not equal the parent's snapshot with the commit's actions",
        )


def _check_entry(
    pool: FilePool,
    path: str,
    value: Any,
    where: str,
    needed: set[str],
    checked: set[str],
) -> Iterator[Fault]:
    """One entry: well-formed, and its blob present with its size (each blob once)."""
    try:
        validate_path(path)
        entry = FileEntry.from_value(path, value)
    except (InvalidInputError, CorruptError) as e:
        yield Fault(where, f"malformed file entry {path!r:.200}: {e}")
        return
    if entry.object is None or entry.object in checked:
        return
    checked.add(entry.object)
    location = blob_path(pool.id, entry.object)
    try:
        info = pool.storage.head(location)
    except NotFoundError:
        tombstone = pool.storage.exists(expired_path(pool.id, entry.object))
        if entry.object in needed or not tombstone:
            why = (
                "a branch, tag, staging area or retained commit holds it"
                if entry.object in needed
                else "no tombstone says vacuum removed it"
            )
            yield Fault(location, f"blob of {path!r:.200} is missing ({why})", RESTORE)
        return
    if info.size != entry.size:
        yield Fault(location, f"size {info.size} differs from the recorded {entry.size}", RESTORE)


def _check_staged(pool: FilePool, checked: set[str]) -> Iterator[Fault]:
    v = pool.versioned
    for branch in v.refs.branches():
        try:
            docs = v.staged_docs(branch)
        except LimnoError as e:
            yield Fault(f"{pool.id}/staging/{branch}", str(e))
            continue
        where = f"{pool.id}/staging/{branch}"
        staged_blobs = {o for k, (val, _) in docs.items() for o in v.keys_of(k, val)}
        for path, (value, _) in sorted(docs.items()):
            if not is_tombstone(value):
                yield from _check_entry(pool, path, value, where, staged_blobs, checked)


def _needed_blobs(pool: FilePool, heads: list[str]) -> set[str]:
    """Blobs that must exist: named by a head or tag, or inside the retention window (all
    reachable history unless a retention window ever trimmed it)."""
    v = pool.versioned
    keys: set[str] = set()
    for cid in heads:
        with contextlib.suppress(LimnoError):
            keys |= v.snapshot_keys(cid)
    retention = pool.retention()
    if retention is not None or not v.gc.state().trimmed:
        with contextlib.suppress(LimnoError):
            keys |= retained_keys(v, retention, dt.datetime.now(dt.UTC))
    return keys
