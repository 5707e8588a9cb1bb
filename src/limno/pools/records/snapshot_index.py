"""Snapshot sidecars: what reading a big snapshot works out, stored once beside it.

A new process that shows the first rows of a snapshot of 100,000 objects used to
read and decode all of its entries (about 1.8 s) and plan a scan over them (about
1.3 s) before the first row. A snapshot id is the SHA-256 of its content, so
anything worked out from the snapshot alone never goes stale, and can be stored
once for every later process:

- ``<pool-id>/meta/snapshot-sidecars/<snapshot>.plan``: the snapshot's scan plan
  (:mod:`limno.data.plan_index`: its objects in plan order, cluster bounds, each
  object's entry), written by the first reader that plans it (:func:`view`), so a
  page of first rows decodes a few objects, and ``status`` lists a snapshot's first
  objects, from one read;
- ``<pool-id>/meta/snapshot-sidecars/<snapshot>.partitions``: ``status``'s
  partitions report (it sums over every object), written by the first ``status``.

A commit changes few objects: the first reader of a new snapshot derives its
sidecars from those of its nearest ancestor snapshot that has them (first parents,
at most :data:`MAX_ANCESTORS` back: commits may land faster than anyone reads) and
the entries that differ (the metaranges share every other range, so only the
changed ranges are read): :func:`derived_table`
(``data/plan_derive.py``) and :func:`derived_partitions`, exactly what planning or
reporting the snapshot whole gives, or None where that cannot be made sure (then it
is planned whole). Commits write none: the commit path pays nothing for them.

Only snapshots of at least :data:`MIN_OBJECTS` objects get them: below that,
planning costs less than writing and reading a sidecar. Each is written
write-if-absent (two processes writing one write the same content: either wins)
and starts with the SHA-256 of the rest, checked on every read: a damaged or
unreadable sidecar is ignored (and replaced), never trusted. A sidecar is a cache:
losing one costs its rebuilding, never a wrong answer. A store that refuses the
write (read-only credentials) just goes without.

Vacuum (:func:`vacuum_sidecars`, from the pool's vacuum) keeps the sidecars of the
snapshots of branch heads and tags (what pages show) and of any sidecar younger
than the grace period (a commit page of an old commit, a head just moved), and
deletes the rest.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from limno.core.committed import _LRU
from limno.core.versioning import Versioned
from limno.data.indexes import INDEX_PREFIX, is_index_key
from limno.data.keys import PoolKey
from limno.errors import CorruptError, LimnoError, NotFoundError
from limno.lazy import lazy_module
from limno.pools.records import snapshot_cache
from limno.pools.records.partitions import (
    PARTITION_PREFIX,
    ROOT_ID,
    PartitionTree,
    is_partition_key,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.core.commits import Commit
    from limno.data import objects as data_objects
    from limno.data import plan_bulk, plan_derive, plan_index
    from limno.data.objects import DataObject
    from limno.pools.records.pool import RecordPool
    from limno.pools.vacuum import VacuumReport
else:
    pa = lazy_module("pyarrow")
    plan_index = lazy_module("limno.data.plan_index")
    plan_derive = lazy_module("limno.data.plan_derive")
    plan_bulk = lazy_module("limno.data.plan_bulk")
    data_objects = lazy_module("limno.data.objects")

#: how a pool reads objects under a partition tree (whole, clipped runs, or not at all)
Clipping = Callable[[Sequence["DataObject"], PartitionTree], list["DataObject"]]

__all__ = [
    "MIN_OBJECTS",
    "ancestors",
    "bulk_table",
    "derived_partitions",
    "derived_table",
    "first_objects",
    "partitions",
    "sidecar_path",
    "vacuum_sidecars",
    "view",
    "whole_table",
]

#: where a pool's snapshot sidecars live, under the pool
SIDECARS = "meta/snapshot-sidecars"
#: the smallest snapshot (in stored objects) that gets sidecars
MIN_OBJECTS = 2000
#: most objects a commit adds or removes for its snapshot's plan to be derived from its
#: parent's (more: planned whole)
MAX_CHANGES = 5000
_DIGEST = 32  # bytes of SHA-256 before the Arrow IPC file


#: how many first-parent ancestors a new snapshot looks through for stored sidecars
MAX_ANCESTORS = 16
#: per big snapshot read in this process, its ancestors' snapshots (see :func:`view`):
#: what :func:`partitions` derives a report from
_parents = _LRU(256)


def _cache_key(versioned: Versioned, snapshot: str) -> str:
    return f"{versioned.storage.uri}/{versioned.pool_id}/{snapshot}"


def sidecar_path(pool_id: str, snapshot: str, kind: str) -> str:
    """Where snapshot ``snapshot``'s sidecar ``kind`` (``plan``, ``partitions``) lives."""
    return f"{pool_id}/{SIDECARS}/{snapshot}.{kind}"


def _big(versioned: Versioned, snapshot: str) -> bool:
    """Whether ``snapshot`` has sidecars (its entries counted from its metarange)."""
    return versioned.snapshots.count(snapshot) >= MIN_OBJECTS


def _read(versioned: Versioned, path: str) -> tuple[memoryview | None, bool]:
    """What is stored at ``path`` (None: missing, or damaged), and whether something is
    there."""
    try:
        data = versioned.storage.get(path)
    except NotFoundError:
        return None, False
    body = memoryview(data)[_DIGEST:]
    if hashlib.sha256(body).digest() != data[:_DIGEST]:
        return None, True
    return body, True


def _write(versioned: Versioned, path: str, body: bytes, replace: bool) -> None:
    """Store ``body`` at ``path`` if nothing is there (``replace``: over a damaged one);
    a store that refuses (another writer first, read-only credentials) is no error."""
    data = hashlib.sha256(body).digest() + body
    with contextlib.suppress(LimnoError):
        if replace:
            versioned.storage.put(path, data)
        else:
            versioned.storage.put_if_absent(path, data)


def view(
    versioned: Versioned,
    key: PoolKey,
    snapshot: str,
    key_types: Callable[[Sequence[DataObject]], list[pa.DataType]],
    make: Callable[[], tuple[snapshot_cache.ScanView, Sequence[DataObject]]],
    parent: Callable[[], Iterable[str]] | None = None,
    clipped: Clipping | None = None,
) -> snapshot_cache.ScanView:
    """The scan view of snapshot ``snapshot``, from its stored plan when it has one;
    else from the plan derived from its nearest ancestor's stored plan (``parent()``:
    the snapshots of its commit's first-parent ancestors, nearest first, as
    :func:`ancestors` lists them; ``clipped``: the objects as a partition
    tree has them read) when that can be derived (:func:`derived_table`); else
    ``make()`` (the view planned from the decoded snapshot, and the snapshot's stored
    objects in their order). A plan derived or made is stored when the snapshot is big
    enough."""
    path = sidecar_path(versioned.pool_id, snapshot, "plan")
    big = _big(versioned, snapshot)
    if big and parent is not None:
        _parents.put(_cache_key(versioned, snapshot), parent)
    body, present = _read(versioned, path) if big else (None, False)
    if body is not None:
        with contextlib.suppress(CorruptError, KeyError, ValueError, TypeError):
            stored = plan_index.StoredPlan(body, key)
            if stored.metadata["key"] == str(key):
                return snapshot_cache.ScanView.stored(stored, key, key_types)
    if big and parent is not None and clipped is not None:
        table = derived_table(versioned, key, parent(), snapshot, clipped)
        if table is not None:
            data = plan_index.plan_ipc(table)
            _write(versioned, path, data, replace=present)
            stored = plan_index.StoredPlan(data, key)
            return snapshot_cache.ScanView.stored(stored, key, key_types)
    table = bulk_table(versioned, key, snapshot) if big else None
    if table is not None:
        data = plan_index.plan_ipc(table)
        _write(versioned, path, data, replace=present)
        stored = plan_index.StoredPlan(data, key)
        return snapshot_cache.ScanView.stored(stored, key, key_types)
    made, objects = make()
    if big:
        table = whole_table(key, made, objects)
        _write(versioned, path, plan_index.plan_ipc(table), replace=present)
    return made


def bulk_table(versioned: Versioned, key: PoolKey, snapshot: str) -> pa.Table | None:
    """Snapshot ``snapshot``'s plan table made whole from its ranges' stored text
    (``data/plan_bulk.py``: what :func:`whole_table` gives, without decoding each
    entry), or None where that does not apply: a partition tree (objects read
    clipped), keys of other types."""
    if any(
        is_partition_key(k) for k, _ in versioned.snapshots.entries_from(snapshot, PARTITION_PREFIX)
    ):
        return None
    texts = (data for _, data in versioned.snapshots.range_texts(snapshot))
    found = plan_bulk.entry_fields(texts, (PARTITION_PREFIX, INDEX_PREFIX))
    if found is None:
        return None
    fields, schemas = found
    meta = {"key": str(key), "stored_objects": str(fields.num_rows)}
    return plan_bulk.plan_table_bulk(fields, schemas, key, meta)


def whole_table(
    key: PoolKey, made: snapshot_cache.ScanView, objects: Sequence[DataObject]
) -> pa.Table:
    """The plan table of a view planned from a decoded snapshot (``objects``: its
    stored objects in their order)."""
    read = {o.id for o in made.objects}
    return plan_index.plan_table(
        made.plan,
        {o.id: i for i, o in enumerate(objects)},
        [o for o in objects if o.id not in read],
        {"key": str(key), "stored_objects": str(len(objects))},
    )


def ancestors(versioned: Versioned, commit: Commit) -> Iterable[str]:
    """The snapshots of ``commit``'s first-parent ancestors, nearest first, at most
    :data:`MAX_ANCESTORS`: each commit read when a walk first reaches it, once (the
    plan and the partitions report walk the same ancestors, as far as each needs)."""

    def walk() -> Iterator[str]:
        at = commit
        for _ in range(MAX_ANCESTORS):
            if not at.parents:
                return
            at = versioned.commits.get(at.parents[0])
            yield at.snapshot

    return _Remembered(walk())


class _Remembered(Iterable[str]):
    """An iterator's items, iterable again and again; each item drawn once, when an
    iteration first reaches it."""

    def __init__(self, items: Iterator[str]) -> None:
        self._items = items
        self._seen: list[str] = []

    def __iter__(self) -> Iterator[str]:
        i = 0
        while True:
            if i == len(self._seen):
                item = next(self._items, None)
                if item is None:
                    return
                self._seen.append(item)
            yield self._seen[i]
            i += 1


def _nearest(
    versioned: Versioned, snapshots: Iterable[str], kind: str
) -> tuple[str, memoryview] | None:
    """The first of ``snapshots`` with a sound stored sidecar ``kind``, and its body."""
    for snapshot in snapshots:
        body, _ = _read(versioned, sidecar_path(versioned.pool_id, snapshot, kind))
        if body is not None:
            return snapshot, body
    return None


def derived_table(
    versioned: Versioned, key: PoolKey, bases: Iterable[str], snapshot: str, clipped: Clipping
) -> pa.Table | None:
    """Snapshot ``snapshot``'s plan table derived from the stored plan of the first of
    snapshots ``bases`` that has one (an ancestor's) and the entries that differ
    between them (only the ranges they do not share are read: see
    ``Snapshots.diff``), or None where it cannot be: no stored plan among ``bases``,
    another pool key, a partition changed (every object's clip may change), more than
    :data:`MAX_CHANGES` objects changed, or what ``plan_derive.derive`` refuses."""
    found = _nearest(versioned, bases, "plan")
    if found is None:
        return None
    parent, body = found
    try:
        base = plan_index.StoredPlan(body, key)
        if base.metadata["key"] != str(key):
            return None
        removed: list[str] = []
        added: list[DataObject] = []
        for k, old, new in versioned.snapshots.diff(parent, snapshot):
            if is_partition_key(k):
                return None
            if is_index_key(k):
                continue
            if old is not None:
                removed.append(k)
            if new is not None:
                added.append(data_objects.DataObject.from_json(new, k))
            if len(removed) + len(added) > MAX_CHANGES:
                return None
        entries = versioned.snapshots.entries_from(snapshot, PARTITION_PREFIX)
        tree = PartitionTree.from_entries(entries, key)
        count = int(base.metadata["stored_objects"]) - len(removed) + len(added)
        return plan_derive.derive(
            base,
            removed,
            [(o, clipped([o], tree)) for o in added],
            snapshot_cache.write_order,
            {"key": str(key), "stored_objects": str(count)},
        )
    except (CorruptError, KeyError, ValueError, TypeError):
        return None


def first_objects(
    pool: RecordPool, ref: str | None, rows: int
) -> tuple[list[DataObject], int, PartitionTree] | None:
    """The first ``rows`` objects of ``ref``'s snapshot in its order (whole, as
    :meth:`RecordPool.snapshot` lists them), how many it has, and its partition tree,
    from the snapshot's stored plan; None when it has none (a small snapshot)."""
    stored = pool.scan_view(ref).stored_plan
    if stored is None:
        return None
    snapshot = pool.versioned.commits.get(pool.resolve(ref)).snapshot
    # partition entries sort last (``~partition/``): the snapshot's last range or so
    entries = pool.versioned.snapshots.entries_from(snapshot, PARTITION_PREFIX)
    tree = PartitionTree.from_entries(entries, pool.key)
    return stored.stored_first(rows), int(stored.metadata["stored_objects"]), tree


def partitions(versioned: Versioned, snapshot: str, make: Callable[[], pa.Table]) -> pa.Table:
    """Snapshot ``snapshot``'s partitions report: stored, else derived from its nearest
    ancestor's stored one (:func:`derived_partitions`; the ancestors as :func:`view`
    last learnt them in this process), else ``make()`` (stored when derived or made, for a
    snapshot of :data:`MIN_OBJECTS` entries or more)."""
    path = sidecar_path(versioned.pool_id, snapshot, "partitions")
    big = _big(versioned, snapshot)
    body, present = _read(versioned, path) if big else (None, False)
    if body is not None:
        report = _report(body)
        if report is not None:
            return report
    parent = _parents.get(_cache_key(versioned, snapshot)) if big else None
    made = None if parent is None else derived_partitions(versioned, parent(), snapshot)
    made = make() if made is None else made
    if big:
        _write(versioned, path, plan_index.to_ipc(made), replace=present)
    return made


def _report(body: memoryview) -> pa.Table | None:
    """A stored partitions report, or None when it is not one."""
    try:
        return pa.ipc.open_file(pa.py_buffer(body)).read_all()
    except (pa.ArrowException, ValueError):
        return None


def derived_partitions(
    versioned: Versioned, bases: Iterable[str], snapshot: str
) -> pa.Table | None:
    """Snapshot ``snapshot``'s partitions report from the stored one of the first of
    snapshots ``bases`` that has one (an ancestor's) and the entries that differ, for a
    pool without partitions (one leaf, every object in it whole: the report's rows and
    objects are sums of whole numbers, the same in any order); None otherwise (a
    partition tree: estimated shares of objects straddling leaves are fractions, whose
    sum depends on its order), with no stored report among ``bases``, or more than
    :data:`MAX_CHANGES` changes."""
    found = _nearest(versioned, bases, "partitions")
    if found is None:
        return None
    parent, body = found
    report = _report(body)
    if report is None or report.num_rows != 1 or report.column("id")[0].as_py() != ROOT_ID:
        return None
    if any(
        is_partition_key(k) for k, _ in versioned.snapshots.entries_from(snapshot, PARTITION_PREFIX)
    ):
        return None
    rows = objects = changes = 0
    try:
        for k, old, new in versioned.snapshots.diff(parent, snapshot):
            if is_index_key(k):
                continue
            changes += 1
            if is_partition_key(k) or changes > MAX_CHANGES:
                return None
            for value, sign in ((old, -1), (new, 1)):
                obj = None if value is None else data_objects.DataObject.from_json(value, k)
                if obj is not None and (obj.keyless or None not in (obj.min_key, obj.max_key)):
                    rows += sign * obj.rows
                    objects += sign
        names = report.column_names
        total_rows = report.column("rows")[0].as_py() + rows
        total_objects = report.column("objects")[0].as_py() + objects
    except (CorruptError, KeyError, TypeError, ValueError):
        return None
    report = report.set_column(names.index("rows"), "rows", pa.array([total_rows], pa.int64()))
    return report.set_column(
        names.index("objects"), "objects", pa.array([total_objects], pa.int64())
    )


def vacuum_sidecars(
    versioned: Versioned, cutoff: dt.datetime, dry_run: bool, report: VacuumReport
) -> None:
    """Delete the sidecars of snapshots no branch head or tag has, last written before
    ``cutoff`` (listed first, then the refs read: a sidecar of a snapshot that became a
    head meanwhile is kept); each removal goes in ``report``."""
    listed = list(versioned.storage.walk(f"{versioned.pool_id}/{SIDECARS}/"))
    if not listed:
        return
    refs = [*versioned.refs.branches().values(), *versioned.refs.tags().values()]
    live = {versioned.commits.get(c).snapshot for c in dict.fromkeys(refs)}
    for info in listed:
        snapshot = info.path.rsplit("/", 1)[-1].split(".", 1)[0]
        if snapshot in live or info.last_modified > cutoff:
            continue
        report.removed.append((info.path, info.size))
        if not dry_run:
            versioned.storage.delete(info.path)
