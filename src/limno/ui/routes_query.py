"""The query page: SQL over the pools (tables are refs, as in ``limno query``), its
answer a page at a time, as CSV or Parquet, and as a chart; shareable by URL
(``/query?sql=...``: a GET form, so the address is the query).

SQL runs exactly as the /v1 query route runs it (the server passes its code path in,
:data:`limno.ui.QueryRunner`): safe mode, the server's limits, only pools the viewer
may read. The page asks for at most :data:`MAX_ROWS` rows (a larger answer is
refused, not cut: add a LIMIT); a download asks for what the server allows.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from limno.engines.query_limits import QueryLimits
from limno.errors import InvalidInputError, LimnoError
from limno.ui.pages import Signed, lake_of, page_router, plain, render

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.ui import QueryRunner

router = page_router()

#: rows a page of the answer shows
PAGE = 100
#: rows the page's query may answer at most
MAX_ROWS = 100_000
#: rows the chart draws at most (the first ones)
CHART_ROWS = 2_000
CHARTS = ("line", "bar", "scatter")


def run(request: Request, sql: str, limits: QueryLimits | None) -> pa.Table:
    runner: QueryRunner = request.app.state.ui_query
    return runner(request, sql, limits)


@router.get("/query")
def query_page(
    request: Request,
    viewer: Signed,
    sql: str = "",
    page: int = 0,
    chart: str = "line",
    x: str = "",
    y: str = "",
) -> Response:
    viewer.need("read")
    table, error = None, ""
    if sql.strip():
        try:
            table = run(request, sql, QueryLimits(max_rows=MAX_ROWS))
        except LimnoError as e:
            error = str(e)
    pools = [c.name for c in lake_of(request).list_pools() if viewer.can("read", c.id)]
    context: dict[str, Any] = {}
    if table is not None:
        page = max(0, min(page, (table.num_rows - 1) // PAGE if table.num_rows else 0))
        names = table.column_names
        context = {
            "rows": table.slice(page * PAGE, PAGE),
            "total": table.num_rows,
            "page": page,
            "pages": (table.num_rows + PAGE - 1) // PAGE,
            "columns": names,
            "chart_data": {
                "columns": names,
                "rows": [[plain(v) for v in row.values()] for row in _head(table)],
            },
            "x": x if x in names else (names[0] if names else ""),
            "y": y if y in names else (names[1] if len(names) > 1 else ""),
        }
    return render(
        request,
        "query.html",
        title="Query",
        section="query",
        sql=sql,
        error=error,
        table=table,
        pools=pools,
        chart=chart if chart in CHARTS else "line",
        charts=CHARTS,
        key_columns=[],
        **context,
    )


def _head(table: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.slice(0, CHART_ROWS).to_pylist()
    return rows


@router.get("/query/download")
def download(request: Request, viewer: Signed, sql: str, format: str = "csv") -> Response:
    """The whole answer as a file (under the server's limits)."""
    viewer.need("read")
    if format not in ("csv", "parquet"):
        raise InvalidInputError(f"format: csv or parquet, not {format!r}")
    table = run(request, sql, None)
    sink = io.BytesIO()
    if format == "csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, sink)
        media = "text/csv"
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, sink)
        media = "application/vnd.apache.parquet"
    return Response(
        sink.getvalue(),
        media_type=media,
        headers={
            "Content-Disposition": f"attachment; filename=query.{format}",
            "Cache-Control": "no-store",
        },
    )
