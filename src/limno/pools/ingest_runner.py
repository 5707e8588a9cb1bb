"""Running the ingest batcher's jobs: each job is one commit, made exactly once.

:func:`run` (``limno ingest run``, and every ``limno manage`` pass) makes jobs of the
waiting files (:meth:`IngestQueue.batch`), then claims and runs each job that is
queued, or running under a runner that died. A job loads its files as ``load``
does (all or nothing): a bad file fails the job with the reader's error, recorded
in the queue, and the other jobs go on.

Exactly once, whatever races or crashes:

- batching and claiming are compare-and-swap entries in the queue's journal, so a
  file lands in one job and a job has one runner at a time;
- a runner holds a lease (:mod:`limno.core.leases`) while it works; a job running
  under a dead lease (its process is gone) is claimed again by the next run;
- the commit itself is the arbiter: it carries ``meta.ingest_job`` and is checked,
  against the very parent it lands on, for an ancestor carrying the same job (made
  after the job was, less :data:`~limno.core.leases.SKEW` for clocks). The branch
  moves only by compare-and-swap, so of two runners that both got as far as
  committing one job (one presumed dead, say), one commit lands and the other finds
  it and records it instead. A runner that crashed between its commit and
  recording it is found out the same way by the next.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from limno.core.commits import Action, Commit
from limno.core.leases import SKEW
from limno.errors import ConflictError, LimnoError, StorageError
from limno.lazy import lazy_module
from limno.pools.ingest_queue import (
    MAX_ATTEMPTS,
    IngestJob,
    IngestQueue,
    QueuedFile,
    forget_copy,
    now_utc,
    parse_time,
)
from limno.pools.ingest_sources import fetched, named_errors

if TYPE_CHECKING:
    from limno.data import writer
    from limno.pools.records import snapshot_cache
    from limno.pools.records.pool import RecordPool
else:
    writer = lazy_module("limno.data.writer")
    snapshot_cache = lazy_module("limno.pools.records.snapshot_cache")

__all__ = ["find_job_commit", "run"]


class _Landed(Exception):  # noqa: N818 - not an error: the job's commit exists already
    def __init__(self, commit: str) -> None:
        super().__init__(commit)
        self.commit = commit


class _History:
    """Finds a job's commit among the ancestors of a commit, remembering the commits
    already searched (a commit's retries search only what is new)."""

    def __init__(self, pool: RecordPool, job: IngestJob) -> None:
        self.commits = pool.versioned.commits
        self.job = job.id
        self.bound = parse_time(job.created) - dt.timedelta(seconds=SKEW)
        self.clean: set[str] = set()

    def find(self, head: str) -> str | None:
        stack, seen = [head], set()
        while stack:
            cid = stack.pop()
            if cid in seen or cid in self.clean:
                continue
            seen.add(cid)
            commit = self.commits.get(cid)
            if commit.meta.get("ingest_job") == self.job:
                return cid
            if parse_time(commit.date) >= self.bound:
                stack.extend(commit.parents)
        self.clean |= seen
        return None


def find_job_commit(pool: RecordPool, job: IngestJob) -> str | None:
    """The commit that loaded ``job`` on its branch, if one landed."""
    return _History(pool, job).find(pool.versioned.head(job.branch))


def run(
    pool: RecordPool,
    branch: str | None = None,
    *,
    force: bool = False,
    now: dt.datetime | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> list[IngestJob]:
    """Batch the waiting files of ``branch`` (None: every branch) and run the jobs that
    are due; the jobs this call ran, as they ended (done, failed, or queued again)."""
    queue = IngestQueue(pool.storage, pool.id)
    if not queue.exists():
        return []
    settings = pool.config.settings.batcher
    queue.batch(settings, now or now_utc(), branch, force)
    due = [
        j
        for j in queue.jobs()
        if j.state in ("queued", "running") and (branch is None or j.branch == branch)
    ]
    if not due:
        return []
    leases = pool.versioned.gc.leases
    ran: list[IngestJob] = []
    with leases.hold("ingest") as lease:
        live = {info.id for info in leases.scan() if info.live}
        for job in due:
            if job.state == "running" and job.owner in live:
                continue  # another runner is on it
            claimed = queue.claim(job, lease.id)
            if claimed is None:
                continue  # another runner took it first
            ended = _run_job(pool, queue, claimed)
            ran.append(ended)
            what = f"commit {ended.commit}" if ended.commit else ended.error
            log(f"ingest {ended.id} ({len(ended.files)} file(s)): {ended.state}, {what}")
    return ran


def _run_job(pool: RecordPool, queue: IngestQueue, job: IngestJob) -> IngestJob:
    began = time.monotonic()
    history = _History(pool, job)
    files: list[QueuedFile] = []
    try:
        files = _files(queue, job)
        found = history.find(pool.versioned.head(job.branch)) if job.attempts > 1 else None
        if found is None and job.attempts > MAX_ATTEMPTS:
            return queue.fail(
                job,
                f"gave up after {MAX_ATTEMPTS} attempts (the runners on it died)",
                time.monotonic() - began,
            )
        commit = pool.versioned.commits.get(found) if found else _load(pool, job, files, history)
    except LimnoError as e:
        landed = _landed(pool, history, job)
        if landed is None:  # a failure before the commit (or the commit refused): record it
            retry = isinstance(e, StorageError | ConflictError)
            return queue.fail(job, f"{type(e).__name__}: {e}", time.monotonic() - began, retry)
        commit = landed  # a failure after the commit landed: the job is done
    rows = sum(int(a.value.get("rows", 0)) for a in commit.actions if a.op == "add")
    done = queue.finish(job, commit.id, rows, time.monotonic() - began)
    for f in files:
        forget_copy(pool.storage, f)
    return done


def _landed(pool: RecordPool, history: _History, job: IngestJob) -> Commit | None:
    """The job's commit, if it landed (None also when the branch cannot be read now:
    the job is then recorded as failed or retried, and a later run looks again)."""
    try:
        found = history.find(pool.versioned.head(job.branch))
        return None if found is None else pool.versioned.commits.get(found)
    except LimnoError:
        return None


def _files(queue: IngestQueue, job: IngestJob) -> list[QueuedFile]:
    by_id = {f.id: f for f in queue.files()}
    missing = [fid for fid in job.files if fid not in by_id]
    if missing:
        raise LimnoError(f"ingest job {job.id}: queued file(s) {', '.join(missing)} are gone")
    return [by_id[fid] for fid in job.files]


def _load(pool: RecordPool, job: IngestJob, files: list[QueuedFile], history: _History) -> Commit:
    """Write the job's files and commit them once (see the module docstring)."""
    versioned = pool.versioned
    versioned.writable_head(job.branch)  # a missing or protected branch: before any work
    since = versioned.gc.ticket()
    with fetched(pool.storage, files) as local, named_errors(files, local):
        objs = pool.write(local, job.fmt, job.branch)
    rows = sum(o.rows for o in objs)
    actions = [Action("add", o.id, o.to_json()) for o in objs]
    keys_fit = pool.keys_fit(objs)

    def validate(parent: Commit) -> None:
        keys_fit(parent)
        landed = history.find(parent.id)
        if landed is not None:
            raise _Landed(landed)

    try:
        commit = versioned.commit(
            job.branch,
            actions,
            message=f"ingest job {job.id}: {len(files)} file(s), {rows} record(s)",
            meta={"ingest_job": job.id, "ingest_files": len(files)},
            since=since,
            validate=validate,
        )
    except _Landed as e:
        writer.delete_objects(pool.storage, pool.id, objs)  # another runner's commit won
        return versioned.commits.get(e.commit)
    with contextlib.suppress(LimnoError):  # a cache for later reads: the commit stands
        parent = versioned.commits.get(commit.parents[0])
        snapshot_cache.remember_added(
            versioned, pool.key, parent.snapshot, commit.snapshot, actions
        )
    return commit
