"""Objects: GetObject, HeadObject, PutObject, CopyObject, DeleteObject, DeleteObjects.

Reads take any ref and see a branch's staged changes; writes go to a branch's
staging area and stay there until a commit (``--s3-autocommit``: one per write).

Conditional requests follow RFC 7232's order, as S3 does: If-Match (else
If-Unmodified-Since) fails with 412; then If-None-Match (else If-Modified-Since)
answers 304 to a GET or HEAD. So If-Match true with If-Unmodified-Since false
serves the object, and If-None-Match false with If-Modified-Since true is 304. A
copy's ``x-amz-copy-source-if-*`` conditions apply the same order to the source and
fail with 412 only. Times compare at whole seconds (what Last-Modified shows).

Ranges: ``bytes=a-b``, ``bytes=a-`` and ``bytes=-n`` (206 with Content-Range); a
range that starts past the end is 416 InvalidRange with ``Content-Range: bytes */size``;
a header that is not one range of bytes is ignored (the whole object), as S3 does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote

from limno.core.staging import TOMBSTONE
from limno.errors import NotFoundError
from limno.gateway.handlers_common import (
    MAX_OBJECT,
    Address,
    Call,
    Reply,
    branch_writes,
    entry_headers,
    parse_mtime,
    split_key,
    stored_metadata,
    xml_reply,
)
from limno.gateway.headers import HeaderMap
from limno.gateway.object_extras import (
    checksum_headers,
    checksum_metadata,
    kept,
    part_range,
    parts_of,
    sent_checksums,
)
from limno.gateway.operations import Op
from limno.gateway.s3errors import S3Error, from_limno
from limno.gateway.s3xml import (
    DeletedEntry,
    DeleteErrorEntry,
    copy_object_result,
    delete_result,
    parse_delete,
    parse_http_date,
    quote_etag,
    unquote_etag,
)

if TYPE_CHECKING:
    from limno.api.local_files import LocalFilePool
    from limno.pools.files.entries import FileEntry

__all__ = ["HANDLERS", "check_conditions", "copy_source", "parse_range"]

DEFAULT_CONTENT_TYPE = "application/octet-stream"

#: GET's query overrides of response headers (S3 allows them on signed requests)
_OVERRIDES = {
    "response-content-type": "content-type",
    "response-content-language": "content-language",
    "response-expires": "expires",
    "response-cache-control": "cache-control",
    "response-content-disposition": "content-disposition",
    "response-content-encoding": "content-encoding",
}


# -- conditions and ranges ----------------------------------------------------------------
def _etag_in(value: str, etag: str) -> bool:
    """Whether an If-Match / If-None-Match list names ``etag`` (``*``: any)."""
    for item in value.split(","):
        item = item.strip()
        if item == "*":
            return True
        if item.startswith("W/"):
            item = item[2:]
        if item and unquote_etag(item) == etag:
            return True
    return False


def _validators(entry: FileEntry) -> dict[str, str]:
    from limno.gateway.s3xml import http_date

    return {
        "etag": quote_etag(entry.etag),
        "last-modified": http_date(parse_mtime(entry.mtime)),
    }


def check_conditions(headers: HeaderMap, entry: FileEntry, prefix: str = "") -> None:
    """PreconditionFailed (412) or NotModified (304) per the request's conditional
    headers; ``prefix`` ``x-amz-copy-source-``: a copy's conditions on its source, where
    every failure is 412."""
    mtime = parse_mtime(entry.mtime).replace(microsecond=0)

    def when(name: str) -> dt.datetime | None:
        value = headers.get(prefix + name)
        return None if value is None else parse_http_date(value)

    def failed(condition: str) -> S3Error:
        return S3Error("PreconditionFailed", Condition=prefix + condition)

    if_match = headers.get(prefix + "if-match")
    if if_match is not None:
        if not _etag_in(if_match, entry.etag):
            raise failed("If-Match")
    else:
        since = when("if-unmodified-since")
        if since is not None and mtime > since:
            raise failed("If-Unmodified-Since")
    not_modified = False
    condition = "If-None-Match"
    if_none_match = headers.get(prefix + "if-none-match")
    if if_none_match is not None:
        not_modified = _etag_in(if_none_match, entry.etag)
    else:
        since = when("if-modified-since")
        condition = "If-Modified-Since"
        not_modified = since is not None and mtime <= since
    if not_modified:
        if prefix:
            raise failed(condition)
        raise S3Error("NotModified", headers=_validators(entry))


def parse_range(value: str | None, size: int) -> tuple[int, int] | None:
    """``(start, end)`` (end exclusive) of a Range header; None: the whole object."""
    if value is None:
        return None
    unit, eq, spec = value.strip().partition("=")
    if not eq or unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, dash, last = (part.strip() for part in spec.partition("-"))
    if not dash or (first and not first.isdigit()) or (last and not last.isdigit()):
        return None
    if not first:
        if not last:
            return None
        count = int(last)
        if count == 0 or size == 0:
            raise _invalid_range(value, size)
        return max(0, size - count), size
    start = int(first)
    if last and int(last) < start:
        return None  # not a valid range: ignored
    if start >= size:
        raise _invalid_range(value, size)
    return start, min(int(last) + 1 if last else size, size)


def _invalid_range(value: str, size: int) -> S3Error:
    return S3Error(
        "InvalidRange",
        headers={"content-range": f"bytes */{size}"},
        RangeRequested=value,
        ActualObjectSize=str(size),
    )


# -- reading ------------------------------------------------------------------------------
class _Chunks:
    """A read's chunks with the first one already read (so that an error opening the
    bytes is an S3 error, not a cut answer); closing closes the read."""

    def __init__(self, first: bytes, rest: Iterator[bytes]) -> None:
        self._first: bytes | None = first
        self._rest = rest

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        return next(self._rest)

    def close(self) -> None:
        close = getattr(self._rest, "close", None)
        if close is not None:
            close()


def _stat(call: Call, pool: LocalFilePool, address: Address) -> FileEntry:
    try:
        return pool.stat(address.path, address.ref)
    except NotFoundError as e:
        raise S3Error(
            "NoSuchKey", str(e), resource=f"/{call.bucket}/{call.op.key}", Key=call.op.key or ""
        ) from None


def _version(call: Call) -> None:
    """Versions are not kept: the one version of a key is ``null``."""
    version = call.query.get("versionId")
    if version is not None and version != "null":
        raise S3Error(
            "InvalidArgument",
            "Invalid version id specified",
            ArgumentName="versionId",
            ArgumentValue=version,
        )


def _part(call: Call, entry: FileEntry) -> tuple[int, int, int] | None:
    """GET/HEAD ``?partNumber=N``: ``(start, end, parts)`` of part N (an object written
    in one piece is its own part 1); None without the parameter."""
    text = call.query.get("partNumber")
    if text is None:
        return None
    number = int(text) if text.isdigit() else 0
    if not 1 <= number <= 10_000:
        raise S3Error("InvalidArgument", "Part number must be an integer between 1 and 10000")
    if call.headers.get("range") is not None:
        raise S3Error(
            "InvalidRequest", "Cannot specify both Range header and partNumber query parameter"
        )
    return part_range(entry, number)


def _get_object(call: Call) -> Reply:
    _version(call)
    address = call.address()
    pool = call.file_pool()
    entry = _stat(call, pool, address)
    part = _part(call, entry)
    check_conditions(call.headers, entry)
    headers = entry_headers(entry)
    for param, header in _OVERRIDES.items():
        if param in call.query:
            headers = [(k, v) for k, v in headers if k != header] + [(header, call.query[param])]
    if part is not None:
        ranged: tuple[int, int] | None = part[:2]
        if parts_of(entry) is not None:
            headers.append(("x-amz-mp-parts-count", str(part[2])))
    else:
        ranged = parse_range(call.headers.get("range"), entry.size)
    start, end = ranged if ranged is not None else (0, entry.size)
    whole = (start, end) == (0, entry.size)
    if whole and (call.headers.get("x-amz-checksum-mode") or "").upper() == "ENABLED":
        headers += checksum_headers(entry)  # of the whole object only, as S3
    status = 200
    if ranged is not None:
        status = 206
        headers.append(("content-range", f"bytes {start}-{end - 1}/{entry.size}"))
    headers.append(("content-length", str(end - start)))
    if call.method == "HEAD" or end == start:
        return Reply(status, headers, b"")
    chunks = pool.read_entry(entry, start, end)
    try:
        first = next(chunks, b"")
    except BaseException:
        getattr(chunks, "close", lambda: None)()
        raise
    return Reply(status, headers, _Chunks(first, chunks), end - start)


# -- writing ------------------------------------------------------------------------------
def _write_conditions(call: Call, pool: LocalFilePool, address: Address) -> tuple[str | None, bool]:
    """``(if_match, if_none_match)`` of a write (S3's conditional writes)."""
    if_none_match = call.headers.get("if-none-match")
    if if_none_match is not None and if_none_match.strip() != "*":
        raise S3Error(
            "NotImplemented",
            "If-None-Match on a write takes only '*' (the key must not exist)",
            resource=f"/{call.bucket}/{call.op.key}",
        )
    if_match = call.headers.get("if-match")
    etag = None
    if if_match is not None:
        text = if_match.strip()
        etag = "*" if text == "*" else unquote_etag(text.removeprefix("W/"))
    return etag, if_none_match is not None


def _branch_marker(call: Call) -> bool:
    """Whether the key is ``<ref>/`` alone: a branch as a directory, which tools that
    make directory markers for every parent (pyarrow's create_dir) write and delete.
    The branch is a directory already: such a marker is accepted and kept nowhere."""
    key = call.op.key or ""
    return call.root_branch is None and key.endswith("/") and key.count("/") == 1


_EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"


@branch_writes
def _put_object(call: Call) -> Reply:
    if _branch_marker(call):
        pool = call.file_pool(action="write")
        if call.read_body(1 << 20):
            raise S3Error("InvalidArgument", f"{call.op.key!r} is a branch, not a file")
        if call.op.key and call.op.key[:-1] not in pool.branches():
            raise S3Error("NoSuchKey", f"no branch {call.op.key[:-1]!r} in {call.bucket!r}")
        return Reply(200, [("etag", quote_etag(_EMPTY_MD5))])
    address = call.write_address()
    pool = call.file_pool(action="write")
    if_match, if_none_match = _write_conditions(call, pool, address)
    entry = pool.put(
        address.ref,
        address.path,
        call.body(),
        content_type=call.headers.get("content-type") or None,
        metadata={**stored_metadata(call.headers), **sent_checksums(call.headers)},
        if_match=if_match,
        if_none_match=if_none_match,
        max_size=MAX_OBJECT,
        # a checksum sent in an aws-chunked trailer is known only once the body ended
        late_metadata=lambda: checksum_metadata(call.checksums),
    )
    call.autocommit(pool, address.ref, {address.path: entry.to_value()}, f"PutObject {call.op.key}")
    return Reply(200, [("etag", quote_etag(entry.etag)), *call.checksums.items()])


def copy_source(call: Call, header: str = "x-amz-copy-source") -> tuple[str, str]:
    """``(bucket, key)`` of a copy's source header (``[/]bucket/key[?versionId=null]``,
    URL-encoded); only the one version there is ("null") may be named."""
    raw = (call.headers.get(header) or "").strip()
    text, _, query = raw.partition("?")
    versions = parse_qs(query).get("versionId", [])
    if any(v != "null" for v in versions):
        raise S3Error("NoSuchVersion", "versions are not kept: the only version is 'null'")
    bucket, sep, key = unquote(text).lstrip("/").partition("/")
    if not bucket or not sep or not key:
        raise S3Error(
            "InvalidArgument",
            "Copy Source must mention the source bucket and key: sourcebucket/sourcekey",
            ArgumentName=header,
            ArgumentValue=raw,
        )
    return bucket, key


def copy_source_entry(call: Call) -> tuple[LocalFilePool, Address, FileEntry, str, str]:
    """The source of a copy, checked (read permission, conditions): its pool, address,
    entry, bucket and key."""
    bucket, key = copy_source(call)
    pool = call.file_pool(bucket, action="read")
    address = split_key(key, call.root_branch)
    try:
        if address is None:
            raise NotFoundError(f"key {key!r} names no file")
        entry = pool.stat(address.path, address.ref)
    except NotFoundError as e:
        raise S3Error("NoSuchKey", str(e), resource=f"/{bucket}/{key}", Key=key) from None
    check_conditions(call.headers, entry, "x-amz-copy-source-")
    return pool, address, entry, bucket, key


@branch_writes
def _copy_object(call: Call) -> Reply:
    target = call.write_address()
    pool = call.file_pool(action="write")
    source_pool, source, entry, bucket, key = copy_source_entry(call)
    directive = (call.headers.get("x-amz-metadata-directive") or "COPY").strip().upper()
    if directive not in ("COPY", "REPLACE"):
        raise S3Error("InvalidArgument", "Unknown metadata directive.", ArgumentName=directive)
    if directive == "COPY" and (bucket, key) == (call.bucket, call.op.key):
        raise S3Error(
            "InvalidRequest",
            "This copy request is illegal because it is trying to copy an object to itself"
            " without changing the object's metadata, storage class, website redirect"
            " location or encryption attributes.",
        )
    metadata = None
    if directive == "REPLACE":
        metadata = {**kept(entry), **stored_metadata(call.headers)}
    content_type = None
    if directive == "REPLACE":
        content_type = call.headers.get("content-type") or DEFAULT_CONTENT_TYPE
    if_match, if_none_match = _write_conditions(call, pool, target)
    if if_none_match or if_match is not None:
        _check_target(pool, target, if_match, if_none_match)  # early; judged again atomically
    if source_pool.id == pool.id:
        made = pool.copy(
            source.ref,
            source.path,
            target.ref,
            target.path,
            metadata=metadata,
            content_type=content_type,
            if_none_match=if_none_match,
            if_match=if_match,
        )
    else:  # blobs belong to their pool: another pool's bytes are copied
        made = pool.put(
            target.ref,
            target.path,
            source_pool.read_entry(entry),
            content_type=content_type or entry.content_type,
            metadata=entry.metadata if metadata is None else metadata,
            if_none_match=if_none_match,
            if_match=if_match,
            max_size=MAX_OBJECT,
        )
    call.autocommit(pool, target.ref, {target.path: made.to_value()}, f"CopyObject {call.op.key}")
    return xml_reply(copy_object_result(made.etag, parse_mtime(made.mtime)))


def _check_target(pool: LocalFilePool, target: Address, if_match: str | None, none: bool) -> None:
    """A copy's own conditions on its target (If-None-Match: *, If-Match), checked before
    any work: the copy's stage judges them again as one step among writers (one wins)."""
    try:
        current: FileEntry | None = pool.stat(target.path, target.ref)
    except NotFoundError:
        current = None
    if none and current is not None:
        raise S3Error("PreconditionFailed", Condition="If-None-Match")
    if if_match is not None and (current is None or if_match not in ("*", current.etag)):
        raise S3Error("PreconditionFailed", Condition="If-Match")


def _delete_condition(pool: LocalFilePool, address: Address, if_match: str | None) -> str | None:
    """S3's conditional delete: with ``If-Match`` (an ETag, or ``*``) the key must exist
    (NoSuchKey) and have that ETag (PreconditionFailed), else nothing is deleted; the
    ETag it has (None: no condition). Checked early, as a conditional write checks its
    target; the removal's stage judges it again (:func:`_remove`)."""
    if if_match is None:
        return None
    current = pool.stat(address.path, address.ref)  # NotFoundError: NoSuchKey
    if not _etag_in(if_match, current.etag):
        raise S3Error("PreconditionFailed", Condition="If-Match")
    return current.etag


def _remove(pool: LocalFilePool, branch: str, paths: list[str], etag: str | None) -> list[str]:
    """Stage the removal of ``paths``; with ``etag`` (one path's, as its condition found
    it) only if the path still has it, judged again as the tombstone is staged and by the
    commit that lands it: a version another write committed meanwhile is not deleted."""
    if etag is None:
        return pool.remove(branch, paths)
    (path,) = paths
    pool.remove_if(branch, path, etag)
    return paths


@branch_writes
def _delete_object(call: Call) -> Reply:
    _version(call)
    for name in ("x-amz-if-match-last-modified-time", "x-amz-if-match-size"):
        if call.headers.get(name) is not None:  # a condition ignored would delete anyway
            raise S3Error("NotImplemented", f"{name} is not implemented (If-Match is)")
    if _branch_marker(call):
        call.file_pool(action="write")
        return Reply(204)  # the branch stays: it is no file
    address = call.write_address()
    pool = call.file_pool(action="write")
    etag = _delete_condition(pool, address, call.headers.get("if-match"))
    if _remove(pool, address.ref, [address.path], etag):
        call.autocommit(pool, address.ref, {address.path: TOMBSTONE}, f"DeleteObject {call.op.key}")
    return Reply(204)


def _delete_objects(call: Call) -> Reply:
    pool = call.file_pool(action="write")
    request = parse_delete(call.read_body())
    deleted: list[DeletedEntry] = []
    errors: list[DeleteErrorEntry] = []
    # the keys of a branch are removed (and autocommitted) together; a key with an ETag
    # condition alone, so that another write's commit refuses only its own removal
    groups: dict[tuple[str, str, str | None], list[tuple[str, str, str | None]]] = {}
    for obj in request.objects:
        address = split_key(obj.key, call.root_branch)
        if obj.version_id not in (None, "null"):
            errors.append(DeleteErrorEntry(obj.key, "NoSuchVersion", "versions are not kept"))
        elif address is None and call.root_branch is None and obj.key.count("/") == 1:
            deleted.append(DeletedEntry(obj.key, obj.version_id))  # a branch marker: nothing
        elif address is None:
            errors.append(DeleteErrorEntry(obj.key, "InvalidArgument", "keys are <branch>/<path>"))
        elif obj.unsupported is not None:  # a condition ignored would delete anyway
            message = f"a {obj.unsupported} condition is not implemented (ETag is)"
            errors.append(DeleteErrorEntry(obj.key, "NotImplemented", message))
        else:
            try:
                etag = _delete_condition(pool, address, obj.etag)
            except Exception as e:
                errors.append(_delete_error(call, address.ref, obj.key, e))
                continue
            group = (address.ref, "" if etag is None else address.path, etag)
            groups.setdefault(group, []).append((obj.key, address.path, obj.version_id))
    for (branch, _, etag), items in groups.items():
        try:
            removed = _remove(pool, branch, [path for _, path, _ in items], etag)
            if removed:
                call.autocommit(
                    pool,
                    branch,
                    dict.fromkeys(removed, TOMBSTONE),
                    f"DeleteObjects ({len(removed)} keys)",
                )
        except Exception as e:
            errors += [_delete_error(call, branch, key, e) for key, _, _ in items]
        else:
            deleted += [DeletedEntry(key, version) for key, _, version in items]
    return xml_reply(delete_result(deleted, errors, quiet=request.quiet))


def _delete_error(call: Call, branch: str, key: str, e: Exception) -> DeleteErrorEntry:
    """Why one key of a DeleteObjects was not deleted (a read-only ref says so)."""
    refused = call.read_only_ref(branch) if isinstance(e, NotFoundError) else None
    error = refused or from_limno(e, bucket=call.bucket, key=key, op="DeleteObjects")
    return DeleteErrorEntry(key, error.code, error.message)


HANDLERS = {
    Op.GetObject: _get_object,
    Op.HeadObject: _get_object,
    Op.PutObject: _put_object,
    Op.CopyObject: _copy_object,
    Op.DeleteObject: _delete_object,
    Op.DeleteObjects: _delete_objects,
}
