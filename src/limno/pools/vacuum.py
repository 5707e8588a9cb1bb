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
import json
from dataclasses import dataclass, field

from limno.core.versioning import Versioned

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


def referenced_keys(v: Versioned, retention: dt.timedelta | None, now: dt.datetime) -> set[str]:
    """Entry keys held by heads, tags, staging, and commits in the retention window."""
    heads = [*v.refs.branches().values(), *v.refs.tags().values()]
    keep_commits = set(heads)
    cutoff = None if retention is None else now - retention
    for commit in v.commits.log(heads):
        if cutoff is None or commit.time >= cutoff:
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
    retention: dt.timedelta | None = None,
    now: dt.datetime | None = None,
) -> VacuumReport:
    """Remove unreferenced objects under ``data_prefix`` older than ``grace``.

    Objects are named ``<key>.<ext>`` after the entry key that references them.
    """
    report = VacuumReport(dry_run=dry_run)
    now = now or dt.datetime.now(dt.UTC)
    keep = referenced_keys(v, retention, now)
    cutoff = now - grace
    for info in v.storage.walk(data_prefix):
        name = info.path.rsplit("/", 1)[-1]
        key = name.split(".", 1)[0]
        if key in keep:
            report.referenced += 1
        elif info.last_modified > cutoff:
            report.too_young += 1
        else:
            report.removed.append((info.path, info.size))
            if not dry_run:
                v.storage.put(expired_path(v.pool_id, key), b"")
                v.storage.delete(info.path)
    return report
