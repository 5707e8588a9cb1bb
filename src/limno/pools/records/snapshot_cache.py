"""Decoded snapshots of record pools, kept per process: a snapshot id names its content.

A snapshot's entries decode into :class:`DataObject`\\ s and a partition tree. For a
pool of many objects that decoding is most of the cost of planning a lookup, and a
load decodes its branch's snapshot twice (to cut its objects at the partition bounds,
then to check key types against the commit's parent). A snapshot id is the SHA-256
of the stored content, so a decoded snapshot never goes stale: it is kept in a small
LRU, keyed like the core's caches by store URI and pool id (a copy of a lake with the
same pool ids must still read its own objects once).

A commit that only adds objects gets its snapshot decoded from its parent's plus
the added entries (:func:`remember_added`), so a process that loads again and again
never decodes what it has just written.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limno.core.commits import Action
from limno.core.committed import _LRU
from limno.core.versioning import Versioned
from limno.data.indexes import is_index_key
from limno.data.keys import PoolKey
from limno.data.objects import DataObject
from limno.pools.records.compaction import order_key
from limno.pools.records.partitions import PartitionTree, is_partition_key

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DecodedSnapshot", "decoded", "memo_key_types", "remember_added"]

#: decoded snapshots kept (a load needs its branch's head; readers a few refs)
SNAPSHOTS = 32
#: key-type lists kept, by the schemas of the objects they were computed over
KEY_TYPES = 256


@dataclass(frozen=True)
class DecodedSnapshot:
    """A snapshot's objects in write order (see ``order_key``) and its partition tree.

    Shared between callers: neither is ever modified (a tree's changes make a new one).
    """

    objects: tuple[DataObject, ...]
    tree: PartitionTree


_snapshots = _LRU(SNAPSHOTS)
_key_types = _LRU(KEY_TYPES)


def _cache_key(versioned: Versioned, key: PoolKey, snapshot: str) -> str:
    return f"{versioned.storage.uri}/{versioned.pool_id}/{snapshot}/{key}"


def _write_order(obj: DataObject) -> tuple[tuple[str, str], str]:
    # a snapshot lists entries by key (the object id), and sorting is stable: ties of
    # order_key keep id order
    return order_key(obj), obj.id


def decoded(versioned: Versioned, key: PoolKey, snapshot: str) -> DecodedSnapshot:
    """Snapshot ``snapshot`` of ``versioned``'s pool, decoded (once per process)."""
    cache_key = _cache_key(versioned, key, snapshot)
    found: DecodedSnapshot | None = _snapshots.get(cache_key)
    if found is None:
        entries = versioned.snapshots.read(snapshot)
        tree = PartitionTree.from_entries(entries.items(), key)
        objs = [
            DataObject.from_json(v)
            for k, v in entries.items()
            if not is_partition_key(k) and not is_index_key(k)
        ]
        found = DecodedSnapshot(tuple(sorted(objs, key=order_key)), tree)
        _snapshots.put(cache_key, found)
    return found


def remember_added(
    versioned: Versioned, key: PoolKey, parent: str, snapshot: str, actions: Sequence[Action]
) -> None:
    """Decode ``snapshot`` from its parent snapshot ``parent`` when it is ``parent`` with
    ``actions`` (adds of new objects) applied, as a commit that lands them makes it.

    Does nothing unless the parent is decoded already and every action adds an object
    (under its own id) that the parent lacks; the entries are decoded as they are
    stored, from their JSON text.
    """
    base: DecodedSnapshot | None = _snapshots.get(_cache_key(versioned, key, parent))
    if base is None or not actions:
        return
    held = {o.id for o in base.objects}
    added = []
    for a in actions:
        if a.op != "add" or is_partition_key(a.key) or is_index_key(a.key) or a.key in held:
            return
        obj = DataObject.from_json(json.loads(json.dumps(dict(a.value))))
        if obj.id != a.key:
            return
        added.append(obj)
    objs = list(base.objects)  # in write order already: the new ones go in their places
    for obj in added:
        bisect.insort(objs, obj, key=_write_order)
    _snapshots.put(_cache_key(versioned, key, snapshot), DecodedSnapshot(tuple(objs), base.tree))


def memo_key_types(
    key: PoolKey,
    objs: Sequence[DataObject],
    compute: Callable[[Sequence[DataObject]], list[pa.DataType]],
) -> list[pa.DataType]:
    """``compute(objs)`` (the key fields' unified types over ``objs``), remembered by the
    objects' schemas: it depends on nothing else, and decoding and unifying the schemas
    of every object costs a lookup more than the lookup itself."""
    memo: tuple[Any, ...] = (str(key), *(o.schema_b64 for o in objs))
    found: tuple[pa.DataType, ...] | None = _key_types.get(memo)
    if found is None:
        found = tuple(compute(objs))
        _key_types.put(memo, found)
    return list(found)
