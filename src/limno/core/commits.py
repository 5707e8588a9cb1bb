"""Commits: immutable nodes of a pool's DAG, each naming the snapshot it produced.

A commit is written once, with put-if-absent, at ``<pool-id>/commits/<id>.json``
before any branch points at it. Its actions say what changed (``add`` and
``delete`` of entries, with the entry's full value so a revert can undo them);
its ``snapshot`` is the id of the resulting committed snapshot, so reading any
commit's data never replays history.

The core knows entries, not what they are. A record pool's entries are its data
objects (keyed by object id), its partitions (``~partition/<id>``) and its search
indexes (``~index/<field>``): the Zed lake's ``AddIndex`` is a ``create`` action of an
index entry and ``DeleteIndex`` a ``delete`` of one, so indexes branch, merge and
revert like data (see :mod:`limno.pools.records.indexing`).
"""

from __future__ import annotations

import datetime as dt
import functools
import heapq
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from limno.core.committed import _LRU
from limno.errors import CorruptError, NotFoundError
from limno.storage import Storage

__all__ = [
    "ACTION_OPS",
    "MAX_COMMIT_ATTEMPTS",
    "Action",
    "Commit",
    "CommitStore",
    "default_author",
    "now_iso",
]

#: how many times a commit or merge is tried when its branch moved meanwhile
MAX_COMMIT_ATTEMPTS = 200


#: the environment variables getpass.getuser() reads before the user database
_USER_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")


def default_author() -> str:
    """Who runs this process, as getpass.getuser() says; the user database (a file read)
    is asked once."""
    import getpass  # writers only

    if any(os.environ.get(name) for name in _USER_VARIABLES):
        return getpass.getuser()
    return _account_name()


@functools.cache
def _account_name() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user database (containers): fall back
        return "unknown"


#: what an action does to its entry (see :class:`Action`)
ACTION_OPS = ("add", "create", "delete")
_TEXT_FIELDS = ("author", "date", "message")
_SNAPSHOT_ID = re.compile(r"[0-9a-f]{64}")  # see limno.core.committed


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Action:
    """One change of an entry: ``add`` (or overwrite), ``create`` (an add that
    conflicts if the entry exists), ``delete`` (``value`` is the entry's value)."""

    op: str
    key: str
    value: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "key": self.key, "value": dict(self.value)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Action:
        """Raises KeyError, TypeError or ValueError when ``d`` is not an action."""
        _expect(d, Mapping, "an action")
        action = cls(d["op"], _expect(d["key"], str, "an action key"), d.get("value", {}))
        if action.op not in ACTION_OPS:
            raise ValueError(f"unknown action {action.op!r:.40}")
        _expect(action.value, Mapping, "an action value")
        return action

    def inverse(self) -> Action:
        return Action("add" if self.op == "delete" else "delete", self.key, self.value)


@dataclass(frozen=True)
class Commit:
    """An immutable commit."""

    id: str
    parents: tuple[str, ...]
    snapshot: str
    author: str = ""
    date: str = ""
    message: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)
    actions: tuple[Action, ...] = ()
    retries: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parents": list(self.parents),
            "snapshot": self.snapshot,
            "author": self.author,
            "date": self.date,
            "message": self.message,
            "meta": dict(self.meta),
            "actions": [a.to_json() for a in self.actions],
            "retries": self.retries,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Commit:
        """Raises KeyError, TypeError or ValueError when ``d`` is not a commit."""
        _expect(d, Mapping, "a commit")
        text = {k: _expect(d.get(k, ""), str, f"commit field {k!r}") for k in _TEXT_FIELDS}
        parents = _expect(d["parents"], list, "the commit's parents")
        retries = _expect(d.get("retries", 0), int, "the commit's retries")
        if text["date"]:
            dt.datetime.fromisoformat(text["date"])  # Commit.time reads it
        if not _SNAPSHOT_ID.fullmatch(_expect(d["snapshot"], str, "a snapshot id")):
            raise ValueError(f"snapshot id {d['snapshot']!r:.80} is not a SHA-256")
        return cls(
            id=_expect(d["id"], str, "a commit id"),
            parents=tuple(_expect(p, str, "a parent id") for p in parents),
            snapshot=d["snapshot"],
            author=text["author"],
            date=text["date"],
            message=text["message"],
            meta=dict(_expect(d.get("meta", {}), Mapping, "the commit's meta")),
            actions=tuple(
                Action.from_json(a) for a in _expect(d.get("actions", []), list, "actions")
            ),
            retries=retries,
        )

    @property
    def time(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.date)


_commits = _LRU(65536)


class CommitStore:
    """The commits of one pool."""

    def __init__(self, storage: Storage, pool_id: str) -> None:
        self.storage = storage
        self.pool_id = pool_id
        self._cached = f"{storage.uri}/{pool_id}"  # per store, as copies share pool ids

    def path(self, commit_id: str) -> str:
        return f"{self.pool_id}/commits/{commit_id}.json"

    def put(self, commit: Commit) -> None:
        data = json.dumps(commit.to_json(), sort_keys=True, separators=(",", ":")).encode()
        self.storage.put_if_absent(self.path(commit.id), data)
        _commits.put(f"{self._cached}/{commit.id}", commit)

    def get(self, commit_id: str) -> Commit:
        cached = _commits.get(f"{self._cached}/{commit_id}")
        if cached is not None:
            return cached
        path = self.path(commit_id)
        try:
            data = self.storage.get(path)
        except NotFoundError as e:
            raise NotFoundError(f"commit {commit_id} not found") from e
        try:
            commit = Commit.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise CorruptError(f"{path}: unreadable commit ({str(e)[:200]})") from e
        if commit.id != commit_id:
            raise CorruptError(f"{path}: holds commit {commit.id}")
        _commits.put(f"{self._cached}/{commit_id}", commit)
        return commit

    def exists(self, commit_id: str) -> bool:
        return self.storage.exists(self.path(commit_id))

    def all_ids(self) -> list[str]:
        """Every stored commit id (a listing; used by vacuum, verify, prefix lookup)."""
        out = []
        for info in self.storage.walk(f"{self.pool_id}/commits"):
            name = info.path.rsplit("/", 1)[-1]
            if name.endswith(".json"):
                out.append(name[: -len(".json")])
        return out

    def first_parent(self, commit_id: str, n: int, name: str | None = None) -> str:
        """The ``n``-th first-parent ancestor (``~n``); ``name``: what the caller called
        ``commit_id`` (``main``), for the error of a history too short."""
        cur = commit_id
        for i in range(n):
            parents = self.get(cur).parents
            if not parents:
                raise NotFoundError(f"{name or commit_id}~{n}: history has only {i} ancestor(s)")
            cur = parents[0]
        return cur

    def log(self, heads: Sequence[str], first_parent: bool = False) -> Iterator[Commit]:
        """Ancestors of ``heads`` (included), newest first by date."""
        seen: set[str] = set()
        heap: list[tuple[str, str]] = []
        for h in heads:
            if h not in seen:
                seen.add(h)
                c = self.get(h)
                heapq.heappush(heap, (_neg(c.date), h))
        while heap:
            _, cid = heapq.heappop(heap)
            commit = self.get(cid)
            yield commit
            parents = commit.parents[:1] if first_parent else commit.parents
            for p in parents:
                if p not in seen:
                    seen.add(p)
                    heapq.heappush(heap, (_neg(self.get(p).date), p))

    def ancestors(self, head: str) -> set[str]:
        return {c.id for c in self.log([head])}


def _expect(value: Any, kind: type, what: str) -> Any:
    """``value`` if it is a ``kind`` (a bool is no int here), else TypeError."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{what} is not a {kind.__name__}: {value!r:.40}")
    return value


def _neg(date: str) -> str:
    """Invert an ISO date string so a min-heap pops the newest first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in date)
