"""What the server refuses before any route runs: oversized or stalled bodies, names
that try to climb out of where they belong, and JSON bodies with fields it does not know.

:class:`Guard` is plain ASGI middleware in front of the whole API:

- a body larger than its cap is 413: JSON bodies are small (``--max-body-mb``, 1 MB by
  default; a ``get``'s list of keys up to :data:`KEYS_BODY`, 64 MB), uploads of
  ``load``, ``add`` and file puts go to disk and are unlimited unless
  ``--max-upload-mb`` says otherwise. A declared ``Content-Length`` over the cap is
  refused before any route runs (up to 64 MB of it read and dropped first, so that
  the client, still sending, sees the answer); a chunked body is counted as it arrives;
- a client that stops sending mid-body for ``--body-timeout`` seconds gets 408. The
  route sees the body end early (a load then loads nothing) and its answer is replaced;
- a name (of a pool, branch, tag, ref or object: in the path, the query or a JSON
  body) that can never be one and could confuse routing or logs is 400 before the lake
  is touched: control characters (NUL, newlines...) or over 1024 bytes. Everything else
  goes to the lake, which words its refusal exactly as it does for a lake path (the
  CLI prints the same line either way): names never become file paths (pools are
  stored by id, branches and tags are journal keys; the one place a branch name meets a
  path, its staging area, takes only valid names: :mod:`limno.core.versioning`), and
  the storage layer refuses ``.``/``..`` segments in any case;
- a path segment that is not a name may not be ``.``/``..`` nor hold an encoded ``/``
  (400). A segment naming a pool, a user or an access key (after ``pools/``,
  ``users/``, ``keys/``, ``grants/``) that holds one is a name none can have (pool,
  user and key names never contain ``/``): 404, worded as the lake words a missing
  one (``user 'a/b' not found``), before authentication, as a lake opened directly
  answers. Branch, tag and hook names end the path, so they may.

:class:`Body` is the base of every JSON body model: unknown fields are 400 naming the
field (``extra="forbid"``), and fields naming pools, refs or objects are checked like query
parameters. CORS is off unless origins are configured (:func:`install`).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "KEYS_BODY",
    "MAX_NAME",
    "MB",
    "Body",
    "Guard",
    "Limits",
    "Options",
    "answer_problem",
    "check_name",
    "check_target",
    "install",
]

MB = 1 << 20
#: most bytes of a ``get``'s JSON body (its keys: millions), unless ``--max-body-mb`` is
#: more; a client sends a longer key list in several requests (limno.api.remote_lookup)
KEYS_BODY = 64 * MB
#: the longest name or ref accepted (bytes of UTF-8): far over any the lake allows
MAX_NAME = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: query parameters and body fields that name a pool or a ref
NAMED = frozenset(
    {"pool", "ref", "branch", "from_ref", "old", "new", "source", "into", "commit", "name"}
)
#: query parameters named like those that are not names (an upload's file name)
_NOT_NAMES = frozenset({"name"})
#: a path segment after one of these names a pool, user or access key, as a segment of
#: its own (no ``/``: routing would split it); the noun the lake says it with
_NAMED_BY = {"pools": "pool", "users": "user", "keys": "access key", "grants": "pool"}
#: path segments after these name a branch, tag or hook: the rest of the path (routes
#: declare them ``{name:path}``), so an encoded ``/`` in them routes nowhere else
_TRAILING_NAMES = frozenset({"branches", "tags", "hooks"})


@dataclass(frozen=True)
class Limits:
    """What one request may send (None: no limit) and how long it may pause sending."""

    max_body: int | None = MB
    max_upload: int | None = None
    body_timeout: float | None = 60.0


@dataclass(frozen=True)
class Options:
    """How ``limno serve`` hardens its API: limits, CORS, TLS, event heartbeats."""

    limits: Limits = Limits()
    cors_origins: tuple[str, ...] = ()
    tls_cert: str | None = None
    tls_key: str | None = None
    #: seconds between keep-alive comments of an idle event stream
    heartbeat: float = 15.0
    #: event streams one server process holds open at most (503 beyond)
    max_event_streams: int = 256


def check_name(value: str) -> str | None:
    """Why ``value`` can be no pool, branch, tag, ref or object name (None: the lake
    decides). Only what could confuse routing or logs is refused here; the lake
    refuses the rest in its own words."""
    if _CONTROL.search(value):
        return f"{value[:80]!r}: control characters are not allowed in a name"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME:
        return f"{value[:80]!r}...: a name is at most {MAX_NAME} bytes"
    return None


class _Refused(Exception):
    """A refusal: its status, detail and the exception class the client raises."""

    def __init__(self, status: int, detail: str, error: str = "InvalidInputError") -> None:
        super().__init__(detail)
        self.status = status
        self.error = error


def _segment_refusal(segment: str, noun: str | None) -> _Refused | None:
    """Why one segment of an API path is refused; ``noun``: what it names when the
    segment before it makes it a name (:data:`_NAMED_BY`), else None."""
    if noun is not None:
        if why := check_name(segment):
            return _Refused(400, why)
        if "/" in segment:  # routing would split it: no pool, user or key has such a name
            return _Refused(404, f"{noun} {segment!r} not found", "NotFoundError")  # as the lake
        return None
    if segment in (".", "..") or "/" in segment or _CONTROL.search(segment):
        return _Refused(400, f"path segment {segment[:80]!r} is not allowed")
    return None


def check_target(scope: Scope) -> _Refused | None:
    """Why the path or query of an API request is refused (None: it is fine)."""
    path: str = scope.get("path", "")
    if not path.startswith("/v1/"):
        return None
    raw = scope.get("raw_path") or path.encode()
    segments = [unquote(s.decode("latin-1")) for s in raw.split(b"?")[0].split(b"/")[2:]]
    before: str | None = None
    for i, segment in enumerate(segments):
        if before in _TRAILING_NAMES:  # the rest of the path is the name
            why = check_name("/".join(segments[i:]))
            return None if why is None else _Refused(400, why)
        noun = None if before is None else _NAMED_BY.get(before)
        if refused := _segment_refusal(segment, noun):
            return refused
        before = None if noun is not None or not segment else segment
    query = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in NAMED and key not in _NOT_NAMES and (why := check_name(value)):
            return _Refused(400, f"{key}: {why}")
    return None


def _is_upload(scope: Scope) -> bool:
    """``load`` and ``add``, and a file pool's put (``PUT .../files/object``, and the web
    UI's ``POST /pools/.../files/upload``): bodies the routes stream to disk, under
    ``--max-upload-mb``."""
    path: str = scope.get("path", "")
    if path.startswith("/pools/") and path.endswith("/files/upload"):
        return scope.get("method") == "POST"
    if not path.startswith("/v1/pools/"):
        return False
    if path.endswith("/files/object"):
        return scope.get("method") == "PUT"
    return path.rsplit("/", 1)[-1] in ("load", "add")


def _is_lookup(scope: Scope) -> bool:
    """A pool's ``get`` (``POST .../get``): a JSON body of keys, which may be long."""
    path: str = scope.get("path", "")
    return scope.get("method") == "POST" and path.startswith("/v1/pools/") and path.endswith("/get")


#: most bytes of a refused body read (and dropped) before the refusal is sent
_DRAIN = 64 * MB


async def answer_problem(
    send: Send, status: int, detail: str, error: str = "InvalidInputError"
) -> None:
    """A problem+json answer (the shape of :mod:`limno.server.problems`; this runs
    outside FastAPI, before its exception handlers)."""
    import http

    body = json.dumps(
        {
            "type": "about:blank",
            "title": http.HTTPStatus(status).phrase,
            "status": status,
            "detail": detail,
            "error": error,  # the client raises this class with the detail
        }
    ).encode()
    headers = [
        (b"content-type", b"application/problem+json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _drain(receive: Receive, timeout: float | None) -> None:
    """Read and drop (a bounded amount of) the body of a refused request: a client
    still sending it sees the answer then, not a reset connection."""
    left = _DRAIN
    while left > 0:
        try:
            message = await asyncio.wait_for(receive(), timeout)
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        left -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


class Guard:
    """The middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if refused := check_target(scope):
            await answer_problem(send, refused.status, str(refused), refused.error)
            return
        cap, what = self._cap(scope)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"").decode("latin-1").strip()
        if cap is not None and length.isdigit() and int(length) > cap:
            await _drain(receive, self.limits.body_timeout)
            await answer_problem(send, 413, f"{what} of {length} bytes is over the limit of {cap}")
            return
        await _Exchange(self.app, self.limits.body_timeout, cap, what).run(scope, receive, send)

    def _cap(self, scope: Scope) -> tuple[int | None, str]:
        """The most bytes the request's body may have, and what to call it."""
        if _is_upload(scope):
            return self.limits.max_upload, "upload"
        body = self.limits.max_body
        if _is_lookup(scope):  # a key list: far over other JSON bodies
            return (None if body is None else max(body, KEYS_BODY)), "key list"
        return body, "request body"


class _Exchange:
    """One request: its body read under the limits; its answer replaced by the refusal
    when a limit cut the body short (the route only saw the body end early)."""

    def __init__(self, app: ASGIApp, timeout: float | None, cap: int | None, what: str) -> None:
        self.app = app
        self.timeout = timeout
        self.cap = cap
        self.what = what
        self.received = 0
        self.body_done = False
        self.refused: _Refused | None = None
        self.started = False

    async def receive(self, receive: Receive) -> Message:
        if self.body_done or self.refused is not None:
            return await receive() if self.refused is None else {"type": "http.disconnect"}
        try:
            message = await asyncio.wait_for(receive(), self.timeout)
        except TimeoutError:
            detail = (
                f"the client sent no {self.what} bytes for {self.timeout:g} s: nothing was done"
            )
            self.refused = _Refused(408, detail)
            return {"type": "http.disconnect"}
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.cap is not None and self.received > self.cap:
                detail = f"{self.what} is over the limit of {self.cap} bytes: nothing was done"
                self.refused = _Refused(413, detail)
                return {"type": "http.disconnect"}
            self.body_done = not message.get("more_body", False)
        return message

    async def send(self, send: Send, message: Message) -> None:
        if self.refused is not None and not self.started:
            return  # the route's answer to a body cut short: the refusal replaces it
        if message["type"] == "http.response.start":
            self.started = True
        await send(message)

    async def run(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def guarded_receive() -> Message:
            return await self.receive(receive)

        async def guarded_send(message: Message) -> None:
            await self.send(send, message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except Exception:
            if self.refused is None or self.started:
                raise
        if self.refused is not None and not self.started:
            self.started = True
            if self.refused.status == 413:
                await _drain(receive, self.timeout)
            await answer_problem(send, self.refused.status, str(self.refused))


class Body(BaseModel):
    """A JSON request body: unknown fields are refused, names are checked as in a
    query (:func:`check_name`)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _names(cls, value: Any, info: ValidationInfo) -> Any:
        named = info.field_name in NAMED and isinstance(value, str) and value
        if named and (why := check_name(value)):
            raise ValueError(why)
        if info.field_name == "ids" and isinstance(value, list):  # object ids
            for item in value:
                if isinstance(item, str) and (why := check_name(item)):
                    raise ValueError(why)
        return value


def install(app: FastAPI, limits: Limits, cors_origins: tuple[str, ...] = ()) -> None:
    """Guard ``app``; allow browsers of ``cors_origins`` (none: CORS stays off)."""
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
            allow_credentials=True,
            expose_headers=["Content-Type"],
        )
    app.add_middleware(Guard, limits=limits)  # outermost: refused requests reach nothing
