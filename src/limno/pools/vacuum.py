"""Vacuum: free the bytes of data objects that nothing referenced can see.

Deleting data is a commit; bytes are freed only here. An object is kept while

- the snapshot of a branch head or a tag holds it, or it is staged;
- a commit in the retention window holds it. A commit is in the window while it
  is reachable and was a branch head at some time in the last ``retention`` (it
  is a head, or a child of it was made within the window). Without a retention
  every reachable commit is in the window, so time travel never breaks;
- a live lease may cover it: a write in flight (see :mod:`limno.core.leases`);
- or it is younger than the grace period (default 15 minutes).

Vacuum and writers never race to a lost object: a run registers its candidates in
the branch store before it looks for references the last time, and writers check
against registered runs when they land (the protocol, and why it is safe, is in
:mod:`limno.core.gc`). Before an object is deleted a tombstone
``<pool-id>/expired/<id>`` records that vacuum removed it on purpose, so ``verify``
and readers of trimmed history can tell "expired by retention" from "lost".

An object's sidecars go with it: its sketch, and the sidecars of its search indexes
(``<id>.<index-id>.idx``, :mod:`limno.data.indexes`). The sidecars of an index that no
retained commit holds anymore (dropped, and out of every retention window) are freed
while the object stays (past the grace period, and not while a write holds a lease that
may be building them).

Hidden partial files (a writer killed while it wrote an object leaves its
``<id>.parquet#<digits>`` staging file behind; see
:meth:`limno.storage.Storage.list_partial`) are reclaimed by the same rules.

The copies of files queued for the ingest batcher (``<pool-id>/ingest/files/``) that
no queue entry needs anymore (an upload whose submit died before it was queued, the
files of done jobs) are freed past the same grace period: see
:mod:`limno.pools.ingest_upkeep`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fnmatch
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from limno.errors import ConflictError, CorruptError, NotFoundError

if TYPE_CHECKING:
    from limno.core.leases import LeaseInfo
    from limno.core.versioning import Versioned
    from limno.storage._base import ObjectInfo

__all__ = ["DEFAULT_GRACE", "VacuumReport", "vacuum"]

DEFAULT_GRACE = dt.timedelta(minutes=15)
#: a run checks that it is still registered at least this often (seconds) while deleting
RECHECK_SECONDS = 1.0


@dataclass
class VacuumReport:
    """What vacuum removed (or would remove, on a dry run)."""

    removed: list[tuple[str, int]] = field(default_factory=list)
    too_young: int = 0
    referenced: int = 0
    leased: int = 0
    dry_run: bool = False

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.removed)


Retention = dt.timedelta | Mapping[str, dt.timedelta] | None


def window(retention: Retention, branch: str) -> dt.timedelta | None:
    """The retention window of ``branch``: per-branch rules are globs, exact names first."""
    if retention is None or isinstance(retention, dt.timedelta):
        return retention
    if branch in retention:
        return retention[branch]
    for pattern, value in retention.items():
        if fnmatch.fnmatchcase(branch, pattern):
            return value
    return None


def retained_commits(v: Versioned, retention: Retention, now: dt.datetime) -> set[str]:
    """Heads, tags, and the commits inside each branch's retention window.

    Each branch keeps the history within its own window (lakeFS style); a tag
    keeps the commit it names (and, without any window, all of its history).
    """
    tags = list(v.refs.tags().values())
    keep_commits = set(tags) | set(v.refs.branches().values())
    for commit in v.commits.log(tags) if retention is None else []:
        keep_commits.add(commit.id)
    for branch, head in v.refs.branches().items():
        span = window(retention, branch)
        cutoff = None if span is None else now - span
        for commit in v.commits.log([head]):
            if cutoff is not None and commit.time < cutoff:
                break  # the log is newest first: the rest is older still
            keep_commits.add(commit.id)
            keep_commits.update(commit.parents)
    return keep_commits


def retained_keys(v: Versioned, retention: Retention, now: dt.datetime) -> set[str]:
    """Entry keys held by heads, tags and commits in a retention window."""
    return retained_entries(v, retention, now)[0]


def retained_entries(
    v: Versioned, retention: Retention, now: dt.datetime
) -> tuple[set[str], set[str]]:
    """Entry keys held by heads, tags and commits in a retention window, and the ids of
    the search indexes among those entries (``~index/<field>``: its value holds the id)."""
    from limno.data.indexes import is_index_key  # record pools' entries

    seen_ranges: set[str] = set()
    keys: set[str] = set()
    index_ids: set[str] = set()
    for cid in retained_commits(v, retention, now):
        for ref in v.snapshots.ranges(v.commits.get(cid).snapshot):
            if ref.id in seen_ranges:
                continue
            seen_ranges.add(ref.id)
            for k, value in v.snapshots.range_entries(ref.id):
                if v.object_keys is None:
                    keys.add(k)
                else:
                    keys.update(v.object_keys(k, value))
                if is_index_key(k):
                    index_ids.add(str(value.get("id", "")))
    return keys, index_ids


def staged_keys(v: Versioned) -> set[str]:
    """Object keys staged on any branch (:attr:`Versioned.object_keys` of each entry)."""
    keys: set[str] = set()
    for info in v.storage.walk(f"{v.pool_id}/staging"):
        try:
            doc = json.loads(v.storage.get(info.path))
        except NotFoundError:
            continue  # committed or dropped meanwhile: the refs, read later, have it
        except ValueError as e:
            raise CorruptError(f"{info.path}: unreadable staging entry") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("key"), str):
            raise CorruptError(f"{info.path}: unreadable staging entry")
        if v.object_keys is None:
            keys.add(doc["key"])
            continue
        value = doc.get("value")
        if not isinstance(value, dict):
            raise CorruptError(f"{info.path}: unreadable staging entry")
        keys.update(v.object_keys(doc["key"], value))
    return keys


def referenced_keys(v: Versioned, retention: Retention, now: dt.datetime) -> set[str]:
    """Entry keys held by heads, tags, staging, and commits in a retention window."""
    return staged_keys(v) | retained_keys(v, retention, now)


def _groups(v: Versioned, data_prefix: str) -> dict[str, list[tuple[ObjectInfo, bool]]]:
    """Files under ``data_prefix`` (and hidden partial ones) by the key they belong to.

    A key's files are ``<key>.<ext>``, ``<key>.<ext>#<digits>`` (partial) and
    everything under ``<key>.<ext>/`` (a Spark job's staging directory); a file pool's
    blob has no extension: ``<key>`` and ``<key>#<digits>``.
    """
    groups: dict[str, list[tuple[ObjectInfo, bool]]] = {}
    listed = [(i, False) for i in v.storage.walk(data_prefix)]
    listed += [(i, True) for i in v.storage.list_partial(data_prefix)]
    for info, partial in listed:
        rel = info.path[len(data_prefix) :].lstrip("/")
        key = rel.split("/", 1)[0].split(".", 1)[0].split("#", 1)[0]
        groups.setdefault(key, []).append((info, partial))
    return groups


def _is_object(info: ObjectInfo, partial: bool) -> bool:
    """Whether ``info`` is a key's object itself (``<key>.parquet``, or a file pool's
    ``<key>``), not a sidecar or a partial file."""
    name = info.path.rsplit("/", 1)[-1]
    return not partial and (name.endswith(".parquet") or "." not in name)


def _stale_sidecars(
    files: list[tuple[ObjectInfo, bool]],
    index_ids: set[str],
    cutoff: dt.datetime,
    leases: list[LeaseInfo],
) -> list[ObjectInfo]:
    """The sidecars among a kept object's ``files`` (``<key>.<index-id>.idx``) of search
    indexes no retained commit holds, past the grace period and not being written (an
    index's id is a KSUID taken under the lease of the write that builds it)."""
    out = []
    for info, partial in files:
        parts = info.path.rsplit("/", 1)[-1].split(".")
        if partial or len(parts) != 3 or parts[2] != "idx" or parts[1] in index_ids:
            continue
        if info.last_modified <= cutoff and not _covered(parts[1], leases):
            out.append(info)
    return out


def _covered(key: str, leases: list[LeaseInfo]) -> bool:
    return any(lease.live and lease.op != "vacuum" and lease.covers(key) for lease in leases)


def vacuum(
    v: Versioned,
    data_prefix: str,
    grace: dt.timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
    retention: Retention = None,
    now: dt.datetime | None = None,
) -> VacuumReport:
    """Remove unreferenced objects under ``data_prefix`` older than ``grace``, then the
    ingest queue's copies nothing needs (:func:`~limno.pools.ingest_upkeep.vacuum_uploads`).

    Objects are named ``<key>.<ext>`` after the entry key that references them; an
    object and its sidecars (``<key>.sketch``...) are counted and removed together,
    the object itself last, once the youngest of them is past the grace period.
    """
    from limno.pools.ingest_upkeep import vacuum_uploads

    now = now or dt.datetime.now(dt.UTC)
    report = _vacuum_objects(v, data_prefix, grace, dry_run, retention, now)
    vacuum_uploads(v.storage, v.pool_id, report, now - grace, dry_run)
    return report


def _vacuum_objects(
    v: Versioned,
    data_prefix: str,
    grace: dt.timedelta,
    dry_run: bool,
    retention: Retention,
    now: dt.datetime,
) -> VacuumReport:
    from limno.core.gc import expired_path  # loaded with the pool's Gc (v.gc) below

    report = VacuumReport(dry_run=dry_run)
    gc = v.gc
    runs = gc.state().runs  # before the leases: a registered run's lease predates it
    leases = gc.leases.scan(now)
    if not dry_run:
        _clear_dead(v, runs, leases)
    keep = staged_keys(v)
    retained, index_ids = retained_entries(v, retention, now)
    keep |= retained
    cutoff = now - grace
    candidates: dict[str, list[tuple[ObjectInfo, bool]]] = {}
    stale: list[ObjectInfo] = []
    for key, files in _groups(v, data_prefix).items():
        files.sort(key=lambda f: (_is_object(*f), f[0].path))  # the object itself last
        if key in keep:
            report.referenced += 1
            stale += _stale_sidecars(files, index_ids, cutoff, leases)
        elif max(f.last_modified for f, _ in files) > cutoff:
            report.too_young += 1
        elif _covered(key, leases):
            report.leased += 1
        else:
            candidates[key] = files
    report.removed += [(info.path, info.size) for info in stale]
    if not dry_run:
        for info in stale:  # no tombstone: the object itself stays
            with contextlib.suppress(NotFoundError):
                v.storage.delete(info.path)
    if dry_run or not candidates:
        report.removed += [(f[-1][0].path, sum(i.size for i, _ in f)) for f in candidates.values()]
        return report
    with gc.leases.hold("vacuum") as lease:
        run = gc.begin(candidates, lease.id, trimmed=retention is not None)
        try:
            # after the mark, in reverse order of how an object becomes referenced:
            # lease, then staging entry, then branch (see limno.core.gc)
            leases = gc.leases.scan(now)
            keep = staged_keys(v)
            keep |= retained_keys(v, retention, now)
            checked = time.monotonic()
            for key, files in candidates.items():
                if key in keep:
                    report.referenced += 1
                    continue
                if _covered(key, leases):
                    report.leased += 1
                    continue
                if time.monotonic() - checked > RECHECK_SECONDS:
                    if not gc.registered(run):
                        raise ConflictError(
                            f"vacuum run {run} was cleared by another vacuum while it ran"
                            " (it looked dead); stopped without deleting more"
                        )
                    checked = time.monotonic()
                report.removed.append((files[-1][0].path, sum(i.size for i, _ in files)))
                v.storage.put(expired_path(v.pool_id, key), b"")
                for info, partial in files:
                    if partial:
                        v.storage.delete_partial(info.path)
                    else:
                        v.storage.delete(info.path)
        finally:
            gc.finish(run)
    return report


def _clear_dead(
    v: Versioned, runs: Mapping[str, Mapping[str, object]], leases: list[LeaseInfo]
) -> None:
    """Forget runs of vacuums that died and the leases of dead processes."""
    live = {lease.id for lease in leases if lease.live}
    for run, info in runs.items():
        if info.get("lease") not in live:
            v.gc.finish(run)
    v.gc.leases.reap([lease for lease in leases if not lease.live])
