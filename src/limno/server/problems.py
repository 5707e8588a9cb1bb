"""Errors as RFC 9457 problem details: the one place exceptions become HTTP answers.

Every :class:`~limno.errors.LimnoError` answers with the status of its class
(:func:`limno.errors.http_status`: 400, 404, 409, 412, 500, 503, and whatever status
classes added to the tree carry, such as 401 and 403) and a body

    {"type": "about:blank", "title": "Not Found", "status": 404,
     "detail": "pool 'logs' not found", "error": "NotFoundError"}

``detail`` is the error's message and ``error`` its class, so that limno's client
raises the same exception with the same message (:mod:`limno.api.remote`): the CLI
prints the same ``error:`` line against a server as against a lake path. Requests
the API cannot parse are 400 ``InvalidInputError``; anything else is a 500 whose
traceback goes to the server's log.
"""

from __future__ import annotations

import http
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from limno.errors import LimnoError, http_status
from limno.server.formats import NotAcceptableError

__all__ = ["PROBLEM", "CatchAll", "install", "install_catch_all", "internal", "of_error", "problem"]

PROBLEM = "application/problem+json"
log = logging.getLogger("limno.server")
#: attributes of errors that travel with them (limno.errors.DamagedObjectError's)
_FIELDS = ("path", "pool", "reason")


def problem(status: int, detail: str, error: str, **extra: Any) -> JSONResponse:
    """A problem+json response (``error``: the name of the exception class); a 401
    names the scheme to authenticate with (``WWW-Authenticate``)."""
    try:
        title = http.HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    body = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "error": error,
        **extra,
    }
    headers = {"WWW-Authenticate": 'Basic realm="limno"'} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def _limno(request: Request, exc: Exception) -> JSONResponse:
    return of_error(exc)


def of_error(exc: Exception) -> JSONResponse:
    """The answer to a LimnoError (also for routes outside FastAPI: limno.server.fast)."""
    # what some errors carry besides their message (a damaged object's path, pool, reason)
    extra = {k: v for k in _FIELDS if isinstance(v := getattr(exc, k, None), str) and v}
    return problem(http_status(exc), str(exc), type(exc).__name__, **extra)


def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts = []
    for err in exc.errors():
        loc = err.get("loc", ())
        if err.get("type") == "json_invalid":  # loc: ("body", offset)
            why = (err.get("ctx") or {}).get("error", "")
            at = f" at character {loc[1]}" if len(loc) > 1 else ""
            parts.append(f"body: not valid JSON{at}" + (f" ({why})" if why else ""))
            continue
        where = ".".join(str(x) for x in loc if x not in ("body", "query", "path"))
        where = where or ("body" if loc[:1] == ("body",) else "")
        parts.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg", ""))
    return problem(400, "invalid request: " + "; ".join(parts), "InvalidInputError")


def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    error = "NotFoundError" if exc.status_code == 404 else "LimnoError"
    return problem(exc.status_code, str(exc.detail), error)


def _not_acceptable(request: Request, exc: Exception) -> JSONResponse:
    return problem(406, str(exc), "InvalidInputError")


def _internal(request: Request, exc: Exception) -> JSONResponse:
    return internal(request.method, request.url.path, exc)


def internal(method: str, path: str, exc: Exception) -> JSONResponse:
    """The 500 of an unexpected error (its traceback goes to the server's log)."""
    log.error("internal error on %s %s", method, path, exc_info=exc)
    lines = str(exc).strip().splitlines()
    detail = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return problem(500, f"internal error on the server: {detail}", "InternalError")


class CatchAll:
    """Answers an unexpected error with its 500 problem and goes on serving the
    connection.

    Starlette hands a handler of ``Exception`` to its outermost middleware, which
    answers and then raises again, so that uvicorn logs a second traceback and closes
    the connection: the client's next request on that kept-alive connection failed
    with a reset. Installed outside every other middleware (:func:`install_catch_all`),
    this answers first. An error after the answer started (a stream cut short) still
    propagates: the connection must close, so the client sees the answer incomplete.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            answer = internal(scope.get("method", ""), scope.get("path", ""), exc)
            await answer(scope, receive, send)


def install_catch_all(app: FastAPI) -> None:
    """Put :class:`CatchAll` outside every middleware added so far (call it last)."""
    app.add_middleware(CatchAll)


def install(app: FastAPI) -> None:
    """Map every exception a route can raise to a problem response."""
    app.add_exception_handler(LimnoError, _limno)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(NotAcceptableError, _not_acceptable)
    app.add_exception_handler(Exception, _internal)
