"""Merges and cherry-picks of one pool's commits: a mixin of
:class:`~limno.core.versioning.Versioned`, whose commit protocol lands them.

A merge fast-forwards when it can, else writes a merge commit whose actions are the
changes to the branch merged into (planned by :mod:`limno.core.merge`: a conflict is
an entry changed on both sides, unless a strategy resolves it), and moves the branch
by compare-and-swap, retrying when the branch moved. A cherry-pick replays one
commit's changes as a new commit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
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
from limno.core.refs import RefStore, Resolved
from limno.errors import ConflictError, InvalidInputError, PreconditionFailedError, StorageError
from limno.journal import Requirement
from limno.journal._journal import backoff
from limno.ksuid import ksuid
from limno.lazy import lazy_module

if TYPE_CHECKING:
    from collections.abc import Sequence

    from limno.core import merge
    from limno.core.gc import Gc
    from limno.core.refs import Lander
else:
    merge = lazy_module("limno.core.merge")

__all__ = ["MergeResult", "Merging"]


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: ``kind`` is ``fast-forward``, ``merge`` or ``up-to-date``."""

    kind: str
    commit: str
    base: str | None
    resolved: tuple[str, ...] = ()


class Merging:
    """Mixin of :class:`~limno.core.versioning.Versioned`: merges and cherry-picks."""

    #: set by Versioned: the pool and its stores
    name: str
    pool_id: str
    hooks: Hooks
    commits: CommitStore
    refs: RefStore
    snapshots: Snapshots
    prepare: Callable[[Commit, Sequence[Action]], None] | None
    #: Versioned's: refs, the protocol with vacuum, and the commit protocol
    resolve: Callable[..., Resolved]
    head: Callable[[str], str]
    trusted_ticket: Callable[[int, Resolved], int | None]
    lander: Callable[[Callable[[], Collection[str]], int | None], Lander]
    added_keys: Callable[[str, str], set[str]]
    commit: Callable[..., Commit]

    @property
    def gc(self) -> Gc:
        raise NotImplementedError  # Versioned's

    def merge_base(self, a: str, b: str) -> str | None:
        return merge.merge_base(self.commits, a, b)

    def _side(self, base: str, commit: Commit) -> dict[str, tuple[Any, Any]]:
        return {k: (va, vb) for k, va, vb in self.snapshots.diff(base, commit.snapshot)}

    def merge(
        self,
        source: str,
        into: str,
        strategy: str = "fail",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        fast_forward: bool = True,
        direct: bool = False,
        fence: Requirement | None = None,
    ) -> MergeResult:
        """Merge ref ``source`` into branch ``into`` (see :mod:`limno.core.merge`).

        Fast-forwards when ``into`` is an ancestor of the source (unless
        ``fast_forward`` is off); otherwise makes a merge commit with parents
        ``(into's head, source)`` whose actions are the changes to ``into``. The
        strategy is recorded in the commit's meta. Retries if ``into`` moves. A merge
        may move a protected branch unless it is ``direct`` (a transaction's: a direct
        write by other means), which is refused there as a commit is. ``fence`` is a
        condition on the branch store that the landing append checks too (a merge
        request's claim), so a merger that lost its claim cannot move ``into``.
        """
        merge.plan_merge({}, {}, strategy)  # validates the strategy before any work
        if direct:
            self.refs.protection.check(into)
        ticket = self.gc.ticket()
        resolved = self.resolve(source)
        src = resolved.commit
        since = self.trusted_ticket(ticket, resolved)
        author = author or default_author()
        payload = {
            "pool": self.name,
            "pool_id": self.pool_id,
            "branch": into,
            "source": source,
            "source_commit": src,
            "strategy": strategy,
            "author": author,
            "message": message,
            "meta": dict(meta or {}),
        }
        self.hooks.fire("pre-merge", payload)
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            head = self.head(into)
            base = self.merge_base(src, head)
            if base == src:
                return MergeResult("up-to-date", head, base)
            try:
                if base == head and fast_forward:
                    result = MergeResult("fast-forward", src, base)
                else:
                    result = self._merge_commit(
                        source, src, into, head, base, strategy, message, author, meta
                    )
                self._land(into, head, result.commit, since, direct, fence)
            except PreconditionFailedError:
                backoff(attempt)
                continue
            done = {"commit": result.commit, "kind": result.kind, "previous": head}
            self.hooks.fire("post-merge", {**payload, **done})
            return result
        raise ConflictError(
            f"branch {into!r}: gave up after {MAX_COMMIT_ATTEMPTS} concurrent updates"
        )

    def _merge_commit(
        self,
        source: str,
        src: str,
        into: str,
        head: str,
        base: str | None,
        strategy: str,
        message: str,
        author: str,
        meta: Mapping[str, Any] | None,
    ) -> MergeResult:
        """The merge commit of ``src`` into ``head``, written: the caller lands it."""
        base_snap = EMPTY if base is None else self.commits.get(base).snapshot
        dest = self.commits.get(head)
        s_side = self._side(base_snap, self.commits.get(src))
        d_side = self._side(base_snap, dest)
        plan = merge.plan_merge(s_side, d_side, strategy)
        if plan.conflicts:
            raise ConflictError(
                f"merge of {source} into {into}: {len(plan.conflicts)} conflicting"
                f" entr{'y' if len(plan.conflicts) == 1 else 'ies'} (changed on both sides):"
                f" {', '.join(plan.conflicts)}",
            )
        actions = []
        for key, value in sorted(plan.changes.items()):
            if value is None:
                now = d_side[key][1] if key in d_side else s_side[key][0]
                actions.append(Action("delete", key, now or {}))
            else:
                actions.append(Action("add", key, value))
        info: dict[str, Any] = {
            "source": source,
            "source_commit": src,
            "base": base,
            "strategy": strategy,
        }
        if plan.resolved:
            info["resolved"] = list(plan.resolved)
        if self.prepare is not None:
            self.prepare(dest, actions)
        commit = Commit(
            id=ksuid(),
            parents=(head, src),
            snapshot=self.snapshots.apply(dest.snapshot, plan.changes),
            author=author,
            date=now_iso(),
            message=message or f"merge {source} into {into}",
            meta={**dict(meta or {}), "merge": info},
            actions=tuple(actions),
        )
        self.commits.put(commit)
        return MergeResult("merge", commit.id, base, plan.resolved)

    def _land(
        self,
        branch: str,
        head: str,
        new: str,
        since: int | None,
        direct: bool = False,
        fence: Requirement | None = None,
    ) -> None:
        """Move ``branch`` from ``head`` to ``new`` by a merge (a protected branch allows
        it unless ``direct``); PreconditionFailedError if it moved."""
        lander = self.lander(functools.partial(self.added_keys, head, new), since)
        try:
            self.refs.move_branch(branch, head, new, lander, not direct, fence)
        except StorageError:
            if self.refs.branch(branch) != new:  # did the append land before the failure?
                raise

    def cherry_pick(
        self,
        commit_ref: str,
        branch: str,
        strategy: str = "fail",
        author: str | None = None,
    ) -> Commit:
        """Apply the changes of one (non-merge) commit to ``branch`` as a new commit."""
        picked = self.commits.get(self.resolve(commit_ref).commit)
        if len(picked.parents) != 1:
            raise InvalidInputError(f"cannot cherry-pick {picked.id}: a root or merge commit")
        base = self.commits.get(picked.parents[0]).snapshot
        head = self.head(branch)
        s_side = self._side(base, picked)
        d_side = self._side(base, self.commits.get(head))
        plan = merge.plan_merge(s_side, d_side, strategy)
        if plan.conflicts:
            raise ConflictError(
                f"cherry-pick of {picked.id} onto {branch}: conflicting entries:"
                f" {', '.join(plan.conflicts)}"
            )
        if not plan.changes:
            raise InvalidInputError(f"cherry-pick of {picked.id} changes nothing on {branch!r}")
        current = self.commits.get(head).snapshot
        actions = []
        for key, value in sorted(plan.changes.items()):
            if value is None:
                actions.append(Action("delete", key, self.snapshots.get(current, key) or {}))
            else:
                actions.append(Action("add", key, value))
        return self.commit(
            branch,
            actions,
            message=picked.message,
            author=author or picked.author,
            meta={**dict(picked.meta), "cherry_pick": picked.id},
            expected_head=head,
            since=None,  # its objects come from history vacuum may have trimmed
        )
