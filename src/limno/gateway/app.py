"""The S3 gateway: an ASGI application serving a lake's file pools to S3 clients.

``limno serve --s3-port PORT`` runs it next to the HTTP API, in the same processes
(:mod:`limno.server.run` routes each connection by the socket it came in on). Every
request goes the same way:

1. the address: bucket and key from the path, or from the Host for virtual-host
   requests (``--s3-domain``);
2. authentication (SigV4 headers or presigned query, SigV2): the protocol layer
   checks the signature with the secret of the caller's limno access key, which the
   server's :class:`~limno.auth.verify.Authenticator` recovers; a request without
   credentials is AccessDenied;
3. the operation, from the whole request (method, bucket, key, sub-resources,
   headers): one the gateway does not implement is NotImplemented (501), never
   another operation;
4. the handler (``handlers_*.py``), in a worker thread: it checks the caller's role
   and grants on the pool (read: GET/HEAD/list; write: PUT/DELETE/copy/multipart) and
   works through :mod:`limno.api`.

Errors of every kind become S3 XML errors in one place (:func:`s3errors.from_limno`).
Bodies stream both ways in bounded memory: a request body is pulled by the handler
batch by batch (:class:`~limno.gateway.handlers_common.BodySource`), a GET's bytes are
sent as the lake reads them, and a client that goes away stops the read.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
import anyio.to_thread

from limno.errors import LimnoError, UnauthenticatedError
from limno.gateway import handlers_buckets, handlers_list, handlers_multipart, handlers_objects
from limno.gateway.authenticate import authenticate
from limno.gateway.handlers_common import BodySource, Call, GatewayOptions, Reply
from limno.gateway.headers import HeaderMap
from limno.gateway.operations import Op, Operation, identify, parse_query, resolve_address
from limno.gateway.s3errors import S3Error, from_limno

if TYPE_CHECKING:
    from limno.api.local import LocalLake
    from limno.auth.model import User
    from limno.auth.verify import Authenticator
    from limno.gateway.sigv4 import AuthResult

__all__ = ["Gateway", "GatewayOptions", "create_gateway"]

log = logging.getLogger("limno.gateway")

Handler = Callable[[Call], Reply]
HANDLERS: dict[Op, Handler] = {
    **handlers_buckets.HANDLERS,
    **handlers_list.HANDLERS,
    **handlers_objects.HANDLERS,
    **handlers_multipart.HANDLERS,
}

#: worker threads the gateway's handlers and transfers use at most (per process);
#: apart from the API's, so that slow S3 uploads never hold up API requests
THREADS = 64

ASGIMessage = Mapping[str, Any]
Receive = Callable[[], Any]
Send = Callable[[ASGIMessage], Any]


def create_gateway(
    lake: LocalLake, authenticator: Authenticator | None, options: GatewayOptions | None = None
) -> Gateway:
    """The gateway of ``lake``; ``authenticator`` None: no credentials asked, every
    request allowed (``--no-auth``)."""
    return Gateway(lake, authenticator, options or GatewayOptions())


class Gateway:
    """The ASGI callable (see the module docstring)."""

    def __init__(
        self, lake: LocalLake, authenticator: Authenticator | None, options: GatewayOptions
    ) -> None:
        self.lake = lake
        self.authenticator = authenticator
        self.options = options
        self._threads: anyio.CapacityLimiter | None = None

    def _limiter(self) -> anyio.CapacityLimiter:
        if self._threads is None:  # made in the event loop, on first use
            self._threads = anyio.CapacityLimiter(THREADS)
        return self._threads

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request_id = secrets.token_hex(8).upper()
        body = BodySource(receive, self.options.body_timeout)
        reply = await anyio.to_thread.run_sync(
            self._handle, scope, body, request_id, limiter=self._limiter()
        )
        await self._send(scope, reply, body, send, receive, request_id)

    # -- one request, in a worker thread ----------------------------------------------------
    def _handle(self, scope: dict[str, Any], body: BodySource, request_id: str) -> Reply:
        method = str(scope["method"]).upper()
        headers = HeaderMap.of(scope["headers"])
        raw_path = _raw_path(scope)
        raw_query = bytes(scope.get("query_string") or b"").decode("latin-1")
        bucket: str | None = None
        key: str | None = None
        query: Mapping[str, str] = {}
        operation: Operation | None = None
        try:
            bucket, key, virtual = resolve_address(
                headers.get("host"), raw_path, self.options.domain
            )
            query = parse_query(raw_query)
            auth, user = self._authenticate(
                method, raw_path, raw_query, headers, bucket if virtual else None
            )
            operation = identify(method, bucket, key, query, headers)
            if not operation.implemented:
                raise S3Error(
                    "NotImplemented",
                    f"{operation.name} is not implemented by the limno S3 gateway",
                    resource=_resource(bucket, key),
                )
            call = Call(
                lake=self.lake,
                options=self.options,
                authenticator=self.authenticator,
                operation=operation,
                method=method,
                headers=headers,
                user=user,
                auth=auth,
                body=body,
                request_id=request_id,
                base_url=_base_url(scope, headers, bucket, virtual),
            )
            reply = HANDLERS[operation.op](call)
        except Exception as e:  # every failure is an S3 error reply
            return self._error(e, method, bucket, key, query, operation, request_id)
        reply.headers += [("x-amz-request-id", request_id), ("x-amz-id-2", request_id)]
        return reply

    def _authenticate(
        self,
        method: str,
        raw_path: str,
        raw_query: str,
        headers: HeaderMap,
        virtual_bucket: str | None,
    ) -> tuple[AuthResult | None, User | None]:
        """The signature's facts and the caller (both None without auth)."""
        if self.authenticator is None:
            return None, None
        checker = self.authenticator
        owners: dict[str, User] = {}

        def secret_for(access_key_id: str) -> str | None:
            try:
                user, secret = checker.secret(access_key_id)
            except UnauthenticatedError:
                return None
            owners[access_key_id] = user
            return secret

        result = authenticate(
            method,
            raw_path,
            raw_query,
            headers,
            secret_for,
            dt.datetime.now(dt.UTC),
            bucket_from_host=virtual_bucket,
        )
        if result is None:
            raise S3Error(
                "AccessDenied",
                "anonymous requests are not allowed: sign with a limno access key"
                " ('limno auth create-key')",
            )
        return result, owners[result.access_key_id]

    def _error(
        self,
        error: BaseException,
        method: str,
        bucket: str | None,
        key: str | None,
        query: Mapping[str, str],
        operation: Operation | None,
        request_id: str,
    ) -> Reply:
        if not isinstance(error, S3Error | LimnoError):
            log.error("S3 %s %s failed", method, _resource(bucket, key), exc_info=error)
        s3 = from_limno(
            error,
            bucket=bucket,
            key=key,
            upload_id=query.get("uploadId"),
            op=operation.name if operation is not None else None,
        )
        headers = [("x-amz-request-id", request_id), ("x-amz-id-2", request_id)]
        headers += list(s3.headers.items())
        if not s3.has_body or method == "HEAD":
            return Reply(s3.status, headers, b"")
        headers.append(("content-type", "application/xml"))
        return Reply(s3.status, headers, s3.to_xml(request_id, request_id))

    # -- sending ------------------------------------------------------------------------
    async def _send(
        self,
        scope: dict[str, Any],
        reply: Reply,
        body: BodySource,
        send: Send,
        receive: Receive,
        request_id: str,
    ) -> None:
        head = scope["method"] == "HEAD"
        raw = [(k.lower().encode("latin-1"), _header_value(v)) for k, v in reply.headers]
        if not body.done and _has_body(scope):
            # an answer before the body was read (an error): the client may still be
            # sending it, or waiting for "100 Continue" (then it never will), so the
            # connection cannot carry another request
            raw.append((b"connection", b"close"))
        names = {k for k, _ in raw}
        no_body = reply.status in (204, 304) or reply.status < 200
        if b"content-length" not in names and not no_body:
            length = len(reply.body) if isinstance(reply.body, bytes) else reply.length
            if length is not None:
                raw.append((b"content-length", str(length).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": raw})
        if isinstance(reply.body, bytes) or head or no_body:
            chunk = reply.body if isinstance(reply.body, bytes) and not head else b""
            await send({"type": "http.response.body", "body": chunk})
            if not isinstance(reply.body, bytes):
                await anyio.to_thread.run_sync(_close, reply.body, limiter=self._limiter())
            return
        await self._stream(reply.body, send, receive, request_id)

    async def _stream(
        self, chunks: Iterator[bytes], send: Send, receive: Receive, request_id: str
    ) -> None:
        """Send ``chunks`` as they are read; stop reading when the client goes away."""
        limiter = self._limiter()

        async def watch(scope: anyio.CancelScope) -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            scope.cancel()

        failed: BaseException | None = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(watch, group.cancel_scope)
                try:
                    while chunk := await anyio.to_thread.run_sync(_next, chunks, limiter=limiter):
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b""})
                except Exception as e:  # after the head: all a server can do is cut it short
                    log.error("S3 response %s failed midway", request_id, exc_info=e)
                    failed = e
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_close, chunks, limiter=limiter)
        if failed is not None:
            raise RuntimeError(f"S3 response {request_id} failed midway") from failed


def _has_body(scope: Mapping[str, Any]) -> bool:
    """Whether the request announces a body (a length above 0, or chunked)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
        if name == b"transfer-encoding":
            return True
    return False


def _next(chunks: Iterator[bytes]) -> bytes:
    """The next non-empty chunk (b"": the end)."""
    for chunk in chunks:
        if chunk:
            return chunk
    return b""


def _close(chunks: Iterator[bytes] | bytes) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to set up or tear down (when the gateway is an app of its own)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _raw_path(scope: Mapping[str, Any]) -> str:
    """The path exactly as sent (signatures are over it), without the query."""
    raw = scope.get("raw_path")
    if raw:
        return bytes(raw).decode("latin-1").split("?", 1)[0]
    return quote(str(scope.get("path") or "/"), safe="/~")


def _header_value(value: str) -> bytes:
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")  # a value made elsewhere (the CLI): its bytes as they are


def _resource(bucket: str | None, key: str | None) -> str:
    if not bucket:
        return "/"
    return f"/{bucket}/{key}" if key else f"/{bucket}"


def _base_url(
    scope: Mapping[str, Any], headers: HeaderMap, bucket: str | None, virtual: bool
) -> str:
    """The URL of the bucket as the client addressed it (for Location elements)."""
    scheme = str(scope.get("scheme") or "http")
    host = headers.get("host")
    if not host:
        server = scope.get("server") or ("localhost", None)
        host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
    if virtual or not bucket:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}/{quote(bucket)}"
