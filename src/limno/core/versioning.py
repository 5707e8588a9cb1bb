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

import contextlib
import datetime as dt
import functools
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.core.commits import (
    MAX_COMMIT_ATTEMPTS,
    Action,
    Commit,
    CommitStore,
    default_author,
    now_iso,
)
from limno.core.committed import EMPTY, Snapshots
from limno.core.hooks import Hooks
from limno.core.merging import MergeResult, Merging
from limno.core.protection import not_a_branch
from limno.core.refs import RefStore, Resolved
from limno.core.staging import Staging
from limno.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PreconditionFailedError,
    StorageError,
)
from limno.journal import Put, Requirement, StoreState
from limno.journal._journal import backoff
from limno.ksuid import ksuid
from limno.lazy import lazy_module
from limno.storage import Storage

if TYPE_CHECKING:
    from limno.core import merge
    from limno.core.gc import Gc
else:
    # writing alongside vacuum and merging: commands that only read never load them
    merge = lazy_module("limno.core.merge")

__all__ = ["DiffEntry", "MergeResult", "Versioned", "default_author"]


def _op_counts(actions: Sequence[Action]) -> dict[str, int]:
    """How many actions of each op a commit has: the hooks' summary of a change (the
    actions themselves can be millions)."""
    counts: dict[str, int] = {}
    for a in actions:
        counts[a.op] = counts.get(a.op, 0) + 1
    return counts


@dataclass(frozen=True)
class DiffEntry:
    """One entry that differs between two snapshots."""

    change: str  # added | removed | changed
    key: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None


class Versioned(Merging, Staging):
    """Versioning state of one pool (its branches' staging areas: :class:`Staging`; its
    merges and cherry-picks: :class:`Merging`)."""

    def __init__(self, storage: Storage, pool_id: str, name: str | None = None) -> None:
        self.storage = storage
        self.pool_id = pool_id
        self.name = name or pool_id
        self.hooks = Hooks()
        self.commits = CommitStore(storage, pool_id)
        self.refs = RefStore(storage, pool_id, self.commits, self.name)
        self.snapshots = Snapshots(storage, pool_id)
        self._gc: Gc | None = None
        self._gc_lock = threading.Lock()
        #: called with (parent commit, actions) before each attempt of a commit or merge
        #: commit is written: what the entry kind needs next to its entries (a record
        #: pool writes its search indexes' sidecars there); raises to refuse the commit
        self.prepare: Callable[[Commit, Sequence[Action]], None] | None = None
        #: the stored objects an entry references, as vacuum and writers name them (see
        #: :mod:`limno.core.gc`): None means the entry's key itself (a record pool's entry
        #: is keyed by its object's id); a file pool's entry names its blob in its value,
        #: and an imported one none at all
        self.object_keys: Callable[[str, Mapping[str, Any]], Iterable[str]] | None = None

    @property
    def gc(self) -> Gc:
        """The pool's side of the protocol with vacuum, made (once, whichever thread asks
        first) when a write or vacuum first needs it: reads never do, and importing it
        with leases costs a command that only reads several milliseconds."""
        with self._gc_lock:
            if self._gc is None:
                from limno.core.gc import Gc

                self._gc = Gc(self.storage, self.pool_id, self.refs.journal)
            return self._gc

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
            tagged = self.refs.tag(branch) is not None
            raise NotFoundError(f"branch {branch!r} not found{not_a_branch(branch, tagged)}")
        return head

    def writable_head(self, branch: str) -> str:
        """The head of ``branch`` before a direct write: ProtectedBranchError now, before
        any object is written, if the branch is protected (see limno.core.protection)."""
        return self.refs.protection.head(branch)

    def entries_at(self, commit_id: str) -> dict[str, dict[str, Any]]:
        return self.snapshots.read(self.commits.get(commit_id).snapshot)

    # -- writing alongside vacuum (core.gc) ------------------------------------------
    @contextlib.contextmanager
    def writing(self, op: str) -> Iterator[int]:
        """Hold a lease while writing objects; yields the gc ticket to commit with."""
        since = self.gc.ticket()
        with self.gc.leases.hold(op):
            yield since

    def lander(self, new_keys: Callable[[], Collection[str]], since: int | None) -> _Landing:
        """What lands a ref move that newly references ``new_keys()`` (see core.gc)."""
        return _Landing(self.gc, new_keys, since)

    def trusted_ticket(self, since: int, resolved: Resolved) -> int | None:
        """``since`` if vacuum keeps what ``resolved`` names, else None (check it all)."""
        if resolved.how in ("branch", "tag"):
            return since
        if resolved.how == "history" and not self.gc.state().trimmed:
            return since
        return None

    def keys_of(self, key: str, value: Mapping[str, Any] | None) -> set[str]:
        """The object keys an entry references (see :attr:`object_keys`); none for None."""
        if value is None:
            return set()
        if self.object_keys is None:
            return {key}
        return set(self.object_keys(key, value))

    def snapshot_keys(self, commit_id: str) -> set[str]:
        """The object keys commit ``commit_id``'s snapshot references."""
        entries = self.snapshots.entries(self.commits.get(commit_id).snapshot)
        if self.object_keys is None:
            return {k for k, _ in entries}
        return {o for k, v in entries for o in self.object_keys(k, v)}

    def added_keys(self, old: str, new: str) -> set[str]:
        """Object keys commit ``new``'s snapshot references that the same entries of commit
        ``old``'s did not (for record pools: the keys ``old``'s lacks)."""
        a, b = self.commits.get(old).snapshot, self.commits.get(new).snapshot
        if self.object_keys is None:
            return {k for k, va, _ in self.snapshots.diff(a, b) if va is None}
        out: set[str] = set()
        for k, va, vb in self.snapshots.diff(a, b):
            out |= self.keys_of(k, vb) - self.keys_of(k, va)
        return out

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
        event: str = "commit",
        since: int | None = None,
        validate: Callable[[Commit], None] | None = None,
        maintenance: bool = False,
    ) -> Commit:
        """Apply ``actions`` to ``branch`` as one new commit (see the module docstring).

        ``expected_head`` pins the parent: with ``rebase=False`` the commit fails with
        PreconditionFailedError if the branch is elsewhere. ``event`` names the hooks
        that run (``commit`` or ``merge``): pre hooks may veto before anything is
        written, post hooks hear about the landed commit. ``since`` is the gc ticket
        read before the objects the actions add were written (None: check them all
        against vacuum's tombstones; see :mod:`limno.core.gc`). ``validate`` checks
        the change against the parent it is about to land on, on every attempt
        (a rebase onto a moved branch checks again) and raises to refuse it.
        ``maintenance`` marks a rewrite that keeps the data (compaction, a partition
        split): it may move a protected branch, which refuses every other commit
        before its hooks run and again at the branch's compare-and-swap.
        """
        if not actions and not extra_parents:
            raise InvalidInputError("a commit needs at least one action")
        if not maintenance:
            self.refs.protection.check(branch)
        author = author or default_author()
        head = expected_head or self.head(branch)
        payload = {
            "pool": self.name,
            "pool_id": self.pool_id,
            "branch": branch,
            "message": message,
            "author": author,
            "meta": dict(meta or {}),
            "actions": len(actions),
            "action_counts": _op_counts(actions),
            "parents": [head, *extra_parents],  # as planned: a rebase may change the first
        }
        self.hooks.fire(f"pre-{event}", payload)
        commit = self._commit_loop(
            branch,
            actions,
            head,
            message,
            author,
            meta,
            extra_parents,
            rebase,
            since,
            validate,
            maintenance,
        )
        self.hooks.fire(
            f"post-{event}", {**payload, "commit": commit.id, "parents": list(commit.parents)}
        )
        return commit

    def _commit_loop(
        self,
        branch: str,
        actions: Sequence[Action],
        head: str,
        message: str,
        author: str,
        meta: Mapping[str, Any] | None,
        extra_parents: Sequence[str],
        rebase: bool,
        since: int | None,
        validate: Callable[[Commit], None] | None,
        maintenance: bool = False,
    ) -> Commit:
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            parent = self.commits.get(head)
            if validate is not None:
                validate(parent)
            if self.prepare is not None:
                self.prepare(parent, actions)
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
            new_keys = functools.partial(self._new_keys, parent.snapshot, actions)
            try:
                lander = self.lander(new_keys, since)
                self.refs.move_branch(branch, head, commit.id, lander, allow_protected=maintenance)
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

    # -- git operations (merges and cherry-picks: Merging) ---------------------------
    def diff(self, old: str, new: str) -> list[DiffEntry]:
        """Entries that differ from commit ``old`` to commit ``new``, in key order."""
        a, b = self.commits.get(old).snapshot, self.commits.get(new).snapshot
        out = []
        for key, va, vb in self.snapshots.diff(a, b):
            change = "added" if va is None else "removed" if vb is None else "changed"
            out.append(DiffEntry(change, key, va, vb))
        return out

    def reset(self, branch: str, ref: str) -> tuple[str, str]:
        """Point ``branch`` at ``ref`` (``reset --hard``) and drop its staged entries."""
        ticket = self.gc.ticket()
        resolved = self.resolve(ref)
        target = resolved.commit
        old = self.head(branch)
        since = self.trusted_ticket(ticket, resolved)
        lander = self.lander(functools.partial(self.added_keys, old, target), since)
        try:
            self.refs.move_branch(branch, old, target, lander)
        except PreconditionFailedError:
            raise PreconditionFailedError(
                f"branch {branch!r} moved while resetting it; try again"
            ) from None
        self.unstage(branch, list(self.staged(branch)))
        return old, target

    def create_ref(self, kind: str, name: str, ref: str | None) -> str:
        """Create branch or tag ``name`` at ``ref`` (default ``main``); the commit id."""
        ticket = self.gc.ticket()
        resolved = self.resolve(ref or "main")
        since = self.trusted_ticket(ticket, resolved)
        lander = self.lander(functools.partial(self.snapshot_keys, resolved.commit), since)
        if kind == "branch":
            self.refs.create_branch(name, resolved.commit, lander)
        else:
            self.refs.create_tag(name, resolved.commit, lander)
        return resolved.commit

    def _new_keys(self, parent_snapshot: str, actions: Sequence[Action]) -> set[str]:
        """Object keys that ``actions`` add and the parent snapshot's same entries do not
        reference (for record pools: keys the parent snapshot lacks). An object another
        entry of the parent references counts as new: more checking, never less."""
        if self.object_keys is None:
            return {
                a.key
                for a in actions
                if a.op in ("add", "create") and self.snapshots.get(parent_snapshot, a.key) is None
            }
        out: set[str] = set()
        for a in actions:
            if a.op in ("add", "create"):
                new = self.keys_of(a.key, a.value)
                if new:
                    out |= new - self.keys_of(a.key, self.snapshots.get(parent_snapshot, a.key))
        return out

    def _changes(
        self, parent: Commit, actions: Sequence[Action]
    ) -> dict[str, dict[str, Any] | None]:
        """Snapshot changes for ``actions`` on top of ``parent``; deletes must still apply."""
        changes: dict[str, dict[str, Any] | None] = {}
        gone = []
        for a in actions:
            if a.op == "add":
                changes[a.key] = dict(a.value)
            elif a.op == "create":
                if self.snapshots.get(parent.snapshot, a.key) is not None and a.key not in changes:
                    gone.append(a.key)
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
                "conflict: deleted, rewritten or created by another commit meanwhile: "
                + ", ".join(gone)
            )
        return changes


@dataclass(frozen=True)
class _Landing:
    """A :class:`limno.core.refs.Lander` bound to what one ref move references."""

    gc: Gc
    new_keys: Callable[[], Collection[str]]
    since: int | None

    def land(self, updates: Sequence[Put], requirements: Sequence[Requirement]) -> StoreState:
        return self.gc.land(updates, requirements, self.new_keys, self.since)
