"""Background maintenance and its reports: ``limno manage`` and ``limno status``.

One maintenance pass over a pool's branch first runs the ingest batcher's due jobs
for the branch (:mod:`limno.pools.ingest_runner`, which tracks them in the ingest
queue: a job that fails is recorded there, and told to the caller, and the pass goes
on), then splits every leaf partition past the
split threshold (repeatedly, until none is), runs the compaction jobs the
pool's strategy picks (one commit per job, so jobs fail or land independently),
and vacuums what is past the grace period. Every job is recorded in the job
tracker (:mod:`limno.pools.jobs`). ``Lake.manage`` repeats passes over every
pool until interrupted.

The reports of ``limno status`` are in :mod:`limno.pools.inspect`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from limno.errors import ConflictError, LimnoError
from limno.ksuid import ksuid
from limno.pools.ingest_queue import MAX_ATTEMPTS
from limno.pools.jobs import JobRecord, JobTracker
from limno.pools.vacuum import DEFAULT_GRACE

if TYPE_CHECKING:
    from limno.pools.ingest_queue import IngestJob
    from limno.pools.records.pool import RecordPool

__all__ = ["ingest_failed", "maintain"]

MAX_SPLIT_ROUNDS = 64


def maintain(
    pool: RecordPool,
    branch: str = "main",
    grace: dt.timedelta = DEFAULT_GRACE,
    log: Callable[[str], None] = lambda _: None,
    failed: list[str] | None = None,
) -> list[JobRecord]:
    """One maintenance pass: ingest jobs, splits, compaction jobs, vacuum; returns the
    job records (of the tracker: ingest jobs are the ingest queue's, and logged).

    An ingest job that fails does not stop the pass: it is recorded in the queue
    (:mod:`limno.pools.ingest_runner`), and one line naming it and its reason is
    appended to ``failed`` (so is an ingest run that failed as a whole), for a
    caller that must tell (``limno manage --once``: :func:`ingest_failed`)."""
    from limno.pools import ingest_runner
    from limno.pools.records import compaction, splitting

    where = f"{pool.name}@{branch}"
    try:
        for ingested in ingest_runner.run(pool, branch, log=log):
            if failed is not None and (line := _failure(ingested)) is not None:
                failed.append(f"{where}: {line}")
    except LimnoError as e:  # the queue unreadable, say: the rest of the pass still runs
        log(f"ingest: {e}")
        if failed is not None:
            failed.append(f"{where}: ingest: {e}")
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


def _failure(job: IngestJob) -> str | None:
    """What went wrong with an ingest job run in this pass (None: it did not fail).

    A failed job and its files stay in the queue as failed until ``limno ingest
    retry``; a job that failed for a reason that may pass (a storage error, a
    conflict) is queued again, up to :data:`~limno.pools.ingest_queue.MAX_ATTEMPTS`
    attempts."""
    files = f"{len(job.files)} file(s)"
    if job.state == "failed":
        last = f" (attempt {job.attempts} of {MAX_ATTEMPTS})" if job.attempts > 1 else ""
        return f"ingest job {job.id} ({files}) failed{last}: {job.error}"
    if job.state == "queued" and job.error:
        again = f"attempt {job.attempts} of {MAX_ATTEMPTS}, queued again"
        return f"ingest job {job.id} ({files}) failed ({again}): {job.error}"
    return None


def ingest_failed(failed: Sequence[str]) -> LimnoError:
    """The error of a maintenance pass whose ingest jobs failed (lines of
    :func:`maintain`'s ``failed``), on one line."""
    if len(failed) == 1:
        return LimnoError(failed[0])
    return LimnoError(f"{len(failed)} ingest jobs failed: " + "; ".join(failed))
