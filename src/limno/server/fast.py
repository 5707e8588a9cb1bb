"""A short way through the server for a point lookup, the request whose latency is all
fixed costs.

A ``get`` of one key takes about 3 ms in process; through FastAPI it paid about as
much again of the framework's own work per request (matching the path against every
route in turn, solving the dependencies, validating the body, its middleware and a
task per layer). :class:`FastPaths` is plain ASGI middleware, inside
:class:`~limno.server.guard.Guard` (whose limits and refusals still come first), that
answers ``POST /v1/pools/{pool}/get`` itself when nothing about the request needs
the framework:

- the body is JSON and is a valid :class:`~limno.server.routes.data.Get` (the same
  model, so the same name checks);
- the caller's key and the pool's id are already remembered and allow the read
  (:func:`limno.server.authorization.allowed_at_once`, from the same rule table);
- the ``Accept`` header names a format the server writes.

Anything else (a key not yet remembered, a pool named by name, a bad body, no
credentials, a refusal) goes to the route itself, with the body replayed, so every
401, 403, 400 and 406 comes from the one place that makes them. The lookup itself is
the route's (:func:`limno.server.routes.data.lookup`), its errors are problem+json
from :mod:`limno.server.problems`, and anything unexpected is the 500 problem
:class:`~limno.server.problems.CatchAll` would send. An app given extra dependencies
to run before every operation (:func:`limno.server.app.create_app`) has no short
way: it would skip them.

Given the guard's ``limits``, the middleware sits outside every other one (Starlette's
error middleware, FastAPI's body limit and telemetry, the guard, ...: about 0.2 ms of
a lookup's CPU on a busy machine), and does the guard's part itself: a path the guard
would refuse, and the body read within its timeout (408 after it, as the guard's).
It goes there only where those layers add nothing to a lookup's answer: no CORS
headers to add, no telemetry to record (:func:`limno.server.app.create_app`).
"""

from __future__ import annotations

import asyncio

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from limno.errors import LimnoError
from limno.server import problems
from limno.server.authorization import allowed_at_once
from limno.server.direct import RAW_SEND
from limno.server.formats import NotAcceptableError, choose
from limno.server.guard import Limits, answer_problem, check_target
from limno.server.routes.data import Get, lookup

__all__ = ["FastPaths"]

#: the most bytes of a body read here; a longer one (many keys) takes the route
_MOST = 1 << 20


class FastPaths:
    """The middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, limits: Limits | None = None) -> None:
        self.app = app
        #: the guard's limits when outside it (None: inside, the guard did its part)
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.limits is not None:  # outside every layer: the ASGI server's own send
            scope[RAW_SEND] = send  # for a streamed answer's body (limno.server.direct)
        pool = _lookup_pool(scope)
        if pool is None or (self.limits is not None and check_target(scope) is not None):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        timeout = None if self.limits is None else self.limits.body_timeout
        try:
            body = await _body(receive, messages, timeout)
        except TimeoutError:  # the guard's refusal, in its words
            detail = f"the client sent no key list bytes for {timeout:g} s: nothing was done"
            await answer_problem(send, 408, detail)
            return
        answered = body is not None and await _answer(scope, pool, body, receive, send)
        if not answered:  # the route decides, with the body as it came
            await self.app(scope, _replay(messages, receive), send)


def _lookup_pool(scope: Scope) -> str | None:
    """The pool of a ``POST /v1/pools/{pool}/get`` with a JSON body (None: another
    request, which the route answers)."""
    if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("root_path"):
        return None
    parts = scope.get("path", "").split("/")
    if len(parts) != 5 or parts[:3] != ["", "v1", "pools"] or parts[4] != "get" or not parts[3]:
        return None
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            return parts[3] if value == b"application/json" else None
    return None


async def _body(receive: Receive, messages: list[Message], timeout: float | None) -> bytes | None:
    """The whole body (None: not one small body; ``messages`` keeps what was read);
    TimeoutError when the client sends nothing for ``timeout`` seconds (as the guard)."""
    size = 0
    while True:
        async with asyncio.timeout(timeout):
            message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None
        size += len(message.get("body", b""))
        if size > _MOST:
            return None
        if not message.get("more_body", False):
            return b"".join(m.get("body", b"") for m in messages)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` with ``messages`` (read already) first."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


async def _answer(scope: Scope, pool: str, body: bytes, receive: Receive, send: Send) -> bool:
    """Answer the lookup (True), or leave it to the route (False) before doing anything."""
    request = Request(scope, receive)
    try:
        asked = Get.model_validate_json(body)
        media = choose(request.headers.get("accept"))
    except (ValidationError, NotAcceptableError, LimnoError, ValueError):
        return False
    if not allowed_at_once(request, "get", pool):
        return False
    response: Response
    try:
        payload = await run_in_threadpool(lookup, request, pool, asked, media)
        response = Response(payload, media_type=media)
    except LimnoError as e:
        response = problems.of_error(e)
    except Exception as e:  # noqa: BLE001 -- the 500 problem, as CatchAll answers it
        response = problems.internal(scope.get("method", ""), scope.get("path", ""), e)
    await response(scope, receive, send)
    return True
