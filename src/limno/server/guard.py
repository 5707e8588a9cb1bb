"""What the server refuses before any route runs: oversized or stalled bodies, names
that try to climb out of where they belong, and JSON bodies with fields it does not know.

:class:`Guard` is plain ASGI middleware in front of the whole API:

- a body larger than its cap is 413: JSON bodies are small (``--max-body-mb``, 1 MB by
  default), uploads of ``load`` and ``add`` are spooled to disk and unlimited unless
  ``--max-upload-mb`` says otherwise. A declared ``Content-Length`` over the cap is
  refused before any route runs (up to 64 MB of it read and dropped first, so that
  the client, still sending, sees the answer); a chunked body is counted as it arrives;
- a client that stops sending mid-body for ``--body-timeout`` seconds gets 408. The
  route sees the body end early (a load then loads nothing) and its answer is replaced;
- the path of an API request, and the query parameters that name pools and refs, must
  be plain names: no ``.``/``..`` segments, no encoded ``/`` or ``\\``, no control
  characters (400, before the lake is touched).

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

__all__ = ["MB", "Body", "Guard", "Limits", "Options", "check_name", "install"]

MB = 1 << 20
#: pool, branch, tag and commit names: letters, digits, ``_ . - ~`` (a ref's ``main~2``),
#: and ``@`` (a meta table's ``pool@ref``)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.~@\-]{0,255}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: query parameters and body fields that name a pool or a ref
NAMED = frozenset(
    {"pool", "ref", "branch", "from_ref", "old", "new", "source", "into", "commit", "name"}
)
#: query parameters named like those that are not names (an upload's file name)
_NOT_NAMES = frozenset({"name"})
#: path segments after these name a pool, a branch or a tag
_NAMING = frozenset({"pools", "branches", "tags"})


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


def check_name(value: str) -> str | None:
    """Why ``value`` is not a plain pool or ref name (None: it is one)."""
    if _NAME.match(value) and ".." not in value:
        return None
    return f"{value[:80]!r} is not a plain name (letters, digits, '_', '.', '-', '~'; no '..')"


def _bad_segment(segment: str, naming: bool) -> str | None:
    if naming:
        return check_name(segment)
    if segment in (".", "..") or "/" in segment or "\\" in segment or _CONTROL.search(segment):
        return f"path segment {segment[:80]!r} is not allowed"
    return None


def check_target(scope: Scope) -> str | None:
    """Why the path or query of an API request is refused (None: it is fine)."""
    path: str = scope.get("path", "")
    if not path.startswith("/v1/"):
        return None
    raw = scope.get("raw_path") or path.encode()
    segments = [unquote(s.decode("latin-1")) for s in raw.split(b"?")[0].split(b"/")[2:]]
    for i, segment in enumerate(segments):
        naming = i > 0 and segments[i - 1] in _NAMING and segment != ""
        if why := _bad_segment(segment, naming):
            return why
    query = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query, keep_blank_values=True):
        if _CONTROL.search(value) and key != "sql":
            return f"{key}: control characters are not allowed"
        if key in NAMED and key not in _NOT_NAMES and value and (why := check_name(value)):
            return f"{key}: {why}"
    return None


def _is_upload(scope: Scope) -> bool:
    path: str = scope.get("path", "")
    return path.startswith("/v1/pools/") and path.rsplit("/", 1)[-1] in ("load", "add")


class _Refused(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


#: most bytes of a refused body read (and dropped) before the refusal is sent
_DRAIN = 64 * MB


async def _answer(send: Send, status: int, detail: str) -> None:
    """A problem+json answer (the shape of :mod:`limno.server.problems`; this runs
    outside FastAPI, before its exception handlers)."""
    import http

    body = json.dumps(
        {
            "type": "about:blank",
            "title": http.HTTPStatus(status).phrase,
            "status": status,
            "detail": detail,
            "error": "InvalidInputError",  # the client raises it with the detail
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
        if why := check_target(scope):
            await _answer(send, 400, why)
            return
        cap = self.limits.max_upload if _is_upload(scope) else self.limits.max_body
        what = "upload" if _is_upload(scope) else "request body"
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"").decode("latin-1").strip()
        if cap is not None and length.isdigit() and int(length) > cap:
            await _drain(receive, self.limits.body_timeout)
            await _answer(send, 413, f"{what} of {length} bytes is over the limit of {cap}")
            return
        await _Exchange(self.app, self.limits.body_timeout, cap, what).run(scope, receive, send)


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
            await _answer(send, self.refused.status, str(self.refused))


class Body(BaseModel):
    """A JSON request body: unknown fields are refused, names are plain names."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _plain_names(cls, value: Any, info: ValidationInfo) -> Any:
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
