"""The FastAPI application of ``limno serve``: one lake, one path per operation.

Routes live in :mod:`limno.server.routes` by group; errors become problem+json in
one place (:mod:`limno.server.problems`). ``dependencies`` run before every
operation but ``/health`` and the API's documents: where authentication plugs in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Depends, FastAPI

from limno.api.local import LocalLake
from limno.server import problems
from limno.server.routes import data, maintenance, pools, query, refs

__all__ = ["create_app"]


def create_app(
    location: str,
    *,
    lake: LocalLake | None = None,
    dependencies: Sequence[Any] = (),
) -> FastAPI:
    """The API of the lake at ``location`` (``lake``: one already open there).

    ``dependencies`` are FastAPI dependencies (callables, wrapped in ``Depends`` here)
    every operation runs first; a LimnoError they raise is answered as a problem.
    """
    served = lake if lake is not None else LocalLake.open(location)
    app = FastAPI(
        title="limno",
        summary="A versioned, git-like data lake: every CLI operation over HTTP.",
        version=_version(),
    )
    app.state.lake = served
    app.state.location = location
    problems.install(app)

    @app.get("/health", tags=["server"], operation_id="health", summary="200 when ready")
    def health() -> dict[str, str]:
        return {"status": "ok", "lake": served.uri}

    guards = [Depends(d) for d in dependencies]
    for module in (pools, refs, data, query, maintenance):
        app.include_router(module.router, dependencies=guards)
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("limno")
    except PackageNotFoundError:
        return "0"
