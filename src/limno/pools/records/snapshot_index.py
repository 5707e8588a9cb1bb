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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from limno.core.versioning import Versioned
from limno.data.keys import PoolKey
from limno.errors import CorruptError, LimnoError, NotFoundError
from limno.lazy import lazy_module
from limno.pools.records import snapshot_cache
from limno.pools.records.partitions import PARTITION_PREFIX, PartitionTree

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.data import plan_index
    from limno.data.objects import DataObject
    from limno.pools.records.pool import RecordPool
    from limno.pools.vacuum import VacuumReport
else:
    pa = lazy_module("pyarrow")
    plan_index = lazy_module("limno.data.plan_index")

__all__ = ["MIN_OBJECTS", "first_objects", "partitions", "sidecar_path", "vacuum_sidecars", "view"]

#: where a pool's snapshot sidecars live, under the pool
SIDECARS = "meta/snapshot-sidecars"
#: the smallest snapshot (in stored objects) that gets sidecars
MIN_OBJECTS = 2000
_DIGEST = 32  # bytes of SHA-256 before the Arrow IPC file


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
) -> snapshot_cache.ScanView:
    """The scan view of snapshot ``snapshot``, from its stored plan when it has one;
    else ``make()`` (the view planned from the decoded snapshot, and the snapshot's
    stored objects in their order), whose plan is then stored when the snapshot is
    big enough."""
    path = sidecar_path(versioned.pool_id, snapshot, "plan")
    big = _big(versioned, snapshot)
    body, present = _read(versioned, path) if big else (None, False)
    if body is not None:
        with contextlib.suppress(CorruptError, KeyError, ValueError, TypeError):
            stored = plan_index.StoredPlan(body, key)
            if stored.metadata["key"] == str(key):
                return snapshot_cache.ScanView.stored(stored, key, key_types)
    made, objects = make()
    if big:
        read = {o.id for o in made.objects}
        table = plan_index.plan_table(
            made.plan,
            {o.id: i for i, o in enumerate(objects)},
            [o for o in objects if o.id not in read],
            {"key": str(key), "stored_objects": str(len(objects))},
        )
        _write(versioned, path, plan_index.plan_ipc(table), replace=present)
    return made


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
    """Snapshot ``snapshot``'s partitions report: stored, else ``make()`` (then stored,
    for a snapshot of :data:`MIN_OBJECTS` entries or more)."""
    path = sidecar_path(versioned.pool_id, snapshot, "partitions")
    big = _big(versioned, snapshot)
    body, present = _read(versioned, path) if big else (None, False)
    if body is not None:
        with contextlib.suppress(pa.ArrowException, ValueError):
            return pa.ipc.open_file(pa.py_buffer(body)).read_all()
    made = make()
    if big:
        _write(versioned, path, plan_index.to_ipc(made), replace=present)
    return made


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
