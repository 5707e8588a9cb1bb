"""Operation identification, addressing, and the mapping of limno's errors to S3's."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.proto_capture import DOMAIN, Capturer
from limno.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptError,
    ForbiddenError,
    HookVetoError,
    InvalidInputError,
    NotFoundError,
    PreconditionFailedError,
    ProtectedBranchError,
    QueryTimeoutError,
    ResultTooLargeError,
    StorageError,
    UnauthenticatedError,
)
from limno.gateway.operations import Op, identify, parse_query, resolve_address
from limno.gateway.s3errors import CODES, S3Error, from_limno

COPY = {"x-amz-copy-source": "/pool/main/src"}

TABLE = [
    ("GET", None, None, "", {}, Op.ListBuckets),
    ("PUT", "b", None, "", {}, Op.CreateBucket),
    ("DELETE", "b", None, "", {}, Op.DeleteBucket),
    ("HEAD", "b", None, "", {}, Op.HeadBucket),
    ("GET", "b", None, "location", {}, Op.GetBucketLocation),
    ("GET", "b", None, "prefix=a&delimiter=/", {}, Op.ListObjects),
    ("GET", "b", None, "list-type=2&prefix=a", {}, Op.ListObjectsV2),
    ("GET", "b", None, "versions&prefix=a", {}, Op.ListObjectVersions),
    ("GET", "b", None, "uploads", {}, Op.ListMultipartUploads),
    ("POST", "b", None, "delete", {}, Op.DeleteObjects),
    ("GET", "b", "main/k", "", {}, Op.GetObject),
    ("GET", "b", "main/k", "response-content-type=x&x-id=GetObject&partNumber=1", {}, Op.GetObject),
    ("HEAD", "b", "main/k", "versionId=null", {}, Op.HeadObject),
    ("PUT", "b", "main/k", "x-id=PutObject", {}, Op.PutObject),
    ("PUT", "b", "main/k", "", COPY, Op.CopyObject),
    ("DELETE", "b", "main/k", "", {}, Op.DeleteObject),
    ("POST", "b", "main/k", "uploads", {}, Op.CreateMultipartUpload),
    ("PUT", "b", "main/k", "partNumber=1&uploadId=u", {}, Op.UploadPart),
    ("PUT", "b", "main/k", "partNumber=1&uploadId=u", COPY, Op.UploadPartCopy),
    ("POST", "b", "main/k", "uploadId=u", {}, Op.CompleteMultipartUpload),
    ("DELETE", "b", "main/k", "uploadId=u", {}, Op.AbortMultipartUpload),
    ("GET", "b", "main/k", "uploadId=u&max-parts=2", {}, Op.ListParts),
]


@pytest.mark.parametrize(("method", "bucket", "key", "query", "headers", "op"), TABLE)
def test_operation_table(
    method: str, bucket: str | None, key: str | None, query: str, headers: dict[str, str], op: Op
) -> None:
    found = identify(method, bucket, key, parse_query(query), headers)
    assert found.op is op and found.implemented and found.name == op.value
    assert (found.bucket, found.key) == (bucket, key)


NOT_IMPLEMENTED = [
    ("GET", "b", None, "acl", "GetBucketAcl"),
    ("PUT", "b", None, "tagging", "PutBucketTagging"),
    ("PUT", "b", "main/k", "tagging", "PutObjectTagging"),
    ("PUT", "b", "main/k", "acl", "PutObjectAcl"),
    ("GET", "b", None, "policy", "GetBucketPolicy"),
    ("PUT", "b", None, "lifecycle", "PutBucketLifecycle"),
    ("GET", "b", None, "cors", "GetBucketCors"),
    ("PUT", "b", None, "versioning", "PutBucketVersioning"),
    ("DELETE", "b", None, "website", "DeleteBucketWebsite"),
    ("GET", "b", None, "object-lock", "GetBucketObjectLockConfiguration"),
    ("GET", "b", "main/k", "torrent", "GetObjectTorrent"),
    ("POST", "b", "main/k", "select&select-type=2", "SelectObjectContent"),
    ("POST", "b", "main/k", "restore", "RestoreObject"),
    ("GET", "b", "main/k", "attributes", "GetObjectAttributes"),
    ("GET", "b", "main/k", "brand-new-subresource", "GetObject?brand-new-subresource"),
    ("POST", "b", None, "", "PostObject"),
    ("OPTIONS", "b", "main/k", "", "OptionsPreflight"),
]


@pytest.mark.parametrize(("method", "bucket", "key", "query", "name"), NOT_IMPLEMENTED)
def test_unimplemented_subresources_are_named_never_guessed(
    method: str, bucket: str, key: str | None, query: str, name: str
) -> None:
    found = identify(method, bucket, key, parse_query(query), COPY if key else {})
    assert found.op is Op.NOT_IMPLEMENTED and not found.implemented
    assert found.name == name
    assert S3Error("NotImplemented").status == 501


@pytest.mark.parametrize(
    ("method", "bucket", "key", "query", "code"),
    [
        ("PUT", None, None, "", "MethodNotAllowed"),
        ("PATCH", "b", "k", "", "MethodNotAllowed"),
        ("POST", "b", "k", "", "MethodNotAllowed"),
        ("GET", "b", None, "uploadId=u", "MethodNotAllowed"),
        ("PUT", "b", "k", "uploads", "MethodNotAllowed"),
        ("PUT", "b", "k", "partNumber=1", "InvalidRequest"),
        ("GET", "b", None, "list-type=3", "InvalidArgument"),
    ],
)
def test_impossible_requests(
    method: str, bucket: str | None, key: str | None, query: str, code: str
) -> None:
    with pytest.raises(S3Error) as e:
        identify(method, bucket, key, parse_query(query), {})
    assert e.value.code == code


def test_every_boto_call_is_identified() -> None:
    cap = Capturer()
    c = cap.client
    calls: list[tuple[Any, dict[str, Any], Op]] = [
        (c.list_buckets, {}, Op.ListBuckets),
        (c.head_bucket, {"Bucket": "b"}, Op.HeadBucket),
        (c.list_objects, {"Bucket": "b"}, Op.ListObjects),
        (c.list_objects_v2, {"Bucket": "b"}, Op.ListObjectsV2),
        (c.list_object_versions, {"Bucket": "b"}, Op.ListObjectVersions),
        (c.list_multipart_uploads, {"Bucket": "b"}, Op.ListMultipartUploads),
        (c.get_bucket_location, {"Bucket": "b"}, Op.GetBucketLocation),
        (
            c.delete_objects,
            {"Bucket": "b", "Delete": {"Objects": [{"Key": "k"}]}},
            Op.DeleteObjects,
        ),
        (c.create_bucket, {"Bucket": "b"}, Op.CreateBucket),
        (c.delete_bucket, {"Bucket": "b"}, Op.DeleteBucket),
        (c.get_object, {"Bucket": "b", "Key": "k"}, Op.GetObject),
        (c.head_object, {"Bucket": "b", "Key": "k"}, Op.HeadObject),
        (c.put_object, {"Bucket": "b", "Key": "k", "Body": b"x"}, Op.PutObject),
        (c.copy_object, {"Bucket": "b", "Key": "k", "CopySource": "b/s"}, Op.CopyObject),
        (c.delete_object, {"Bucket": "b", "Key": "k"}, Op.DeleteObject),
        (c.create_multipart_upload, {"Bucket": "b", "Key": "k"}, Op.CreateMultipartUpload),
        (
            c.upload_part,
            {"Bucket": "b", "Key": "k", "UploadId": "u", "PartNumber": 1, "Body": b"x"},
            Op.UploadPart,
        ),
        (
            c.upload_part_copy,
            {"Bucket": "b", "Key": "k", "UploadId": "u", "PartNumber": 1, "CopySource": "b/s"},
            Op.UploadPartCopy,
        ),
        (
            c.complete_multipart_upload,
            {"Bucket": "b", "Key": "k", "UploadId": "u", "MultipartUpload": {"Parts": []}},
            Op.CompleteMultipartUpload,
        ),
        (
            c.abort_multipart_upload,
            {"Bucket": "b", "Key": "k", "UploadId": "u"},
            Op.AbortMultipartUpload,
        ),
        (c.list_parts, {"Bucket": "b", "Key": "k", "UploadId": "u"}, Op.ListParts),
        (
            c.put_object_tagging,
            {"Bucket": "b", "Key": "k", "Tagging": {"TagSet": []}},
            Op.NOT_IMPLEMENTED,
        ),
        (c.get_bucket_versioning, {"Bucket": "b"}, Op.NOT_IMPLEMENTED),
        (c.put_bucket_acl, {"Bucket": "b", "ACL": "private"}, Op.NOT_IMPLEMENTED),
        (c.get_object_acl, {"Bucket": "b", "Key": "k"}, Op.NOT_IMPLEMENTED),
        (
            c.get_object_attributes,
            {"Bucket": "b", "Key": "k", "ObjectAttributes": ["ETag"]},
            Op.NOT_IMPLEMENTED,
        ),
    ]
    for call, params, op in calls:
        sent = cap.sent(call, **params)
        bucket, key, _ = resolve_address(sent.host, sent.raw_path, DOMAIN)
        found = identify(sent.method, bucket, key, parse_query(sent.raw_query), sent.headers)
        assert found.op is op, (call, found)


def test_resolve_address() -> None:
    assert resolve_address("localhost:9868", "/pool/main/a%20b/c%2Bd") == (
        "pool",
        "main/a b/c+d",
        False,
    )
    assert resolve_address("localhost", "/pool/") == ("pool", None, False)
    assert resolve_address("localhost", "/") == (None, None, False)
    assert resolve_address("localhost", "/pool/main//x/") == ("pool", "main//x/", False)
    assert resolve_address("pool.s3.local.limno:9868", "/main/k", DOMAIN) == (
        "pool",
        "main/k",
        True,
    )
    assert resolve_address("my.pool.s3.local.limno", "/", DOMAIN) == ("my.pool", None, True)
    assert resolve_address("s3.local.limno", "/pool/k", DOMAIN) == ("pool", "k", False)
    assert resolve_address("127.0.0.1:9868", "/pool/k", DOMAIN) == ("pool", "k", False)
    with pytest.raises(S3Error, match="KeyTooLongError"):
        resolve_address("h", "/pool/" + "x" * 1025)
    with pytest.raises(S3Error, match="InvalidURI"):
        resolve_address("h", "/pool/%ff")


def test_parse_query() -> None:
    assert parse_query("uploads&prefix=a%2Fb+c&prefix=2") == {"uploads": "", "prefix": "a/b+c"}


@pytest.mark.parametrize(
    ("err", "context", "code", "status"),
    [
        (NotFoundError("x"), {"bucket": "b"}, "NoSuchBucket", 404),
        (NotFoundError("x"), {"bucket": "b", "key": "k"}, "NoSuchKey", 404),
        (NotFoundError("x"), {"bucket": "b", "key": "k", "upload_id": "u"}, "NoSuchUpload", 404),
        (AlreadyExistsError("x"), {"bucket": "b"}, "BucketAlreadyOwnedByYou", 409),
        (AlreadyExistsError("x"), {"bucket": "b", "key": "k"}, "PreconditionFailed", 412),
        (ConflictError("x"), {"bucket": "b", "op": "DeleteBucket"}, "BucketNotEmpty", 409),
        (ConflictError("x"), {"bucket": "b", "key": "k"}, "OperationAborted", 409),
        (PreconditionFailedError("x"), {}, "PreconditionFailed", 412),
        (HookVetoError("x"), {}, "PreconditionFailed", 412),
        (InvalidInputError("x"), {"bucket": "B!", "op": "CreateBucket"}, "InvalidBucketName", 400),
        (InvalidInputError("x"), {}, "InvalidArgument", 400),
        (UnauthenticatedError("x"), {}, "AccessDenied", 403),
        (ForbiddenError("x"), {}, "AccessDenied", 403),
        (ProtectedBranchError("x"), {"bucket": "b", "key": "main/k"}, "AccessDenied", 403),
        (ResultTooLargeError("x"), {}, "EntityTooLarge", 400),
        (StorageError("x"), {}, "ServiceUnavailable", 503),
        (QueryTimeoutError("x"), {}, "ServiceUnavailable", 503),
        (CorruptError("x"), {}, "InternalError", 500),
        (RuntimeError("secret internals"), {}, "InternalError", 500),
    ],
)
def test_from_limno(err: BaseException, context: dict[str, str], code: str, status: int) -> None:
    got = from_limno(err, **context)
    assert (got.code, got.status) == (code, status)
    body = got.to_xml("r1").decode()
    assert f"<Code>{code}</Code>" in body and "<RequestId>r1</RequestId>" in body
    assert "secret internals" not in body
    if "key" in context:
        assert got.resource == f"/{context['bucket']}/{context['key']}"


def test_s3_error_basics() -> None:
    passthrough = S3Error("SlowDown")
    assert from_limno(passthrough) is passthrough and passthrough.status == 503
    assert S3Error("NotModified").status == 304 and not S3Error("NotModified").has_body
    assert S3Error("InvalidRange").status == 416
    custom = S3Error("Weird", "odd", status=418, Key="a<b")
    assert custom.status == 418 and b"<Key>a&lt;b</Key>" in custom.to_xml()
    for code, (status, message) in CODES.items():
        assert 300 <= status < 600 and message, code
