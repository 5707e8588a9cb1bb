"""The XML documents of the S3 API: response bodies built, request bodies parsed safely.

Builders emit exactly the element names, nesting and namespace S3 uses, because SDK parsers
look elements up by name and silently drop what they do not know: a misspelled element is a
missing field, not an error. Request bodies are untrusted: they are parsed with DTDs and
entities refused (no billion laughs, no external entities), and any malformed or
out-of-schema body is S3's ``MalformedXML``.

``EncodingType=url``: keys are arbitrary Unicode and may hold characters XML 1.0 cannot
carry, so a client may ask for the key-like fields to be percent-encoded. We encode them
RFC 3986 style (space as ``%20``, ``/`` kept) rather than with ``+`` for space: every SDK
decodes ``%20`` (boto with ``unquote_plus``, the Java and Go SDKs with form decoders, browsers
with ``decodeURIComponent``), while a ``+`` is misread by a plain percent-decoder.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from urllib.parse import quote
from xml.sax.saxutils import escape

from limno.gateway.s3errors import S3Error
from limno.gateway.s3parse import (
    MAX_XML_BODY,
    CompletedPart,
    DeleteRequest,
    ObjectToDelete,
    parse_complete_multipart,
    parse_create_bucket,
    parse_delete,
    unquote_etag,
)

__all__ = [
    "MAX_XML_BODY",
    "NS",
    "BucketEntry",
    "CompletedPart",
    "DeleteErrorEntry",
    "DeleteRequest",
    "DeletedEntry",
    "ObjectEntry",
    "ObjectToDelete",
    "Owner",
    "PartEntry",
    "UploadEntry",
    "check_encoding_type",
    "complete_multipart_upload",
    "copy_object_result",
    "copy_part_result",
    "delete_result",
    "http_date",
    "initiate_multipart_upload",
    "list_buckets",
    "list_multipart_uploads",
    "list_object_versions",
    "list_objects_v1",
    "list_objects_v2",
    "list_parts",
    "location_constraint",
    "parse_complete_multipart",
    "parse_create_bucket",
    "parse_delete",
    "parse_http_date",
    "quote_etag",
    "s3_timestamp",
    "unquote_etag",
]

#: the namespace of every S3 response document
NS = "http://s3.amazonaws.com/doc/2006-03-01/"

_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'


# -- data shapes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """The owner S3 names in listings (limno has no per-object owners: one for all)."""

    id: str = "limno"
    display_name: str = "limno"


@dataclass(frozen=True)
class BucketEntry:
    name: str
    created: datetime


@dataclass(frozen=True)
class ObjectEntry:
    key: str
    last_modified: datetime
    etag: str
    size: int
    storage_class: str = "STANDARD"
    owner: Owner | None = None


@dataclass(frozen=True)
class PartEntry:
    part_number: int
    last_modified: datetime
    etag: str
    size: int


@dataclass(frozen=True)
class UploadEntry:
    key: str
    upload_id: str
    initiated: datetime
    storage_class: str = "STANDARD"


@dataclass(frozen=True)
class DeletedEntry:
    key: str
    version_id: str | None = None


@dataclass(frozen=True)
class DeleteErrorEntry:
    key: str
    code: str
    message: str
    version_id: str | None = None


# -- small helpers -------------------------------------------------------------------------


def _utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def s3_timestamp(dt: datetime) -> str:
    """``2009-10-12T17:50:30.000Z``: the time form of S3's XML (milliseconds, always UTC)."""
    u = _utc(dt)
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + f"{u.microsecond // 1000:03d}Z"


def http_date(dt: datetime) -> str:
    """``Wed, 12 Oct 2009 17:50:30 GMT``: the form of ``Last-Modified`` and ``Date``."""
    return format_datetime(_utc(dt).replace(microsecond=0), usegmt=True)


_HTTP_DATE_FORMATS = (
    "%a, %d %b %Y %H:%M:%S GMT",  # RFC 7231 (IMF-fixdate)
    "%A, %d-%b-%y %H:%M:%S GMT",  # RFC 850
    "%a %b %d %H:%M:%S %Y",  # asctime
    "%a %b  %d %H:%M:%S %Y",  # asctime, one-digit day
)


def parse_http_date(text: str) -> datetime | None:
    """An HTTP date (the three forms RFC 7231 allows) as aware UTC, None when unparsable:
    S3 ignores a conditional header whose date it cannot read, and so do we."""
    text = text.strip()
    for fmt in _HTTP_DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def quote_etag(etag: str) -> str:
    """The ETag in the quotes S3 sends it in (kept as is when already quoted)."""
    return etag if len(etag) >= 2 and etag[0] == etag[-1] == '"' else f'"{etag}"'


def check_encoding_type(value: str | None) -> bool:
    """Whether the request asked for ``encoding-type=url``; any other value is refused
    with ``InvalidArgument`` as S3 does."""
    if value is None:
        return False
    if value.lower() != "url":
        raise S3Error(
            "InvalidArgument",
            "Invalid Encoding Method specified in Request",
            ArgumentName="encoding-type",
            ArgumentValue=value,
        )
    return True


def _enc(value: str, url: bool) -> str:
    return quote(value, safe="/") if url else value


def _el(name: str, value: object) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, datetime):
        text = s3_timestamp(value)
    else:
        text = escape(str(value))
    return f"<{name}>{text}</{name}>"


def _doc(root: str, parts: Iterable[str]) -> bytes:
    return (_DECL + f'<{root} xmlns="{NS}">' + "".join(parts) + f"</{root}>").encode("utf-8")


def _owner(tag: str, owner: Owner) -> str:
    return f"<{tag}>{_el('ID', owner.id)}{_el('DisplayName', owner.display_name)}</{tag}>"


def _common_prefixes(prefixes: Iterable[str], url: bool) -> list[str]:
    return [f"<CommonPrefixes>{_el('Prefix', _enc(p, url))}</CommonPrefixes>" for p in prefixes]


def _object(obj: ObjectEntry, url: bool, owner: Owner | None) -> str:
    parts = [
        _el("Key", _enc(obj.key, url)),
        _el("LastModified", obj.last_modified),
        _el("ETag", quote_etag(obj.etag)),
        _el("Size", obj.size),
    ]
    who = obj.owner or owner
    if who is not None:
        parts.append(_owner("Owner", who))
    parts.append(_el("StorageClass", obj.storage_class))
    return "<Contents>" + "".join(parts) + "</Contents>"


# -- response builders ---------------------------------------------------------------------


def list_buckets(buckets: Iterable[BucketEntry], owner: Owner | None = None) -> bytes:
    """ListBuckets: every bucket (pool) with its creation time."""
    items = "".join(
        f"<Bucket>{_el('Name', b.name)}{_el('CreationDate', b.created)}</Bucket>" for b in buckets
    )
    return _doc(
        "ListAllMyBucketsResult", [_owner("Owner", owner or Owner()), f"<Buckets>{items}</Buckets>"]
    )


def list_objects_v1(
    *,
    bucket: str,
    prefix: str = "",
    marker: str = "",
    delimiter: str | None = None,
    max_keys: int = 1000,
    is_truncated: bool = False,
    contents: Sequence[ObjectEntry] = (),
    common_prefixes: Sequence[str] = (),
    next_marker: str | None = None,
    encoding_type: str | None = None,
) -> bytes:
    """ListObjects (v1). Objects carry their Owner, as v1 always does. With
    ``encoding-type=url`` the Prefix stays as sent: S3's v1 answer encodes the keys,
    markers and delimiter only (botocore decodes just those, and boto3 sets url
    encoding on every ListObjects call)."""
    url = check_encoding_type(encoding_type)
    parts = [
        _el("Name", bucket),
        _el("Prefix", prefix),
        _el("Marker", _enc(marker, url)),
    ]
    if next_marker is not None:
        parts.append(_el("NextMarker", _enc(next_marker, url)))
    parts.append(_el("MaxKeys", max_keys))
    if delimiter:
        parts.append(_el("Delimiter", _enc(delimiter, url)))
    parts.append(_el("IsTruncated", is_truncated))
    if url:
        parts.append(_el("EncodingType", "url"))
    parts += [_object(o, url, Owner()) for o in contents]
    parts += _common_prefixes(common_prefixes, url)
    return _doc("ListBucketResult", parts)


def list_objects_v2(
    *,
    bucket: str,
    prefix: str = "",
    delimiter: str | None = None,
    max_keys: int = 1000,
    is_truncated: bool = False,
    contents: Sequence[ObjectEntry] = (),
    common_prefixes: Sequence[str] = (),
    continuation_token: str | None = None,
    next_continuation_token: str | None = None,
    start_after: str | None = None,
    fetch_owner: bool = False,
    encoding_type: str | None = None,
) -> bytes:
    """ListObjectsV2. ``KeyCount`` counts objects and common prefixes, as S3 does;
    continuation tokens are opaque and never encoded."""
    url = check_encoding_type(encoding_type)
    parts = [
        _el("Name", bucket),
        _el("Prefix", _enc(prefix, url)),
        _el("KeyCount", len(contents) + len(common_prefixes)),
        _el("MaxKeys", max_keys),
    ]
    if delimiter:
        parts.append(_el("Delimiter", _enc(delimiter, url)))
    parts.append(_el("IsTruncated", is_truncated))
    if continuation_token is not None:
        parts.append(_el("ContinuationToken", continuation_token))
    if next_continuation_token is not None:
        parts.append(_el("NextContinuationToken", next_continuation_token))
    if start_after is not None:
        parts.append(_el("StartAfter", _enc(start_after, url)))
    if url:
        parts.append(_el("EncodingType", "url"))
    parts += [_object(o, url, Owner() if fetch_owner else None) for o in contents]
    parts += _common_prefixes(common_prefixes, url)
    return _doc("ListBucketResult", parts)


def list_object_versions(
    *,
    bucket: str,
    prefix: str = "",
    key_marker: str = "",
    version_id_marker: str = "",
    delimiter: str | None = None,
    max_keys: int = 1000,
    is_truncated: bool = False,
    contents: Sequence[ObjectEntry] = (),
    common_prefixes: Sequence[str] = (),
    next_key_marker: str | None = None,
    encoding_type: str | None = None,
) -> bytes:
    """ListObjectVersions of an unversioned bucket: one ``null`` version per key, the
    latest (tools such as ``aws s3 rb --force`` and s3a's cleanup list versions)."""
    url = check_encoding_type(encoding_type)
    parts = [
        _el("Name", bucket),
        _el("Prefix", _enc(prefix, url)),
        _el("KeyMarker", _enc(key_marker, url)),
        _el("VersionIdMarker", version_id_marker),
    ]
    if next_key_marker is not None:
        parts.append(_el("NextKeyMarker", _enc(next_key_marker, url)))
        parts.append(_el("NextVersionIdMarker", "null"))
    parts.append(_el("MaxKeys", max_keys))
    if delimiter:
        parts.append(_el("Delimiter", _enc(delimiter, url)))
    parts.append(_el("IsTruncated", is_truncated))
    if url:
        parts.append(_el("EncodingType", "url"))
    for o in contents:
        parts.append(
            "<Version>"
            + _el("Key", _enc(o.key, url))
            + _el("VersionId", "null")
            + _el("IsLatest", True)
            + _el("LastModified", o.last_modified)
            + _el("ETag", quote_etag(o.etag))
            + _el("Size", o.size)
            + _owner("Owner", o.owner or Owner())
            + _el("StorageClass", o.storage_class)
            + "</Version>"
        )
    parts += _common_prefixes(common_prefixes, url)
    return _doc("ListVersionsResult", parts)


def location_constraint(region: str | None) -> bytes:
    """GetBucketLocation: S3 answers an empty element for us-east-1."""
    if not region or region == "us-east-1":
        return (_DECL + f'<LocationConstraint xmlns="{NS}"/>').encode("utf-8")
    return _doc("LocationConstraint", [escape(region)])


def copy_object_result(etag: str, last_modified: datetime) -> bytes:
    """CopyObject's answer."""
    return _doc(
        "CopyObjectResult", [_el("LastModified", last_modified), _el("ETag", quote_etag(etag))]
    )


def copy_part_result(etag: str, last_modified: datetime) -> bytes:
    """UploadPartCopy's answer."""
    return _doc(
        "CopyPartResult", [_el("LastModified", last_modified), _el("ETag", quote_etag(etag))]
    )


def initiate_multipart_upload(bucket: str, key: str, upload_id: str) -> bytes:
    """CreateMultipartUpload's answer."""
    return _doc(
        "InitiateMultipartUploadResult",
        [_el("Bucket", bucket), _el("Key", key), _el("UploadId", upload_id)],
    )


def complete_multipart_upload(*, location: str, bucket: str, key: str, etag: str) -> bytes:
    """CompleteMultipartUpload's answer (``etag`` the multipart one, ``<md5>-<parts>``)."""
    return _doc(
        "CompleteMultipartUploadResult",
        [
            _el("Location", location),
            _el("Bucket", bucket),
            _el("Key", key),
            _el("ETag", quote_etag(etag)),
        ],
    )


def list_parts(
    *,
    bucket: str,
    key: str,
    upload_id: str,
    parts: Sequence[PartEntry],
    part_number_marker: int = 0,
    next_part_number_marker: int | None = None,
    max_parts: int = 1000,
    is_truncated: bool = False,
    owner: Owner | None = None,
    storage_class: str = "STANDARD",
) -> bytes:
    """ListParts: the parts uploaded so far, in part-number order."""
    who = owner or Owner()
    out = [
        _el("Bucket", bucket),
        _el("Key", key),
        _el("UploadId", upload_id),
        _owner("Initiator", who),
        _owner("Owner", who),
        _el("StorageClass", storage_class),
        _el("PartNumberMarker", part_number_marker),
        _el(
            "NextPartNumberMarker",
            next_part_number_marker
            if next_part_number_marker is not None
            else (parts[-1].part_number if parts else 0),
        ),
        _el("MaxParts", max_parts),
        _el("IsTruncated", is_truncated),
    ]
    for p in parts:
        out.append(
            "<Part>"
            + _el("PartNumber", p.part_number)
            + _el("LastModified", p.last_modified)
            + _el("ETag", quote_etag(p.etag))
            + _el("Size", p.size)
            + "</Part>"
        )
    return _doc("ListPartsResult", out)


def list_multipart_uploads(
    *,
    bucket: str,
    uploads: Sequence[UploadEntry],
    prefix: str = "",
    delimiter: str | None = None,
    key_marker: str = "",
    upload_id_marker: str = "",
    next_key_marker: str | None = None,
    next_upload_id_marker: str | None = None,
    max_uploads: int = 1000,
    is_truncated: bool = False,
    common_prefixes: Sequence[str] = (),
    owner: Owner | None = None,
    encoding_type: str | None = None,
) -> bytes:
    """ListMultipartUploads: the uploads begun and neither completed nor aborted."""
    url = check_encoding_type(encoding_type)
    who = owner or Owner()
    out = [
        _el("Bucket", bucket),
        _el("KeyMarker", _enc(key_marker, url)),
        _el("UploadIdMarker", upload_id_marker),
        _el("NextKeyMarker", _enc(next_key_marker or "", url)),
        _el("NextUploadIdMarker", next_upload_id_marker or ""),
        _el("Prefix", _enc(prefix, url)),
    ]
    if delimiter:
        out.append(_el("Delimiter", _enc(delimiter, url)))
    out += [_el("MaxUploads", max_uploads), _el("IsTruncated", is_truncated)]
    if url:
        out.append(_el("EncodingType", "url"))
    for u in uploads:
        out.append(
            "<Upload>"
            + _el("Key", _enc(u.key, url))
            + _el("UploadId", u.upload_id)
            + _owner("Initiator", who)
            + _owner("Owner", who)
            + _el("StorageClass", u.storage_class)
            + _el("Initiated", u.initiated)
            + "</Upload>"
        )
    out += _common_prefixes(common_prefixes, url)
    return _doc("ListMultipartUploadsResult", out)


def delete_result(
    deleted: Sequence[DeletedEntry], errors: Sequence[DeleteErrorEntry], quiet: bool = False
) -> bytes:
    """DeleteObjects' answer; in quiet mode S3 lists only the keys that failed."""
    out: list[str] = []
    if not quiet:
        for d in deleted:
            version = _el("VersionId", d.version_id) if d.version_id is not None else ""
            out.append(f"<Deleted>{_el('Key', d.key)}{version}</Deleted>")
    for e in errors:
        version = _el("VersionId", e.version_id) if e.version_id is not None else ""
        out.append(
            f"<Error>{_el('Key', e.key)}{version}{_el('Code', e.code)}"
            f"{_el('Message', e.message)}</Error>"
        )
    return _doc("DeleteResult", out)
