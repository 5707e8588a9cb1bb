"""Reverting a commit of a file pool, path by path.

A record pool reverts by inverting a commit's actions: its entries are immutable
objects, added and deleted, never rewritten. A file pool's commit rewrites paths in
place (an ``add`` over an existing path), so the inverse of an ``add`` is not a delete:
the path must get back the value it had before. The revert therefore compares the
commit's snapshot with its parent's and, for each path that differs, restores the
parent's value, provided the branch still holds what the commit left there; a path
changed since is a conflict that names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from limno.core.commits import Action, Commit
from limno.errors import ConflictError, InvalidInputError

if TYPE_CHECKING:
    from limno.pools.files.pool import FilePool

__all__ = ["revert"]


def revert(
    pool: FilePool,
    commit_id: str,
    branch: str = "main",
    message: str = "",
    author: str | None = None,
) -> Commit:
    """A new commit on ``branch`` that puts back what ``commit_id`` changed (see the
    module docstring)."""
    v = pool.versioned
    target = v.commits.get(pool.resolve(commit_id))
    if len(target.parents) != 1:
        raise InvalidInputError(f"cannot revert {target.id}: it is a root or a merge commit")
    head = v.writable_head(branch)
    if target.id not in v.commits.ancestors(head):
        raise InvalidInputError(f"commit {target.id} is not on branch {branch!r}")
    before = v.commits.get(target.parents[0]).snapshot
    now = v.commits.get(head).snapshot
    actions, changed = [], []
    for path, old, new in v.snapshots.diff(before, target.snapshot):
        current = v.snapshots.get(now, path)
        if current != new:
            changed.append(path)
        elif old is None:
            actions.append(Action("delete", path, current or {}))
        else:
            actions.append(Action("add", path, old))
    if changed:
        shown = ", ".join(changed[:20]) + (
            f" and {len(changed) - 20} more" if len(changed) > 20 else ""
        )
        raise ConflictError(f"revert of {target.id} on {branch!r}: changed since: {shown}")
    if not actions:
        raise InvalidInputError(f"revert of {target.id} changes nothing on {branch!r}")
    return v.commit(
        branch,
        actions,
        message=message or f"revert {target.id}",
        author=author,
        meta={"reverts": target.id},
        expected_head=head,
        since=None,  # it brings blobs back from history: check that they still exist
    )
