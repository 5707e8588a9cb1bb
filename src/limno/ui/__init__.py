"""The web UI of ``limno serve``: server-rendered pages at ``/`` over the lake interface.

:func:`install` adds the pages to the server's FastAPI app (the server imports this
package, never the reverse). Pages are Jinja2 templates (``templates/``) with the
package's own CSS and a little vanilla JS (``static/``): no CDN, nothing fetched at
run time. Each page area has its module of routes (``routes_*.py``); what they
share (the viewer, rendering, forms, errors) is :mod:`limno.ui.pages`, sessions
and CSRF are :mod:`limno.ui.session`.

The pages act as the signed-in user with the server's own authorization
(:mod:`limno.auth.roles`, the actions the /v1 routes need), so a page can do
nothing its user could not do through the API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from fastapi import FastAPI, Request

    from limno.engines.query_limits import QueryLimits

__all__ = ["QueryRunner", "install"]

#: how the server runs a caller's SQL (safe mode, its limits, the caller's pools):
#: ``(request, sql, asked limits) -> table``; the /v1 query route's own code path
QueryRunner = Callable[["Request", str, "QueryLimits | None"], "pa.Table"]


def install(app: FastAPI, *, run_query: QueryRunner) -> None:
    """Serve the UI from ``app`` (whose ``state`` holds the lake and authenticator)."""
    from fastapi.staticfiles import StaticFiles

    from limno.ui import (
        live,
        routes_auth,
        routes_data,
        routes_files,
        routes_merge_requests,
        routes_ops,
        routes_pool,
        routes_pools,
        routes_query,
        routes_users,
    )
    from limno.ui.pages import TEMPLATES
    from limno.ui.session import Signer

    app.state.ui_signer = Signer.for_server(
        app.state.lake.uri, auth=app.state.authenticator is not None
    )
    app.state.ui_query = run_query
    app.mount("/static", StaticFiles(directory=str(TEMPLATES.parent / "static")), "ui-static")
    for module in (
        routes_auth,
        routes_pools,
        routes_pool,
        routes_merge_requests,
        routes_data,
        routes_files,
        routes_query,
        routes_ops,
        routes_users,
    ):
        app.include_router(module.router)
    live.install(app)
