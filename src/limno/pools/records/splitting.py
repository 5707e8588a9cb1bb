"""Splitting leaf partitions at the median of their objects' merged sketches.

A leaf whose estimated row count passes the pool's split threshold is split at
its median key: the sketches of the objects it references are merged, and the
value at the middle of the leaf's share of that distribution becomes the split
point. Rows per leaf are estimates for objects that straddle leaves (their
sketch gives the fraction of their keys inside the leaf) and exact otherwise.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from limno.core.commits import Commit
from limno.core.committed import _LRU
from limno.data.objects import DataObject
from limno.lazy import lazy_module
from limno.pools.records.partitions import Partition, PartitionTree
from limno.pools.settings import DEFAULT_SPLIT_THRESHOLD

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data import sketches
    from limno.pools.records.pool import RecordPool
else:
    pa = lazy_module("pyarrow")
    sketches = lazy_module("limno.data.sketches")  # datasketches, numpy

__all__ = ["DEFAULT_SPLIT_THRESHOLD", "leaf_rows", "split_candidates", "split_leaf"]

#: Sleeper's default (sleeper.table.partition.splitting.threshold)

_sketches = _LRU(4096)


def sketch_of(pool: RecordPool, obj: DataObject) -> sketches.KeySketch | None:
    cache_key = f"{pool.storage.uri}/{pool.id}/{obj.id}"
    cached = _sketches.get(cache_key)
    if cached is None:
        cached = sketches.read_sketch(pool.storage, pool.id, obj.id) or False
        _sketches.put(cache_key, cached)
    return cached or None


def _share(pool: RecordPool, tree: PartitionTree, leaf: Partition, obj: DataObject) -> float:
    """Estimated rows of ``obj`` inside ``leaf``."""
    if tree.inside(leaf, obj):
        return float(obj.rows)
    keyless = obj.keyless if leaf.hi is None else 0
    keyed = obj.rows - obj.keyless
    sk = sketch_of(pool, obj)
    desc = pool.key.fields[0].descending
    if sk is None or not sk.n:
        n = max(1, len(tree.leaves_of(obj)))
        return keyed / n + keyless
    lo = 0.0 if leaf.lo is None else sketches.sort_rank(sk, leaf.lo[0], desc)
    hi = 1.0 if leaf.hi is None else sketches.sort_rank(sk, leaf.hi[0], desc)
    return max(0.0, hi - lo) * keyed + keyless


def leaf_rows(
    pool: RecordPool, tree: PartitionTree, objects: Sequence[DataObject]
) -> dict[str, float]:
    """Estimated rows per leaf id."""
    out = {p.id: 0.0 for p in tree.leaves()}
    for obj in objects:
        for leaf in tree.leaves_of(obj):
            out[leaf.id] += _share(pool, tree, leaf, obj)
    return out


def split_candidates(
    pool: RecordPool, tree: PartitionTree, objects: Sequence[DataObject], threshold: int
) -> list[tuple[Partition, float]]:
    rows = leaf_rows(pool, tree, objects)
    return [(tree.get(pid), n) for pid, n in rows.items() if n > threshold]


def median(
    pool: RecordPool, tree: PartitionTree, leaf: Partition, objects: Sequence[DataObject]
) -> Any:
    """The first-field value at the middle of ``leaf``'s rows, or None if unsplittable."""
    inside = [o for o in objects if leaf in tree.leaves_of(o)]
    sk = sketches.merged(sketch_of(pool, o) for o in inside)
    if sk is None:
        return None
    desc = pool.key.fields[0].descending
    lo = 0.0 if leaf.lo is None else sketches.sort_rank(sk, leaf.lo[0], desc)
    hi = 1.0 if leaf.hi is None else sketches.sort_rank(sk, leaf.hi[0], desc)
    mid = (lo + hi) / 2
    raw = sk.quantile(1.0 - mid if desc else mid)
    value = _typed(raw, _field_type(pool, inside))
    at = (value,)
    key = pool.key
    if leaf.lo is not None and not key.sort_key(leaf.lo) < key.sort_key(at):
        return None
    if leaf.hi is not None and not key.sort_key(at) < key.sort_key(leaf.hi):
        return None
    return value


def _field_type(pool: RecordPool, objects: Sequence[DataObject]) -> pa.DataType | None:
    path = pool.key.fields[0].path
    for o in objects:
        if not o.schema_b64 or path[0] not in o.schema.names:
            continue
        typ = o.schema.field(path[0]).type
        for part in path[1:]:
            if not pa.types.is_struct(typ) or typ.get_field_index(part) < 0:
                break
            typ = typ.field(part).type
        else:
            return typ
    return None


def _typed(raw: Any, typ: pa.DataType | None) -> Any:
    """A sketch value (a double, or a string) back in the key field's type."""
    binary = typ is not None and (
        pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or pa.types.is_fixed_size_binary(typ)
    )
    if binary and isinstance(raw, str):
        return raw.encode("latin-1")  # binary keys are sketched one character per byte
    if typ is None or isinstance(raw, str):
        return raw
    t = pa.types
    if t.is_integer(typ):
        return int(round(raw))
    if t.is_floating(typ):
        return float(raw)
    if t.is_timestamp(typ):
        value = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=round(raw))
        return value if typ.tz else value.replace(tzinfo=None)
    if t.is_date(typ):
        return dt.date(1970, 1, 1) + dt.timedelta(days=round(raw))
    if t.is_decimal(typ):
        return pa.scalar(raw, pa.float64()).cast(typ, safe=False).as_py()
    if t.is_boolean(typ):
        return raw >= 0.5
    return raw


def split_leaf(pool: RecordPool, branch: str, leaf_id: str, value: Any = None) -> Commit | None:
    """Split one leaf (at ``value``, or its median); None if it cannot be split.

    Conditional: if the leaf was split or changed meanwhile the commit conflicts.
    """
    since = pool.versioned.gc.ticket()
    head = pool.versioned.head(branch)
    objects, tree = pool.snapshot(head)
    leaf = tree.get(leaf_id)
    if value is None:
        value = median(pool, tree, leaf, objects)
        if value is None:
            return None
    actions, left, right = tree.split_actions(leaf_id, value, objects)
    return pool.versioned.commit(
        branch,
        actions,
        message=f"split partition {leaf_id} at {value!r}",
        meta={"split": {"partition": leaf_id, "at": repr(value), "children": [left.id, right.id]}},
        expected_head=head,
        since=since,
        maintenance=True,  # the same rows: allowed on a protected branch
    )
