"""A branch's staging area: entries added to a branch but not yet committed.

``add`` writes its objects and stages them; ``commit`` later lands what is staged
in one commit. A staged entry is one small JSON file,
``<pool-id>/staging/<branch>/<name>.json``, holding the key, the entry and the gc
ticket read before its object was written (vacuum reads these areas too: see
:mod:`limno.core.gc`). ``<name>`` is the key itself when it is a plain id (a record
pool's object ids: lakes written before file pools keep their names) and
``~<sha256 of the key>`` otherwise: a file pool's keys are paths of up to 1,024 bytes
with any characters, ``/``, ``..`` and spaces included, which no object name can hold.
A staged value may be a *tombstone* (:data:`TOMBSTONE`, a file pool's staged delete):
its commit deletes the key's committed entry. The area lives here, apart from the commit protocol of
:mod:`limno.core.versioning`, because it is a separate store with its own recovery:
an entry whose commit landed but whose unstaging never ran is dropped when the area
is next read, so it cannot come back once the branch moves on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from limno.core.commits import Action
from limno.core.refs import validate_ref_name
from limno.errors import (
    AlreadyExistsError,
    CorruptError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
)

if TYPE_CHECKING:
    from limno.core.commits import Commit, CommitStore
    from limno.core.committed import Snapshots
    from limno.core.refs import RefStore
    from limno.storage import Storage

__all__ = ["TOMBSTONE", "Staging", "is_tombstone", "staging_name"]

T = TypeVar("T")

#: keys staged under their own name (record pools' object ids are KSUIDs)
_PLAIN_KEY = re.compile(r"[0-9A-Za-z]{1,64}")
#: the staged value of a delete: committing it deletes the key's committed entry
TOMBSTONE: Mapping[str, Any] = {"deleted": True}


def is_tombstone(value: Mapping[str, Any]) -> bool:
    return value.get("deleted") is True and len(value) == 1


#: above this many entries, a remote staging area is read (and unstaged) by several
#: threads: one request per entry, which on S3 is network latency, not work (on a local
#: or memory store a request is microseconds of work, and threads only add contention)
PARALLEL_FROM = 64
STAGING_THREADS = 16


def _each(storage: Storage, fn: Callable[[str], T], items: Sequence[str]) -> list[T]:
    """``[fn(i) for i in items]``, by :data:`STAGING_THREADS` threads when there are many
    and the store is remote (named ``limno-staging-*``: tests that pause a writer's
    threads see them as its own)."""
    if len(items) < PARALLEL_FROM or storage.uri.startswith(("file:", "memory:")):
        return [fn(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(STAGING_THREADS, thread_name_prefix="limno-staging") as pool:
        return list(pool.map(fn, items))


def staging_name(key: str) -> str:
    """The file name a staged ``key`` takes in its branch's area (see the module
    docstring): a name any store accepts, whatever the key holds."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{key}.json"
    return f"~{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()}.json"


#: the committed values a staged conditional write holds over (see Staging.judged_check)
Judged = list[dict[str, Any] | None]


def _parse_doc(path: str, raw: bytes) -> tuple[str, dict[str, Any], int | None]:
    """A staging entry's bytes as (key, value, ticket); CorruptError if unreadable."""
    return _parse_judged(path, raw)[:3]


def _parse_judged(path: str, raw: bytes) -> tuple[str, dict[str, Any], int | None, Judged | None]:
    """:func:`_parse_doc` and the committed values the entry's condition holds over
    (None: no condition recorded, an unconditional write or one staged before they
    were recorded), from one parse."""
    try:
        doc = json.loads(raw)
        key, value = doc["key"], doc["value"]
        since = doc.get("since")
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptError(f"{path}: unreadable staging entry ({e})") from e
    if not isinstance(key, str) or not isinstance(value, dict):
        raise CorruptError(f"{path}: unreadable staging entry")
    judged = doc.get("judged")
    if not isinstance(judged, list) or not all(v is None or isinstance(v, dict) for v in judged):
        judged = None
    return key, value, since if isinstance(since, int) else None, judged


#: how many committed values a staged conditional write keeps to be judged against
_JUDGED = 16


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

    def stage(self, branch: str, key: str, value: Mapping[str, Any], since: int | None) -> None:
        """Stage an added entry on ``branch`` (committed later by :meth:`commit_staged`).

        ``since`` is the gc ticket read before the entry's object was written; the
        commit that lands it checks against it (see :mod:`limno.core.gc`; None: check
        its objects against vacuum's tombstones). A protected branch refuses: what is
        staged could only be committed directly.
        """
        self.writable_head(branch)
        doc = {"key": key, "value": dict(value), "since": since}
        data = json.dumps(doc, sort_keys=True).encode()
        self.storage.put(f"{self._staging_prefix(branch)}/{staging_name(key)}", data)

    def stage_replacing(
        self,
        branch: str,
        key: str,
        value: Mapping[str, Any],
        since: int | None,
        checked: Mapping[str, Any] | None,
        committed: Mapping[str, Any] | None = None,
    ) -> bool:
        """Stage ``value`` for ``key`` only if its staged value is still ``checked`` (None:
        nothing staged); False, staging nothing, otherwise. A conditional write's stage
        (If-Match, If-None-Match), its condition judged against ``checked``, or when
        nothing was staged against ``committed``, the key's committed value then.

        Of writers racing on one key exactly one wins, in one atomic step of the store:
        a new entry is created put-if-absent; a ``checked`` entry is replaced only if
        its bytes are still the ones read (:meth:`~limno.storage.Storage.replace_if_equal`),
        so a reader sees the old staged entry or the new one, never the committed file
        between the two, and a crash cannot lose both.

        The entry also records the committed values its condition holds over
        (``judged``, see :meth:`judged_check`): a write judged against the committed
        file, committed and unstaged by another writer before this stage, is refused
        by the commit that would land it, not by this stage.
        """
        self.writable_head(branch)
        path = f"{self._staging_prefix(branch)}/{staging_name(key)}"
        doc: dict[str, Any] = {"key": key, "value": dict(value), "since": since}
        if checked is None:
            doc["judged"] = [None if committed is None else dict(committed)]
            return self._create(path, doc)
        try:
            raw = self.storage.get(path)
        except NotFoundError:
            return False
        if _parse_doc(path, raw)[1] != checked:
            return False
        earlier = _parse_judged(path, raw)[3]
        if earlier is not None:  # the staged write's own landing, or what it held over
            judged = [None if is_tombstone(checked) else dict(checked), *earlier]
            # bounded: the newest landings and the committed value the chain began on
            doc["judged"] = (
                judged if len(judged) <= _JUDGED else [*judged[: _JUDGED - 1], judged[-1]]
            )
        data = json.dumps(doc, sort_keys=True).encode()
        return self.storage.replace_if_equal(path, data, raw)

    def _create(self, path: str, doc: Mapping[str, Any]) -> bool:
        try:
            self.storage.put_if_absent(path, json.dumps(doc, sort_keys=True).encode())
        except AlreadyExistsError:
            return False
        return True

    def staged_doc(self, branch: str, key: str) -> tuple[dict[str, Any], int | None] | None:
        """The staged value of one key on ``branch`` and its ticket (None: not staged),
        read without listing the area. Unlike :meth:`staged` it does not drop an entry
        whose commit landed before its unstaging: callers compare with the head."""
        path = f"{self._staging_prefix(branch)}/{staging_name(key)}"
        try:
            doc = json.loads(self.storage.get(path))
        except NotFoundError:
            return None
        except ValueError as e:
            raise CorruptError(f"{path}: unreadable staging entry ({e})") from e
        value = doc.get("value") if isinstance(doc, dict) else None
        if not isinstance(value, dict) or doc.get("key") != key:
            raise CorruptError(f"{path}: unreadable staging entry")
        since = doc.get("since")
        return value, since if isinstance(since, int) and not isinstance(since, bool) else None

    def judged_check(self, guards: Mapping[str, Judged]) -> Callable[[Commit], None]:
        """A commit's ``validate`` (see :meth:`~limno.core.versioning.Versioned.commit`)
        that refuses, with PreconditionFailedError naming every such key, to land a
        staged conditional write (``guards``: key -> the committed values its condition
        holds over, read with the staged entries the commit lands: see
        :meth:`staged_docs`) on a parent whose committed value of the key is none of
        those: another writer's commit landed after the condition was judged, and the
        write would overwrite (or delete) a version it never saw. Run on every attempt
        of the commit's compare-and-swap, so no commit can slip between the check and
        the landing."""

        def check(parent: Commit) -> None:
            stale = [
                key
                for key, allowed in sorted(guards.items())
                if self.snapshots.get(parent.snapshot, key) not in allowed
            ]
            if stale:
                raise PreconditionFailedError(
                    f"{', '.join(map(repr, stale))} committed by another write after the"
                    " staged write's condition was judged (If-Match / If-None-Match):"
                    " nothing committed; write them again, or discard them"
                )

        return check

    def staged(self, branch: str) -> dict[str, dict[str, Any]]:
        """The staged entries of ``branch``, by key."""
        return {k: v for k, (v, _) in self._staged_docs(branch).items()}

    def staged_count(self, branch: str) -> int:
        """How many entries ``branch`` has staged (tombstones too): a listing, no reads."""
        return sum(1 for _ in self.storage.walk(self._staging_prefix(branch) + "/"))

    def staged_docs(
        self, branch: str, judged: dict[str, Judged] | None = None
    ) -> dict[str, tuple[dict[str, Any], int | None]]:
        """Staged entries (tombstones too) with the ticket each was written under;
        ``judged``, if given, gets the committed values each conditional write among
        them holds over (for :meth:`judged_check`), read with it: no second request."""
        return self._staged_docs(branch, judged)

    def _staged_docs(
        self, branch: str, judged: dict[str, Judged] | None = None
    ) -> dict[str, tuple[dict[str, Any], int | None]]:
        """Staged entries with the ticket each was written under (None: unknown)."""
        out: dict[str, tuple[dict[str, Any], int | None]] = {}
        guards: dict[str, Judged] = {}
        paths = [info.path for info in self.storage.walk(self._staging_prefix(branch))]
        for doc in _each(self.storage, self._read_doc, paths):
            if doc is not None:
                key, value, since, held = doc
                out[key] = (value, since)
                if held is not None:
                    guards[key] = held
        out = self._drop_landed(branch, out)
        if judged is not None:
            judged.update((k, g) for k, g in guards.items() if k in out)
        return out

    def _read_doc(self, path: str) -> tuple[str, dict[str, Any], int | None, Judged | None] | None:
        """One staging entry: (key, value, ticket, judged), or None if it is gone."""
        try:
            return _parse_judged(path, self.storage.get(path))
        except NotFoundError:
            return None  # committed or dropped meanwhile

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
        landed = [k for k, (v, _) in docs.items() if self._landed(snapshot, k, v)]
        with contextlib.suppress(LimnoError):
            self.unstage(branch, landed, expect={k: docs[k][0] for k in landed})
        return {k: d for k, d in docs.items() if k not in landed}

    def _landed(self, snapshot: str, key: str, value: Mapping[str, Any]) -> bool:
        """Whether ``snapshot`` holds the staged ``value`` of ``key`` (a tombstone: holds
        no entry for it, so there is nothing left to delete)."""
        current = self.snapshots.get(snapshot, key)
        return current is None if is_tombstone(value) else current == value

    def unstage(
        self,
        branch: str,
        keys: Iterable[str],
        expect: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Drop staged ``keys``; with ``expect``, only those whose staged value is still
        the expected one (a file pool's path may be staged again meanwhile: that newer
        write must stay). The entry is read, its value compared, and the delete is
        conditional on the entry's bytes being the ones read
        (:meth:`~limno.storage.Storage.delete_if_equal`): atomic on a local lake, so a
        write staged between the read and the delete always stays; on S3 and memory
        stores the store offers no conditional delete and the window is only narrowed."""
        prefix = self._staging_prefix(branch)

        def drop(key: str) -> None:
            path = f"{prefix}/{staging_name(key)}"
            if expect is None:
                self.storage.delete(path)
                return
            try:
                raw = self.storage.get(path)
            except NotFoundError:
                return
            if _parse_doc(path, raw)[1] == expect.get(key):
                self.storage.delete_if_equal(path, raw)

        _each(self.storage, drop, list(keys))

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
        actions = self.staged_actions(branch, docs)
        tickets = [since for v, since in docs.values() if not is_tombstone(v)]
        since = (
            None if None in tickets else min((t for t in tickets if t is not None), default=None)
        )
        commit = self.commit(branch, actions, since=since, **kwargs)
        # the commit landed: a failure now must not report it failed (a retry would
        # commit again); what is left staged is dropped when next read (_drop_landed)
        with contextlib.suppress(LimnoError):
            self.unstage(branch, docs)
        return commit

    def staged_actions(
        self, branch: str, docs: Mapping[str, tuple[Mapping[str, Any], int | None]]
    ) -> list[Action]:
        """The actions that commit staged ``docs``: an ``add`` per entry, a ``delete`` of the
        head's entry per tombstone (whose value must still be the head's when the commit
        lands, else the commit conflicts)."""
        head = None
        actions = []
        for key, (value, _) in sorted(docs.items()):
            if not is_tombstone(value):
                actions.append(Action("add", key, dict(value)))
                continue
            if head is None:
                head = self.commits.get(self.writable_head(branch)).snapshot
            current = self.snapshots.get(head, key)
            if current is not None:
                actions.append(Action("delete", key, current))
        return actions
