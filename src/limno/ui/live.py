"""Live pages: the browser's ``EventSource`` reads the server's own event stream.

``/events`` (:mod:`limno.server.routes.events`) authenticates with HTTP Basic, which
an ``EventSource`` cannot send. This middleware lets a signed-in browser read it
with its session instead: a ``GET /events`` (or ``/v1/events``) with a valid session
cookie and no ``Authorization`` header gets the header of the session's key, looked
up through the server's authenticator. The stream then is exactly an API client's:
the same filtering by readable pools, the same rechecks while it stays open (a key
deleted ends it). Only that read-only GET: a cookie never authorizes any other API
request, and SameSite=Strict keeps other sites' pages from sending it at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool
from starlette.requests import cookie_parser

from limno.auth.verify import Credentials, authorization_header
from limno.errors import UnauthenticatedError
from limno.ui.session import COOKIE

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Receive, Scope, Send

    from limno.auth.verify import Authenticator
    from limno.ui.session import Signer

__all__ = ["install"]

_PATHS = ("/events", "/v1/events")


class _SessionEvents:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in _PATHS and scope["method"] == "GET":
            header = await _session_header(scope)
            if header is not None:
                scope = {**scope, "headers": [*scope["headers"], (b"authorization", header)]}
        await self.app(scope, receive, send)


async def _session_header(scope: Scope) -> bytes | None:
    """The Basic header of the session's key (None: no session, or one already sent)."""
    headers = dict(scope.get("headers") or [])
    state = scope["app"].state
    authenticator: Authenticator | None = state.authenticator
    if authenticator is None or b"authorization" in headers:
        return None
    # the pages' own parser (Starlette's, lenient): http.cookies refuses a whole header
    # over one cookie it dislikes, which another app on this host may well have set
    jar = cookie_parser(headers.get(b"cookie", b"").decode("latin-1"))
    signer: Signer = state.ui_signer
    session = signer.loads(jar.get(COOKIE))
    if session is None or not session.key_id:
        return None
    key_id, generation = session.key_id, session.generation

    def secret_of_session() -> str:  # a signed-out session's cookie opens no stream
        authenticator.session_user(key_id, generation)
        return authenticator.secret(key_id)[1]

    try:
        secret = await run_in_threadpool(secret_of_session)
    except UnauthenticatedError:
        return None
    return authorization_header(Credentials(session.key_id, secret)).encode("latin-1")


def install(app: FastAPI) -> None:
    app.add_middleware(_SessionEvents)
