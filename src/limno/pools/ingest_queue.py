"""The ingest batcher's queue (Sleeper's ingest batcher): files waiting to be loaded,
and the jobs that load them.

``limno ingest submit`` records files (local paths, ``s3://`` URLs, or copies kept in
the lake) with their size, submit time, input format and target branch; the batcher
(:func:`plan`, run by ``limno ingest run`` and ``limno manage``) groups waiting files
into jobs by the pool's :class:`~limno.pools.settings.BatcherSettings`, and each job
becomes one commit (:mod:`limno.pools.ingest_runner`).

The queue is a journal store at ``<pool-id>/ingest/`` (a put-if-absent journal, so
it is durable and atomic on a local directory and on S3 alike): key ``f/<id>`` is a
file, ``j/<id>`` a job. Every change is one entry computed from the state it follows
(a compare-and-swap), so two runners never put one file in two jobs nor both claim a
job. A file moves ``queued → batched → done`` (or ``failed``, kept in the queue with
its job's error until someone retries or drops it); a job ``queued → running → done``
(or ``failed``). Done jobs and their files are forgotten after :data:`KEEP_DONE`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from limno.errors import AlreadyExistsError, InvalidInputError, LimnoError, NotFoundError
from limno.journal import JournalStore, Put, Remove, StoreState, Update
from limno.ksuid import ksuid
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.pools.inspect import Rows
    from limno.pools.settings import BatcherSettings
    from limno.storage import Storage
else:
    pa = lazy_module("pyarrow")

__all__ = [
    "FILE_STATES",
    "JOB_STATES",
    "KEEP_DONE",
    "LAKE_PREFIX",
    "IngestJob",
    "IngestQueue",
    "Plan",
    "QueuedFile",
    "files_rows",
    "forget_copy",
    "iso",
    "now_utc",
    "parse_time",
    "jobs_table",
    "plan",
]

FILE_STATES = ("queued", "batched", "done", "failed")
JOB_STATES = ("queued", "running", "done", "failed")
#: how long done jobs (and their files) stay listed
KEEP_DONE = dt.timedelta(days=7)
#: a file's ``path`` that names an object of the lake itself (a copy made at submit)
LAKE_PREFIX = "lake:"
#: how many times a job is claimed before it fails for good (a storage error, a runner
#: that died on it) — a bad file fails its job at once
MAX_ATTEMPTS = 3


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat(timespec="microseconds")


def parse_time(text: str) -> dt.datetime:
    t = dt.datetime.fromisoformat(text)
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _known(cls: Any, d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in cls.__dataclass_fields__ if k in d}


@dataclass(frozen=True)
class QueuedFile:
    """A submitted file and where it stands."""

    id: str
    #: as submitted (a client's path for an upload): for people
    name: str
    #: where the batcher reads it: an absolute local path, an ``s3://`` URL, or
    #: ``lake:<key>`` for a copy kept in the lake
    path: str
    size: int
    submitted: str
    branch: str = "main"
    fmt: str | None = None
    state: str = "queued"
    job: str | None = None
    error: str | None = None

    @property
    def pending(self) -> bool:
        """Not yet committed, and not given up on."""
        return self.state in ("queued", "batched")

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> QueuedFile:
        return cls(**_known(cls, d))


@dataclass(frozen=True)
class IngestJob:
    """A batch of queued files that one commit loads (all or nothing)."""

    id: str
    branch: str
    fmt: str | None
    files: tuple[str, ...]
    bytes: int
    state: str = "queued"
    created: str = ""
    updated: str = ""
    started: str | None = None
    #: the lease id of the runner working on it (while running)
    owner: str | None = None
    attempts: int = 0
    rows: int = 0
    commit: str | None = None
    error: str | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "files": list(self.files)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IngestJob:
        known = _known(cls, d)
        known["files"] = tuple(known.get("files", ()))
        return cls(**known)


# -- the batcher's grouping: a pure function ------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What the batcher makes of the waiting files: jobs, and the files that wait on."""

    jobs: list[list[QueuedFile]] = field(default_factory=list)
    waiting: list[QueuedFile] = field(default_factory=list)


def plan(
    files: Iterable[QueuedFile],
    settings: BatcherSettings,
    now: dt.datetime,
    force: bool = False,
) -> Plan:
    """Group waiting files into jobs (Sleeper's batcher rules).

    Files of one branch and input format go together, oldest first. They are cut
    into runs of at most ``max_files`` files and ``max_bytes`` bytes (a file larger
    than that is a run of its own). A run becomes a job when it holds ``min_files``
    files and ``min_bytes`` bytes, when its oldest file has waited ``max_age``, or
    with ``force``; the other runs wait for more files or for time to pass, and so
    does every newer run of the same group: files of one branch and format are never
    made into a job ahead of older ones (with ``dedup``, the last file submitted wins).
    """
    groups: dict[tuple[str, str], list[QueuedFile]] = {}
    for f in files:
        groups.setdefault((f.branch, f.fmt or ""), []).append(f)
    out = Plan()
    for key in sorted(groups):
        run: list[QueuedFile] = []
        size = 0
        runs: list[list[QueuedFile]] = []
        for f in sorted(groups[key], key=lambda f: (f.submitted, f.id)):
            if run and (len(run) >= settings.max_files or size + f.size > settings.max_bytes):
                runs.append(run)
                run, size = [], 0
            run.append(f)
            size += f.size
        if run:
            runs.append(run)
        waits = False  # once a run waits, the newer runs of its group wait behind it
        for run in runs:
            big = len(run) >= settings.min_files and sum(f.size for f in run) >= settings.min_bytes
            aged = now - parse_time(run[0].submitted) >= settings.max_age
            if not waits and (force or big or aged):
                out.jobs.append(run)
            else:
                waits = True
                out.waiting.extend(run)
    out.jobs.sort(key=lambda run: (run[0].submitted, run[0].id))  # the oldest files first
    return out


# -- the queue -------------------------------------------------------------------------------


class _Lost(LimnoError):
    """A change whose premise another runner changed first (nothing to do here)."""


class IngestQueue:
    """The ingest queue of one pool."""

    def __init__(self, storage: Storage, pool_id: str) -> None:
        self.storage = storage
        self.pool_id = pool_id
        self.store = JournalStore(storage, f"{pool_id}/ingest")

    def exists(self) -> bool:
        return self.store.exists()

    def _ensure(self) -> None:
        if not self.store.exists():
            with suppress(AlreadyExistsError):
                self.store.create()

    # -- reading ----------------------------------------------------------------------------
    def state(self) -> StoreState:
        return self.store.state() if self.store.exists() else StoreState(0, {})

    @staticmethod
    def files_of(state: StoreState) -> list[QueuedFile]:
        found = [QueuedFile.from_json(v) for k, v in state.items.items() if k.startswith("f/")]
        return sorted(found, key=lambda f: (f.submitted, f.id))

    @staticmethod
    def jobs_of(state: StoreState) -> list[IngestJob]:
        found = [IngestJob.from_json(v) for k, v in state.items.items() if k.startswith("j/")]
        return sorted(found, key=lambda j: (j.created, j.id))

    def files(self) -> list[QueuedFile]:
        return self.files_of(self.state())

    def jobs(self) -> list[IngestJob]:
        return self.jobs_of(self.state())

    # -- changing -----------------------------------------------------------------------------
    def commit(self, updates: Callable[[StoreState], Sequence[Update]]) -> StoreState:
        self._ensure()
        return self.store.commit(updates)

    def add(self, new: Sequence[QueuedFile]) -> None:
        """Queue files in one entry; a file still waiting under the same path and branch
        is refused (a file submitted once is loaded once)."""

        def updates(state: StoreState) -> list[Update]:
            waiting = {(f.path, f.branch): f for f in self.files_of(state) if f.pending}
            seen: set[tuple[str, str]] = set()
            for f in new:
                at = (f.path, f.branch)
                if at in waiting or at in seen:
                    first = waiting[at].id if at in waiting else "this submit"
                    raise AlreadyExistsError(f"{f.name}: already queued for {f.branch} ({first})")
                seen.add(at)
            return [Put(f"f/{f.id}", f.to_json()) for f in new]

        self.commit(updates)

    def batch(
        self,
        settings: BatcherSettings,
        now: dt.datetime,
        branch: str | None = None,
        force: bool = False,
    ) -> list[IngestJob]:
        """Make jobs of the waiting files (of ``branch``, or all), forgetting done jobs
        past :data:`KEEP_DONE` in the same entry; the jobs made."""
        made: list[IngestJob] = []

        def updates(state: StoreState) -> list[Update]:
            made.clear()
            out: list[Update] = []
            files = self.files_of(state)
            waiting = [
                f for f in files if f.state == "queued" and (branch is None or f.branch == branch)
            ]
            start = now_utc()
            for i, run in enumerate(plan(waiting, settings, now, force).jobs):
                stamp = iso(start + dt.timedelta(microseconds=i))  # jobs keep the plan's order
                job = IngestJob(
                    ksuid(),
                    run[0].branch,
                    run[0].fmt,
                    tuple(f.id for f in run),
                    sum(f.size for f in run),
                    created=stamp,
                    updated=stamp,
                )
                made.append(job)
                out.append(Put(f"j/{job.id}", job.to_json()))
                out += [
                    Put(f"f/{f.id}", replace(f, state="batched", job=job.id).to_json()) for f in run
                ]
            out += _expired(state, files, now)
            return out

        state = self.state()
        if not any(f.state == "queued" for f in self.files_of(state)) and not _expired(
            state, self.files_of(state), now
        ):
            return []  # nothing to write: the common case of an idle queue costs one read
        self.commit(updates)
        return list(made)

    def claim(self, job: IngestJob, owner: str) -> IngestJob | None:
        """Take ``job`` as it was read (queued, or running under a dead ``job.owner``) for
        the runner holding lease ``owner``; None when another runner changed it first."""
        key = f"j/{job.id}"
        taken: list[IngestJob] = []

        def updates(state: StoreState) -> list[Update]:
            current = state.items.get(key)
            if current is None or IngestJob.from_json(current) != job:
                raise _Lost(f"job {job.id} changed")
            stamp = iso(now_utc())
            new = replace(
                job,
                state="running",
                owner=owner,
                attempts=job.attempts + 1,
                started=stamp,
                updated=stamp,
            )
            taken[:] = [new]
            return [Put(key, new.to_json())]

        try:
            self.commit(updates)
        except _Lost:
            return None
        return taken[0]

    def finish(self, job: IngestJob, commit: str, rows: int, seconds: float) -> IngestJob:
        """Record the job's commit: the job and its files are done."""
        return self._settle(job, "done", commit=commit, rows=rows, seconds=seconds)

    def fail(self, job: IngestJob, error: str, seconds: float, retry: bool = False) -> IngestJob:
        """Record a failed attempt: with ``retry`` (a storage error, say) the job waits
        for the next run unless it used up :data:`MAX_ATTEMPTS`; else it and its files
        fail, with ``error``. A job another runner has taken meanwhile is left alone."""
        again = retry and job.attempts < MAX_ATTEMPTS
        return self._settle(job, "queued" if again else "failed", error=error, seconds=seconds)

    def _settle(self, job: IngestJob, to: str, **fields: Any) -> IngestJob:
        key = f"j/{job.id}"
        settled: list[IngestJob] = []

        def updates(state: StoreState) -> list[Update]:
            current = state.items.get(key)
            if current is None:
                raise _Lost(f"job {job.id} is gone")
            now = IngestJob.from_json(current)
            if now.state == "done" or (to != "done" and now.owner != job.owner):
                settled[:] = [now]  # done already, or another runner's now
                raise _Lost(f"job {job.id} is settled")
            new = replace(now, state=to, owner=None, updated=iso(now_utc()), **fields)
            if to == "done":
                new = replace(new, error=None)
            settled[:] = [new]
            out: list[Update] = [Put(key, new.to_json())]
            file_state = {"done": "done", "failed": "failed"}.get(to)
            for fid in new.files:
                f = state.items.get(f"f/{fid}")
                if f is not None and file_state is not None:
                    error = new.error if to == "failed" else None
                    updated = replace(QueuedFile.from_json(f), state=file_state, error=error)
                    out.append(Put(f"f/{fid}", updated.to_json()))
            return out

        try:
            self.commit(updates)
        except _Lost:
            return settled[0] if settled else job
        return settled[0]

    def retry(self, ids: Sequence[str]) -> list[QueuedFile]:
        """Queue failed files again (``ids``: files, or jobs meaning their files)."""
        return self._change(ids, "retry")

    def drop(self, ids: Sequence[str]) -> list[QueuedFile]:
        """Remove files that are not part of a job being loaded (queued or failed)."""
        return self._change(ids, "drop")

    def _change(self, ids: Sequence[str], how: str) -> list[QueuedFile]:
        changed: list[QueuedFile] = []

        def updates(state: StoreState) -> list[Update]:
            changed.clear()
            out: list[Update] = []
            # as for add: one waiting entry per path and branch (a failed file submitted
            # again, then retried, would otherwise be loaded twice)
            waiting = {(f.path, f.branch): f for f in self.files_of(state) if f.pending}
            for f in _named(state, ids):
                if how == "retry":
                    if f.state != "failed":
                        raise InvalidInputError(f"file {f.id} is {f.state}, not failed")
                    first = waiting.get((f.path, f.branch))
                    if first is not None:
                        raise AlreadyExistsError(
                            f"{f.name}: already queued for {f.branch} ({first.id})"
                        )
                    new = replace(f, state="queued", job=None, error=None)
                    waiting[(f.path, f.branch)] = new
                    out.append(Put(f"f/{f.id}", new.to_json()))
                    changed.append(new)
                else:
                    if f.state not in ("queued", "failed"):
                        raise InvalidInputError(f"file {f.id} is {f.state}: it cannot be dropped")
                    out.append(Remove(f"f/{f.id}"))
                    changed.append(f)
            return out

        self.commit(updates)
        if how == "drop":
            for f in changed:
                forget_copy(self.storage, f)
        return changed


def _named(state: StoreState, ids: Sequence[str]) -> list[QueuedFile]:
    """The files ``ids`` name (a job id names its files), each once."""
    out: dict[str, QueuedFile] = {}
    for i in ids:
        if f"f/{i}" in state.items:
            out[i] = QueuedFile.from_json(state.items[f"f/{i}"])
        elif f"j/{i}" in state.items:
            for fid in state.items[f"j/{i}"].get("files", ()):
                if f"f/{fid}" in state.items:
                    out[fid] = QueuedFile.from_json(state.items[f"f/{fid}"])
        else:
            raise NotFoundError(f"no queued file or ingest job {i!r}")
    if not out:
        raise InvalidInputError("name at least one queued file or ingest job")
    return list(out.values())


def _expired(state: StoreState, files: Sequence[QueuedFile], now: dt.datetime) -> list[Update]:
    """Removals of done jobs older than :data:`KEEP_DONE`, with their files."""
    out: list[Update] = []
    gone: set[str] = set()
    for key, value in state.items.items():
        if not key.startswith("j/") or value.get("state") != "done":
            continue
        if now - parse_time(str(value.get("updated") or value["created"])) > KEEP_DONE:
            out.append(Remove(key))
            gone.add(key[2:])
    out += [Remove(f"f/{f.id}") for f in files if f.job in gone and f.state == "done"]
    return out


def forget_copy(storage: Storage, f: QueuedFile) -> None:
    """Delete the lake's copy of ``f`` (if it has one)."""
    if f.path.startswith(LAKE_PREFIX):
        with suppress(LimnoError):
            storage.delete(f.path[len(LAKE_PREFIX) :])


# -- tables ------------------------------------------------------------------------------------

_FILES = ("id", "name", "size", "submitted", "branch", "format", "state", "job", "error")


def files_rows(files: Sequence[QueuedFile]) -> Rows:
    """``limno ingest ls``: one row per queued file."""
    from limno.pools.inspect import Rows

    rows = [
        {
            "id": f.id,
            "name": f.name,
            "size": f.size,
            "submitted": f.submitted,
            "branch": f.branch,
            "format": f.fmt,
            "state": f.state,
            "job": f.job,
            "error": f.error,
        }
        for f in files
    ]

    def types() -> list[pa.DataType]:
        text = pa.string()
        return [text, text, pa.int64(), *[text] * 6]

    return Rows(_FILES, rows, types)


def jobs_table(jobs: Sequence[IngestJob]) -> pa.Table:
    """``limno status``'s batched ingest jobs (and ``limno ingest ls --jobs``)."""
    return pa.table(
        {
            "id": pa.array([j.id for j in jobs], pa.string()),
            "branch": pa.array([j.branch for j in jobs], pa.string()),
            "state": pa.array([j.state for j in jobs], pa.string()),
            "files": pa.array([len(j.files) for j in jobs], pa.int64()),
            "bytes": pa.array([j.bytes for j in jobs], pa.int64()),
            "rows": pa.array([j.rows for j in jobs], pa.int64()),
            "attempts": pa.array([j.attempts for j in jobs], pa.int64()),
            "seconds": pa.array([round(j.seconds, 3) for j in jobs], pa.float64()),
            "commit": pa.array([j.commit for j in jobs], pa.string()),
            "error": pa.array([j.error for j in jobs], pa.string()),
            "created": pa.array([j.created for j in jobs], pa.string()),
        }
    )
