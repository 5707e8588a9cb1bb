"""Background maintenance and its reports: ``limno manage`` and ``limno status``.

One maintenance pass over a pool's branch splits every leaf partition past the
split threshold (repeatedly, until none is), runs the compaction jobs the
pool's strategy picks (one commit per job, so jobs fail or land independently),
and vacuums what is past the grace period. Every job is recorded in the job
tracker (:mod:`limno.pools.jobs`). ``manage`` repeats passes over every pool
until interrupted.

The reports follow Sleeper's: partitions (range, estimated rows, objects, leaf
or not), files, compaction and other jobs from the tracker, and ingest jobs,
which are the pool's load commits (read from the log, so loads cost nothing extra).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from limno.errors import ConflictError, LimnoError
from limno.ksuid import ksuid
from limno.pools.jobs import JobRecord, JobTracker
from limno.pools.records.keys import encode_key
from limno.pools.vacuum import DEFAULT_GRACE

if TYPE_CHECKING:
    from limno.lake import Lake
    from limno.pools.records.pool import RecordPool

__all__ = ["maintain", "manage", "partitions_table", "status_tables"]

MAX_SPLIT_ROUNDS = 64


def maintain(
    pool: RecordPool,
    branch: str = "main",
    grace: dt.timedelta = DEFAULT_GRACE,
    log: Callable[[str], None] = lambda _: None,
) -> list[JobRecord]:
    """One maintenance pass: splits, compaction jobs, vacuum; returns the job records."""
    from limno.pools.records import compaction, splitting

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
    name, ratio, batch = compaction.strategy_settings(pool.config.settings)
    ordered = bool(pool.config.settings.get("iterators")) and pool.iterators.needs_order
    for job in compaction.plan_jobs(tree, objects, name, ratio, batch, ordered):
        record = JobRecord(job.id, "compaction", partition=job.partition, inputs=len(job.inputs))
        record.detail = {"inputs": list(job.inputs), "strategy": name}
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


def manage(
    lake: Lake,
    pools: Sequence[str] = (),
    once: bool = False,
    interval: dt.timedelta = dt.timedelta(seconds=60),
    grace: dt.timedelta = DEFAULT_GRACE,
    stop: threading.Event | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> int:
    """Maintain ``pools`` (default: every record pool) until ``stop`` is set; passes run."""
    stop = stop or threading.Event()
    passes = 0
    while True:
        names = list(pools) or [c.name for c in lake.pools() if c.kind == "records"]
        for name in names:
            pool = lake.pool(name)
            for branch in pool.branches():
                if branch.startswith("_tx-"):
                    continue
                prefix = f"{pool.name}@{branch}: "

                def say(message: str, prefix: str = prefix) -> None:
                    log(prefix + message)

                maintain(pool, branch, grace, say)
        passes += 1
        if once or stop.wait(interval.total_seconds()):
            return passes


# -- reports ---------------------------------------------------------------------------
def _key_text(bound: Any) -> str | None:
    return None if bound is None else str(encode_key(bound))


def partitions_table(pool: RecordPool, ref: str | None = None) -> pa.Table:
    """One row per partition: id, parent, range, leaf, depth, estimated rows, objects."""
    from limno.pools.records.splitting import leaf_rows

    objects, tree = pool.snapshot(ref)
    rows = leaf_rows(pool, tree, objects)
    counts: dict[str, int] = {}
    for o in objects:
        for leaf in tree.leaves_of(o):
            counts[leaf.id] = counts.get(leaf.id, 0) + 1
    parts = sorted(tree.parts.values(), key=lambda p: (tree.depth(p.id), p.id))

    def total(pid: str, table: dict[str, float]) -> float:
        return sum(table.get(leaf.id, 0) for leaf in tree.leaves_under(pid))

    return pa.table(
        {
            "id": [p.id for p in parts],
            "parent": [p.parent for p in parts],
            "lo": [_key_text(p.lo) for p in parts],
            "hi": [_key_text(p.hi) for p in parts],
            "leaf": [p.leaf for p in parts],
            "depth": pa.array([tree.depth(p.id) for p in parts], pa.int64()),
            "rows": pa.array([round(total(p.id, rows)) for p in parts], pa.int64()),
            "objects": pa.array(
                [int(total(p.id, {k: float(v) for k, v in counts.items()})) for p in parts],
                pa.int64(),
            ),
        }
    )


def _files_table(pool: RecordPool, ref: str | None) -> pa.Table:
    objects, tree = pool.snapshot(ref)
    return pa.table(
        {
            "id": [o.id for o in objects],
            "rows": pa.array([o.rows for o in objects], pa.int64()),
            "size": pa.array([o.size for o in objects], pa.int64()),
            "min_key": [_key_text(o.min_key) for o in objects],
            "max_key": [_key_text(o.max_key) for o in objects],
            "partitions": [",".join(p.id for p in tree.leaves_of(o)) for o in objects],
            "created": [o.created for o in objects],
        }
    )


def _jobs_table(records: Sequence[JobRecord]) -> pa.Table:
    return pa.table(
        {
            "id": [r.id for r in records],
            "kind": [r.kind for r in records],
            "state": [r.state for r in records],
            "partition": [r.partition for r in records],
            "inputs": pa.array([r.inputs for r in records], pa.int64()),
            "rows_in": pa.array([r.rows_in for r in records], pa.int64()),
            "rows_out": pa.array([r.rows_out for r in records], pa.int64()),
            "seconds": pa.array([round(r.seconds, 3) for r in records], pa.float64()),
            "commit": [r.commit for r in records],
            "error": [r.error for r in records],
            "created": [r.created for r in records],
        }
    )


def _ingest_table(pool: RecordPool, ref: str | None, limit: int) -> pa.Table:
    rows = []
    for c in pool.log(ref, limit=limit * 4):
        if (
            len(c.parents) != 1
            or not c.actions
            or any(k in c.meta for k in ("compaction", "split"))
        ):
            continue
        if any(a.op != "add" for a in c.actions):
            continue
        rows.append(c)
        if len(rows) >= limit:
            break
    return pa.table(
        {
            "commit": [c.id for c in rows],
            "date": [c.date for c in rows],
            "author": [c.author for c in rows],
            "objects": pa.array([len(c.actions) for c in rows], pa.int64()),
            "rows": pa.array(
                [sum(int(a.value.get("rows", 0)) for a in c.actions) for c in rows], pa.int64()
            ),
            "retries": pa.array([c.retries for c in rows], pa.int64()),
            "message": [c.message for c in rows],
        }
    )


def status_tables(pool: RecordPool, ref: str | None = None, limit: int = 20) -> dict[str, pa.Table]:
    """The reports of ``limno status``: partitions, files, jobs, ingest jobs."""
    tracker = JobTracker(pool.storage, pool.id)
    records = tracker.jobs()
    return {
        "partitions": partitions_table(pool, ref),
        "files": _files_table(pool, ref),
        "compaction_jobs": _jobs_table([r for r in records if r.kind == "compaction"][-limit:]),
        "other_jobs": _jobs_table([r for r in records if r.kind != "compaction"][-limit:]),
        "ingest_jobs": _ingest_table(pool, ref, limit),
    }
