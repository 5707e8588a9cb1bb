"""SQL over the lake's pools, and the lake's meta tables."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from limno.api import wire
from limno.api.base import Engine
from limno.engines.query_limits import QueryLimits
from limno.server.authorization import check_spark_settings, readable_of, visible
from limno.server.deps import lake_of, stream_tables
from limno.server.formats import MEDIA_TYPES
from limno.server.guard import Body

if TYPE_CHECKING:
    import pyarrow as pa

router = APIRouter(prefix="/v1", tags=["query"])

_TABLES = {
    "responses": {
        "200": {
            "description": "Rows, in the format the Accept header asks for.",
            "content": {media: {} for media in MEDIA_TYPES},
        }
    }
}


class Query(Body):
    sql: str
    engine: Engine = "local"
    safe: bool = False
    spark_master: str | None = None
    spark_conf: dict[str, str] | None = None
    #: the client's limits: ``timeout`` (seconds), ``max_rows``, ``max_bytes``
    limits: dict[str, float | int | None] | None = None
    #: ISO 8601: every branch the SQL reads, as it was then
    as_of: str | None = None


#: a server's caps on every query, unless ``limno serve`` sets others
DEFAULT_LIMITS = QueryLimits(timeout=60.0, max_rows=10_000_000, max_bytes=1 << 30)


@router.post("/query", operation_id="query", summary="SQL over pools", openapi_extra=_TABLES)
def query(
    request: Request,
    body: Query,
    timeout: float | None = None,
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> StreamingResponse:
    """SQL from a caller: always in safe mode (one read-only query; no files, network,
    extensions or settings), reading only pools the caller may read, under the
    server's limits, which the body's ``limits`` or the query parameters may lower
    (never raise). ``safe`` in the body is accepted and ignored."""
    asked = wire.limits_from_json(body.limits) or QueryLimits()
    check_spark_settings(request, body.spark_master, body.spark_conf)
    table = run_sql(
        request,
        body.sql,
        asked.within(QueryLimits(timeout, max_rows, max_bytes)),
        engine=body.engine,
        spark_master=body.spark_master,
        spark_conf=body.spark_conf,
        as_of=wire.time_from_json(body.as_of),
    )
    return stream_tables(request, [table] if table.num_rows else [], table.schema)


def run_sql(
    request: Request,
    sql: str,
    asked: QueryLimits | None = None,
    *,
    engine: Engine = "local",
    spark_master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    as_of: dt.datetime | None = None,
) -> pa.Table:
    """SQL from the caller of ``request`` (``request.state.user``), as every caller's
    runs: in safe mode, reading only pools the caller may read, under the server's
    limits (``asked`` may lower them). The /v1 route and the web UI's query page
    both run SQL through here."""
    caps: QueryLimits = request.app.state.query_limits or DEFAULT_LIMITS
    return lake_of(request).query(
        sql,
        engine=engine,
        safe=True,
        spark_master=spark_master,
        spark_conf=spark_conf,
        limits=(asked or QueryLimits()).within(caps),
        readable=readable_of(request),
        as_of=as_of,
    )


@router.get("/meta", operation_id="meta_table", summary="A meta table", openapi_extra=_TABLES)
def meta_table(request: Request, name: str, ref: str = "") -> StreamingResponse:
    """``ref`` empty and ``name`` ``pools``: the lake's pools; else a pool ref's table."""
    table = lake_of(request).meta_table(ref, name)
    if not ref and "id" in table.column_names:  # the lake's pools: those the caller may read
        shown = visible(request, [str(i) for i in table.column("id").to_pylist()])
        if not all(shown):
            table = table.filter(shown)
    return stream_tables(request, [table] if table.num_rows else [], table.schema)
