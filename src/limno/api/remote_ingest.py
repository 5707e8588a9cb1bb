"""The ingest batcher through ``limno serve`` (a base of
:class:`~limno.api.remote.RemotePool`): one request per operation, under
``/v1/pools/<id>/ingest/``.

What a path means through a server: a local path is a file of the client's machine,
uploaded with the submit and kept in the lake until its job has loaded it (a writer
may do that). An ``s3://`` URL is read by the server, with the server's credentials,
which may reach what the caller should not (the lake's own bucket, say): only an
admin may submit those. A path on the server's own disk cannot be named.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from limno.errors import InvalidInputError

if TYPE_CHECKING:
    from limno.api.sources import Sources
    from limno.pools.ingest_queue import IngestJob, QueuedFile
    from limno.pools.settings import BatcherSettings

__all__ = ["RemoteIngest"]


def _files(docs: Any) -> list[QueuedFile]:
    from limno.pools.ingest_queue import QueuedFile

    return [QueuedFile.from_json(d) for d in docs]


def _jobs(docs: Any) -> list[IngestJob]:
    from limno.pools.ingest_queue import IngestJob

    return [IngestJob.from_json(d) for d in docs]


class RemoteIngest:
    """Mixin of :class:`~limno.api.remote.RemotePool`: the ingest batcher's operations."""

    def _call(self, method: str, op: str, params: Any = None, body: Any = None) -> Any:
        raise NotImplementedError  # RemotePool's: one request to the pool's routes

    def _upload(self, op: str, sources: Sources, params: dict[str, Any]) -> Any:
        raise NotImplementedError  # RemotePool's: sources sent as one framed body

    def ingest_submit(
        self,
        paths: Sequence[str],
        fmt: str | None = None,
        branch: str = "main",
        *,
        copy: bool = False,
    ) -> list[QueuedFile]:
        """Upload local files into the queue, or (an admin) queue ``s3://`` URLs that
        the server reads (``copy``: the server keeps a copy in the lake)."""
        paths = list(paths)
        if not paths:
            raise InvalidInputError("nothing to submit: name at least one file")
        if "-" in paths:
            raise InvalidInputError("the ingest queue takes files, not stdin (use 'limno load')")
        urls = [p for p in paths if "://" in p and not p.startswith("file://")]
        if urls and len(urls) != len(paths):
            raise InvalidInputError(
                "through a server, submit local files (uploaded) and URLs (read by the"
                " server) in separate calls"
            )
        if urls:
            body = {"paths": urls, "fmt": fmt, "branch": branch, "keep_copy": copy}
            return _files(self._call("POST", "ingest/submit", body=body))
        local = [p.removeprefix("file://") for p in paths]
        return _files(self._upload("ingest/add", local, {"branch": branch, "fmt": fmt}))

    def ingest_run(self, branch: str | None = None, *, force: bool = False) -> list[IngestJob]:
        """Run the batcher on the server (the call lasts as long as the jobs)."""
        return _jobs(self._call("POST", "ingest/run", body={"branch": branch, "force": force}))

    def ingest_queue(self) -> list[QueuedFile]:
        return _files(self._call("GET", "ingest/files"))

    def ingest_jobs(self) -> list[IngestJob]:
        return _jobs(self._call("GET", "ingest/jobs"))

    def ingest_retry(self, ids: Sequence[str]) -> list[QueuedFile]:
        return _files(self._call("POST", "ingest/retry", body={"ids": list(ids)}))

    def ingest_drop(self, ids: Sequence[str]) -> list[QueuedFile]:
        return _files(self._call("POST", "ingest/drop", body={"ids": list(ids)}))

    def ingest_settings(self, changes: str | None = None) -> BatcherSettings:
        from limno.pools.settings import BatcherSettings

        if changes:
            done = self._call("POST", "ingest/settings", body={"changes": changes})
        else:
            done = self._call("GET", "ingest/settings")
        return BatcherSettings.from_json(done)
