"""Background maintenance and its reports: ``limno manage`` and ``limno status``.

One maintenance pass over a pool's branch first runs the ingest batcher's due jobs
for the branch (:mod:`limno.pools.ingest_runner`, which tracks them in the ingest
queue), then splits every leaf partition past the
split threshold (repeatedly, until none is), runs the compaction jobs the
pool's strategy picks (one commit per job, so jobs fail or land independently),
and vacuums what is past the grace period. Every job is recorded in the job
tracker (:mod:`limno.pools.jobs`). ``Lake.manage`` repeats passes over every
pool until interrupted.

The reports of ``limno status`` are in :mod:`limno.pools.inspect`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from limno.errors import ConflictError, LimnoError
from limno.ksuid import ksuid
from limno.pools.jobs import JobRecord, JobTracker
from limno.pools.vacuum import DEFAULT_GRACE

if TYPE_CHECKING:
    from limno.pools.records.pool import RecordPool

__all__ = ["maintain"]

MAX_SPLIT_ROUNDS = 64


def maintain(
    pool: RecordPool,
    branch: str = "main",
    grace: dt.timedelta = DEFAULT_GRACE,
    log: Callable[[str], None] = lambda _: None,
) -> list[JobRecord]:
    """One maintenance pass: ingest jobs, splits, compaction jobs, vacuum; returns the
    job records (of the tracker: ingest jobs are the ingest queue's, and logged)."""
    from limno.pools import ingest_runner
    from limno.pools.records import compaction, splitting

    try:
        ingest_runner.run(pool, branch, log=log)
    except LimnoError as e:  # the queue unreadable, say: the rest of the pass still runs
        log(f"ingest: {e}")
    tracker = JobTracker(pool.storage, pool.id)
    done: list[JobRecord] = []
    for _ in range(MAX_SPLIT_ROUNDS):
        objects, tree = pool.snapshot(branch)
        candidates = splitting.split_candidates(pool, tree, objects, pool.split_threshold)
        if not candidates:
            break
        split_any = False
        for leaf, rows in candidates:
            record = JobRecord(ksuid(), "split", partition=leaf.id, rows_in=int(rows))
            try:
                with tracker.track(record):
                    commit = pool.split(leaf.id, branch)
                    if commit is not None:
                        record.commit = commit.id
                        record.detail = dict(commit.meta.get("split", {}))
                        split_any = True
            except ConflictError:
                pass  # recorded as failed; the next round sees the new tree
            done.append(record)
            log(f"split {leaf.id}: {record.state}")
        if not split_any:
            break
    objects, tree = pool.snapshot(branch)
    c = pool.config.settings.compaction
    ordered = bool(pool.iterators) and pool.iterators.needs_order
    for job in compaction.plan_jobs(tree, objects, c.strategy, c.ratio, c.batch, ordered):
        record = JobRecord(job.id, "compaction", partition=job.partition, inputs=len(job.inputs))
        record.detail = {"inputs": list(job.inputs), "strategy": c.strategy}
        try:
            with tracker.track(record):
                commit, results = compaction.run_jobs(pool, branch, [job])
                record.commit = commit.id
                record.rows_in = sum(r.rows_in for r in results)
                record.rows_out = sum(r.rows_out for r in results)
        except LimnoError:
            pass  # recorded as failed (a conflict with a concurrent change, say)
        done.append(record)
        log(f"compaction {job.id} ({len(job.inputs)} objects): {record.state}")
    record = JobRecord(ksuid(), "vacuum")
    with tracker.track(record):
        report = pool.vacuum(grace=grace)
        record.detail = {"removed": len(report.removed), "bytes": report.bytes}
    done.append(record)
    log(f"vacuum: removed {len(report.removed)} object(s)")
    return done
