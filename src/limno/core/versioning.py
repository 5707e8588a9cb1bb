"""The versioning core of one pool: commits, refs, snapshots, staging, and the commit protocol.

It versions a sorted map of entries and knows nothing about what the entries are
(data objects for record pools, paths for file pools).

Commit protocol (SPEC section 2): the caller has already written its data; the
core computes the new snapshot from the branch head, writes the commit object
with put-if-absent, then moves the branch by compare-and-swap. If the branch
moved meanwhile, the change is rebased onto the new head — adds never conflict;
deleting an entry the other side already deleted or changed does, and fails with
a ConflictError naming the entries — and retried with backoff. The number of
retries is recorded on the commit.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from limno.core.commits import Action, Commit, CommitStore, now_iso
from limno.core.committed import EMPTY, Snapshots
from limno.core.refs import RefStore, Resolved
from limno.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PreconditionFailedError,
    StorageError,
)
from limno.journal._journal import backoff
from limno.ksuid import ksuid
from limno.storage import Storage

__all__ = ["Versioned", "default_author"]

MAX_COMMIT_ATTEMPTS = 200

#: a hook called before a commit lands; raising a LimnoError vetoes it
PreCommitHook = Callable[[str, Sequence[Action]], None]


def default_author() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user database (containers): fall back
        return "unknown"


class Versioned:
    """Versioning state of one pool."""

    def __init__(self, storage: Storage, pool_id: str) -> None:
        self.storage = storage
        self.pool_id = pool_id
        self.commits = CommitStore(storage, pool_id)
        self.refs = RefStore(storage, pool_id, self.commits)
        self.snapshots = Snapshots(storage, pool_id)

    # -- creation ------------------------------------------------------------
    def initialize(self, author: str | None = None) -> Commit:
        """Create the branch journal, the root commit and branch ``main``."""
        self.refs.create()
        root = Commit(
            id=ksuid(),
            parents=(),
            snapshot=EMPTY,
            author=author or default_author(),
            date=now_iso(),
            message="pool created",
        )
        self.commits.put(root)
        self.refs.create_branch("main", root.id)
        return root

    # -- reading -------------------------------------------------------------
    def resolve(self, ref: str | None, as_of: dt.datetime | None = None) -> Resolved:
        return self.refs.resolve(ref, as_of)

    def head(self, branch: str) -> str:
        head = self.refs.branch(branch)
        if head is None:
            raise NotFoundError(f"branch {branch!r} not found")
        return head

    def entries_at(self, commit_id: str) -> dict[str, dict[str, Any]]:
        return self.snapshots.read(self.commits.get(commit_id).snapshot)

    # -- staging -------------------------------------------------------------
    def _staging_prefix(self, branch: str) -> str:
        return f"{self.pool_id}/staging/{branch}"

    def stage(self, branch: str, key: str, value: Mapping[str, Any]) -> None:
        """Stage an added entry on ``branch`` (committed later by :meth:`commit_staged`)."""
        self.head(branch)
        data = json.dumps({"key": key, "value": dict(value)}, sort_keys=True).encode()
        self.storage.put(f"{self._staging_prefix(branch)}/{key}.json", data)

    def staged(self, branch: str) -> dict[str, dict[str, Any]]:
        """The staged entries of ``branch``, by key."""
        out: dict[str, dict[str, Any]] = {}
        for info in self.storage.walk(self._staging_prefix(branch)):
            doc = json.loads(self.storage.get(info.path))
            out[doc["key"]] = doc["value"]
        return out

    def unstage(self, branch: str, keys: Iterable[str]) -> None:
        for key in keys:
            self.storage.delete(f"{self._staging_prefix(branch)}/{key}.json")

    def commit_staged(
        self,
        branch: str,
        keys: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> Commit:
        """Commit staged entries (all, or the given keys) in one commit, then unstage them."""
        staged = self.staged(branch)
        if keys:
            missing = [k for k in keys if k not in staged]
            if missing:
                raise NotFoundError(f"not staged on {branch!r}: {', '.join(missing)}")
            staged = {k: staged[k] for k in keys}
        if not staged:
            raise InvalidInputError(f"nothing staged on branch {branch!r}")
        actions = [Action("add", k, v) for k, v in sorted(staged.items())]
        commit = self.commit(branch, actions, **kwargs)
        self.unstage(branch, staged)
        return commit

    # -- the commit protocol -----------------------------------------------------
    def commit(
        self,
        branch: str,
        actions: Sequence[Action],
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        extra_parents: Sequence[str] = (),
        expected_head: str | None = None,
        rebase: bool = True,
        hooks: Sequence[PreCommitHook] = (),
    ) -> Commit:
        """Apply ``actions`` to ``branch`` as one new commit (see the module docstring).

        ``expected_head`` pins the parent: with ``rebase=False`` the commit fails with
        PreconditionFailedError if the branch is elsewhere.
        """
        if not actions and not extra_parents:
            raise InvalidInputError("a commit needs at least one action")
        for hook in hooks:
            hook(branch, actions)
        author = author or default_author()
        head = expected_head or self.head(branch)
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            parent = self.commits.get(head)
            changes = self._changes(parent, actions)
            snapshot = self.snapshots.apply(parent.snapshot, changes)
            commit = Commit(
                id=ksuid(),
                parents=(head, *extra_parents),
                snapshot=snapshot,
                author=author,
                date=now_iso(),
                message=message,
                meta=dict(meta or {}),
                actions=tuple(actions),
                retries=attempt,
            )
            self.commits.put(commit)
            try:
                self.refs.move_branch(branch, head, commit.id)
                return commit
            except StorageError:
                # the append may have landed before the failure was reported
                if self.refs.branch(branch) == commit.id:
                    return commit
                raise
            except PreconditionFailedError:
                moved = self.head(branch)
                if not rebase:
                    raise PreconditionFailedError(
                        f"branch {branch!r} moved from {head} to {moved}"
                    ) from None
                head = moved
                backoff(attempt)
        raise ConflictError(
            f"branch {branch!r}: gave up after {MAX_COMMIT_ATTEMPTS} concurrent updates"
        )

    def _changes(
        self, parent: Commit, actions: Sequence[Action]
    ) -> dict[str, dict[str, Any] | None]:
        """Snapshot changes for ``actions`` on top of ``parent``; deletes must still apply."""
        changes: dict[str, dict[str, Any] | None] = {}
        gone = []
        for a in actions:
            if a.op == "add":
                changes[a.key] = dict(a.value)
            elif a.op == "delete":
                current = self.snapshots.get(parent.snapshot, a.key)
                if current is None or current != dict(a.value):
                    gone.append(a.key)
                changes[a.key] = None
            else:
                raise InvalidInputError(f"unknown action {a.op!r}")
        if gone:
            raise ConflictError(
                "conflict: already deleted or rewritten by another commit: " + ", ".join(gone)
            )
        return changes
