"""What every pool of the lake interface has, whatever it holds: git operations.

A pool is versioned the same way whether its entries are data objects (a record pool,
:class:`~limno.api.base.Pool`) or paths (a file pool,
:class:`~limno.api.base_files.FilePool`): branches, tags, history, merge, diff,
cherry-pick, reset, revert, hooks, transactions and vacuum live here once, so that
``limno branch``, ``log``, ``merge``... (and the server's routes behind them) take
either kind through :meth:`limno.api.base.Lake.versioned_pool`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from limno.core.commits import Commit
    from limno.core.hooks import HookSpec
    from limno.core.versioning import DiffEntry, MergeResult
    from limno.pools.branching import BranchView
    from limno.pools.registry import PoolConfig
    from limno.pools.review_compare import Comparison
    from limno.pools.reviews import MergeRequest
    from limno.pools.vacuum import Retention, VacuumReport

__all__ = ["VersionedPool"]


class VersionedPool(ABC):
    """A pool of either kind: identity, refs, history and the git operations."""

    # -- identity --------------------------------------------------------------------
    #: the pool's registered configuration (name, id, kind, key, settings)
    config: PoolConfig

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def kind(self) -> str:
        """``records`` or ``files``."""
        return self.config.kind

    # -- refs and history --------------------------------------------------------------
    @abstractmethod
    def branches(self) -> dict[str, str]:
        """Branch name -> head commit id."""

    @abstractmethod
    def tags(self) -> dict[str, str]:
        """Tag name -> commit id."""

    @abstractmethod
    def branch(self, name: str, from_ref: str | None = None) -> str:
        """Create a branch at ``from_ref`` (default ``main``); its commit."""

    @abstractmethod
    def delete_branch(self, name: str) -> str:
        """Delete a branch and its staging area; the commit it pointed at."""

    @abstractmethod
    def protect(self, branch: str) -> bool:
        """Protect a branch: only merges (and compaction, splits) move it, every direct
        write and its deletion raise ProtectedBranchError; False if it already was."""

    @abstractmethod
    def unprotect(self, branch: str) -> bool:
        """Lift a branch's protection; False if it had none."""

    @abstractmethod
    def protected(self) -> list[str]:
        """The protected branches, by name."""

    @abstractmethod
    def tag(self, name: str, from_ref: str | None = None) -> str:
        """Create an immutable tag; its commit."""

    @abstractmethod
    def delete_tag(self, name: str) -> str: ...

    @abstractmethod
    def resolve(self, ref: str | None = None, as_of: dt.datetime | None = None) -> str:
        """The commit id a ref names (``main``, ``v1``, ``main~2``, an id or prefix)."""

    @abstractmethod
    def log(
        self,
        ref: str | None = None,
        limit: int | None = None,
        first_parent: bool = False,
        *,
        as_of: dt.datetime | None = None,
    ) -> list[Commit]:
        """Commits reachable from ``ref``, newest first; with ``as_of``, from the commit
        the branch ``ref`` pointed at then."""

    @abstractmethod
    def merge(
        self,
        source: str,
        into: str = "main",
        strategy: str = "fail",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        fast_forward: bool = True,
    ) -> MergeResult: ...

    @abstractmethod
    def diff(
        self,
        old: str,
        new: str | None = None,
        three_dot: bool = False,
        *,
        as_of: dt.datetime | None = None,
    ) -> list[DiffEntry]:
        """Entries added, removed or changed from ref ``old`` to ref ``new``; ``as_of``
        reads each side that is a branch as it was then (tags and commits as they are).
        The entries are data objects (records) or paths (files), as stored."""

    @abstractmethod
    def cherry_pick(self, commit: str, branch: str = "main", strategy: str = "fail") -> Commit: ...

    @abstractmethod
    def reset(self, branch: str, ref: str) -> tuple[str, str]:
        """``reset --hard``: (old head, new head)."""

    @abstractmethod
    def revert(
        self, commit_id: str, branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit: ...

    # -- merge requests (limno.pools.reviews) ------------------------------------------
    @abstractmethod
    def open_merge_request(
        self,
        source: str,
        into: str = "main",
        title: str = "",
        description: str = "",
        author: str | None = None,
    ) -> MergeRequest:
        """Propose merging ref ``source`` into branch ``into``; the new open request."""

    @abstractmethod
    def merge_requests(self, state: str | None = None) -> list[MergeRequest]:
        """The pool's merge requests, newest first (``state``: open, merged, closed;
        None or ``all``: every one)."""

    @abstractmethod
    def merge_request(self, mr_id: str) -> MergeRequest: ...

    @abstractmethod
    def merge_merge_request(
        self, mr_id: str, strategy: str = "fail", author: str | None = None
    ) -> MergeRequest:
        """Merge an open request with ``strategy``; the request, now merged. A failed
        merge raises its error and leaves the request open with the attempt recorded; of
        two concurrent merges of one request one wins, the other gets ConflictError."""

    @abstractmethod
    def close_merge_request(self, mr_id: str, author: str | None = None) -> MergeRequest:
        """Close an open request without merging."""

    @abstractmethod
    def compare(
        self, source: str, into: str = "main", rows: int = 10, limit: int = 1000
    ) -> Comparison:
        """What merging ``source`` into ``into`` would bring (the diff since the merge
        base, counts, the first ``limit`` entries), the conflicts it would meet (a dry
        run), and for record pools ``rows`` rows of each added/removed object."""

    # -- hooks -------------------------------------------------------------------------
    @abstractmethod
    def hook_specs(self) -> list[HookSpec]: ...

    @abstractmethod
    def add_hook(self, spec: HookSpec) -> None: ...

    @abstractmethod
    def remove_hook(self, name: str) -> None: ...

    # -- maintenance ---------------------------------------------------------------------
    @abstractmethod
    def vacuum(
        self,
        grace: dt.timedelta | None = None,
        dry_run: bool = False,
        retention: Retention = None,
    ) -> VacuumReport:
        """Free the bytes no branch, tag, staging area or retained commit holds (bytes
        limno did not write, imported files, are never deleted)."""

    # -- transactions (built on the operations above, so every implementation has it) ------
    @contextlib.contextmanager
    def transaction(
        self,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        strategy: str = "fail",
    ) -> Iterator[BranchView]:
        """Write to a throw-away branch merged into ``branch`` atomically on success."""
        from limno.pools.branching import transaction

        with transaction(self, branch, message, author, strategy) as view:
            yield view
