"""Maintenance of a record pool: compaction, partition splits, vacuum, and the reports
that show what they have to do (``limno status``, meta tables).

None of these changes what a pool holds: compaction and splits rewrite how its
records are stored (one commit, on a branch that may even be protected), vacuum frees
the bytes of objects nothing references any more. The work itself lives in
:mod:`~limno.pools.records.compaction`, :mod:`~limno.pools.records.splitting` and
:mod:`limno.pools.vacuum`; this mixin is how a :class:`RecordPool` offers it, apart
from the methods that read and write its data.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from limno.errors import NotFoundError
from limno.ksuid import ksuid
from limno.lazy import lazy_module
from limno.pools import inspect
from limno.pools.vacuum import DEFAULT_GRACE, Retention, VacuumReport, vacuum

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.core.commits import Commit
    from limno.pools.records import compaction, key_bounds, splitting
    from limno.pools.records.compaction import Runner
    from limno.pools.records.pool import RecordPool
else:
    # what compactions and splits need: commands that only read import none of it
    compaction = lazy_module("limno.pools.records.compaction")
    key_bounds = lazy_module("limno.pools.records.key_bounds")
    splitting = lazy_module("limno.pools.records.splitting")

__all__ = ["Maintenance"]


class Maintenance:
    """Mixin of :class:`~limno.pools.records.pool.RecordPool`: compact, split, vacuum,
    status and meta tables."""

    def compact(
        self,
        ids: Sequence[str] = (),
        branch: str = "main",
        strategy: str | None = None,
        message: str = "",
        author: str | None = None,
        runner: Runner | None = None,
    ) -> tuple[Commit | None, list[Any]]:
        """Compact ``ids`` (merged per leaf partition), or the jobs the strategy picks.

        One commit for everything; (None, []) when the strategy finds nothing to do.
        ``runner`` merges the jobs' objects: here by default (``compaction.local_runner``),
        or as Spark tasks (``limno.engines.spark.compaction_runner``).
        """
        pool = cast("RecordPool", self)
        pool.versioned.head(branch)  # a tag or ``main~1`` is no place to write
        objs, tree = pool.snapshot(branch)
        if ids:
            by_id = {o.id: o for o in objs}
            missing = [i for i in ids if i not in by_id]
            if missing:
                raise NotFoundError(f"no such object on {pool.name}@{branch}: {', '.join(missing)}")
            jobs = []
            for leaf in tree.leaves():
                group = [i for i in dict.fromkeys(ids) if leaf in tree.leaves_of(by_id[i])]
                if group:
                    jobs.append(compaction.CompactionJob(ksuid(), leaf.id, tuple(group)))
        else:
            c = pool.config.settings.compaction
            ordered = bool(pool.iterators) and pool.iterators.needs_order
            jobs = compaction.plan_jobs(
                tree, objs, strategy or c.strategy, c.ratio, c.batch, ordered
            )
        if not jobs:
            return None, []
        commit, results = compaction.run_jobs(
            pool, branch, jobs, message, author, runner or compaction.local_runner
        )
        return commit, results

    def status(
        self, ref: str | None = None, limit: int = 20, rows: int | None = None
    ) -> dict[str, pa.Table]:
        """The reports of ``limno status``: partitions, files, jobs, ingest jobs."""
        return inspect.status_tables(cast("RecordPool", self), ref, limit, rows)

    def meta_table(self, name: str, ref: str | None = None) -> pa.Table:
        """A meta table of this pool (``objects``, ``commits``, ``branches``, ``partitions``)."""
        return inspect.pool_table(cast("RecordPool", self), name, ref)

    def split(self, partition: str, branch: str = "main", at: Any = None) -> Commit | None:
        """Split a leaf partition (at ``at``, else at its median); None if it cannot be.

        ``at`` is a value of the first key field, or text parsed into its type.
        """
        pool = cast("RecordPool", self)
        if isinstance(at, str):
            parsed = key_bounds.key_bound(pool.key, at, pool.key_types(pool.objects(branch)))
            at = None if parsed is None else parsed[0]

        return splitting.split_leaf(pool, branch, partition, at)

    @property
    def split_threshold(self) -> int:
        return cast("RecordPool", self).config.settings.split_threshold

    def vacuum(
        self,
        grace: dt.timedelta | None = None,
        dry_run: bool = False,
        retention: Retention = None,
    ) -> VacuumReport:
        """Free the bytes of objects no branch, tag, staging area or retained commit holds.

        ``retention`` (one window, or per-branch globs) defaults to the pool's
        configured retention; without any, all history stays readable.
        """
        from limno.pools.records.snapshot_index import vacuum_sidecars

        pool = cast("RecordPool", self)
        grace = DEFAULT_GRACE if grace is None else grace
        if retention is None:
            retention = self.retention()
        report = vacuum(pool.versioned, f"{pool.id}/data", grace, dry_run, retention)
        # the stored scan plans of snapshots pages no longer show (see snapshot_index.py)
        vacuum_sidecars(pool.versioned, dt.datetime.now(dt.UTC) - grace, dry_run, report)
        return report

    def retention(self) -> dict[str, dt.timedelta] | None:
        """The pool's configured retention windows by branch glob (None: keep all)."""
        return dict(cast("RecordPool", self).config.settings.retention) or None
