"""Vacuum: free the bytes of data objects that no commit still referenced can see.

Deleting data is a commit; bytes are freed only here. An object is kept while

- the snapshot of a branch head or a tag holds it, or it is staged;
- a commit in the retention window holds it. A commit is in the window while it
  is reachable and was a branch head at some time in the last ``retention`` (it
  is a head, or a child of it was made within the window). Without a retention
  every reachable commit is in the window, so time travel never breaks;
- or it is younger than the grace period (default 15 minutes), so a load that
  has written objects but not yet committed them is never pulled from under.

Before an object is deleted a tombstone ``<pool-id>/expired/<id>`` records that
vacuum removed it on purpose, so ``verify`` and readers of expired commits can
tell "expired by retention" from "lost".
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from limno.core.versioning import Versioned
from limno.storage._base import ObjectInfo

__all__ = ["DEFAULT_GRACE", "VacuumReport", "vacuum"]

DEFAULT_GRACE = dt.timedelta(minutes=15)


@dataclass
class VacuumReport:
    """What vacuum removed (or would remove, on a dry run)."""

    removed: list[tuple[str, int]] = field(default_factory=list)
    too_young: int = 0
    referenced: int = 0
    dry_run: bool = False

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.removed)


def expired_path(pool_id: str, key: str) -> str:
    return f"{pool_id}/expired/{key}"


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


def referenced_keys(v: Versioned, retention: Retention, now: dt.datetime) -> set[str]:
    """Entry keys held by heads, tags, staging, and commits in a retention window.

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
    seen_ranges: set[str] = set()
    keys: set[str] = set()
    for cid in keep_commits:
        for ref in v.snapshots.ranges(v.commits.get(cid).snapshot):
            if ref.id in seen_ranges:
                continue
            seen_ranges.add(ref.id)
            keys.update(k for k, _ in v.snapshots.range_entries(ref.id))
    for info in v.storage.walk(f"{v.pool_id}/staging"):
        keys.add(json.loads(v.storage.get(info.path))["key"])
    return keys


def vacuum(
    v: Versioned,
    data_prefix: str,
    grace: dt.timedelta = DEFAULT_GRACE,
    dry_run: bool = False,
    retention: Retention = None,
    now: dt.datetime | None = None,
) -> VacuumReport:
    """Remove unreferenced objects under ``data_prefix`` older than ``grace``.

    Objects are named ``<key>.<ext>`` after the entry key that references them; an
    object and its sidecars (``<key>.sketch``...) are counted and removed together,
    the object itself last, once the youngest of them is past the grace period.
    """
    report = VacuumReport(dry_run=dry_run)
    now = now or dt.datetime.now(dt.UTC)
    keep = referenced_keys(v, retention, now)
    cutoff = now - grace
    groups: dict[str, list[ObjectInfo]] = {}
    for info in v.storage.walk(data_prefix):
        name = info.path.rsplit("/", 1)[-1]
        groups.setdefault(name.split(".", 1)[0], []).append(info)
    for key, files in groups.items():
        files.sort(key=lambda f: (f.path.endswith(".parquet"), f.path))
        if key in keep:
            report.referenced += 1
        elif max(f.last_modified for f in files) > cutoff:
            report.too_young += 1
        else:
            report.removed.append((files[-1].path, sum(f.size for f in files)))
            if not dry_run:
                v.storage.put(expired_path(v.pool_id, key), b"")
                for f in files:
                    v.storage.delete(f.path)
    return report
