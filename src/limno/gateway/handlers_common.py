"""What every S3 handler shares: the call (one request), key addressing, headers, replies.

A handler is a plain function ``handler(call) -> Reply`` that runs in a worker thread
(:mod:`limno.gateway.app` sends it there), so it may block on the lake: the event loop
only moves bytes. A request body is pulled from the loop as the handler consumes it
(:meth:`Call.body`), decoded (aws-chunked, checksums) by the protocol layer on the way;
a reply body may be an iterator of chunks, sent as they come. Memory stays bounded by
one batch of a body either way.

Addressing. A bucket is a file pool. A key is ``<ref>/<path>`` (a branch to write, any
ref to read), or, when the gateway serves one branch of every pool
(``--s3-root-branch``), the path itself on that branch: :func:`split_key` and
:func:`join_key` are the one place that knows.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread

from limno.auth.roles import allowed, check
from limno.errors import InvalidInputError, LimnoError, NotFoundError
from limno.gateway.chunked import decode_iter, request_body_decoder, stored_content_encoding
from limno.gateway.s3errors import S3Error

if TYPE_CHECKING:
    from limno.api.local import LocalLake
    from limno.api.local_files import LocalFilePool
    from limno.auth.model import User
    from limno.auth.verify import Authenticator
    from limno.gateway.headers import HeaderMap
    from limno.gateway.operations import Operation
    from limno.gateway.sigv4 import AuthResult
    from limno.pools.files.entries import FileEntry

__all__ = [
    "MAX_OBJECT",
    "Address",
    "BodySource",
    "Call",
    "GatewayOptions",
    "Reply",
    "branch_writes",
    "entry_headers",
    "join_key",
    "parse_mtime",
    "split_key",
    "stored_metadata",
    "xml_reply",
]

log = logging.getLogger("limno.gateway")

#: S3's largest single PUT (and part): 5 GiB
MAX_OBJECT = 5 * 2**30
#: the largest XML request body read (DeleteObjects of 1,000 long keys, 10,000 parts)
MAX_XML_BODY = 8 * 2**20
#: how much of a request body the event loop gathers before handing it to the handler
BODY_BATCH = 1 << 20

#: request headers kept with an object and returned on GET/HEAD, as S3 does; stored in
#: the entry's metadata under a name no ``x-amz-meta-`` header can produce (":" is not
#: a character of an HTTP header name), so they never clash with user metadata
STANDARD_HEADERS = (
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "expires",
)
RESERVED = ":"
_META = "x-amz-meta-"


@dataclass(frozen=True)
class GatewayOptions:
    """How ``limno serve --s3-port`` serves the lake over S3.

    ``domain``: virtual-host addressing for ``<bucket>.<domain>`` (path-style always
    works); ``root_branch``: keys are paths on that branch of every pool, and
    CreateBucket / DeleteBucket create and drop file pools; ``autocommit``: each
    completed write is committed at once (one commit per write); ``region``: what
    GetBucketLocation and HeadBucket say."""

    host: str = "127.0.0.1"
    port: int = 9868
    domain: str | None = None
    root_branch: str | None = None
    autocommit: bool = False
    region: str = "us-east-1"
    #: a client that sends no body bytes this long gets RequestTimeout (None: no limit)
    body_timeout: float | None = 60.0


@dataclass
class Reply:
    """An answer: status, headers, and a body of bytes or an iterator of chunks (then
    ``length`` is its Content-Length when known)."""

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | Iterator[bytes] = b""
    length: int | None = None


def xml_reply(body: bytes, status: int = 200, headers: Sequence[tuple[str, str]] = ()) -> Reply:
    return Reply(status, [("content-type", "application/xml"), *headers], body)


@dataclass(frozen=True)
class Address:
    """Where a key points: a ref (a branch for writes) and a path in it."""

    ref: str
    path: str


def split_key(key: str | None, root_branch: str | None) -> Address | None:
    """The ref and path of ``key`` (None: the key names no path, as ``main`` or ``main/``)."""
    if not key:
        return None
    if root_branch is not None:
        return Address(root_branch, key)
    ref, sep, path = key.partition("/")
    if not sep or not ref or not path:
        return None
    return Address(ref, path)


def join_key(ref: str, path: str, root_branch: str | None) -> str:
    """The S3 key of ``path`` on ``ref``."""
    return path if root_branch is not None else f"{ref}/{path}"


def parse_mtime(text: str) -> dt.datetime:
    """An entry's (or a pool's) ISO time as an aware datetime (the epoch if unreadable)."""
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def stored_metadata(headers: HeaderMap) -> dict[str, str]:
    """The metadata a write keeps: ``x-amz-meta-*`` (names lower-case, without the
    prefix) and the standard headers S3 returns with the object (reserved names)."""
    found: dict[str, str] = {}
    for name, text in headers.items():
        if name.startswith(_META) and len(name) > len(_META):
            found[name[len(_META) :]] = text
    for name in STANDARD_HEADERS:
        value: str | None
        if name == "content-encoding":
            value = stored_content_encoding(headers)  # without aws-chunked (the transfer's)
        else:
            value = headers.get(name)
        if value is not None:
            found[RESERVED + name] = value
    return found


def entry_headers(entry: FileEntry) -> list[tuple[str, str]]:
    """The object headers of GET and HEAD: type, standard headers kept at the write, user
    metadata, ETag and Last-Modified."""
    from limno.gateway.s3xml import http_date, quote_etag

    out = [
        ("content-type", entry.content_type),
        ("etag", quote_etag(entry.etag)),
        ("last-modified", http_date(parse_mtime(entry.mtime))),
        ("accept-ranges", "bytes"),
    ]
    for name, value in sorted(entry.metadata.items()):
        if name.startswith(RESERVED):
            if name[1:] in STANDARD_HEADERS:
                out.append((name[1:], value))
        else:
            out.append((_META + name, value))
    return out


def branch_writes(handler: Callable[[Call], Reply]) -> Callable[[Call], Reply]:
    """A write handler whose "no such branch" on a tag or commit is AccessDenied
    (:meth:`Call.read_only_ref`): only branches take writes."""

    @functools.wraps(handler)
    def wrapped(call: Call) -> Reply:
        try:
            return handler(call)
        except NotFoundError:
            refused = call.read_only_ref()
            if refused is None:
                raise
            raise refused from None

    return wrapped


class BodySource:
    """A request body, pulled by a worker thread from the event loop in batches.

    :meth:`chunks` runs in the handler's thread: each batch is gathered by the loop
    (``receive()`` messages up to :data:`BODY_BATCH` bytes). The next batch is asked
    for before the current one is handed over, so the loop reads the socket while the
    handler hashes and writes (one batch ahead: the server still reads no faster than
    the handler writes, and memory stays bounded by two batches)."""

    def __init__(self, receive: Callable[[], Any], timeout: float | None = None) -> None:
        self._receive = receive
        self._timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(RuntimeError):  # made in the event loop (the gateway's)
            self._loop = asyncio.get_running_loop()
        self.done = False
        self.disconnected = False

    async def _pull(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        while size < BODY_BATCH and not self.done:
            try:
                with anyio.fail_after(self._timeout):
                    message = await self._receive()
            except TimeoutError:
                self.done = True
                raise S3Error(
                    "RequestTimeout",
                    "Your socket connection to the server was not read from or written to"
                    " within the timeout period.",
                ) from None
            if message["type"] == "http.disconnect":
                self.done = self.disconnected = True
                break
            body = message.get("body", b"")
            if body:
                parts.append(body)
                size += len(body)
            if not message.get("more_body", False):
                self.done = True
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _ask(self) -> concurrent.futures.Future[bytes] | None:
        """The next batch, being gathered by the loop (None: the body has ended)."""
        if self.done:
            return None
        if self._loop is None:
            self._loop = anyio.from_thread.run(_running_loop)
        return asyncio.run_coroutine_threadsafe(self._pull(), self._loop)

    def chunks(self) -> Iterator[bytes]:
        pending = self._ask()
        try:
            while pending is not None:
                data = pending.result()
                pending = self._ask()
                if self.disconnected:
                    raise S3Error("IncompleteBody", "the client went away before the body ended")
                if data:
                    yield data
        finally:
            if pending is not None:  # the handler stopped early: no reader left behind
                pending.cancel()


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


class Call:
    """One S3 request as a handler sees it: the operation, the caller, the body."""

    def __init__(
        self,
        *,
        lake: LocalLake,
        options: GatewayOptions,
        authenticator: Authenticator | None,
        operation: Operation,
        method: str,
        headers: HeaderMap,
        user: User | None,
        auth: AuthResult | None,
        body: BodySource,
        request_id: str,
        base_url: str,
    ) -> None:
        self.lake = lake
        self.options = options
        self.authenticator = authenticator
        self.op = operation
        self.method = method
        self.headers = headers
        self.user = user
        self.auth = auth
        self._body = body
        self.request_id = request_id
        self.base_url = base_url
        #: the checksums a body carried and were verified (echoed in the reply)
        self.checksums: dict[str, str] = {}

    # -- addressing -----------------------------------------------------------------------
    @property
    def root_branch(self) -> str | None:
        return self.options.root_branch

    @property
    def query(self) -> Mapping[str, str]:
        return self.op.query

    @property
    def bucket(self) -> str:
        if not self.op.bucket:
            raise S3Error("InvalidRequest", "this operation needs a bucket")
        return self.op.bucket

    def address(self, key: str | None = None) -> Address:
        """The ref and path of the request's key (or ``key``); NoSuchKey when it names
        none (a ref alone)."""
        key = self.op.key if key is None else key
        found = split_key(key, self.root_branch)
        if found is None:
            raise S3Error(
                "NoSuchKey",
                f"key {key!r} names no file: keys are <ref>/<path> (a branch, tag or commit,"
                " then the path)",
                resource=f"/{self.op.bucket}/{key or ''}",
            )
        return found

    def write_address(self) -> Address:
        """:meth:`address` for a write (InvalidArgument rather than NoSuchKey)."""
        found = split_key(self.op.key, self.root_branch)
        if found is None:
            raise S3Error(
                "InvalidArgument",
                f"key {self.op.key!r} names no file: write to <branch>/<path>",
                ArgumentName="key",
            )
        return found

    def read_only_ref(self, ref: str | None = None) -> S3Error | None:
        """AccessDenied when ``ref`` (default: the request key's) is a tag or a commit:
        a write there failed as "no such branch", but the ref exists and is read-only.
        None when it is a branch or names nothing (the original error stands)."""
        if ref is None:
            found = split_key(self.op.key, self.root_branch)
            if found is None:
                return None
            ref = found.ref
        pool = self.file_pool()
        if ref in pool.branches():
            return None
        if ref in pool.tags():
            what = "a tag"
        else:
            try:
                commit = pool.resolve(ref)
            except LimnoError:
                return None  # no such ref at all
            what = "a commit" if commit.startswith(ref) else f"a commit ({commit})"
        return S3Error(
            "AccessDenied",
            f"{ref!r} is {what}: refs other than branches are read-only; write to <branch>/<path>",
            resource=f"/{self.bucket}/{self.op.key or ''}",
        )

    # -- pools and permissions -----------------------------------------------------------
    def file_pool(self, bucket: str | None = None, action: str = "read") -> LocalFilePool:
        """The file pool of ``bucket`` (the request's), once the caller may do ``action``
        on it: NoSuchBucket when there is none (or it holds records), AccessDenied when
        the caller may not."""
        name = bucket if bucket is not None else self.bucket
        try:
            config = self.lake.registry.find(name)
        except NotFoundError:
            raise S3Error("NoSuchBucket", resource=f"/{name}", BucketName=name) from None
        if config.name != name:  # an id: buckets are named by pool names only
            raise S3Error("NoSuchBucket", resource=f"/{name}", BucketName=name)
        if config.kind != "files":
            raise S3Error(
                "NoSuchBucket",
                f"pool {name!r} holds records: the S3 gateway serves file pools only"
                " ('limno create NAME --kind files')",
                resource=f"/{name}",
                BucketName=name,
            )
        self.check(action, config.id, f"bucket {name}")
        return self.lake.file_pool(config.id)

    def check(self, action: str, pool_id: str | None, what: str) -> None:
        """AccessDenied unless the caller may do ``action`` (nothing to check without auth)."""
        if self.user is not None:
            check(self.user, action, pool_id, what=what)

    def may(self, action: str, pool_id: str | None) -> bool:
        return self.user is None or allowed(self.user, action, pool_id)

    @property
    def author(self) -> str | None:
        return None if self.user is None else self.user.name

    # -- bodies ---------------------------------------------------------------------------
    def declared_length(self) -> int | None:
        """The length of the decoded body as the request announces it (None: unknown)."""
        for name in ("x-amz-decoded-content-length", "content-length"):
            value = self.headers.get(name)
            if value is not None and name == "content-length" and self._streaming():
                continue  # the encoded length of an aws-chunked body
            if value is not None:
                try:
                    return int(value)
                except ValueError:
                    raise S3Error("InvalidArgument", f"bad {name}: {value!r}") from None
        return None

    def _streaming(self) -> bool:
        sha = (self.headers.get("x-amz-content-sha256") or "").upper()
        encoding = (self.headers.get("content-encoding") or "").lower()
        return sha.startswith("STREAMING-") or "aws-chunked" in encoding

    def body(self, max_size: int = MAX_OBJECT) -> Iterator[bytes]:
        """The decoded request body, streamed; every check the request asks for
        (signatures of chunks, checksums, Content-MD5, lengths) is made before the last
        chunk is handed over, so a write that consumes it whole is checked."""
        declared = self.declared_length()
        if declared is not None and declared > max_size:
            raise S3Error(
                "EntityTooLarge",
                f"{declared} bytes: the most one request may carry is {max_size}",
                MaxSizeAllowed=str(max_size),
                ProposedSize=str(declared),
            )
        decoder = request_body_decoder(self.auth, self.headers)
        checksums = self.checksums

        def decoded() -> Iterator[bytes]:
            yield from decode_iter(decoder, self._body.chunks())
            checksums.update(decoder.checksum_headers())

        return decoded()

    def read_body(self, limit: int = MAX_XML_BODY) -> bytes:
        """The whole (small) request body; EntityTooLarge beyond ``limit``."""
        parts: list[bytes] = []
        size = 0
        for chunk in self.body(limit):
            size += len(chunk)
            if size > limit:
                raise S3Error("EntityTooLarge", f"the request body exceeds {limit} bytes")
            parts.append(chunk)
        return b"".join(parts)

    # -- commits --------------------------------------------------------------------------
    def autocommit(
        self,
        pool: LocalFilePool,
        branch: str,
        staged: Mapping[str, Mapping[str, Any]],
        what: str,
    ) -> None:
        """With ``--s3-autocommit``: commit what this write staged (one commit; nothing
        when another commit sealed it first, or when nothing changed).

        All or nothing: when the commit fails (a pre-commit hook vetoes it, the store
        fails), what this write staged is unstaged before the error is answered, so
        the branch looks as if the write never came. ``staged`` maps each path to the
        value this write staged (an entry's value, or the tombstone of a delete); a
        path staged again since by another write keeps that newer value. A conditional
        write (If-Match, If-None-Match) is committed only if no other write of its path
        was committed after its condition was judged, else it is unstaged and answered
        412 (:meth:`~limno.pools.files.pool.FilePool.commit`'s ``writes``)."""
        if not self.options.autocommit or not staged:
            return
        paths = list(staged)
        prefix = os.path.commonprefix(paths) or None
        try:
            pool.commit(branch, f"S3 {what}", author=self.author, prefix=prefix, writes=paths)
        except InvalidInputError as e:
            if not any(c.path in staged for c in pool.uncommitted(branch, prefix or "")):
                return  # committed meanwhile by another commit
            self._unstage(pool, branch, staged, e)
            raise  # staged changes that could not be committed: say why
        except Exception as e:
            self._unstage(pool, branch, staged, e)
            raise

    @staticmethod
    def _unstage(
        pool: LocalFilePool,
        branch: str,
        staged: Mapping[str, Mapping[str, Any]],
        error: BaseException,
    ) -> None:
        try:
            pool.take_back(branch, staged)
        except Exception as e:  # the commit's error is the answer; this one is logged
            log.error("could not unstage %s after a failed commit (%s)", list(staged), error)
            log.debug("unstage failure", exc_info=e)
