"""``verify`` for record pools: every invariant that the write path promises.

- the branch journal verifies, and every branch and tag names an existing commit;
- every reachable commit exists, is readable, and its parents exist;
- every snapshot's ranges are present, hash to their ids and are sorted;
- each commit's snapshot equals its first parent's with its actions applied
  (so snapshots are consistent with the commit chain);
- every object a snapshot references exists with its recorded size and a readable
  Parquet footer with the recorded row count. An object may be missing only if
  vacuum removed it on purpose (a tombstone says so) *and* no branch head or tag
  holds it *and* it is outside the retention window (the pool's, or all history
  when no retention window ever trimmed it);
- with ``deep``, every object is read whole with its page checksums verified, and
  its rows are sorted by the pool key, within the recorded min/max key, with the
  recorded row and keyless counts;
- every object a branch head or tag holds has the sidecar of each search index of
  that snapshot (:mod:`limno.pools.records.indexing`);
- the ingest queue's journal verifies, its entries parse, and every file still to be
  loaded (or failed) is where the queue says (:mod:`limno.pools.ingest_upkeep`).

Each fault says what to do about it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from limno.core.committed import EMPTY, RangeRef
from limno.core.gc import expired_path
from limno.data.indexes import is_index_key
from limno.data.objects import DataObject, data_path
from limno.errors import CorruptError, LimnoError, NotFoundError
from limno.faults import Fault
from limno.lazy import lazy_module
from limno.pools import ingest_upkeep
from limno.pools.records.partitions import is_partition_key
from limno.pools.reviews import verify_reviews
from limno.pools.vacuum import retained_keys
from limno.storage import Storage

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data import parquet
    from limno.pools.records import indexing
    from limno.pools.records.pool import RecordPool
else:
    pa = lazy_module("pyarrow")
    parquet = lazy_module("limno.data.parquet")
    indexing = lazy_module("limno.pools.records.indexing")

__all__ = ["check_object", "verify_pool"]


#: what to do about a missing or damaged data object
RESTORE = (
    "restore the file from a backup; else drop the object from the refs that hold it"
    " (limno delete -p POOL@BRANCH ID) and load its data again"
)


def verify_pool(pool: RecordPool, deep: bool = False) -> Iterator[Fault]:
    """Every broken invariant of one record pool (see the module docstring)."""
    config = pool.config
    v = pool.versioned
    where = f"{config.id}/branches"
    journal_faults = list(v.refs.journal.verify())
    yield from journal_faults
    if journal_faults:
        return
    yield from verify_reviews(v.storage, pool.id)  # merge requests
    heads = {**{f"branch {n}": c for n, c in v.refs.branches().items()}}
    heads.update({f"tag {n}": c for n, c in v.refs.tags().items()})
    if "branch main" not in heads and not heads:
        yield Fault(where, "pool has no branches")
    seen: set[str] = set()
    todo: list[str] = []
    for label, cid in heads.items():
        if not v.commits.exists(cid):
            yield Fault(v.commits.path(cid), f"{label} points at a missing commit")
        else:
            todo.append(cid)
    sidecars: set[tuple[str, str]] = set()
    for label, cid in heads.items():
        if v.commits.exists(cid):
            yield from check_partitions(pool, cid, label)
            yield from indexing.check_sidecars(pool, cid, label, sidecars)
    checked_objects: set[str] = set()
    verified_ranges: set[RangeRef] = set()
    needed = _needed_keys(pool, list(heads.values()))
    while todo:
        cid = todo.pop()
        if cid in seen:
            continue
        seen.add(cid)
        try:
            commit = v.commits.get(cid)
        except (NotFoundError, CorruptError) as e:
            yield Fault(v.commits.path(cid), str(e))
            continue
        snap_faults = list(v.snapshots.verify(commit.snapshot, verified_ranges))
        yield from snap_faults
        if snap_faults:
            continue
        if not commit.parents and commit.snapshot != EMPTY:
            yield Fault(v.commits.path(cid), "root commit has a non-empty snapshot")
        for p in commit.parents:
            if not v.commits.exists(p):
                yield Fault(v.commits.path(cid), f"parent {p} is missing")
            else:
                todo.append(p)
        if commit.parents and v.commits.exists(commit.parents[0]):
            # compare by diff, which skips shared ranges: cost follows the change size
            net: dict[str, dict[str, Any] | None] = {}
            for a in commit.actions:
                net[a.key] = None if a.op == "delete" else dict(a.value)
            parent = v.commits.get(commit.parents[0]).snapshot
            changed = {k: new for k, _, new in v.snapshots.diff(parent, commit.snapshot)}
            explained = all(k in net and net[k] == new for k, new in changed.items())
            if not explained or any(
                v.snapshots.get(commit.snapshot, k) != value for k, value in net.items()
            ):
                yield Fault(
                    v.commits.path(cid),
                    "snapshot does not equal the parent's snapshot with the commit's actions",
                )
        objects = [(a.key, a.value) for a in commit.actions if a.op == "add"]
        if not commit.parents:
            objects = list(v.snapshots.entries(commit.snapshot))
        for oid, value in objects:
            if oid in checked_objects or is_partition_key(oid) or is_index_key(oid):
                continue
            checked_objects.add(oid)
            yield from check_object(
                pool.storage, pool.id, DataObject.from_json(value), pool, deep, needed=oid in needed
            )
    yield from ingest_upkeep.verify_queue(pool.storage, pool.id, config.name)


def check_partitions(pool: Any, commit_id: str, label: str) -> Iterator[Fault]:
    """The partition tree of a head: children tile their parent; objects reference leaves
    (or ancestors of leaves) of this tree."""
    try:
        objects, tree = pool.snapshot(commit_id)
    except LimnoError as e:
        yield Fault(pool.versioned.commits.path(commit_id), f"{label}: {e}")
        return
    where = f"{pool.id}/meta ({label})"
    key = pool.key
    for p in tree.parts.values():
        if p.leaf:
            continue
        kids = [tree.parts.get(c) for c in p.children]
        if any(k is None for k in kids) or len(kids) != 2:
            yield Fault(where, f"partition {p.id} has missing children")
            continue
        left, right = kids
        assert left is not None and right is not None
        same = (
            left.lo == p.lo
            and right.hi == p.hi
            and left.hi is not None
            and right.lo is not None
            and key.sort_key(left.hi) == key.sort_key(right.lo)
        )
        if not same:
            yield Fault(where, f"children of partition {p.id} do not tile its range")
    for o in objects:
        for ref in o.partitions:
            if ref not in tree.parts:
                yield Fault(where, f"object {o.id} references missing partition {ref}")
        if not tree.leaves_of(o):
            yield Fault(where, f"object {o.id} is referenced by no leaf partition")


def _needed_keys(pool: Any, heads: list[str]) -> set[str]:
    """Keys whose objects must exist: held by a head or tag, or inside the retention
    window (all reachable history unless a retention window ever trimmed it)."""
    import datetime as dt

    v = pool.versioned
    keys: set[str] = set()
    for cid in heads:
        if v.commits.exists(cid):
            with contextlib.suppress(LimnoError):
                keys |= v.snapshot_keys(cid)
    retention = pool.retention()
    if retention is not None or not v.gc.state().trimmed:
        with contextlib.suppress(LimnoError):
            keys |= retained_keys(v, retention, dt.datetime.now(dt.UTC))
    return keys


def check_object(
    storage: Storage,
    pool_id: str,
    obj: DataObject,
    pool: Any,
    deep: bool = True,
    needed: bool = True,
) -> Iterator[Fault]:
    """Check one data object against its recorded metadata (its rows too when ``deep``).

    A missing object is a fault when it is ``needed`` (held by a head, a tag or a
    retained commit), or when no tombstone says vacuum removed it.
    """
    path = data_path(pool_id, obj.id)
    try:
        info = storage.head(path)
    except NotFoundError:
        if needed:
            why = "a branch, tag or retained commit holds it"
            yield Fault(path, f"referenced data object is missing ({why})", RESTORE)
        elif not storage.exists(expired_path(pool_id, obj.id)):
            why = "no tombstone says vacuum removed it"
            yield Fault(path, f"referenced data object is missing ({why})", RESTORE)
        return
    if info.size != obj.size:
        yield Fault(path, f"size {info.size} differs from the recorded {obj.size}", RESTORE)
        return
    if not deep:
        try:
            rows = parquet.open_parquet(storage, path).metadata.num_rows
        except (LimnoError, pa.ArrowException, OSError) as e:
            reason = (
                e.reason if isinstance(e, CorruptError) and e.reason else str(e).splitlines()[0]
            )
            yield Fault(path, f"unreadable Parquet footer ({reason})", RESTORE)
            return
        if rows != obj.rows:
            yield Fault(path, f"{rows} rows, recorded {obj.rows}", RESTORE)
        return
    try:
        table = _read_verified(storage, path)
    except (LimnoError, pa.ArrowException, OSError) as e:
        reason = e.reason if isinstance(e, CorruptError) and e.reason else str(e).splitlines()[0]
        yield Fault(path, f"unreadable Parquet ({reason})", RESTORE)
        return
    if table.num_rows != obj.rows:
        yield Fault(path, f"{table.num_rows} rows, recorded {obj.rows}", RESTORE)
    key = pool.key
    keys = key.key_table(table)
    keyed = key.keyed_mask(table)
    n_keyed = int(pa.compute.sum(keyed).as_py() or 0)
    if table.num_rows - n_keyed != obj.keyless:
        yield Fault(
            path, f"{table.num_rows - n_keyed} keyless rows, recorded {obj.keyless}", RESTORE
        )
    # the sort is stable, so rows are in key order exactly when it leaves them in
    # place (comparing key values would fail on NaN, which equals nothing)
    order = key.sort_indices(table)
    if not order.equals(pa.array(range(table.num_rows), order.type)):
        yield Fault(path, "rows are not sorted by the pool key", RESTORE)
        return
    if n_keyed:
        first = key.row_key(keys, 0)
        last = key.row_key(keys, n_keyed - 1)
        if first is None or key.sort_key(first) != key.sort_key(obj.min_key):
            yield Fault(
                path, f"first key {first!r} differs from the recorded min {obj.min_key!r}", RESTORE
            )
        if last is None or key.sort_key(last) != key.sort_key(obj.max_key):
            yield Fault(
                path, f"last key {last!r} differs from the recorded max {obj.max_key!r}", RESTORE
            )


def _read_verified(storage: Storage, path: str) -> pa.Table:
    """An object's rows, its pages' checksums verified where the writer stored them."""
    import pyarrow.parquet as pq

    local = storage.local_path(path)
    source: Any = local if local is not None else pa.BufferReader(storage.get(path))
    with pq.ParquetFile(source, page_checksum_verification=True) as f:
        return f.read()
