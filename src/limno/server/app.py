"""The FastAPI application of ``limno serve``: one lake, one path per operation.

Routes live in :mod:`limno.server.routes` by group; errors become problem+json in
one place (:mod:`limno.server.problems`). ``dependencies`` run before every
operation but ``/health`` and the API's documents: where authentication plugs in.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI
from fastapi.telemetry import TelemetryConfig
from starlette.types import ASGIApp

from limno.api.local import LocalLake
from limno.server import problems
from limno.server.authorization import guard
from limno.server.deps import json_only
from limno.server.fast import FastPaths
from limno.server.guard import Limits as RequestLimits
from limno.server.guard import install as install_guard
from limno.server.routes import (
    auth,
    data,
    events,
    files,
    indexes,
    ingest,
    maintenance,
    pools,
    query,
    refs,
    registry,
    reviews,
)

if TYPE_CHECKING:
    from limno.auth.verify import Authenticator
    from limno.engines.query_limits import QueryLimits

__all__ = ["create_app"]


def create_app(
    location: str,
    *,
    lake: LocalLake | None = None,
    dependencies: Sequence[Any] = (),
    authenticator: Authenticator | None = None,
    limits: QueryLimits | None = None,
    request_limits: RequestLimits | None = None,
    cors_origins: Sequence[str] = (),
    heartbeat: float = 15.0,
    max_event_streams: int = events.MAX_STREAMS,
) -> FastAPI:
    """The API of the lake at ``location`` (``lake``: one already open there).

    ``authenticator`` checks every request's credentials, and
    :mod:`limno.server.authorization` what the caller may do (None: no auth, every
    request allowed: ``--no-auth``). ``limits``: the server's caps on a query (a
    caller may only lower them; None: QueryLimits' server defaults).
    ``request_limits``: body sizes and timeouts (:mod:`limno.server.guard`);
    ``cors_origins``: browser origins allowed (none: CORS off); ``heartbeat``: seconds
    between keep-alive comments of event streams; ``max_event_streams``: how many may
    be open at once (503 beyond).
    ``dependencies`` are FastAPI dependencies (callables, wrapped in ``Depends`` here)
    every operation runs first, after the guard; a LimnoError they raise is answered
    as a problem.
    """
    _import_request_modules()
    served = lake if lake is not None else LocalLake.open(location)
    telemetry = _telemetry()
    app = _App(
        title="limno",
        summary="A versioned, git-like data lake: every CLI operation over HTTP.",
        version=_version(),
        telemetry=telemetry,
    )
    app.state.lake = served
    app.state.location = location
    app.state.authenticator = authenticator
    app.state.query_limits = limits
    problems.install(app)
    guarded = request_limits or RequestLimits()
    if not dependencies:  # it runs none: with some, every request takes the routes
        if cors_origins or telemetry is None:  # CORS headers, traces: the layers' part
            app.add_middleware(FastPaths)  # inside the guard: its limits and refusals first
        else:
            app.fast_limits = guarded  # outside everything, doing the guard's part
    install_guard(app, guarded, tuple(cors_origins))
    events.install(app, heartbeat, max_open=max_event_streams)

    @app.get("/health", tags=["server"], operation_id="health", summary="200 when ready")
    def health() -> dict[str, str]:
        return {"status": "ok", "lake": served.uri}

    guards = [Depends(guard), *(Depends(d) for d in dependencies)]
    # limno's own JSON routes refuse an Accept they cannot meet (406); Confluent's
    # registry answers its own media types to its clients, as Confluent's does
    negotiated = [*guards, Depends(json_only)]
    for module in (pools, refs, data, files, indexes, query, maintenance, ingest, events, auth):
        app.include_router(module.router, dependencies=negotiated)
    app.include_router(reviews.router, dependencies=negotiated)
    app.include_router(registry.router, dependencies=guards)  # Confluent's, at /registry
    # the short path SPEC.md and `curl -N HOST/events` use; the document lists /v1/events
    app.add_api_route(
        "/events",
        events.events,
        methods=["GET"],
        operation_id="events",
        include_in_schema=False,
        dependencies=guards,
    )
    from limno import ui  # the web UI's pages at / (their own sign-in, same rules)

    ui.install(app, run_query=query.run_sql)
    problems.install_catch_all(app)
    return app


class _App(FastAPI):
    """FastAPI with :class:`~limno.server.fast.FastPaths` outside its whole middleware
    stack when :attr:`fast_limits` is set (the guard's limits, which it then applies)."""

    fast_limits: RequestLimits | None = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        return stack if self.fast_limits is None else FastPaths(stack, self.fast_limits)


def _telemetry() -> TelemetryConfig | None:
    """FastAPI's OpenTelemetry, off unless the environment asks for OpenTelemetry (an
    ``OTEL_...`` variable, or ``FASTAPI_OTEL_AUTO_CONFIGURE``). Left on, it asks for the
    global tracer, meter and logger providers on every request, to find that none is
    set: about 0.1 ms of a 3 ms lookup's server time, for nothing."""
    if any(name.startswith(("OTEL_", "FASTAPI_OTEL_")) for name in os.environ):
        return None
    return TelemetryConfig(tracing=False, metrics=False, logs=False)


def _import_request_modules() -> None:
    """Import what requests use before the first one arrives: requests run on many
    threads, and two threads importing pyarrow at once can see it half-initialized
    (``partially initialized module 'pyarrow' has no attribute ...``), which Python's
    import locks do not rule out when imports cross. A server is long-lived; its start
    pays the imports (about half a second) that its first request would pay anyway."""
    import importlib

    for name in _REQUEST_MODULES:
        importlib.import_module(name)
    # pyarrow imports pandas (when installed) the first time it makes an array from
    # Python values, as status reports and meta tables do: a third of a second that
    # made the first operations page of a new server miss its 300 ms
    pa = importlib.import_module("pyarrow")
    pa.array([0])


#: the libraries and limno modules a request may import (lazily elsewhere)
_REQUEST_MODULES = (
    "numpy",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.csv",
    "pyarrow.ipc",
    "pyarrow.json",
    "pyarrow.parquet",
    "duckdb",
    "limno.api.local_pool",
    "limno.engines.local",
    "limno.data.scan",
    "limno.data.indexes",
    "limno.pools.records.pool",
    "limno.pools.records.snapshot_index",
    "limno.data.plan_index",
    "limno.pools.inspect",
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("limno")
    except PackageNotFoundError:
        return "0"
