"""A file pool's files: put, read (byte ranges), stat, list, copy, remove, commit,
uncommitted changes, discard, diff and import, under ``/v1/pools/{pool}/files``.

Paths are query parameters (or JSON fields), never URL path segments: a path may be
anything S3 allows (``a/../b``, ``//x``, newlines), which a URL path would normalize
or the guard refuse. Bytes stream both ways: a put's body goes to the pool as it
arrives (:func:`put`: the blob writer spools it to a local file while hashing, so the
server holds a chunk at a time), and a read's answer is the object's chunks, one byte
range of it when the request has a ``Range`` header (206, or 416 when the range lies
past the end). The git operations of a file pool are the common routes of
:mod:`limno.server.routes.refs`.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import itertools
import re
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import anyio.from_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from limno.api import wire, wire_files
from limno.errors import InvalidInputError
from limno.pools.files.entries import FileEntry
from limno.server.authorization import author_of
from limno.server.deps import file_pool_of
from limno.server.guard import Body
from limno.server.problems import problem
from limno.server.uploads import query_json

if TYPE_CHECKING:
    from limno.api.local_files import LocalFilePool

__all__ = ["MAX_PAGE", "byte_range", "router"]

router = APIRouter(prefix="/v1/pools/{pool}/files", tags=["files"])

#: the most entries one listing page holds (a client pages on with ``after``)
MAX_PAGE = 1000

_PUT = {
    "requestBody": {
        "required": True,
        "description": "The file's bytes (streamed: any size, in bounded memory).",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}
_BYTES = {
    "responses": {
        "200": {"description": "The file's bytes.", "content": {"application/octet-stream": {}}},
        "206": {"description": "The byte range asked for (Range: bytes=A-B)."},
        "416": {"description": "The range lies past the file's end."},
    }
}


class Copy(Body):
    src_ref: str = "main"
    src_path: str
    branch: str = "main"
    dst_path: str
    metadata: dict[str, str] | None = None
    content_type: str | None = None


class Remove(Body):
    branch: str = "main"
    paths: list[str]


class RemovePrefix(Body):
    branch: str = "main"
    prefix: str


class CommitFiles(Body):
    branch: str = "main"
    message: str = ""
    author: str | None = None
    meta: dict[str, Any] | None = None
    prefix: str | None = None


class Discard(Body):
    branch: str = "main"
    prefix: str = ""


class Import(Body):
    #: ``s3://bucket/prefix/`` or a directory of the server's machine
    source: str
    branch: str = "main"
    prefix: str = ""
    message: str = ""
    author: str | None = None


# -- writing ------------------------------------------------------------------------------


async def _next_chunk(chunks: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await chunks.__anext__()
    except StopAsyncIteration:
        return None


@router.put("/object", operation_id="files_put", summary="Write a file", openapi_extra=_PUT)
async def put(
    request: Request,
    pool: str,
    path: str,
    branch: str = "main",
    content_type: str | None = None,
    metadata: str | None = None,
    if_match: str | None = None,
    if_none_match: bool = False,
    max_size: int | None = None,
) -> dict[str, Any]:
    """Stage ``path`` on ``branch`` with the body's bytes (``metadata``: a JSON object of
    strings; ``if_match``: the ETag the path must have; ``if_none_match``: the path must
    not exist). The body is handed to the pool chunk by chunk as it arrives."""
    meta = wire_files.metadata_from_json(query_json(metadata, "metadata"))
    stream = request.stream()

    def body() -> Iterator[bytes]:  # in the worker thread: each chunk from the event loop
        while (chunk := anyio.from_thread.run(_next_chunk, stream)) is not None:
            if chunk:
                yield chunk

    def run() -> dict[str, Any]:
        entry = file_pool_of(request, pool).put(
            branch,
            path,
            body(),
            content_type=content_type,
            metadata=meta,
            if_match=if_match,
            if_none_match=if_none_match,
            max_size=max_size,
        )
        return wire_files.entry_to_json(entry)

    try:
        return await run_in_threadpool(run)
    except ClientDisconnect:
        raise InvalidInputError(f"upload of {path!r} ended early: nothing was written") from None


@router.post("/copy", operation_id="files_copy", summary="Copy a file (no bytes copied)")
def copy(request: Request, pool: str, body: Copy) -> dict[str, Any]:
    entry = file_pool_of(request, pool).copy(
        body.src_ref,
        body.src_path,
        body.branch,
        body.dst_path,
        metadata=body.metadata,
        content_type=body.content_type,
    )
    return wire_files.entry_to_json(entry)


@router.post("/remove", operation_id="files_remove", summary="Remove files")
def remove(request: Request, pool: str, body: Remove) -> list[str]:
    return file_pool_of(request, pool).remove(body.branch, body.paths)


@router.post("/remove-prefix", operation_id="files_remove_prefix", summary="Remove a prefix")
def remove_prefix(request: Request, pool: str, body: RemovePrefix) -> list[str]:
    return file_pool_of(request, pool).remove_prefix(body.branch, body.prefix)


@router.post("/commit", operation_id="files_commit", summary="Commit staged changes")
def commit(request: Request, pool: str, body: CommitFiles) -> dict[str, Any]:
    made = file_pool_of(request, pool).commit(
        body.branch, body.message, author_of(request, body.author), body.meta, body.prefix
    )
    return wire.commit_to_json(made)


@router.get("/uncommitted", operation_id="files_uncommitted", summary="Staged changes")
def uncommitted(
    request: Request, pool: str, branch: str = "main", prefix: str = ""
) -> list[dict[str, Any]]:
    changes = file_pool_of(request, pool).uncommitted(branch, prefix)
    return [wire_files.change_to_json(c) for c in changes]


@router.post("/discard", operation_id="files_discard", summary="Drop staged changes")
def discard(request: Request, pool: str, body: Discard) -> dict[str, int]:
    return {"discarded": file_pool_of(request, pool).discard(body.branch, body.prefix)}


@router.post("/import", operation_id="files_import", summary="Import files by reference")
def import_files(request: Request, pool: str, body: Import) -> dict[str, Any]:
    """Register the objects under ``source`` (read by the server: its directory, or S3
    with its credentials) without copying them: an admin's (limno.server.authorization)."""
    made = file_pool_of(request, pool).import_from(
        body.source, body.branch, body.prefix, body.message, author_of(request, body.author)
    )
    return wire.commit_to_json(made)


# -- reading ------------------------------------------------------------------------------


@router.get("/stat", operation_id="files_stat", summary="A file's entry")
def stat(
    request: Request, pool: str, path: str, ref: str | None = None, as_of: str | None = None
) -> dict[str, Any]:
    entry = file_pool_of(request, pool).stat(path, ref, wire.time_from_json(as_of))
    return wire_files.entry_to_json(entry)


@router.get("/object", operation_id="files_read", summary="A file's bytes", openapi_extra=_BYTES)
def read(
    request: Request,
    pool: str,
    path: str,
    ref: str | None = None,
    as_of: str | None = None,
    start: int = 0,
    end: int | None = None,
) -> Response:
    """The bytes of ``path`` at ``ref``: ``start`` to ``end`` (exclusive), clipped at
    the file's size as a lake opened directly reads them (limno's client asks so); or
    the part a ``Range: bytes=A-B`` header asks, answered as HTTP does (206, 416).

    The entry is read once and its bytes are those of that entry, so a write to the path
    meanwhile never mixes two versions into one answer."""
    header = request.headers.get("range")
    if header and (start or end is not None):
        raise InvalidInputError("ask a range once: a Range header or start/end, not both")
    found = file_pool_of(request, pool)
    entry = found.stat(path, ref, wire.time_from_json(as_of))
    headers = _headers(entry)
    if not header:
        if start < 0 or (end is not None and end < start):
            raise InvalidInputError(f"invalid range [{start}, {end}) of {path!r}")
        stop = entry.size if end is None else min(end, entry.size)
        return _bytes(found, entry, min(start, stop), stop, None, headers)
    wanted = byte_range(header, entry.size)
    if wanted == "unsatisfiable":
        refused = problem(
            416,
            f"range {request.headers.get('range')} is past the end of {path!r}"
            f" ({entry.size} bytes)",
            "InvalidInputError",
        )
        refused.headers["Content-Range"] = f"bytes */{entry.size}"
        return refused
    if wanted is None:
        return _bytes(found, entry, 0, entry.size, None, headers)
    assert isinstance(wanted, tuple)
    return _bytes(found, entry, wanted[0], wanted[1], wanted, headers)


def _bytes(
    found: LocalFilePool,
    entry: FileEntry,
    start: int,
    stop: int,
    ranged: tuple[int, int] | None,
    headers: dict[str, str],
) -> StreamingResponse:
    """The answer of ``[start, stop)`` of ``entry`` (206 with its Content-Range when it
    answers a Range header)."""
    chunks = iter(found.read_entry(entry, start, stop))
    first = next(chunks, b"")  # missing bytes are still a problem response
    headers["Content-Length"] = str(stop - start)
    if ranged is not None:
        headers["Content-Range"] = f"bytes {start}-{stop - 1}/{entry.size}"
    return StreamingResponse(
        itertools.chain([first], chunks),
        status_code=200 if ranged is None else 206,
        media_type=entry.content_type,
        headers=headers,
    )


def _headers(entry: FileEntry) -> dict[str, str]:
    when = dt.datetime.fromisoformat(entry.mtime.replace("Z", "+00:00"))
    return {
        "ETag": f'"{entry.etag}"',
        "Last-Modified": email.utils.format_datetime(when.astimezone(dt.UTC), usegmt=True),
        "Accept-Ranges": "bytes",
    }


_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


def byte_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """The ``(start, end)`` (end exclusive) a ``Range`` header asks of ``size`` bytes;
    None to send the whole (no header, or one this does not serve: several ranges, not
    bytes), ``"unsatisfiable"`` for a range past the end (RFC 9110 section 14)."""
    if not header:
        return None
    m = _RANGE.match(header)
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    if not first:  # the last N bytes
        if not last or int(last) == 0:
            return "unsatisfiable" if last else None
        return max(size - int(last), 0), size
    start = int(first)
    if start >= size:
        return "unsatisfiable"
    end = size if not last else min(int(last) + 1, size)
    if end <= start:
        return None  # last < first: invalid, ignored
    return start, end


@router.get("/list", operation_id="files_list", summary="A page of a listing")
def list_files(
    request: Request,
    pool: str,
    ref: str | None = None,
    prefix: str = "",
    delimiter: str | None = None,
    after: str = "",
    limit: int = MAX_PAGE,
    as_of: str | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """Entries (and, with ``delimiter``, common prefixes) under ``prefix`` after
    ``after``, at most ``limit`` (up to :data:`MAX_PAGE`); a truncated page's
    ``next_after`` is the next page's ``after``, and its ``next_token`` the next page's
    ``token``: the same commit's (409 if the branch listed moved since)."""
    if limit < 1:
        raise InvalidInputError(f"limit must be at least 1, not {limit}")
    page = file_pool_of(request, pool).list(
        ref,
        prefix,
        delimiter or None,
        after,
        min(limit, MAX_PAGE),
        wire.time_from_json(as_of),
        token=token or None,
    )
    return wire_files.listing_to_json(page)


@router.get("/diff", operation_id="files_diff", summary="Paths changed between refs")
def diff(
    request: Request, pool: str, old: str, new: str | None = None, prefix: str = ""
) -> list[dict[str, Any]]:
    """Paths added, removed or changed from ``old`` to ``new`` (none: ``old``'s staged
    changes)."""
    changes = file_pool_of(request, pool).diff_paths(old, new, prefix)
    return [wire_files.change_to_json(c) for c in changes]
