"""The S3 gateway's object operations through boto3 (default settings) against a real
``limno serve --s3-port``: put/get/head/delete, metadata and standard headers, ranges,
conditional reads and writes, copies (also across branches and pools), DeleteObjects,
the staged -> commit -> tag -> read-at-tag flow, and S3's error codes."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import zlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, gateway, s3

__all__ = ["gateway", "s3"]  # fixtures


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def status(e: pytest.ExceptionInfo[ClientError]) -> int:
    return int(e.value.response["ResponseMetadata"]["HTTPStatusCode"])


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def md5(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest() + '"'


def test_put_get_head_round_trip_metadata_and_standard_headers(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    expires = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    put = s3.put_object(
        Bucket=bucket,
        Key="main/docs/a.txt",
        Body=b"hello world",
        ContentType="text/plain",
        Metadata={"Owner": "ann", "x-y": "1 2"},
        ContentDisposition='attachment; filename="a.txt"',
        ContentEncoding="identity",
        CacheControl="max-age=60",
        ContentLanguage="en",
        Expires=expires,
    )
    assert put["ETag"] == md5(b"hello world")
    got = s3.get_object(Bucket=bucket, Key="main/docs/a.txt")
    assert got["Body"].read() == b"hello world"
    head = s3.head_object(Bucket=bucket, Key="main/docs/a.txt")
    for answer in (got, head):
        assert answer["ETag"] == md5(b"hello world")
        assert answer["ContentLength"] == 11
        assert answer["ContentType"] == "text/plain"
        assert answer["Metadata"] == {"owner": "ann", "x-y": "1 2"}
        assert answer["ContentDisposition"] == 'attachment; filename="a.txt"'
        assert answer["ContentEncoding"] == "identity"
        assert answer["CacheControl"] == "max-age=60"
        assert answer["ContentLanguage"] == "en"
        assert answer["ResponseMetadata"]["HTTPHeaders"]["expires"].startswith("Wed, 02 Jan 2030")
        assert answer["AcceptRanges"] == "bytes"
        assert abs(answer["LastModified"] - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=5)


def test_default_checksums_travel_as_aws_chunked_trailers(gateway: Gateway) -> None:
    """boto3's defaults over TLS: the body aws-chunked, its CRC32 in a trailer, checked."""
    client = gateway.client()
    sent: list[dict[str, str]] = []
    client.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: sent.append({k.lower(): _text(v) for k, v in request.headers.items()}),
    )
    bucket = gateway.pool()
    data = bytes(range(256)) * 4096
    answer = client.put_object(Bucket=bucket, Key="main/crc", Body=data)
    headers = sent[0]
    assert headers["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert headers["x-amz-trailer"] == "x-amz-checksum-crc32"
    assert "aws-chunked" in headers["content-encoding"]
    assert answer["ChecksumCRC32"] == base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    got = client.get_object(Bucket=bucket, Key="main/crc")
    assert got["Body"].read() == data
    assert "ContentEncoding" not in got  # aws-chunked was the transfer's, not the object's


def test_get_response_overrides(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/x.bin", Body=b"abc", ContentType="text/plain")
    got = s3.get_object(
        Bucket=bucket,
        Key="main/x.bin",
        ResponseContentType="application/json",
        ResponseContentDisposition="inline",
        ResponseCacheControl="no-cache",
        ResponseContentLanguage="fr",
        ResponseContentEncoding="br",
    )
    assert got["Body"].read() == b"abc"
    assert got["ContentType"] == "application/json"
    assert got["ContentDisposition"] == "inline"
    assert got["CacheControl"] == "no-cache"
    assert got["ContentLanguage"] == "fr"
    assert got["ContentEncoding"] == "br"


def test_empty_and_unusual_keys(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    keys = ["main/empty", "main/dir with space/ü+%&=.txt", "main/a//b", "main/folder/"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"" if key == "main/empty" else key.encode())
    for key in keys:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == (b"" if key == "main/empty" else key.encode())
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]]
    assert listed == sorted(keys)


def test_ranges(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    data = bytes(range(256)) * 40  # 10,240 bytes
    s3.put_object(Bucket=bucket, Key="main/r", Body=data)
    cases = {
        "bytes=0-0": (data[:1], "bytes 0-0/10240"),
        "bytes=100-199": (data[100:200], "bytes 100-199/10240"),
        "bytes=10000-": (data[10000:], "bytes 10000-10239/10240"),
        "bytes=-10": (data[-10:], "bytes 10230-10239/10240"),
        "bytes=10200-99999": (data[10200:], "bytes 10200-10239/10240"),
        "bytes=-99999": (data, "bytes 0-10239/10240"),
    }
    for asked, (expected, content_range) in cases.items():
        got = s3.get_object(Bucket=bucket, Key="main/r", Range=asked)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206, asked
        assert got["ContentRange"] == content_range
        assert got["Body"].read() == expected
    # not one range of bytes: ignored, the whole object (as S3)
    for ignored in ("bytes=0-1,5-6", "items=0-1", "bytes=5-1"):
        got = s3.get_object(Bucket=bucket, Key="main/r", Range=ignored)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert got["Body"].read() == data
    for unsatisfiable in ("bytes=10240-", "bytes=20000-30000", "bytes=-0"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key="main/r", Range=unsatisfiable)
        assert (code(e), status(e)) == ("InvalidRange", 416)
        headers = e.value.response["ResponseMetadata"]["HTTPHeaders"]
        assert headers["content-range"] == "bytes */10240"


def test_conditional_reads(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/c", Body=b"v1")
    head = s3.head_object(Bucket=bucket, Key="main/c")
    etag, modified = head["ETag"], head["LastModified"]
    before, after = modified - dt.timedelta(days=1), modified + dt.timedelta(seconds=1)
    ok = [
        {"IfMatch": etag},
        {"IfMatch": f'"nope", {etag}'},
        {"IfNoneMatch": '"other"'},
        {"IfModifiedSince": before},
        {"IfUnmodifiedSince": after},
        # If-Match true wins over If-Unmodified-Since false (S3, RFC 7232)
        {"IfMatch": etag, "IfUnmodifiedSince": before},
    ]
    for conditions in ok:
        assert s3.get_object(Bucket=bucket, Key="main/c", **conditions)["Body"].read() == b"v1"
        s3.head_object(Bucket=bucket, Key="main/c", **conditions)
    failed = [{"IfMatch": '"nope"'}, {"IfUnmodifiedSince": before}]
    for conditions in failed:
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key="main/c", **conditions)
        assert (code(e), status(e)) == ("PreconditionFailed", 412)
        with pytest.raises(ClientError) as e:
            s3.head_object(Bucket=bucket, Key="main/c", **conditions)
        assert status(e) == 412
    not_modified = [
        {"IfNoneMatch": etag},
        {"IfNoneMatch": "*"},
        {"IfModifiedSince": modified},
        # If-None-Match false with If-Modified-Since true: 304 (S3, RFC 7232)
        {"IfNoneMatch": etag, "IfModifiedSince": before},
    ]
    for conditions in not_modified:
        for call in (s3.get_object, s3.head_object):
            with pytest.raises(ClientError) as e:
                call(Bucket=bucket, Key="main/c", **conditions)
            assert status(e) == 304
            assert e.value.response["ResponseMetadata"]["HTTPHeaders"]["etag"] == etag


def test_conditional_writes(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    first = s3.put_object(Bucket=bucket, Key="main/w", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/w", Body=b"2", IfNoneMatch="*")
    assert (code(e), status(e)) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/w", Body=b"2", IfMatch='"0123"')
    assert (code(e), status(e)) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/absent", Body=b"2", IfMatch=first["ETag"])
    assert status(e) in (404, 412)
    s3.put_object(Bucket=bucket, Key="main/w", Body=b"3", IfMatch=first["ETag"])
    assert s3.get_object(Bucket=bucket, Key="main/w")["Body"].read() == b"3"


def test_errors(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    gateway.lake().create_pool(f"rec-{bucket}", key="ts")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/missing")
    assert (code(e), status(e)) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main")  # a ref, no path
    assert code(e) == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="nobranch/x")
    assert code(e) == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="main/missing")
    assert status(e) == 404
    for missing in ("no-such-pool", f"rec-{bucket}"):  # a record pool is no bucket
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=missing, Key="main/x")
        assert (code(e), status(e)) == ("NoSuchBucket", 404)
        with pytest.raises(ClientError) as e:
            s3.head_bucket(Bucket=missing)
        assert status(e) == 404
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert bucket in names and f"rec-{bucket}" not in names
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="v9/x", Body=b"")  # no such branch
    assert status(e) in (400, 404)


def test_buckets_head_location(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    head = s3.head_bucket(Bucket=bucket)
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-bucket-region"] == "us-east-1"
    assert s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") is None


def test_delete_object_and_delete_objects(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"main/d/{i}", Body=b"x")
    assert (
        s3.delete_object(Bucket=bucket, Key="main/d/0")["ResponseMetadata"]["HTTPStatusCode"] == 204
    )
    s3.delete_object(Bucket=bucket, Key="main/d/0")  # again: S3 says 204 too
    answer = s3.delete_objects(
        Bucket=bucket,
        Delete={"Objects": [{"Key": "main/d/1"}, {"Key": "main/d/2"}, {"Key": "main/d/none"}]},
    )
    assert sorted(d["Key"] for d in answer["Deleted"]) == ["main/d/1", "main/d/2", "main/d/none"]
    assert "Errors" not in answer
    quiet = s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": "main/d/3"}, {"Key": "main"}], "Quiet": True}
    )
    assert "Deleted" not in quiet
    assert [err["Key"] for err in quiet["Errors"]] == ["main"]
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]]
    assert left == ["main/d/4"]


def test_copy_object(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    gateway.lake().file_pool(bucket).branch("dev")
    s3.put_object(
        Bucket=bucket, Key="main/src", Body=b"payload", ContentType="text/csv", Metadata={"a": "1"}
    )
    source = {"Bucket": bucket, "Key": "main/src"}
    made = s3.copy_object(Bucket=bucket, Key="dev/copied", CopySource=source)
    assert made["CopyObjectResult"]["ETag"] == md5(b"payload")
    head = s3.head_object(Bucket=bucket, Key="dev/copied")
    assert (head["ContentType"], head["Metadata"]) == ("text/csv", {"a": "1"})
    replaced = s3.copy_object(
        Bucket=bucket,
        Key="main/replaced",
        CopySource=source,
        MetadataDirective="REPLACE",
        Metadata={"b": "2"},
        ContentType="text/plain",
    )
    assert replaced["CopyObjectResult"]["ETag"] == md5(b"payload")
    head = s3.head_object(Bucket=bucket, Key="main/replaced")
    assert (head["ContentType"], head["Metadata"]) == ("text/plain", {"b": "2"})
    with pytest.raises(ClientError) as e:  # onto itself, nothing changed
        s3.copy_object(Bucket=bucket, Key="main/src", CopySource=source)
    assert code(e) == "InvalidRequest"
    s3.copy_object(Bucket=bucket, Key="main/src", CopySource=source, MetadataDirective="REPLACE")
    assert s3.head_object(Bucket=bucket, Key="main/src")["Metadata"] == {}
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="dev/c2", CopySource=source, CopySourceIfMatch='"x"')
    assert (code(e), status(e)) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as e:
        s3.copy_object(
            Bucket=bucket, Key="dev/c2", CopySource=source, CopySourceIfNoneMatch=md5(b"payload")
        )
    assert status(e) == 412
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="dev/c2", CopySource={"Bucket": bucket, "Key": "main/no"})
    assert code(e) == "NoSuchKey"
    other = gateway.pool()
    s3.copy_object(Bucket=other, Key="main/from-elsewhere", CopySource=source)
    got = s3.get_object(Bucket=other, Key="main/from-elsewhere")
    assert got["Body"].read() == b"payload"
    # boto3's managed copy (HeadObject, then CopyObject) across branches
    s3.copy(source, bucket, "dev/managed")
    assert s3.get_object(Bucket=bucket, Key="dev/managed")["Body"].read() == b"payload"


def test_staged_commit_tag_read_at_tag(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    pool = gateway.lake().file_pool(bucket)
    pool.branch("dev")
    s3.put_object(Bucket=bucket, Key="main/f.txt", Body=b"one")
    # staged: read-after-write on main, invisible on dev, listed as uncommitted
    assert s3.get_object(Bucket=bucket, Key="main/f.txt")["Body"].read() == b"one"
    with pytest.raises(ClientError):
        s3.get_object(Bucket=bucket, Key="dev/f.txt")
    assert [c.path for c in pool.uncommitted("main")] == ["f.txt"]
    pool.commit("main", "first", author="test")
    assert pool.uncommitted("main") == []
    pool.tag("v1", "main")
    s3.put_object(Bucket=bucket, Key="main/f.txt", Body=b"two")
    assert s3.get_object(Bucket=bucket, Key="main/f.txt")["Body"].read() == b"two"
    assert s3.get_object(Bucket=bucket, Key="v1/f.txt")["Body"].read() == b"one"
    commit = pool.resolve("v1")
    assert s3.get_object(Bucket=bucket, Key=f"{commit}/f.txt")["Body"].read() == b"one"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="v1/")["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("v1/f.txt", 3)]
    with pytest.raises(ClientError) as e:  # a tag takes no writes
        s3.put_object(Bucket=bucket, Key="v1/f.txt", Body=b"three")
    assert status(e) in (400, 403, 404, 409)
    assert s3.get_object(Bucket=bucket, Key="v1/f.txt")["Body"].read() == b"one"


def test_version_null_and_part_numbers(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/v", Body=b"only version")
    got = s3.get_object(Bucket=bucket, Key="main/v", VersionId="null")
    assert got["Body"].read() == b"only version"
    assert s3.get_object(Bucket=bucket, Key="main/v", PartNumber=1)["Body"].read() == (
        b"only version"
    )
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/v", VersionId="3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY")
    assert (code(e), status(e)) == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/v", PartNumber=2)
    assert status(e) == 416
    s3.delete_object(Bucket=bucket, Key="main/v", VersionId="null")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
