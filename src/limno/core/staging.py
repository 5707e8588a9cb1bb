"""A branch's staging area: entries added to a branch but not yet committed.

``add`` writes its objects and stages them; ``commit`` later lands what is staged
in one commit. A staged entry is one small JSON file,
``<pool-id>/staging/<branch>/<key>.json``, holding the entry and the gc ticket read
before its object was written (vacuum reads these areas too: see
:mod:`limno.core.gc`). The area lives here, apart from the commit protocol of
:mod:`limno.core.versioning`, because it is a separate store with its own recovery:
an entry whose commit landed but whose unstaging never ran is dropped when the area
is next read, so it cannot come back once the branch moves on.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from limno.core.commits import Action
from limno.core.refs import validate_ref_name
from limno.errors import CorruptError, InvalidInputError, LimnoError, NotFoundError

if TYPE_CHECKING:
    from limno.core.commits import Commit, CommitStore
    from limno.core.committed import Snapshots
    from limno.core.refs import RefStore
    from limno.storage import Storage

__all__ = ["Staging"]


class Staging:
    """Mixin of :class:`~limno.core.versioning.Versioned`: the staging areas of a pool's
    branches."""

    #: set by Versioned: where the pool lives and its stores
    storage: Storage
    pool_id: str
    commits: CommitStore
    refs: RefStore
    snapshots: Snapshots
    #: Versioned's: the commit protocol, which lands what is staged
    commit: Callable[..., Commit]

    def writable_head(self, branch: str) -> str:
        raise NotImplementedError  # Versioned's: the head, if the branch takes direct writes

    def _staging_prefix(self, branch: str) -> str:
        """Where ``branch`` stages: its name becomes part of a path, so only a name a
        branch can have does (any other is no branch: not found, as ``Versioned.head`` says)."""
        try:
            validate_ref_name("branch", branch)
        except InvalidInputError:
            raise NotFoundError(f"branch {branch!r} not found") from None
        return f"{self.pool_id}/staging/{branch}"

    def stage(self, branch: str, key: str, value: Mapping[str, Any], since: int) -> None:
        """Stage an added entry on ``branch`` (committed later by :meth:`commit_staged`).

        ``since`` is the gc ticket read before the entry's object was written; the
        commit that lands it checks against it (see :mod:`limno.core.gc`). A protected
        branch refuses: what is staged could only be committed directly.
        """
        self.writable_head(branch)
        doc = {"key": key, "value": dict(value), "since": since}
        data = json.dumps(doc, sort_keys=True).encode()
        self.storage.put(f"{self._staging_prefix(branch)}/{key}.json", data)

    def staged(self, branch: str) -> dict[str, dict[str, Any]]:
        """The staged entries of ``branch``, by key."""
        return {k: v for k, (v, _) in self._staged_docs(branch).items()}

    def _staged_docs(self, branch: str) -> dict[str, tuple[dict[str, Any], int | None]]:
        """Staged entries with the ticket each was written under (None: unknown)."""
        out: dict[str, tuple[dict[str, Any], int | None]] = {}
        for info in self.storage.walk(self._staging_prefix(branch)):
            try:
                doc = json.loads(self.storage.get(info.path))
                key, value = doc["key"], doc["value"]
                since = doc.get("since")
            except NotFoundError:
                continue  # committed or dropped meanwhile
            except (ValueError, KeyError, TypeError) as e:
                raise CorruptError(f"{info.path}: unreadable staging entry ({e})") from e
            if not isinstance(key, str) or not isinstance(value, dict):
                raise CorruptError(f"{info.path}: unreadable staging entry")
            out[key] = (value, since if isinstance(since, int) else None)
        return self._drop_landed(branch, out)

    def _drop_landed(
        self, branch: str, docs: dict[str, tuple[dict[str, Any], int | None]]
    ) -> dict[str, tuple[dict[str, Any], int | None]]:
        """``docs`` less those the branch head already holds as staged: their commit
        landed but the unstaging after it failed or never ran (a crash). They are
        unstaged here, best effort, so that they cannot come back once the branch
        moves on."""
        head = self.refs.branch(branch) if docs else None
        if head is None:
            return docs
        snapshot = self.commits.get(head).snapshot
        landed = [k for k, (v, _) in docs.items() if self.snapshots.get(snapshot, k) == v]
        with contextlib.suppress(LimnoError):
            self.unstage(branch, landed)
        return {k: d for k, d in docs.items() if k not in landed}

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
        docs = self._staged_docs(branch)
        if keys:
            missing = [k for k in keys if k not in docs]
            if missing:
                raise NotFoundError(f"not staged on {branch!r}: {', '.join(missing)}")
            docs = {k: docs[k] for k in keys}
        if not docs:
            raise InvalidInputError(f"nothing staged on branch {branch!r}")
        actions = [Action("add", k, v) for k, (v, _) in sorted(docs.items())]
        tickets = [since for _, since in docs.values()]
        since = None if None in tickets else min(t for t in tickets if t is not None)
        commit = self.commit(branch, actions, since=since, **kwargs)
        # the commit landed: a failure now must not report it failed (a retry would
        # commit again); what is left staged is dropped when next read (_drop_landed)
        with contextlib.suppress(LimnoError):
            self.unstage(branch, docs)
        return commit
