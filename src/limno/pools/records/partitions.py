"""Range partitions of a record pool (Sleeper's partition tree).

The key space of a pool is a tree of ranges over its *first* key field, closed on
the left and open on the right; the root is the whole space and leaves tile it.
Keyless rows (null first field) sort last and belong to the rightmost leaf.

The tree is versioned with the data: each partition is an entry of the snapshot
under ``~partition/<id>`` (``~`` sorts after every object id), so a split is a
commit, branches can split differently, and merges compare partitions like any
other entry. A pool without partition entries has just the implicit root.

Objects reference partitions: an object entry may list ``partitions`` (absent
means the root). A reference to a partition that has since been split stands for
its leaves that overlap the object. When a split cuts through an object, the
object is referenced by both children (Sleeper's reference splitting) rather than
rewritten; when a compaction later consumes one child's share, the object keeps
only its other references, and readers *clip* it to the ranges it is still
referenced for (see :meth:`PartitionTree.clip`), so no row is read twice.

A split is atomic and conditional: its commit deletes the parent's leaf entry with
the exact value it read and re-adds it with children, so if the parent was split
(or changed) meanwhile the commit conflicts and nothing happens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from limno.core.commits import Action
from limno.data.keys import PoolKey, decode_key, encode_key
from limno.data.objects import DataObject
from limno.errors import InvalidInputError
from limno.ksuid import ksuid

__all__ = ["PARTITION_PREFIX", "ROOT_ID", "Partition", "PartitionTree", "is_partition_key"]

PARTITION_PREFIX = "~partition/"
ROOT_ID = "root"

Bound = tuple[Any, ...] | None


def is_partition_key(key: str) -> bool:
    return key.startswith(PARTITION_PREFIX)


def entry_key(pid: str) -> str:
    return f"{PARTITION_PREFIX}{pid}"


@dataclass(frozen=True)
class Partition:
    """One node of the tree: ``[lo, hi)`` over the first key field (None = open)."""

    id: str
    parent: str | None = None
    lo: Bound = None
    hi: Bound = None
    children: tuple[str, ...] = ()
    split: Any = None

    @property
    def leaf(self) -> bool:
        return not self.children

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent": self.parent,
            "lo": encode_key(self.lo),
            "hi": encode_key(self.hi),
            "children": list(self.children),
            "split": encode_key(None if self.split is None else (self.split,)),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Partition:
        split = decode_key(d.get("split"))
        return cls(
            id=d["id"],
            parent=d.get("parent"),
            lo=decode_key(d.get("lo")),
            hi=decode_key(d.get("hi")),
            children=tuple(d.get("children", ())),
            split=None if split is None else split[0],
        )


ROOT = Partition(ROOT_ID)


class PartitionTree:
    """The partitions of one snapshot."""

    def __init__(self, parts: Mapping[str, Partition], key: PoolKey) -> None:
        self.parts = dict(parts) or {ROOT_ID: ROOT}
        self.key = key
        self.stored = bool(parts)

    @classmethod
    def from_entries(
        cls, entries: Iterable[tuple[str, Mapping[str, Any]]], key: PoolKey
    ) -> PartitionTree:
        parts = {}
        for k, v in entries:
            if is_partition_key(k):
                p = Partition.from_json(v)
                parts[p.id] = p
        return cls(parts, key)

    def get(self, pid: str) -> Partition:
        try:
            return self.parts[pid]
        except KeyError:
            raise InvalidInputError(f"no partition {pid!r}") from None

    def leaves(self) -> list[Partition]:
        """Leaves in key order."""
        out: list[Partition] = []
        stack = [ROOT_ID]
        while stack:
            p = self.parts[stack.pop()]
            if p.leaf:
                out.append(p)
            else:
                stack.extend(reversed(p.children))
        return out

    def lower_bounds(self) -> list[tuple[Any, ...]]:
        """The lower bounds of the leaves but the first, in key order: where a sorted
        stream must start a new object for each object to lie in one leaf."""
        return [p.lo for p in self.leaves() if p.lo is not None]

    def referencing(self, objs: Iterable[DataObject]) -> list[DataObject]:
        """New objects pointed at the leaves they overlap (unchanged without a tree)."""
        if not self.stored:
            return list(objs)
        leaves = self.leaves()
        return [
            dataclasses.replace(o, partitions=tuple(p.id for p in leaves if self.overlaps(p, o)))
            for o in objs
        ]

    def leaves_under(self, pid: str) -> list[Partition]:
        out: list[Partition] = []
        stack = [pid]
        while stack:
            p = self.parts.get(stack.pop())
            if p is None:
                continue
            if p.leaf:
                out.append(p)
            else:
                stack.extend(reversed(p.children))
        return out

    def depth(self, pid: str) -> int:
        d, p = 0, self.parts[pid]
        while p.parent is not None:
            d, p = d + 1, self.parts[p.parent]
        return d

    # -- objects against partitions ---------------------------------------------
    def overlaps(self, p: Partition, obj: DataObject) -> bool:
        """Whether ``obj`` may hold rows of ``p`` (keyless rows belong to the last leaf)."""
        if obj.keyless and p.hi is None:
            return True
        if obj.min_key is None or obj.max_key is None:
            return False
        sk = self.key.sort_key
        if p.hi is not None and not sk(obj.min_key) < sk(p.hi):
            return False
        return not (p.lo is not None and sk(obj.max_key) < sk(p.lo))

    def inside(self, p: Partition, obj: DataObject) -> bool:
        """Whether every row of ``obj`` lies in ``p``."""
        if obj.keyless and p.hi is not None:
            return False
        if obj.min_key is None or obj.max_key is None:
            return p.hi is None
        sk = self.key.sort_key
        if p.lo is not None and sk(obj.min_key) < sk(p.lo):
            return False
        return p.hi is None or sk(obj.max_key) < sk(p.hi)

    def leaves_of(self, obj: DataObject) -> list[Partition]:
        """The leaves ``obj`` is (still) referenced for, in key order."""
        refs = obj.partitions or (ROOT_ID,)
        found: dict[str, Partition] = {}
        for ref in refs:
            for leaf in self.leaves_under(ref):
                if self.overlaps(leaf, obj):
                    found[leaf.id] = leaf
        order = {p.id: i for i, p in enumerate(self.leaves())}
        return sorted(found.values(), key=lambda p: order.get(p.id, 0))

    def clip(self, obj: DataObject) -> list[tuple[Bound, Bound]] | None:
        """Key ranges ``obj`` may be read for, or None when all of it is referenced."""
        runs: list[tuple[Bound, Bound]] = []
        for leaf in self.leaves_of(obj):
            if (
                runs
                and runs[-1][1] is not None
                and leaf.lo is not None
                and self._same(runs[-1][1], leaf.lo)
            ):
                runs[-1] = (runs[-1][0], leaf.hi)
            else:
                runs.append((leaf.lo, leaf.hi))
        if len(runs) == 1 and self.inside(Partition("run", None, *runs[0]), obj):
            return None
        return runs

    def _same(self, a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
        return self.key.sort_key(a) == self.key.sort_key(b)

    # -- changes ---------------------------------------------------------------
    def split_actions(
        self, pid: str, value: Any, objects: Sequence[DataObject]
    ) -> tuple[list[Action], Partition, Partition]:
        """Actions splitting leaf ``pid`` at first-field ``value``; objects re-referenced.

        Objects that reference the leaf (directly or through an ancestor) are
        re-pointed at the child (or both children) they overlap.
        """
        p = self.get(pid)
        if not p.leaf:
            raise InvalidInputError(f"partition {pid} is not a leaf")
        at = (value,)
        sk = self.key.sort_key
        if (p.lo is not None and not sk(p.lo) < sk(at)) or (
            p.hi is not None and not sk(at) < sk(p.hi)
        ):
            raise InvalidInputError(f"split point {value!r} is not inside partition {pid}")
        left = Partition(ksuid(), pid, p.lo, at)
        right = Partition(ksuid(), pid, at, p.hi)
        parent = Partition(p.id, p.parent, p.lo, p.hi, (left.id, right.id), value)
        # the leaf's entry is swapped with the exact value read (or, for the implicit
        # root, created): a concurrent split of the same leaf conflicts
        actions: list[Action] = []
        if self.stored:
            actions.append(Action("delete", entry_key(pid), p.to_json()))
        actions += [
            Action("add" if self.stored else "create", entry_key(pid), parent.to_json()),
            Action("add", entry_key(left.id), left.to_json()),
            Action("add", entry_key(right.id), right.to_json()),
        ]
        after = PartitionTree({**self.parts, pid: parent, left.id: left, right.id: right}, self.key)
        for obj in objects:
            leaves = self.leaves_of(obj)
            if not any(leaf.id == pid for leaf in leaves):
                continue
            refs = [leaf.id for leaf in leaves if leaf.id != pid]
            refs += [c.id for c in (left, right) if after.overlaps(c, obj)]
            actions += retarget(obj, refs)
        return actions, left, right


def retarget(obj: DataObject, refs: Sequence[str]) -> list[Action]:
    """Actions replacing ``obj``'s references (a delete with the old value: a CAS)."""
    import dataclasses

    old = obj.to_json()
    if not refs:
        return [Action("delete", obj.id, old)]
    new = dataclasses.replace(obj, partitions=tuple(refs), clip=None).to_json()
    return [Action("delete", obj.id, old), Action("add", obj.id, new)]
