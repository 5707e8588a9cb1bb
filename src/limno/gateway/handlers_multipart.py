"""Multipart uploads: create, upload part, upload part copy, complete, abort, list
parts, list uploads, through the pool's :class:`~limno.pools.files.multipart.Multipart`.

An upload belongs to one key (branch and path): a request naming an upload with
another key is NoSuchUpload, as S3 answers. Completing stages the object on the
upload's branch (read-after-write from then on); S3's rules (part numbers 1 to
10,000, every part but the last at least 5 MiB, ascending ETags that match) are the
lake's, and its :class:`~limno.errors.MultipartError` reasons become S3's codes here.
A part copied from another key is read from the source entry checked against the
``x-amz-copy-source-if-*`` conditions, so the bytes are that entry's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from limno.errors import MultipartError
from limno.gateway.handlers_common import (
    MAX_OBJECT,
    Address,
    Call,
    Reply,
    branch_writes,
    join_key,
    parse_mtime,
    split_key,
    stored_metadata,
    xml_reply,
)
from limno.gateway.handlers_list import max_keys
from limno.gateway.handlers_objects import copy_source_entry
from limno.gateway.object_extras import PARTS, encode_parts
from limno.gateway.operations import Op
from limno.gateway.s3errors import S3Error
from limno.gateway.s3xml import (
    PartEntry,
    UploadEntry,
    check_encoding_type,
    complete_multipart_upload,
    copy_part_result,
    initiate_multipart_upload,
    list_multipart_uploads,
    list_parts,
    parse_complete_multipart,
    quote_etag,
    unquote_etag,
)

if TYPE_CHECKING:
    from limno.api.local_files import LocalFilePool
    from limno.pools.files.multipart import Multipart, Upload

__all__ = ["HANDLERS"]

_CODES = {
    "invalid-part": "InvalidPart",
    "part-order": "InvalidPartOrder",
    "too-small": "EntityTooSmall",
    "no-upload": "NoSuchUpload",
}
MAX_PART_NUMBER = 10_000


def _s3_codes(handler: Callable[[Call], Reply]) -> Callable[[Call], Reply]:
    """The handler, its MultipartErrors answered with S3's codes."""

    @functools.wraps(handler)
    def wrapped(call: Call) -> Reply:
        try:
            return handler(call)
        except MultipartError as e:
            error = S3Error(
                _CODES.get(e.reason, "InvalidPart"),
                str(e),
                resource=f"/{call.bucket}/{call.op.key or ''}",
            )
            if e.reason == "no-upload":
                error.extra["UploadId"] = call.query.get("uploadId", "")
            raise error from None

    return wrapped


def _upload_of(call: Call, multipart: Multipart, address: Address) -> Upload:
    """The upload the request names, which must be of the request's key."""
    upload_id = call.query.get("uploadId", "")
    upload = multipart.upload(upload_id)
    if (upload.branch, upload.path) != (address.ref, address.path):
        raise S3Error(
            "NoSuchUpload",
            f"upload {upload_id} is not an upload of {call.op.key!r}",
            resource=f"/{call.bucket}/{call.op.key}",
            UploadId=upload_id,
        )
    return upload


def _part_number(call: Call) -> int:
    text = call.query.get("partNumber", "")
    number = int(text) if text.isdigit() else 0
    if not 1 <= number <= MAX_PART_NUMBER:
        raise S3Error(
            "InvalidArgument",
            f"Part number must be an integer between 1 and {MAX_PART_NUMBER}, inclusive",
            ArgumentName="partNumber",
            ArgumentValue=text,
        )
    return number


def _writing(call: Call) -> tuple[LocalFilePool, Address]:
    address = call.write_address()
    return call.file_pool(action="write"), address


@branch_writes
@_s3_codes
def _create(call: Call) -> Reply:
    pool, address = _writing(call)
    upload_id = pool.multipart().create(
        address.ref,
        address.path,
        content_type=call.headers.get("content-type") or None,
        metadata=stored_metadata(call.headers),
    )
    return xml_reply(initiate_multipart_upload(call.bucket, call.op.key or "", upload_id))


@_s3_codes
def _upload_part(call: Call) -> Reply:
    pool, address = _writing(call)
    number = _part_number(call)
    multipart = pool.multipart()
    upload = _upload_of(call, multipart, address)
    part = multipart.upload_part(upload.id, number, call.body(MAX_OBJECT))
    return Reply(200, [("etag", quote_etag(part.etag)), *call.checksums.items()])


def _copy_range(call: Call, size: int) -> tuple[int, int]:
    """``[start, end)`` of ``x-amz-copy-source-range`` (the whole source without one)."""
    text = call.headers.get("x-amz-copy-source-range")
    if text is None:
        return 0, size
    unit, _, spec = text.strip().partition("=")
    first, dash, last = spec.partition("-")
    if unit != "bytes" or not dash or not first.isdigit() or not last.isdigit():
        raise S3Error(
            "InvalidArgument",
            "The x-amz-copy-source-range value must be of the form bytes=first-last"
            " where first and last are the zero-based offsets of the first and last bytes"
            " to copy",
            ArgumentName="x-amz-copy-source-range",
            ArgumentValue=text,
        )
    start, end = int(first), int(last) + 1
    if start >= end or end > size:
        raise S3Error(
            "InvalidRange",
            f"Range specified is not valid for source object of size: {size}",
            RangeRequested=text,
            ActualObjectSize=str(size),
        )
    return start, end


@_s3_codes
def _upload_part_copy(call: Call) -> Reply:
    pool, address = _writing(call)
    number = _part_number(call)
    multipart = pool.multipart()
    upload = _upload_of(call, multipart, address)
    source_pool, _, entry, _, _ = copy_source_entry(call)
    start, end = _copy_range(call, entry.size)
    part = multipart.upload_part(upload.id, number, source_pool.read_entry(entry, start, end))
    return xml_reply(copy_part_result(part.etag, parse_mtime(part.mtime)))


@_s3_codes
def _complete(call: Call) -> Reply:
    pool, address = _writing(call)
    multipart = pool.multipart()
    upload = _upload_of(call, multipart, address)
    parts = parse_complete_multipart(call.read_body())
    _complete_conditions(call, pool, address)
    sizes = _part_sizes(multipart, upload.id, [p.part_number for p in parts])
    entry = multipart.complete(
        upload.id,
        [(p.part_number, p.etag) for p in parts],
        {PARTS: encode_parts(sizes)},
        # judged again as the entry is staged: one step among writers, unlike the check
        if_none_match=call.headers.get("if-none-match") is not None,
        if_match=_if_match(call),
    )
    call.autocommit(
        pool,
        address.ref,
        {address.path: entry.to_value()},
        f"CompleteMultipartUpload {call.op.key}",
    )
    key = call.op.key or ""
    body = complete_multipart_upload(
        location=f"{call.base_url}/{quote(key, safe='/')}",  # URL-encoded, as S3's
        bucket=call.bucket,
        key=key,
        etag=entry.etag,
    )
    return xml_reply(body)


def _part_sizes(multipart: Multipart, upload_id: str, numbers: list[int]) -> list[int]:
    """The sizes of the upload's parts ``numbers`` (kept with the object, so that GET
    ``?partNumber=N`` can serve part N); a missing part is left to ``complete``."""
    wanted = set(numbers)
    sizes: dict[int, int] = {}
    after = 0
    while True:
        page, more = multipart.list_parts(upload_id, after, 1000)
        sizes.update((p.number, p.size) for p in page if p.number in wanted)
        if not more or not page:
            return [sizes.get(n, 0) for n in numbers]
        after = page[-1].number


def _complete_conditions(call: Call, pool: LocalFilePool, address: Address) -> None:
    """S3's conditional completion: If-None-Match: * (the key must not exist) and
    If-Match (its ETag must be this one), checked before the parts are joined (and
    judged again, atomically, as the completed entry is staged)."""
    if_none_match = call.headers.get("if-none-match")
    if_match = call.headers.get("if-match")
    if if_none_match is None and if_match is None:
        return
    from limno.errors import NotFoundError

    try:
        current = pool.stat(address.path, address.ref).etag
    except NotFoundError:
        current = None
    if if_none_match is not None and current is not None:
        raise S3Error("PreconditionFailed", Condition="If-None-Match")
    wanted = _if_match(call)
    if wanted is not None and (current is None or wanted not in ("*", current)):
        raise S3Error("PreconditionFailed", Condition="If-Match")


def _if_match(call: Call) -> str | None:
    """The ETag a completion's If-Match names (``*``: any), bare; None without one."""
    if_match = call.headers.get("if-match")
    return None if if_match is None else unquote_etag(if_match.strip())


@_s3_codes
def _abort(call: Call) -> Reply:
    pool, address = _writing(call)
    multipart = pool.multipart()
    upload = _upload_of(call, multipart, address)
    multipart.abort(upload.id)
    return Reply(204)


@_s3_codes
def _list_parts(call: Call) -> Reply:
    address = call.address()
    pool = call.file_pool()
    multipart = pool.multipart()
    upload = _upload_of(call, multipart, address)
    marker_text = call.query.get("part-number-marker", "") or "0"
    if not marker_text.isdigit():
        raise S3Error("InvalidArgument", "part-number-marker must be an integer")
    marker = int(marker_text)
    limit = max_keys(call, "max-parts")
    parts, truncated = multipart.list_parts(upload.id, marker, limit)
    body = list_parts(
        bucket=call.bucket,
        key=call.op.key or "",
        upload_id=upload.id,
        parts=[PartEntry(p.number, parse_mtime(p.mtime), p.etag, p.size) for p in parts],
        part_number_marker=marker,
        next_part_number_marker=parts[-1].number if parts else marker,
        max_parts=limit,
        is_truncated=truncated,
    )
    return xml_reply(body)


@_s3_codes
def _list_uploads(call: Call) -> Reply:
    pool = call.file_pool()
    encoding = call.query.get("encoding-type")
    check_encoding_type(encoding)
    prefix = call.query.get("prefix", "")
    delimiter = call.query.get("delimiter") or None
    key_marker = call.query.get("key-marker", "")
    id_marker = call.query.get("upload-id-marker", "") if key_marker else ""
    limit = max_keys(call, "max-uploads")
    found = _uploads(call, pool.multipart(), prefix)
    after = [
        (key, u)
        for key, u in found
        if ((key, u.id) > (key_marker, id_marker) if id_marker else key > key_marker)
    ]
    uploads: list[tuple[str, Upload]] = []
    prefixes: list[str] = []
    truncated = False
    last: tuple[str, str] | None = None
    for key, upload in after:
        cut = key.find(delimiter, len(prefix)) if delimiter else -1
        rolled = key[: cut + len(delimiter)] if delimiter and cut >= 0 else None
        if rolled is not None and prefixes and prefixes[-1] == rolled:
            continue
        if len(uploads) + len(prefixes) >= limit:
            truncated = True
            break
        if rolled is not None:
            prefixes.append(rolled)
            last = (rolled, "")
        else:
            uploads.append((key, upload))
            last = (key, upload.id)
    body = list_multipart_uploads(
        bucket=call.bucket,
        uploads=[UploadEntry(key, u.id, parse_mtime(u.initiated)) for key, u in uploads],
        prefix=prefix,
        delimiter=delimiter,
        key_marker=key_marker,
        upload_id_marker=id_marker,
        next_key_marker=last[0] if truncated and last else None,
        next_upload_id_marker=last[1] if truncated and last else None,
        max_uploads=limit,
        is_truncated=truncated,
        common_prefixes=prefixes,
        encoding_type=encoding,
    )
    return xml_reply(body)


def _uploads(call: Call, multipart: Multipart, prefix: str) -> list[tuple[str, Upload]]:
    """Every upload in progress whose key starts with ``prefix``, by (key, id)."""
    branch = None
    path_prefix = ""
    if call.root_branch is not None:
        branch, path_prefix = call.root_branch, prefix
    elif "/" in prefix:
        found = split_key(prefix, None)
        branch, path_prefix = (found.ref, found.path) if found else (prefix[:-1], "")
    found_all: list[tuple[str, Upload]] = []
    after_path, after_id = "", ""
    while True:
        page, more = multipart.uploads(path_prefix, after_path, after_id, 1000, branch=branch)
        for upload in page:
            key = join_key(upload.branch, upload.path, call.root_branch)
            if key.startswith(prefix):
                found_all.append((key, upload))
        if not more or not page:
            break
        after_path, after_id = page[-1].path, page[-1].id
    return sorted(found_all, key=lambda item: (item[0], item[1].id))


HANDLERS = {
    Op.CreateMultipartUpload: _create,
    Op.UploadPart: _upload_part,
    Op.UploadPartCopy: _upload_part_copy,
    Op.CompleteMultipartUpload: _complete,
    Op.AbortMultipartUpload: _abort,
    Op.ListParts: _list_parts,
    Op.ListMultipartUploads: _list_uploads,
}
