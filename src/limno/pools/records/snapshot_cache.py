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
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from limno.core.commits import Action
from limno.core.committed import _LRU
from limno.core.versioning import Versioned
from limno.data.indexes import is_index_key
from limno.data.keys import PoolKey
from limno.data.objects import DataObject, distinct_schemas
from limno.lazy import lazy_module
from limno.pools.records.compaction import order_key
from limno.pools.records.partitions import PartitionTree, is_partition_key

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data import scan
    from limno.data import schema as unification
    from limno.data.plan_index import StoredPlan
else:  # planning needs pyarrow; importing this module must not
    scan = lazy_module("limno.data.scan")
    unification = lazy_module("limno.data.schema")

__all__ = [
    "DecodedSnapshot",
    "ScanView",
    "decoded",
    "memo",
    "memo_key_types",
    "remember_added",
    "scan_view",
]

T = TypeVar("T")

#: decoded snapshots kept (a load needs its branch's head; readers a few refs)
SNAPSHOTS = 32
#: key-type lists kept, by the schemas of the objects they were computed over
KEY_TYPES = 256
#: scan views kept (each as big as its snapshot's decoded objects, which it shares)
VIEWS = 16
#: other things worked out from one snapshot (see :func:`memo`)
MEMOS = 32


@dataclass(frozen=True)
class DecodedSnapshot:
    """A snapshot's objects in write order (see ``order_key``) and its partition tree.

    Shared between callers: neither is ever modified (a tree's changes make a new one).
    """

    objects: tuple[DataObject, ...]
    tree: PartitionTree


_snapshots = _LRU(SNAPSHOTS)
_key_types = _LRU(KEY_TYPES)
_views = _LRU(VIEWS)
_memos = _LRU(MEMOS)


def _cache_key(versioned: Versioned, key: PoolKey, snapshot: str) -> str:
    return f"{versioned.storage.uri}/{versioned.pool_id}/{snapshot}/{key}"


def write_order(obj: DataObject) -> tuple[tuple[str, str], str]:
    """The order of a decoded snapshot's objects (see :func:`decoded`) as a total order:
    a snapshot lists entries by key (the object id), and sorting is stable, so ties of
    ``order_key`` keep id order."""
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


class ScanView:
    """What a scan of one snapshot needs, worked out once per process: the objects to
    read (clipped to the partitions: see ``RecordPool.objects``), their :class:`scan.Plan`
    (clusters in key order, cut to any bounds by a binary search), the unified schema
    of the whole snapshot (every scan's columns, whatever its bounds) and the key
    types. Each part is made on first use; a snapshot never changes, so none goes
    stale. Without it a scan of ten rows decoded and sorted every object's metadata.

    A view made by :meth:`stored` comes from a snapshot's stored plan (see
    ``snapshot_index.py``): its objects are decoded as scans reach them.
    """

    #: the stored plan the view was read from (None: planned here)
    stored_plan: StoredPlan | None = None

    def __init__(
        self,
        objects: Sequence[DataObject],
        key: PoolKey,
        key_types: Callable[[Sequence[DataObject]], list[pa.DataType]],
    ) -> None:
        self.objects: Sequence[DataObject] = tuple(objects)
        self.key = key
        self._key_types = key_types

    @classmethod
    def stored(
        cls,
        plan: StoredPlan,
        key: PoolKey,
        key_types: Callable[[Sequence[DataObject]], list[pa.DataType]],
    ) -> ScanView:
        """The view whose plan is ``plan``, a snapshot's stored one."""
        view = cls((), key, key_types)
        view.objects = plan.objects
        view.stored_plan = plan
        return view

    @functools.cached_property
    def plan(self) -> scan.Plan:
        if self.stored_plan is not None:
            return self.stored_plan
        return scan.Plan(self.objects, self.key)

    def _schema_holders(self) -> Sequence[DataObject]:
        """Objects that together hold each distinct schema of the view's, first-seen
        first (a stored plan lists the schemas: one stand-in object each)."""
        if self.stored_plan is None:
            return self.objects
        return [DataObject("", 0, 0, None, None, schema_b64=s) for s in self.stored_plan.schemas]

    @functools.cached_property
    def schema(self) -> pa.Schema:
        """The objects' schemas unified (each distinct one decoded once)."""
        return unification.unify(distinct_schemas(self._schema_holders()))

    @functools.cached_property
    def key_types(self) -> tuple[pa.DataType, ...]:
        return tuple(self._key_types(self._schema_holders()))


def scan_view(
    versioned: Versioned,
    key: PoolKey,
    snapshot: str,
    make: Callable[[], ScanView],
) -> ScanView:
    """The :class:`ScanView` of snapshot ``snapshot``: ``make()`` once per process (an
    LRU of :data:`VIEWS`, keyed like :func:`decoded`)."""
    cache_key = _cache_key(versioned, key, snapshot)
    found: ScanView | None = _views.get(cache_key)
    if found is None:
        found = make()
        _views.put(cache_key, found)
    return found


def memo(versioned: Versioned, key: PoolKey, snapshot: str, what: str, make: Callable[[], T]) -> T:
    """``make()``, something worked out from snapshot ``snapshot`` alone (``what`` names
    it, e.g. status's partitions report), once per process: a snapshot never changes,
    and a server asked again and again pays once (an LRU of :data:`MEMOS`)."""
    cache_key = (_cache_key(versioned, key, snapshot), what)
    found: T | None = _memos.get(cache_key)
    if found is None:
        found = make()
        _memos.put(cache_key, found)
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
        bisect.insort(objs, obj, key=write_order)
    _snapshots.put(_cache_key(versioned, key, snapshot), DecodedSnapshot(tuple(objs), base.tree))


def memo_key_types(
    key: PoolKey,
    objs: Sequence[DataObject],
    compute: Callable[[Sequence[DataObject]], list[pa.DataType]],
) -> list[pa.DataType]:
    """``compute(objs)`` (the key fields' unified types over ``objs``), remembered by the
    objects' schemas: it depends on nothing else, and decoding and unifying the schemas
    of every object costs a lookup more than the lookup itself."""
    # the distinct schemas in first-seen order say as much (a repeat adds nothing)
    memo: tuple[Any, ...] = (str(key), *dict.fromkeys(o.schema_b64 for o in objs))
    found: tuple[pa.DataType, ...] | None = _key_types.get(memo)
    if found is None:
        found = tuple(compute(objs))
        _key_types.put(memo, found)
    return list(found)
