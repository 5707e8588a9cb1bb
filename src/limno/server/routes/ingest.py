"""The ingest batcher: submit files to a pool's queue, run it, list it, tune it.

Uploads (``ingest/add``, a writer's) are kept in the lake until their job loads them,
so the queue never depends on the client's disk nor on this server's temporary
files; the upload's path ends in ``add`` on purpose, so the guard treats it as the
upload it is (``--max-upload-mb``, not the JSON body cap). ``ingest/submit`` queues
``s3://`` URLs that the server reads with its own credentials: an admin's (see
:mod:`limno.server.authorization` and :mod:`limno.api.remote_ingest`). A path on this
server's disk cannot be named: a lake admin is not a user of the server's machine.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from limno.errors import InvalidInputError
from limno.pools.ingest_sources import is_url
from limno.server.deps import pool_of
from limno.server.formats import ARROW
from limno.server.guard import Body
from limno.server.uploads import PARTS, renamed_errors, spooled

router = APIRouter(prefix="/v1/pools/{pool}/ingest", tags=["ingest"])

_UPLOAD = {
    "requestBody": {
        "required": True,
        "description": "One input file; or several in limno's framing (see the README).",
        "content": {
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in ("application/octet-stream", PARTS)
        },
    }
}


class Submit(Body):
    paths: list[str]
    fmt: str | None = None
    branch: str = "main"
    keep_copy: bool = False


class Run(Body):
    branch: str | None = None
    force: bool = False


class Ids(Body):
    ids: list[str]


class Settings(Body):
    changes: str


@router.post(
    "/add", operation_id="ingest_add", summary="Upload files to the queue", openapi_extra=_UPLOAD
)
async def add(
    request: Request,
    pool: str,
    branch: str = "main",
    fmt: str | None = None,
    parts: str | None = None,
    name: str = "-",
) -> list[dict[str, Any]]:
    """Queue the body's files (kept in the lake), all or none."""
    if request.headers.get("content-type", "").split(";")[0].strip() == ARROW:
        raise InvalidInputError("the ingest queue takes files, not Arrow tables (use load)")
    async with spooled(request, parts, name) as sources:
        if any(s.kind != "file" for s in sources):
            raise InvalidInputError("the ingest queue takes files, not Arrow tables (use load)")

        def run() -> list[dict[str, Any]]:
            with renamed_errors(sources):
                queued = pool_of(request, pool).ingest_submit(
                    [s.path for s in sources],
                    fmt,
                    branch,
                    copy=True,
                    names=[s.name for s in sources],
                )
            return [f.to_json() for f in queued]

        return await run_in_threadpool(run)


@router.post("/submit", operation_id="ingest_submit", summary="Queue files the server reads")
def submit(request: Request, pool: str, body: Submit) -> list[dict[str, Any]]:
    local = [p for p in body.paths if not is_url(p)]
    if local:
        raise InvalidInputError(
            f"{local[0]}: through a server, queue s3:// URLs here; local files are uploaded"
            " (ingest/add), and a path on the server's disk cannot be named"
        )
    queued = pool_of(request, pool).ingest_submit(
        body.paths, body.fmt, body.branch, copy=body.keep_copy
    )
    return [f.to_json() for f in queued]


@router.post("/run", operation_id="ingest_run", summary="Batch and run due ingest jobs")
def run(request: Request, pool: str, body: Run) -> list[dict[str, Any]]:
    jobs = pool_of(request, pool).ingest_run(body.branch, force=body.force)
    return [j.to_json() for j in jobs]


@router.get("/files", operation_id="ingest_files", summary="The queued files")
def files(request: Request, pool: str) -> list[dict[str, Any]]:
    return [f.to_json() for f in pool_of(request, pool).ingest_queue()]


@router.get("/jobs", operation_id="ingest_jobs", summary="The batcher's jobs")
def jobs(request: Request, pool: str) -> list[dict[str, Any]]:
    return [j.to_json() for j in pool_of(request, pool).ingest_jobs()]


@router.post("/retry", operation_id="ingest_retry", summary="Queue failed files again")
def retry(request: Request, pool: str, body: Ids) -> list[dict[str, Any]]:
    return [f.to_json() for f in pool_of(request, pool).ingest_retry(body.ids)]


@router.post("/drop", operation_id="ingest_drop", summary="Remove files from the queue")
def drop(request: Request, pool: str, body: Ids) -> list[dict[str, Any]]:
    return [f.to_json() for f in pool_of(request, pool).ingest_drop(body.ids)]


@router.get("/settings", operation_id="ingest_settings", summary="The batcher's settings")
def settings(request: Request, pool: str) -> dict[str, Any]:
    return pool_of(request, pool).ingest_settings().to_json()


@router.post("/settings", operation_id="ingest_configure", summary="Change batcher settings")
def configure(request: Request, pool: str, body: Settings) -> dict[str, Any]:
    return pool_of(request, pool).ingest_settings(body.changes).to_json()
