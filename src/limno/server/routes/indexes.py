"""Search indexes: create and drop them (commits), list them, look records up by one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from limno.api import wire
from limno.server.authorization import author_of
from limno.server.deps import pool_of
from limno.server.formats import MEDIA_TYPES, choose, whole
from limno.server.guard import Body

router = APIRouter(prefix="/v1/pools/{pool}", tags=["indexes"])

_TABLES = {
    "responses": {
        "200": {
            "description": "Records, in the format the Accept header asks for.",
            "content": {media: {} for media in MEDIA_TYPES},
        }
    }
}


class Fields(Body):
    fields: list[str]
    branch: str = "main"
    message: str = ""
    author: str | None = None


class Search(Body):
    field: str
    #: values in their JSON form (limno.api.wire.value_to_json); text is read in the
    #: field's type
    values: list[Any]
    ref: str | None = None
    as_of: str | None = None


@router.get("/indexes", operation_id="indexes", summary="Search indexes of a ref")
def indexes(request: Request, pool: str, ref: str | None = None) -> list[dict[str, Any]]:
    return [s.to_json() for s in pool_of(request, pool).indexes(ref)]


@router.post(
    "/indexes", operation_id="create_index", summary="Index fields (a commit)", status_code=201
)
def create_index(request: Request, pool: str, body: Fields) -> dict[str, Any]:
    made = pool_of(request, pool).create_index(
        body.fields, body.branch, body.message, author_of(request, body.author)
    )
    return wire.commit_to_json(made)


@router.post("/indexes/drop", operation_id="drop_index", summary="Drop indexes (a commit)")
def drop_index(request: Request, pool: str, body: Fields) -> dict[str, Any]:
    made = pool_of(request, pool).drop_index(
        body.fields, body.branch, body.message, author_of(request, body.author)
    )
    return wire.commit_to_json(made)


@router.post(
    "/search", operation_id="search", summary="Records by an indexed field", openapi_extra=_TABLES
)
def search(request: Request, pool: str, body: Search) -> Response:
    """The records whose ``field`` equals one of ``values``, sent whole (a lookup's
    answer is small)."""
    media = choose(request.headers.get("accept"))
    values = [wire.value_from_json(v) for v in body.values]
    as_of = wire.time_from_json(body.as_of)
    table = pool_of(request, pool).search(body.field, values, body.ref, as_of=as_of)
    return Response(whole(table, media), media_type=media)
