"""Protected branches (lakeFS's branch protection): only a merge may move one.

A rule is an entry of the pool's branch store, the journal of :mod:`limno.core.refs`:
``protected:<branch>`` -> ``{"since": iso}``, beside the ``branch:<branch>`` entry it
guards. Keeping rules in the same journal as the heads is what makes them hold under
concurrency. Every ref move is one compare-and-swap append to that journal, and a
*direct* move (a commit, revert, cherry-pick, reset, a transaction's merge) or a
branch delete carries the requirement :class:`Unprotected`, checked against exactly
the state the append follows. Protecting is itself an append. So the journal orders
the two: if the protect entry lands first, the commit's append (which then either
follows it, or loses the race and is checked again against a state that holds it)
is refused; if the commit's append lands first, it landed before protect returned.
No direct move can land after a protect returned.

What may move a protected branch: a merge (fast-forward or merge commit), and
maintenance, compaction and partition splits, which rewrite objects without changing
what a read returns (the pool's iterators apply alike at compaction and at query
time). Vacuum and tags move no branch. Staging onto a protected branch is refused
too: what is staged could only be committed directly.

The early checks (:meth:`Protection.head` and :meth:`Protection.check`, at the start of
a load, an add, a ``delete --where``, a Spark write and every commit before its hooks
run) only spare the work and the hooks: they refuse before any object is written. A
protect that lands between an early check and the append still refuses the commit at
the append; objects written meanwhile are referenced by nothing (not a fault for
``verify``) and vacuum removes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from limno.errors import NotFoundError, ProtectedBranchError
from limno.journal import JournalStore, Put, Remove, Requirement, StoreState

__all__ = [
    "DELETE",
    "MOVE",
    "PREFIX",
    "Protection",
    "Unprotected",
    "not_a_branch",
    "protection_key",
    "refusal",
]

#: the branch-store key prefix of a rule (branches are ``branch:``, tags ``tag:``)
PREFIX = "protected:"
#: why a protected branch refuses a direct move, and a delete
MOVE = "only merges may move it"
DELETE = "it cannot be deleted"


def protection_key(branch: str) -> str:
    return f"{PREFIX}{branch}"


def not_a_branch(name: str, tagged: bool) -> str:
    """What a write named instead of a branch, if anything (``tagged``: ``name`` is a
    tag): loading onto ``v1`` or ``main~1`` said only that no such branch exists."""
    if tagged:
        return f" ({name!r} is a tag; a write goes to a branch)"
    if "~" in name:
        return " (a ref with '~' names a past commit; a write goes to a branch)"
    return ""


def _branch_key(branch: str) -> str:
    return f"branch:{branch}"  # limno.core.refs' key of a branch head


def refusal(pool: str, branch: str, why: str = MOVE) -> ProtectedBranchError:
    """The one-line error of a refused write, with the command that lifts the rule."""
    return ProtectedBranchError(
        f"branch {branch!r} of pool {pool!r} is protected: {why}"
        f" (limno branch unprotect -p {pool} {branch})"
    )


@dataclass(frozen=True)
class Unprotected(Requirement):
    """A journal requirement: ``branch`` has no protection rule (ProtectedBranchError
    otherwise, which no writer retries: it is not a lost compare-and-swap)."""

    pool: str
    branch: str
    why: str = MOVE

    def check(self, items: Mapping[str, dict[str, Any]]) -> None:
        if protection_key(self.branch) in items:
            raise refusal(self.pool, self.branch, self.why)


class Protection:
    """The protection rules of one pool, kept in its branch store ``journal``; ``pool``
    names the pool in refusals."""

    def __init__(self, journal: JournalStore, pool: str) -> None:
        self.journal = journal
        self.pool = pool

    def protected(self) -> list[str]:
        """The protected branches, by name."""
        items = self.journal.state().items
        return sorted(k[len(PREFIX) :] for k in items if k.startswith(PREFIX))

    def requirement(self, branch: str, why: str = MOVE) -> Unprotected:
        return Unprotected(self.pool, branch, why)

    def check(self, branch: str, why: str = MOVE) -> None:
        """Refuse now if ``branch`` is protected (an early check; see the module doc)."""
        self.requirement(branch, why).check(self.journal.state().items)

    def head(self, branch: str) -> str:
        """The head of ``branch``, which a direct write is about to move: NotFoundError
        if there is no such branch, ProtectedBranchError if it is protected."""
        items = self.journal.state().items
        value = items.get(_branch_key(branch))
        if value is None:
            tagged = f"tag:{branch}" in items
            raise NotFoundError(f"branch {branch!r} not found{not_a_branch(branch, tagged)}")
        self.requirement(branch).check(items)
        return str(value["commit"])

    def protect(self, branch: str, since: str) -> bool:
        """Protect an existing branch (``since``: the time to record); False if it was
        protected already. Atomic with every ref move: see the module docstring."""
        key = protection_key(branch)
        state = self.journal.state()
        if key in state.items and _branch_key(branch) in state.items:
            return False
        changed = [True]

        def updates(now: StoreState) -> list[Put]:
            if _branch_key(branch) not in now.items:
                raise NotFoundError(f"branch {branch!r} not found")
            changed[0] = key not in now.items
            return [Put(key, {"since": since})] if changed[0] else []

        self.journal.commit(updates, state=state)
        return changed[0]

    def unprotect(self, branch: str) -> bool:
        """Lift the rule of ``branch``; False if it had none (NotFoundError if there is
        neither a rule nor a branch of that name)."""
        key = protection_key(branch)
        state = self.journal.state()
        if key not in state.items:
            if _branch_key(branch) not in state.items:
                raise NotFoundError(f"branch {branch!r} not found")
            return False
        changed = [True]

        def updates(now: StoreState) -> list[Remove]:
            changed[0] = key in now.items
            return [Remove(key)] if changed[0] else []

        self.journal.commit(updates, state=state)
        return changed[0]
