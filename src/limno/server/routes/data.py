"""Writing and reading a pool's data: load, add, stage, commit, delete, scan, get."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from limno.api import wire, wire_objects, wire_ranges
from limno.api.base import Engine
from limno.server import parquet_objects
from limno.server.ahead import read_ahead
from limno.server.authorization import author_of, check_spark_settings
from limno.server.deps import ok, pool_of, stream_tables
from limno.server.formats import ARROW, MEDIA_TYPES, accepts, choose, whole
from limno.server.guard import Body
from limno.server.uploads import PARTS, query_json, renamed_errors, spooled

router = APIRouter(prefix="/v1/pools/{pool}", tags=["data"])

_UPLOAD = {
    "requestBody": {
        "required": True,
        "description": "One input file (or, as application/vnd.apache.arrow.stream, an Arrow"
        " table); or several in limno's framing (see the README).",
        "content": {
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in ("application/octet-stream", ARROW, PARTS)
        },
    }
}
_TABLES = {
    "responses": {
        "200": {
            "description": "Records, in the format the Accept header asks for.",
            "content": {media: {} for media in MEDIA_TYPES},
        }
    }
}


_SCAN = {
    "responses": {
        "200": {
            "description": "Records, in the format the Accept header asks for; or, asked for"
            f" by name ({wire_objects.MEDIA}) and when a scan needs no merging, the stored"
            " objects themselves (limno.api.wire_objects).",
            "content": {media: {} for media in (*MEDIA_TYPES, wire_objects.MEDIA)},
        }
    }
}


class Ids(Body):
    ids: list[str]
    branch: str = "main"


class CommitStaged(Body):
    ids: list[str] | None = None
    branch: str = "main"
    message: str = ""
    author: str | None = None
    meta: dict[str, Any] | None = None


class DeleteObjects(Body):
    ids: list[str]
    branch: str = "main"
    message: str = ""
    author: str | None = None


class DeleteWhere(Body):
    predicate: str
    branch: str = "main"
    message: str = ""
    author: str | None = None


class Get(Body):
    #: key values in their JSON form (limno.api.wire.value_to_json)
    keys: list[Any]
    ref: str | None = None
    #: ISO 8601: the branch ``ref`` as it was then
    as_of: str | None = None


@router.post("/load", operation_id="load", summary="Load and commit", openapi_extra=_UPLOAD)
async def load(
    request: Request,
    pool: str,
    branch: str = "main",
    fmt: str | None = None,
    message: str = "",
    author: str | None = None,
    meta: str | None = None,
    engine: Engine = "local",
    spark_master: str | None = None,
    spark_conf: str | None = None,
    parts: str | None = None,
    name: str = "-",
    expect_head: str | None = None,
) -> dict[str, Any]:
    """Load the body's sources in one commit (``meta``, ``spark_conf``: JSON objects);
    ``expect_head``: only onto that head of the branch (412 if it moved)."""
    author = author_of(request, author)  # before the body is read: 403 changes nothing
    meta_doc = query_json(meta, "meta")
    conf = query_json(spark_conf, "spark_conf")
    check_spark_settings(request, spark_master, conf)
    async with spooled(request, parts, name) as sources:

        def run() -> dict[str, Any]:  # the pool looked up here too: one thread hop
            with renamed_errors(sources):
                commit = pool_of(request, pool).load(
                    [s.source() for s in sources],
                    fmt,
                    branch,
                    message,
                    author,
                    meta_doc,
                    engine=engine,
                    spark_master=spark_master,
                    spark_conf=conf,
                    expect_head=expect_head,
                )
            return wire.commit_to_json(commit)

        return await run_in_threadpool(run)


@router.post("/add", operation_id="add", summary="Write and stage", openapi_extra=_UPLOAD)
async def add(
    request: Request,
    pool: str,
    branch: str = "main",
    fmt: str | None = None,
    parts: str | None = None,
    name: str = "-",
) -> list[dict[str, Any]]:
    async with spooled(request, parts, name) as sources:

        def run() -> list[dict[str, Any]]:
            with renamed_errors(sources):
                objs = pool_of(request, pool).add([s.source() for s in sources], fmt, branch)
            return [wire.object_to_json(o) for o in objs]

        return await run_in_threadpool(run)


@router.get("/staged", operation_id="staged", summary="Staged objects of a branch")
def staged(request: Request, pool: str, branch: str = "main") -> list[dict[str, Any]]:
    return [wire.object_to_json(o) for o in pool_of(request, pool).staged(branch)]


@router.post("/unstage", operation_id="unstage", summary="Drop staged objects")
def unstage(request: Request, pool: str, body: Ids) -> dict[str, Any]:
    pool_of(request, pool).unstage(body.ids, body.branch)
    return ok()


@router.post("/commit", operation_id="commit", summary="Commit staged objects")
def commit(request: Request, pool: str, body: CommitStaged) -> dict[str, Any]:
    made = pool_of(request, pool).commit(
        body.ids, body.branch, body.message, author_of(request, body.author), body.meta
    )
    return wire.commit_to_json(made)


@router.post("/delete-objects", operation_id="delete_objects", summary="Delete objects")
def delete_objects(request: Request, pool: str, body: DeleteObjects) -> dict[str, Any]:
    made = pool_of(request, pool).delete_objects(
        body.ids, body.branch, body.message, author_of(request, body.author)
    )
    return wire.commit_to_json(made)


@router.post("/delete-where", operation_id="delete_where", summary="Delete matching rows")
def delete_where(request: Request, pool: str, body: DeleteWhere) -> dict[str, Any]:
    made = pool_of(request, pool).delete_where(
        body.predicate, body.branch, body.message, author_of(request, body.author)
    )
    return wire.commit_to_json(made)


@router.get("/scan", operation_id="scan", summary="A sorted scan", openapi_extra=_SCAN)
def scan(
    request: Request,
    pool: str,
    ref: str | None = None,
    start: str | None = None,
    end: str | None = None,
    order: str = "asc",
    limit: int | None = None,
    as_of: str | None = None,
    ranges: str | None = None,
) -> StreamingResponse:
    """Records from ``start`` (inclusive) to ``end`` (exclusive): each a JSON value of
    limno's wire form (a plain JSON string is text parsed into the key's type); or
    instead those of ``ranges``, a JSON list of ``[from, to]`` pairs of such values."""
    lo = wire.value_from_json(query_json(start, "start"))
    hi = wire.value_from_json(query_json(end, "end"))
    when = wire.time_from_json(as_of)
    several = wire_ranges.ranges_from_json(ranges)
    opened = pool_of(request, pool)
    whole_scan = lo is None and hi is None and several is None and limit is None
    if whole_scan and accepts(request.headers.get("accept"), wire_objects.MEDIA):
        answer = parquet_objects.objects_body(opened, ref, when, order)
        if answer is not None:  # the stored objects as they are: the client decodes them
            sized = {} if answer.length is None else {"Content-Length": str(answer.length)}
            body = read_ahead(answer.body)
            return StreamingResponse(body, media_type=wire_objects.MEDIA, headers=sized)
    tables = opened.iter_scan(ref, lo, hi, order, limit, when, ranges=several)
    return stream_tables(request, tables)


@router.post("/get", operation_id="get", summary="Point lookup", openapi_extra=_TABLES)
def get(request: Request, pool: str, body: Get) -> Response:
    """The rows of ``keys``: a small answer, sent whole (no stream: a lookup's latency
    is mostly fixed costs)."""
    media = choose(request.headers.get("accept"))
    return Response(lookup(request, pool, body, media), media_type=media)


def lookup(request: Request, pool: str, body: Get, media: str) -> bytes:
    """A ``get``'s answer in ``media`` (also :mod:`limno.server.fast`'s)."""
    keys = [wire.value_from_json(k) for k in body.keys]
    table = pool_of(request, pool).get(keys, body.ref, as_of=wire.time_from_json(body.as_of))
    return whole(table, media)


@router.get("/objects", operation_id="objects", summary="Data objects of a ref")
def objects(
    request: Request, pool: str, ref: str | None = None, as_of: str | None = None
) -> list[dict[str, Any]]:
    objs = pool_of(request, pool).objects(ref, wire.time_from_json(as_of))
    return [wire.object_to_json(o) for o in objs]


@router.get("/meta/{name}", operation_id="pool_meta_table", summary="A meta table of the pool")
def meta_table(request: Request, pool: str, name: str, ref: str | None = None) -> StreamingResponse:
    table = pool_of(request, pool).meta_table(name, ref)
    return stream_tables(request, [table] if table.num_rows else [], table.schema)
