"""Upkeep of the ingest batcher's queue (:mod:`limno.pools.ingest_queue`): ``vacuum``
frees the uploads nothing needs anymore, ``verify`` checks the queue.

Uploads. A copy kept in the lake (a server's upload, ``submit --copy``) lives at
``<pool-id>/ingest/files/<file-id>/<name>`` (:func:`~limno.pools.ingest_sources.copy_key`).
Its job deletes it once loaded, and ``ingest drop`` with the file; but a process that
dies between copying a file and queueing it (the copy is made first, so that the
queue never names a copy that is not there), or between a job's end and its cleanup,
leaves a copy behind. :func:`vacuum_uploads` frees a copy once it is older than the
grace period and no queue entry needs it: needed are the copies of files waiting
(``queued``), in a job (``batched``) or ``failed`` (kept for ``ingest retry``), and of
every file a ``queued``, ``running`` or ``failed`` job names. The copies are listed
before the queue is read, so a copy whose entry lands meanwhile is seen as needed;
one whose submit is still between its copy and its entry is younger than the grace
period (as for data objects, a submit stuck there longer than that loses its copy,
and its job then fails naming the file).

Checks. :func:`verify_queue` reports, for ``limno verify``: a queue journal that does
not verify, entries that do not parse, jobs to run naming files the queue does not
hold, and files still to be loaded (or failed) that are not where the queue says: a
lake copy missing, or a local path missing when the lake is on this machine's disk (a path of
another machine, queued for an S3 lake, cannot be told from here; ``s3://`` objects
are read with the runner's credentials and are not fetched by verify).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from limno.errors import CorruptError, NotFoundError
from limno.faults import Fault
from limno.pools.ingest_queue import (
    FILE_STATES,
    JOB_STATES,
    LAKE_PREFIX,
    IngestJob,
    IngestQueue,
    QueuedFile,
    parse_time,
)

if TYPE_CHECKING:
    from limno.journal import StoreState
    from limno.pools.vacuum import VacuumReport
    from limno.storage import Storage
    from limno.storage._base import ObjectInfo

__all__ = ["needed_uploads", "uploads_prefix", "vacuum_uploads", "verify_queue"]

#: the states in which verify wants a file readable (vacuum keeps the copies of files
#: in any state but ``done``, a state it cannot read included: :func:`needed_uploads`)
_FILE_NEEDED = ("queued", "batched", "failed")


def uploads_prefix(pool_id: str) -> str:
    """Where the copies of a pool's queued files are kept."""
    return f"{pool_id}/ingest/files"


def needed_uploads(state: StoreState) -> set[str]:
    """The ids of the queued files whose copy must stay (see the module docstring)."""
    needed: set[str] = set()
    for key, value in state.items.items():
        if value.get("state") == "done":  # anything else, a damaged entry too, keeps them
            continue
        if key.startswith("f/"):
            needed.add(key[2:])
        elif key.startswith("j/"):
            files = value.get("files")
            if isinstance(files, list):
                needed.update(f for f in files if isinstance(f, str))
    return needed


def _uploads(storage: Storage, pool_id: str) -> dict[str, list[tuple[ObjectInfo, bool]]]:
    """The stored copies (and hidden partial files of copies cut short) by file id."""
    prefix = uploads_prefix(pool_id)
    listed = [(i, False) for i in storage.walk(prefix)]
    listed += [(i, True) for i in storage.list_partial(prefix)]
    groups: dict[str, list[tuple[ObjectInfo, bool]]] = {}
    for info, partial in listed:
        file_id = info.path[len(prefix) :].lstrip("/").split("/", 1)[0]
        groups.setdefault(file_id, []).append((info, partial))
    return groups


def vacuum_uploads(
    storage: Storage,
    pool_id: str,
    report: VacuumReport,
    cutoff: dt.datetime,
    dry_run: bool = False,
) -> None:
    """Free the copies no queue entry needs that were stored before ``cutoff``, counted
    in ``report`` as vacuum counts objects (removed, referenced, too young)."""
    groups = _uploads(storage, pool_id)
    if not groups:
        return  # the common case: no upload, and the queue is not read
    needed = needed_uploads(IngestQueue(storage, pool_id).state())  # after the listing
    for file_id, files in sorted(groups.items()):
        if file_id in needed:
            report.referenced += 1
            continue
        if max(info.last_modified for info, _ in files) > cutoff:
            report.too_young += 1
            continue
        files.sort(key=lambda f: (not f[1], f[0].path))  # partial files first, the copy last
        report.removed.append((files[-1][0].path, sum(info.size for info, _ in files)))
        if dry_run:
            continue
        for info, partial in files:
            if partial:
                storage.delete_partial(info.path)
            else:
                storage.delete(info.path)


# -- verify -------------------------------------------------------------------------------------


def _text(d: Mapping[str, Any], *names: str) -> None:
    for name in names:
        if not isinstance(d.get(name), str):
            raise ValueError(f"{name} is not text")


def _parsed_file(key: str, value: Mapping[str, Any]) -> QueuedFile:
    _text(value, "id", "name", "path", "submitted", "branch")
    f = QueuedFile.from_json(value)
    if f"f/{f.id}" != key:
        raise ValueError(f"its id is {f.id!r}")
    if not isinstance(f.size, int) or isinstance(f.size, bool) or f.size < 0:
        raise ValueError(f"size {f.size!r} is not a byte count")
    if f.state not in FILE_STATES:
        raise ValueError(f"unknown state {f.state!r}")
    parse_time(f.submitted)
    return f


def _parsed_job(key: str, value: Mapping[str, Any]) -> IngestJob:
    _text(value, "id", "branch")
    files = value.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise ValueError("files is not a list of file ids")
    job = IngestJob.from_json(value)
    if f"j/{job.id}" != key:
        raise ValueError(f"its id is {job.id!r}")
    if job.state not in JOB_STATES:
        raise ValueError(f"unknown state {job.state!r}")
    return job


def _entries(
    state: StoreState, where: str
) -> tuple[dict[str, QueuedFile], dict[str, IngestJob], list[Fault]]:
    files: dict[str, QueuedFile] = {}
    jobs: dict[str, IngestJob] = {}
    faults: list[Fault] = []
    for key, value in sorted(state.items.items()):
        try:
            if key.startswith("f/"):
                f = _parsed_file(key, value)
                files[f.id] = f
            elif key.startswith("j/"):
                job = _parsed_job(key, value)
                jobs[job.id] = job
            else:
                raise ValueError("not a file (f/ID) nor a job (j/ID)")
        except (TypeError, ValueError) as e:
            faults.append(Fault(where, f"queue entry {key!r} does not parse ({e})"))
    return files, jobs, faults


def verify_queue(storage: Storage, pool_id: str, pool: str) -> Iterator[Fault]:
    """Every fault of the ingest queue of the pool ``pool_id`` (named ``pool`` in the
    advice); nothing when the pool never had one."""
    queue = IngestQueue(storage, pool_id)
    if not queue.exists():
        return
    faults = list(queue.store.verify())
    yield from faults
    if faults:
        return
    where = f"{pool_id}/ingest"
    try:
        state = queue.state()
    except (CorruptError, NotFoundError) as e:
        yield Fault(where, str(e))
        return
    files, jobs, faults = _entries(state, where)
    yield from faults
    drop = f"limno ingest drop -p {pool} ID"
    for job in jobs.values():
        if job.state not in ("queued", "running"):  # a failed job's files may be dropped
            continue
        for fid in job.files:
            if fid not in files:
                yield Fault(
                    where,
                    f"ingest job {job.id} ({job.state}) names file {fid}, which the queue"
                    " does not hold",
                    f"its run fails it (limno ingest run -p {pool}); then queue its other"
                    f" files again (limno ingest retry -p {pool} {job.id})",
                )
    local_lake = storage.local_path(uploads_prefix(pool_id)) is not None
    for f in files.values():
        if f.state == "batched" and (f.job not in jobs or f.id not in jobs[f.job].files):
            yield Fault(where, f"queued file {f.id} is batched in job {f.job}, which lacks it")
        if f.state not in _FILE_NEEDED:
            continue
        missing = _missing(storage, f, local_lake)
        if missing is not None:
            yield Fault(
                missing,
                f"{f.state} file {f.id} ({f.name}) for branch {f.branch} is missing:"
                " its job cannot load it",
                f"put it back, or drop it ({drop.replace('ID', f.id)}) and submit it again",
            )


def _missing(storage: Storage, f: QueuedFile, local_lake: bool) -> str | None:
    """Where ``f`` should be, if it is not there (None: there, or not checked here)."""
    if f.path.startswith(LAKE_PREFIX):
        key = f.path[len(LAKE_PREFIX) :]
        return None if storage.exists(key) else key
    if "://" in f.path or not local_lake:
        return None
    return None if os.path.isfile(f.path) else f.path
