"""Refs: branches and tags of a pool, and the one resolver for ref expressions.

Branches and tags live in a journal store at ``<pool-id>/branches/``, keyed
``branch:<name>`` and ``tag:<name>`` with value ``{"commit": id}``. A branch moves
only by compare-and-swap (the journal entry requires the old head), so reading a
branch head is one journal open: O(1), whatever the history length. The journal's
timestamps, and the dates of the commits landed just after a time, give ``--as-of``
(:meth:`RefStore.branch_as_of`).

A ref expression is ``name``, ``name~N`` or a commit id (or an unambiguous prefix
of one), where ``name`` is a branch or a tag.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from limno.core.commits import CommitStore
from limno.core.protection import DELETE, Protection
from limno.errors import AlreadyExistsError, InvalidInputError, LimnoError, NotFoundError
from limno.journal import (
    AssertAbsent,
    AssertEquals,
    JournalStore,
    Put,
    Remove,
    Requirement,
    StoreState,
)
from limno.ksuid import is_ksuid
from limno.storage import Storage
from limno.units import check_time

__all__ = ["Lander", "RefStore", "Resolved", "parse_pool_ref", "validate_ref_name"]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


def validate_ref_name(kind: str, name: str) -> str:
    """A branch or tag name: letters, digits, ``_ . -``; not a ``~`` expression."""
    if not _NAME.match(name) or ".." in name:
        raise InvalidInputError(
            f"invalid {kind} name {name!r}: use letters, digits, '_', '.', '-', with a"
            " letter, digit or '_' first and no '..' (at most 128 characters)"
        )
    return name


def parse_pool_ref(text: str) -> tuple[str, str | None]:
    """Split ``pool@ref`` into ``(pool, ref)``; ``ref`` is None when absent."""
    pool, sep, ref = text.partition("@")
    if sep and not ref:
        raise InvalidInputError(f"invalid ref {text!r}: nothing after '@'")
    return pool, (ref if sep else None)


@dataclass(frozen=True)
class Resolved:
    """A ref resolved to a commit; ``branch`` is set when the ref named a branch head.

    ``how`` says what the ref named: a branch head, a tag, the first-parent history of
    a branch or tag (``main~2``), or a commit by id or time (``--as-of``). Vacuum keeps
    the objects of heads and tags, and of their history unless a retention window
    trimmed it, so a writer can trust those to exist (see :mod:`limno.core.gc`).
    """

    commit: str
    branch: str | None = None
    how: Literal["branch", "tag", "history", "commit"] = "commit"


class Lander(Protocol):
    """Appends a ref move once vacuum cannot remove what it references (core.gc)."""

    def land(self, updates: Sequence[Put], requirements: Sequence[Requirement]) -> StoreState: ...


class RefStore:
    """Branches and tags of one pool, and its branches' protection rules (``name``:
    the pool's name, for the refusals of :mod:`limno.core.protection`)."""

    def __init__(
        self, storage: Storage, pool_id: str, commits: CommitStore, name: str | None = None
    ) -> None:
        self.journal = JournalStore(storage, f"{pool_id}/branches")
        self.commits = commits
        self.protection = Protection(self.journal, name or pool_id)

    def create(self) -> None:
        self.journal.create()

    # -- branches ------------------------------------------------------------
    def branch(self, name: str) -> str | None:
        value = self.journal.get(f"branch:{name}")
        return None if value is None else str(value["commit"])

    def branches(self) -> dict[str, str]:
        return _of_kind(self.journal.state().items, "branch")

    def tags(self) -> dict[str, str]:
        return _of_kind(self.journal.state().items, "tag")

    def tag(self, name: str) -> str | None:
        value = self.journal.get(f"tag:{name}")
        return None if value is None else str(value["commit"])

    def _write(
        self, updates: Sequence[Put], requirements: Sequence[Requirement], lander: Lander | None
    ) -> None:
        if lander is None:
            self.journal.commit(updates, requirements)
        else:
            lander.land(updates, requirements)

    def create_branch(self, name: str, commit: str, lander: Lander | None = None) -> None:
        """A new branch; its name must not be a branch or a tag (a tag stays reachable)."""
        validate_ref_name("branch", name)
        key, other = f"branch:{name}", f"tag:{name}"
        if self.journal.get(key) is not None:
            raise AlreadyExistsError(f"branch {name!r} already exists")
        if self.journal.get(other) is not None:
            raise AlreadyExistsError(f"{name!r} already exists as a tag")
        self._write(
            [Put(key, {"commit": commit})], [AssertAbsent(key), AssertAbsent(other)], lander
        )

    def move_branch(
        self,
        name: str,
        expected: str,
        new: str,
        lander: Lander | None = None,
        allow_protected: bool = False,
        fence: Requirement | None = None,
    ) -> None:
        """Compare-and-swap: point ``name`` at ``new`` if it still points at ``expected``.

        Raises PreconditionFailedError when the branch moved meanwhile, and
        ProtectedBranchError when it is protected, unless ``allow_protected`` (a merge,
        or maintenance): the rule is read in the same append (limno.core.protection).
        ``fence`` is one more condition checked in that append (a merge request's
        claim: limno.pools.reviews), raising its own error.
        """
        key = f"branch:{name}"
        required: list[Requirement] = [AssertEquals(key, {"commit": expected})]
        if not allow_protected:
            required.insert(0, self.protection.requirement(name))
        if fence is not None:
            required.insert(0, fence)
        self._write([Put(key, {"commit": new})], required, lander)

    def delete_branch(self, name: str) -> None:
        """Remove a branch (ProtectedBranchError if it is protected, decided by the append)."""
        if self.branch(name) is None:
            raise NotFoundError(f"branch {name!r} not found")
        guard = self.protection.requirement(name, DELETE)
        self.journal.commit([Remove(f"branch:{name}")], [guard])

    def create_tag(self, name: str, commit: str, lander: Lander | None = None) -> None:
        validate_ref_name("tag", name)
        key, other = f"tag:{name}", f"branch:{name}"
        if self.journal.get(key) is not None:
            raise AlreadyExistsError(f"tag {name!r} already exists (tags are immutable)")
        if self.journal.get(other) is not None:
            raise AlreadyExistsError(f"{name!r} already exists as a branch")
        self._write(
            [Put(key, {"commit": commit})], [AssertAbsent(key), AssertAbsent(other)], lander
        )

    def delete_tag(self, name: str) -> None:
        if self.tag(name) is None:
            raise NotFoundError(f"tag {name!r} not found")
        self.journal.commit([Remove(f"tag:{name}")])

    def branch_as_of(self, name: str, when: dt.datetime) -> str:
        """Where branch ``name`` pointed at time ``when``, a commit made at or before
        ``when`` included.

        The journal stamps a branch move when it lands, a moment after the commit it
        lands was made (dated): a commit dated ``when`` lands after ``when``. So the
        branch's first move after ``when`` counts too when it lands a commit made for
        it by then (:meth:`_made_for`), not one that merely came to it later (a
        fast-forward to another branch's commit, a reset)."""
        check_time(when)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        key = f"branch:{name}"
        found: str | None = None
        landed: set[str] = set()  # the commits some ref pointed at so far
        for _, entry in self.journal.history():
            later = dt.datetime.fromisoformat(entry["ts"]) > when
            for u in entry["updates"]:
                value = u.get("value") if u["op"] == "put" else None
                new = value.get("commit") if isinstance(value, dict) else None
                if u["key"] == key and (not later or self._made_for(new, found, landed, when)):
                    found = new
                if isinstance(new, str):
                    landed.add(new)
            if later and any(u["key"] == key for u in entry["updates"]):
                break
        if found is None:
            raise NotFoundError(f"branch {name!r} did not exist at {when.isoformat()}")
        return found

    def _made_for(self, commit: Any, head: str | None, landed: set[str], when: dt.datetime) -> bool:
        """Whether a branch move to ``commit`` from ``head`` lands a commit made on
        ``head`` at or before ``when``: one no ref pointed at before (it is new),
        whose first parent is ``head`` (none for a branch's first commit)."""
        if not isinstance(commit, str) or commit in landed:
            return False
        try:
            made = self.commits.get(commit)
        except LimnoError:
            return False  # unreadable: the move counts from when it landed, as before
        if made.parents[:1] != ((head,) if head is not None else ()):
            return False
        made_at = made.time
        return (made_at if made_at.tzinfo else made_at.replace(tzinfo=dt.UTC)) <= when

    # -- resolution ----------------------------------------------------------
    def resolve(self, ref: str | None, as_of: dt.datetime | None = None) -> Resolved:
        """Resolve ``ref`` (default ``main``) to a commit."""
        ref = ref or "main"
        base, _, tilde = ref.partition("~")
        steps = 0
        if _:
            if not tilde.isdigit():
                raise InvalidInputError(f"invalid ref {ref!r}: '~' must be followed by a number")
            steps = int(tilde)
        branch_head = self.branch(base)
        how: Literal["branch", "tag", "history", "commit"]
        if branch_head is not None:
            commit = self.branch_as_of(base, as_of) if as_of is not None else branch_head
            on_branch: str | None = base if steps == 0 and as_of is None else None
            how = "commit" if as_of is not None else "branch"
        elif as_of is not None:
            raise InvalidInputError(f"--as-of needs a branch, and {base!r} is not one")
        elif (tagged := self.tag(base)) is not None:
            commit, on_branch, how = tagged, None, "tag"
        else:
            commit, on_branch, how = self._commit_id(base), None, "commit"
        if steps:
            commit = self.commits.first_parent(commit, steps, base)
            how = "history" if how != "commit" else how
        return Resolved(commit, on_branch, how)

    def _commit_id(self, text: str) -> str:
        if is_ksuid(text):
            if self.commits.exists(text):
                return text
            raise NotFoundError(f"no branch, tag or commit named {text!r}")
        if len(text) >= 6:
            matches = [c for c in self.commits.all_ids() if c.startswith(text)]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise InvalidInputError(f"commit prefix {text!r} is ambiguous")
        raise NotFoundError(f"no branch, tag or commit named {text!r}")


def _of_kind(items: Mapping[str, dict[str, Any]], kind: str) -> dict[str, str]:
    prefix = f"{kind}:"
    return {
        k[len(prefix) :]: str(v["commit"]) for k, v in sorted(items.items()) if k.startswith(prefix)
    }
