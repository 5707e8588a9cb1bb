"""Commits: immutable nodes of a pool's DAG, each naming the snapshot it produced.

A commit is written once, with put-if-absent, at ``<pool-id>/commits/<id>.json``
before any branch points at it. Its actions say what changed (``add`` and
``delete`` of entries, with the entry's full value so a revert can undo them);
its ``snapshot`` is the id of the resulting committed snapshot, so reading any
commit's data never replays history.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from limno.core.committed import _LRU
from limno.errors import CorruptError, NotFoundError
from limno.storage import Storage

__all__ = ["Action", "Commit", "CommitStore", "now_iso"]


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
        return cls(d["op"], d["key"], d.get("value", {}))

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
        return cls(
            id=d["id"],
            parents=tuple(d["parents"]),
            snapshot=d["snapshot"],
            author=d.get("author", ""),
            date=d.get("date", ""),
            message=d.get("message", ""),
            meta=dict(d.get("meta", {})),
            actions=tuple(Action.from_json(a) for a in d.get("actions", [])),
            retries=int(d.get("retries", 0)),
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

    def path(self, commit_id: str) -> str:
        return f"{self.pool_id}/commits/{commit_id}.json"

    def put(self, commit: Commit) -> None:
        data = json.dumps(commit.to_json(), sort_keys=True, separators=(",", ":")).encode()
        self.storage.put_if_absent(self.path(commit.id), data)
        _commits.put(f"{self.pool_id}/{commit.id}", commit)

    def get(self, commit_id: str) -> Commit:
        cached = _commits.get(f"{self.pool_id}/{commit_id}")
        if cached is not None:
            return cached
        path = self.path(commit_id)
        try:
            data = self.storage.get(path)
        except NotFoundError as e:
            raise NotFoundError(f"commit {commit_id} not found") from e
        try:
            commit = Commit.from_json(json.loads(data))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptError(f"{path}: unreadable commit ({e})") from e
        if commit.id != commit_id:
            raise CorruptError(f"{path}: holds commit {commit.id}")
        _commits.put(f"{self.pool_id}/{commit_id}", commit)
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

    def first_parent(self, commit_id: str, n: int) -> str:
        """The ``n``-th first-parent ancestor (``~n``)."""
        cur = commit_id
        for i in range(n):
            parents = self.get(cur).parents
            if not parents:
                raise NotFoundError(f"{commit_id}~{n}: history has only {i} ancestor(s)")
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


def _neg(date: str) -> str:
    """Invert an ISO date string so a min-heap pops the newest first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in date)
