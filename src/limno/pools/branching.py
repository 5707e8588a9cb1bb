"""Git operations of a pool: branches, tags, merge, diff, cherry-pick, reset, transactions.

They act on the versioning core only, so every pool kind gets them by mixing in
:class:`Branching` (record pools now, file pools later): the entries are data
objects for one and paths for the other, and nothing here looks inside them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import inspect
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from limno.core import protection
from limno.core.commits import now_iso
from limno.core.hooks import Hooks, HookSpec, validate_hook
from limno.core.versioning import DiffEntry, MergeResult, Versioned
from limno.errors import InvalidInputError, NotFoundError
from limno.ksuid import ksuid

if TYPE_CHECKING:
    from limno.core.commits import Commit
    from limno.journal import Requirement
    from limno.pools.registry import PoolConfig, PoolRegistry

__all__ = ["Branching", "BranchView", "DEFAULT_BRANCH", "TX_PREFIX", "check_limit", "transaction"]

DEFAULT_BRANCH = "main"
#: throw-away branches of transactions are named ``_tx-<ksuid>``
TX_PREFIX = "_tx-"


def check_limit(limit: int | None) -> None:
    """A ``limit`` of a log or a scan: a negative one used to read as an empty answer,
    which hides a caller's mistake (``log -n -1`` printed nothing and exited 0)."""
    if limit is not None and limit < 0:
        raise InvalidInputError(f"limit must not be negative, not {limit}")


class Branching:
    """Mixin: git semantics over ``self.versioned``."""

    versioned: Versioned
    registry: PoolRegistry
    config: PoolConfig

    # -- refs ------------------------------------------------------------------
    def branches(self) -> dict[str, str]:
        """Branch name -> head commit id."""
        return self.versioned.refs.branches()

    def tags(self) -> dict[str, str]:
        """Tag name -> commit id."""
        return self.versioned.refs.tags()

    def branch(self, name: str, from_ref: str | None = None) -> str:
        """Create branch ``name`` at ``from_ref`` (default ``main``): O(1), no data copied.

        From a commit that vacuum may have trimmed (a commit id, ``--as-of``, or any
        history once a retention window applied) the objects are checked to exist
        first, which reads the commit's snapshot.
        """
        return self.versioned.create_ref("branch", name, from_ref or DEFAULT_BRANCH)

    def delete_branch(self, name: str) -> str:
        """Delete a branch and its staging area; returns the commit it pointed at."""
        if name == DEFAULT_BRANCH:
            raise InvalidInputError(f"cannot delete the default branch {DEFAULT_BRANCH!r}")
        head = self.versioned.head(name)
        self.versioned.refs.delete_branch(name)
        self.versioned.unstage(name, list(self.versioned.staged(name)))
        return head

    def protect(self, branch: str) -> bool:
        """Protect ``branch``: from now on only merges (and maintenance) move it, and it
        cannot be deleted (see :mod:`limno.core.protection`); False if it already was."""
        return self.versioned.refs.protection.protect(branch, now_iso())

    def unprotect(self, branch: str) -> bool:
        """Lift the protection of ``branch``; False if it had none."""
        return self.versioned.refs.protection.unprotect(branch)

    def protected(self) -> list[str]:
        """The protected branches, by name."""
        return self.versioned.refs.protection.protected()

    def tag(self, name: str, from_ref: str | None = None) -> str:
        """Create immutable tag ``name`` at ``from_ref`` (default ``main``)."""
        return self.versioned.create_ref("tag", name, from_ref or DEFAULT_BRANCH)

    def delete_tag(self, name: str) -> str:
        commit = self.versioned.refs.tag(name)
        if commit is None:
            raise NotFoundError(f"tag {name!r} not found")
        self.versioned.refs.delete_tag(name)
        return commit

    # -- history -------------------------------------------------------------
    def merge(
        self,
        source: str,
        into: str = DEFAULT_BRANCH,
        strategy: str = "fail",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        fast_forward: bool = True,
        fence: Requirement | None = None,
    ) -> MergeResult:
        """Merge ref ``source`` into branch ``into`` (three-way; fast-forward if possible).

        A transaction's merge (of its ``_tx-`` branch) is a direct write to ``into``,
        refused on a protected branch even if the rule came after the transaction began.
        ``fence``: a condition the landing checks too (a merge request's claim).
        """
        direct = source.startswith(TX_PREFIX)
        return self.versioned.merge(
            source, into, strategy, message, author, meta, fast_forward, direct, fence
        )

    def branch_time(self, ref: str | None, as_of: dt.datetime | None) -> dt.datetime | None:
        """``as_of`` when ``ref`` (default main, ``~N`` or not) is a branch, else None: a tag
        or a commit id names the same commit at any time (what commands reading several
        refs at a time, diff and SQL, apply ``--as-of`` to)."""
        if as_of is None:
            return None
        base = (ref or DEFAULT_BRANCH).partition("~")[0]
        return as_of if self.versioned.refs.branch(base) is not None else None

    def diff(
        self,
        old: str,
        new: str | None = None,
        three_dot: bool = False,
        *,
        as_of: dt.datetime | None = None,
    ) -> list[DiffEntry]:
        """Entries added, removed or changed from ref ``old`` to ref ``new`` (default main).

        With ``three_dot`` the comparison starts at the merge base of the two refs,
        showing only what ``new`` changed since they diverged. ``as_of`` reads each
        side that is a branch as it was at that time (at least one must be).
        """
        new = new or DEFAULT_BRANCH
        old_at, new_at = self.branch_time(old, as_of), self.branch_time(new, as_of)
        if as_of is not None and old_at is None and new_at is None:
            raise InvalidInputError(
                f"--as-of needs a branch, and neither {old!r} nor {new!r} is one"
            )
        a = self.versioned.resolve(old, old_at).commit
        b = self.versioned.resolve(new, new_at).commit
        if three_dot:
            base = self.versioned.merge_base(a, b)
            if base is None:
                raise InvalidInputError(f"{old} and {new} have no common history")
            a = base
        return self.versioned.diff(a, b)

    def cherry_pick(
        self, commit: str, branch: str = DEFAULT_BRANCH, strategy: str = "fail"
    ) -> Commit:
        """Apply one commit's changes on ``branch`` as a new commit."""
        return self.versioned.cherry_pick(commit, branch, strategy)

    def reset(self, branch: str, ref: str) -> tuple[str, str]:
        """``reset --hard``: point ``branch`` at ``ref``; returns (old head, new head)."""
        return self.versioned.reset(branch, ref)

    @contextlib.contextmanager
    def transaction(
        self,
        branch: str = DEFAULT_BRANCH,
        message: str = "",
        author: str | None = None,
        strategy: str = "fail",
    ) -> Iterator[BranchView]:
        """Write to a throw-away branch; merge it into ``branch`` atomically on success
        (see :func:`transaction`)."""
        with transaction(self, branch, message, author, strategy) as view:
            yield view

    # -- hooks ---------------------------------------------------------------
    @property
    def hooks(self) -> Hooks:
        """This pool's hooks: configured ones, plus callables registered in-process."""
        return self.versioned.hooks

    def hook_specs(self) -> list[HookSpec]:
        return list(self.config.settings.hooks)

    def add_hook(self, spec: HookSpec) -> None:
        """Persist a hook in the pool's configuration (every process then runs it)."""
        validate_hook(spec)
        specs = self.hook_specs()
        if any(s.name == spec.name for s in specs):
            raise InvalidInputError(f"pool {self.config.name!r} already has a hook {spec.name!r}")
        self._set_hooks([*specs, spec])

    def remove_hook(self, name: str) -> None:
        specs = self.hook_specs()
        if not any(s.name == name for s in specs):
            raise NotFoundError(f"pool {self.config.name!r} has no hook {name!r}")
        self._set_hooks([s for s in specs if s.name != name])

    def _set_hooks(self, specs: list[HookSpec]) -> None:
        settings = self.config.settings.with_hooks(tuple(specs))
        self.config = self.registry.update(self.config, settings=settings)
        self.versioned.hooks.specs = specs


class BranchView:
    """A pool bound to one branch: every method gets ``branch=``/``ref=`` filled in."""

    def __init__(self, pool: Any, branch: str) -> None:
        self.pool = pool
        self.branch = branch

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.pool, name)
        if not callable(attr):
            return attr
        params = inspect.signature(attr).parameters
        if "branch" in params:
            return functools.partial(attr, branch=self.branch)
        if "ref" in params:
            return functools.partial(attr, ref=self.branch)
        return attr


@contextlib.contextmanager
def transaction(
    pool: Any,
    branch: str = DEFAULT_BRANCH,
    message: str = "",
    author: str | None = None,
    strategy: str = "fail",
) -> Iterator[BranchView]:
    """Write to a throw-away branch; merge it into ``branch`` atomically on success.

    Inside the block, the view is ``pool`` bound to the throw-away branch (its
    reads see the transaction's own writes). On a normal exit the branch is
    merged (fast-forward when ``branch`` did not move) and deleted; on an
    exception — including a merge conflict — it is deleted and nothing becomes
    visible on ``branch``. Only public pool operations are used, so any pool
    implementation (in process or remote) gets transactions. A protected ``branch``
    refuses: first here, before any work, and at the merge (:meth:`Branching.merge`).
    """
    if branch not in pool.branches():
        raise NotFoundError(f"branch {branch!r} not found")
    if branch in pool.protected():
        raise protection.refusal(pool.name, branch)
    name = f"{TX_PREFIX}{ksuid()}"
    pool.branch(name, branch)
    try:
        yield BranchView(pool, name)
        pool.merge(name, branch, strategy, message or f"transaction {name}", author)
    finally:
        pool.delete_branch(name)
