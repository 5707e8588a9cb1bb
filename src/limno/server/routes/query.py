"""SQL over the lake's pools, and the lake's meta tables."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from limno.api import wire
from limno.api.base import Engine
from limno.server.deps import lake_of, stream_tables
from limno.server.formats import MEDIA_TYPES

router = APIRouter(prefix="/v1", tags=["query"])

_TABLES = {
    "responses": {
        "200": {
            "description": "Rows, in the format the Accept header asks for.",
            "content": {media: {} for media in MEDIA_TYPES},
        }
    }
}


class Query(BaseModel):
    sql: str
    engine: Engine = "local"
    safe: bool = False
    spark_master: str | None = None
    spark_conf: dict[str, str] | None = None
    #: the client's limits: ``timeout`` (seconds), ``max_rows``, ``max_bytes``
    limits: dict[str, float | int | None] | None = None


@router.post("/query", operation_id="query", summary="SQL over pools", openapi_extra=_TABLES)
def query(request: Request, body: Query) -> StreamingResponse:
    table = lake_of(request).query(
        body.sql,
        engine=body.engine,
        safe=body.safe,
        spark_master=body.spark_master,
        spark_conf=body.spark_conf,
        limits=wire.limits_from_json(body.limits),
    )
    return stream_tables(request, [table] if table.num_rows else [], table.schema)


@router.get("/meta", operation_id="meta_table", summary="A meta table", openapi_extra=_TABLES)
def meta_table(request: Request, name: str, ref: str = "") -> StreamingResponse:
    """``ref`` empty and ``name`` ``pools``: the lake's pools; else a pool ref's table."""
    table = lake_of(request).meta_table(ref, name)
    return stream_tables(request, [table] if table.num_rows else [], table.schema)
