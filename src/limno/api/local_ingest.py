"""The ingest batcher of a pool in this process (a base of
:class:`~limno.api.local_pool.LocalPool`): thin over :mod:`limno.pools.ingest_queue`,
:mod:`limno.pools.ingest_sources` and :mod:`limno.pools.ingest_runner`.

A local path submitted here is a path of this machine, and must still be there when a
job reads it (``copy=True`` keeps a copy in the lake instead: what a server does with
uploads); an ``s3://`` URL is read with this process's credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from limno.errors import NotFoundError
from limno.pools.records.pool import RecordPool

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.pools.ingest_queue import IngestJob, IngestQueue, QueuedFile
    from limno.pools.settings import BatcherSettings

__all__ = ["LocalIngest", "STATUS_REPORT"]

#: the title of the batcher's report in ``status``
STATUS_REPORT = "ingest_batches"


def _silent(message: str) -> None:
    """A log that drops its messages."""


class LocalIngest(RecordPool):
    """A record pool with the ingest batcher's operations (see :class:`limno.api.base.Pool`)."""

    def _ingest_queue(self) -> IngestQueue:
        from limno.pools.ingest_queue import IngestQueue

        return IngestQueue(self.storage, self.id)

    def ingest_submit(
        self,
        paths: Sequence[str],
        fmt: str | None = None,
        branch: str = "main",
        *,
        copy: bool = False,
        names: Sequence[str] | None = None,
    ) -> list[QueuedFile]:
        """Queue files (checked to exist now) in one step; ``names``: what to call them
        (a server's uploads: the client's paths)."""
        from limno.pools.ingest_sources import submit

        # a missing or protected branch fails now, not at run time (a queued file could
        # only be committed directly, as a staged object: see limno.core.protection)
        self.versioned.writable_head(branch)
        return submit(self._ingest_queue(), paths, fmt, branch, copy=copy, names=names)

    def ingest_run(
        self,
        branch: str | None = None,
        *,
        force: bool = False,
        log: Callable[[str], None] = _silent,
    ) -> list[IngestJob]:
        from limno.pools.ingest_runner import run

        if branch is not None and self.versioned.refs.branch(branch) is None:
            raise NotFoundError(f"branch {branch!r} not found")
        return run(self, branch, force=force, log=log)

    def ingest_queue(self) -> list[QueuedFile]:
        return self._ingest_queue().files()

    def ingest_jobs(self) -> list[IngestJob]:
        return self._ingest_queue().jobs()

    def ingest_retry(self, ids: Sequence[str]) -> list[QueuedFile]:
        return self._ingest_queue().retry(ids)

    def ingest_drop(self, ids: Sequence[str]) -> list[QueuedFile]:
        return self._ingest_queue().drop(ids)

    def ingest_settings(self, changes: str | None = None) -> BatcherSettings:
        """The batcher's settings, after ``changes`` (``min-files=2,max-age=10m``) if given."""
        if not changes:
            return self.config.settings.batcher
        self.config = self.registry.find(self.id)  # the latest: the update is a CAS on it
        batcher = self.config.settings.batcher.parse(changes)
        settings = replace(self.config.settings, batcher=batcher)
        self.config = self.registry.update(self.config, settings=settings)
        return batcher

    def status(
        self, ref: str | None = None, limit: int = 20, rows: int | None = None
    ) -> dict[str, pa.Table]:
        """The pool's reports, with the batcher's jobs (the latest ``limit``)."""
        from limno.pools.ingest_queue import jobs_table

        reports = super().status(ref, limit, rows)
        reports[STATUS_REPORT] = jobs_table(self.ingest_jobs()[-limit:])
        return reports
