"""Which S3 operation a request is, from all of it: method, bucket, key, query, headers.

S3 overloads a handful of URLs with sub-resources (``?uploads``, ``?delete``,
``?partNumber=&uploadId=``) and headers (``x-amz-copy-source``). Getting one wrong is
silent damage: a ``PUT ?tagging`` taken for a PutObject would overwrite the object with
its tag set. So every sub-resource S3 has and we do not is named and answered 501, and a
value-less query flag nobody knows is treated the same way; only parameters known to be
harmless (listing options, response overrides, presign fields, SDK hints) are ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from limno.gateway.headers import HeaderMap, HeadersLike, percent_decode, query_pairs
from limno.gateway.s3errors import S3Error

__all__ = [
    "MAX_KEY_BYTES",
    "Op",
    "Operation",
    "identify",
    "parse_query",
    "resolve_address",
]

#: S3's limit on a key's UTF-8 length
MAX_KEY_BYTES = 1024


class Op(enum.StrEnum):
    """The S3 operations the gateway implements (and NOT_IMPLEMENTED for the rest)."""

    ListBuckets = "ListBuckets"
    CreateBucket = "CreateBucket"
    DeleteBucket = "DeleteBucket"
    HeadBucket = "HeadBucket"
    GetBucketLocation = "GetBucketLocation"
    ListObjects = "ListObjects"
    ListObjectsV2 = "ListObjectsV2"
    ListObjectVersions = "ListObjectVersions"
    ListMultipartUploads = "ListMultipartUploads"
    DeleteObjects = "DeleteObjects"
    GetObject = "GetObject"
    HeadObject = "HeadObject"
    PutObject = "PutObject"
    CopyObject = "CopyObject"
    DeleteObject = "DeleteObject"
    CreateMultipartUpload = "CreateMultipartUpload"
    UploadPart = "UploadPart"
    UploadPartCopy = "UploadPartCopy"
    CompleteMultipartUpload = "CompleteMultipartUpload"
    AbortMultipartUpload = "AbortMultipartUpload"
    ListParts = "ListParts"
    NOT_IMPLEMENTED = "NotImplemented"


@dataclass(frozen=True)
class Operation:
    """An identified request: ``op`` to dispatch on, ``name`` S3's action name (for
    messages and logs: ``GetObject``, or ``PutBucketTagging`` for an unimplemented one)."""

    op: Op
    name: str
    bucket: str | None
    key: str | None
    query: dict[str, str] = field(default_factory=dict)

    @property
    def implemented(self) -> bool:
        return self.op is not Op.NOT_IMPLEMENTED


#: sub-resources S3 has and the gateway does not -> the word S3's action names use
UNSUPPORTED = {
    "accelerate": "Accelerate",
    "acl": "Acl",
    "analytics": "Analytics",
    "attributes": "Attributes",
    "cors": "Cors",
    "encryption": "Encryption",
    "intelligent-tiering": "IntelligentTiering",
    "inventory": "Inventory",
    "legal-hold": "LegalHold",
    "lifecycle": "Lifecycle",
    "logging": "Logging",
    "metadataConfiguration": "MetadataConfiguration",
    "metadataTable": "MetadataTable",
    "metrics": "Metrics",
    "notification": "Notification",
    "object-lock": "ObjectLockConfiguration",
    "ownershipControls": "OwnershipControls",
    "policy": "Policy",
    "policyStatus": "PolicyStatus",
    "publicAccessBlock": "PublicAccessBlock",
    "renameObject": "Rename",
    "replication": "Replication",
    "requestPayment": "RequestPayment",
    "restore": "Restore",
    "retention": "Retention",
    "select": "SelectContent",
    "select-type": "SelectContent",
    "session": "Session",
    "tagging": "Tagging",
    "torrent": "Torrent",
    "versioning": "Versioning",
    "website": "Website",
}

#: the sub-resources of the operations we implement
_OURS = {"uploads", "uploadId", "partNumber", "delete", "location", "versions", "versionId"}

#: parameters that change no operation: listing options, response overrides, SDK hints
_HARMLESS = {
    "prefix",
    "delimiter",
    "marker",
    "max-keys",
    "list-type",
    "continuation-token",
    "start-after",
    "fetch-owner",
    "encoding-type",
    "key-marker",
    "version-id-marker",
    "upload-id-marker",
    "max-uploads",
    "max-parts",
    "part-number-marker",
    "x-id",
    "AWSAccessKeyId",
    "Expires",
    "Signature",
    "optional-object-attributes",
}

_VERBS = {"GET": "Get", "PUT": "Put", "DELETE": "Delete", "POST": "Post", "HEAD": "Head"}


def parse_query(raw_query: str) -> dict[str, str]:
    """The query parameters, percent-decoded, first value of each (``?uploads`` -> ``""``)."""
    params: dict[str, str] = {}
    for name, value in query_pairs(raw_query):
        params.setdefault(name, value)
    return params


def _harmless(name: str) -> bool:
    return name in _HARMLESS or name.startswith("response-") or name.lower().startswith("x-amz-")


def _unsupported(method: str, key: str | None, query: Mapping[str, str]) -> str | None:
    """The S3 action name of an unimplemented sub-resource in the query, if any."""
    scope = "Bucket" if key is None else "Object"
    verb = _VERBS.get(method, method.title())
    for name, value in query.items():
        if name in UNSUPPORTED:
            word = UNSUPPORTED[name]
            if word == "SelectContent":
                return "SelectObjectContent"
            if word == "Restore":
                return "RestoreObject"
            return f"{verb}{scope}{word}"
        if name in _OURS or _harmless(name):
            continue
        if value == "":
            # a flag nobody knows is most likely a sub-resource added after this list
            return f"{verb}{scope}?{name}"
    return None


class _Make(Protocol):
    """The type of ``identify``'s ``make`` closure, for the helpers' signatures."""

    def __call__(self, op: Op, name: str | None = None) -> Operation: ...


def _not_allowed(method: str) -> S3Error:
    return S3Error("MethodNotAllowed", ResourceType="OBJECT", Method=method)


def identify(
    method: str,
    bucket: str | None,
    key: str | None,
    query: Mapping[str, str],
    headers: HeadersLike,
) -> Operation:
    """The operation a request asks for. Raises ``MethodNotAllowed`` for a method S3 does
    not take on that resource, ``InvalidRequest``/``InvalidArgument`` for a half-formed
    multipart request; answers ``Op.NOT_IMPLEMENTED`` for a sub-resource we lack."""
    method = method.upper()
    params = dict(query)

    def make(op: Op, name: str | None = None) -> Operation:
        return Operation(op, name or op.value, bucket, key, params)

    if bucket is None:
        if method == "GET":
            return make(Op.ListBuckets)
        raise _not_allowed(method)
    unsupported = _unsupported(method, key, params)
    if unsupported is not None or method == "OPTIONS":
        return make(Op.NOT_IMPLEMENTED, unsupported or "OptionsPreflight")
    if key is None:
        return _bucket_op(method, params, make)
    return _object_op(method, params, HeaderMap.of(headers), make)


def _bucket_op(method: str, q: dict[str, str], make: _Make) -> Operation:
    object_level = {"uploadId", "partNumber", "versionId"} & q.keys()
    if object_level:
        # an object's sub-resource on a bucket: no operation we could mean
        raise _not_allowed(method)
    if method == "GET":
        if "location" in q:
            return make(Op.GetBucketLocation)
        if "versions" in q:
            return make(Op.ListObjectVersions)
        if "uploads" in q:
            return make(Op.ListMultipartUploads)
        if "list-type" in q:
            if q["list-type"] != "2":
                raise S3Error(
                    "InvalidArgument",
                    "Invalid List Type specified in Request",
                    ArgumentName="list-type",
                    ArgumentValue=q["list-type"],
                )
            return make(Op.ListObjectsV2)
        return make(Op.ListObjects)
    if method == "HEAD":
        return make(Op.HeadBucket)
    if method == "PUT" and not (q.keys() & _OURS):
        return make(Op.CreateBucket)
    if method == "DELETE" and not (q.keys() & _OURS):
        return make(Op.DeleteBucket)
    if method == "POST":
        if "delete" in q:
            return make(Op.DeleteObjects)
        if not q.keys() & _OURS:
            # a browser form upload (POST policy)
            return make(Op.NOT_IMPLEMENTED, "PostObject")
    raise _not_allowed(method)


def _object_op(method: str, q: dict[str, str], hm: HeaderMap, make: _Make) -> Operation:
    bucket_level = {"uploads", "delete", "location", "versions"} & q.keys()
    copy = "x-amz-copy-source" in hm
    if method in ("GET", "HEAD"):
        if bucket_level - {"uploads"} or (method == "HEAD" and "uploadId" in q):
            raise _not_allowed(method)
        if "uploads" in q:
            raise _not_allowed(method)
        if method == "GET" and "uploadId" in q:
            return make(Op.ListParts)
        return make(Op.GetObject if method == "GET" else Op.HeadObject)
    if method == "PUT":
        if bucket_level:
            raise _not_allowed(method)
        if "uploadId" in q or "partNumber" in q:
            if "uploadId" not in q or "partNumber" not in q:
                raise S3Error("InvalidRequest", "UploadPart needs both partNumber and uploadId")
            return make(Op.UploadPartCopy if copy else Op.UploadPart)
        return make(Op.CopyObject if copy else Op.PutObject)
    if method == "DELETE":
        if bucket_level:
            raise _not_allowed(method)
        return make(Op.AbortMultipartUpload if "uploadId" in q else Op.DeleteObject)
    if method == "POST":
        if "uploads" in q and "uploadId" not in q and not bucket_level - {"uploads"}:
            return make(Op.CreateMultipartUpload)
        if "uploadId" in q and not bucket_level:
            return make(Op.CompleteMultipartUpload)
    raise _not_allowed(method)


def _decode(text: str) -> str:
    try:
        return percent_decode(text, strict=True)
    except UnicodeDecodeError:
        raise S3Error("InvalidURI", "Couldn't parse the specified URI.") from None


def resolve_address(
    host: str | None, raw_path: str, domain: str | None = None
) -> tuple[str | None, str | None, bool]:
    """``(bucket, key, virtual_host)`` of a request.

    Virtual-host style (``<bucket>.<domain>``) when ``domain`` is configured and the Host
    header is under it, else path style (``/<bucket>/<key>``). Both are percent-decoded; an
    empty key is None; a key keeps every ``/`` (``a//b`` and a trailing ``/`` are keys of
    their own in S3). Raises ``KeyTooLongError`` past 1024 UTF-8 bytes.
    """
    path = raw_path.split("?", 1)[0] or "/"
    if not path.startswith("/"):
        path = "/" + path
    bucket: str | None = None
    rest: str
    virtual = False
    if domain and host:
        name = host.strip().lower()
        if not name.startswith("["):  # an IPv6 literal is never a virtual host
            name = name.rsplit(":", 1)[0]
        suffix = "." + domain.strip().lower().rstrip(".")
        name = name.rstrip(".")
        if name.endswith(suffix) and len(name) > len(suffix):
            bucket = name[: -len(suffix)]
            virtual = True
    if virtual:
        rest = path[1:]
    else:
        first, _, rest = path[1:].partition("/")
        bucket = _decode(first) or None
    key = _decode(rest) if rest else None
    if key is not None and len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise S3Error("KeyTooLongError", Size=str(len(key.encode("utf-8"))))
    return bucket, key, virtual
