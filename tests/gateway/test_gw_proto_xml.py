"""S3 XML bodies: what we build, botocore's own response parser reads back; what clients
send, we parse safely."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest
from botocore import handlers
from botocore.parsers import RestXMLParser
from hypothesis import given, settings
from hypothesis import strategies as st

from limno.gateway import s3xml
from limno.gateway.s3errors import S3Error
from limno.gateway.s3xml import (
    BucketEntry,
    DeletedEntry,
    DeleteErrorEntry,
    ObjectEntry,
    PartEntry,
    UploadEntry,
)

_MODEL = botocore.session.get_session().get_service_model("s3")
T0 = datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)


def parse(operation: str, body: bytes, status: int = 200) -> dict[str, Any]:
    """The dict boto3 would hand its caller for this response body."""
    shape = _MODEL.operation_model(operation).output_shape
    parsed: dict[str, Any] = RestXMLParser().parse(
        {"body": body, "headers": {}, "status_code": status}, shape
    )
    parsed.pop("ResponseMetadata", None)
    return parsed


def location(body: bytes) -> str | None:
    """GetBucketLocation as boto3 reads it (by hand: its model cannot describe the body)."""

    class Response:
        raw = object()
        content = body

    parsed: dict[str, Any] = {}
    handlers.parse_get_bucket_location(parsed, Response())
    value: str | None = parsed["LocationConstraint"]
    return value


def test_timestamps() -> None:
    assert s3xml.s3_timestamp(T0) == "2024-05-06T07:08:09.123Z"
    assert s3xml.http_date(T0) == "Mon, 06 May 2024 07:08:09 GMT"
    assert s3xml.parse_http_date("Mon, 06 May 2024 07:08:09 GMT") == T0.replace(microsecond=0)
    assert s3xml.parse_http_date("Monday, 06-May-24 07:08:09 GMT") == T0.replace(microsecond=0)
    assert s3xml.parse_http_date("Mon May  6 07:08:09 2024") == T0.replace(microsecond=0)
    assert s3xml.parse_http_date("yesterday") is None


def test_list_buckets() -> None:
    out = parse("ListBuckets", s3xml.list_buckets([BucketEntry("pool-a", T0)]))
    assert out["Buckets"] == [{"Name": "pool-a", "CreationDate": T0}]
    assert out["Owner"]["ID"] == "limno"


def test_list_objects_v2_with_prefixes() -> None:
    body = s3xml.list_objects_v2(
        bucket="pool",
        prefix="main/",
        delimiter="/",
        max_keys=2,
        is_truncated=True,
        contents=[ObjectEntry("main/a.csv", T0, "abc", 3)],
        common_prefixes=["main/dir/"],
        next_continuation_token="tok",
        continuation_token="prev",
        start_after="main/0",
    )
    out = parse("ListObjectsV2", body)
    assert out["KeyCount"] == 2 and out["IsTruncated"] is True
    assert out["Contents"][0] == {
        "Key": "main/a.csv",
        "LastModified": T0,
        "ETag": '"abc"',
        "Size": 3,
        "StorageClass": "STANDARD",
    }
    assert out["CommonPrefixes"] == [{"Prefix": "main/dir/"}]
    assert (out["NextContinuationToken"], out["ContinuationToken"]) == ("tok", "prev")
    assert (out["Delimiter"], out["StartAfter"], out["MaxKeys"]) == ("/", "main/0", 2)


def test_list_objects_v1_and_versions() -> None:
    entry = ObjectEntry("k", T0, "e-2", 10)
    v1 = parse(
        "ListObjects",
        s3xml.list_objects_v1(
            bucket="pool", marker="a", next_marker="k", is_truncated=True, contents=[entry]
        ),
    )
    assert v1["Contents"][0]["Owner"]["ID"] == "limno" and v1["NextMarker"] == "k"
    versions = parse(
        "ListObjectVersions",
        s3xml.list_object_versions(
            bucket="pool", contents=[entry], next_key_marker="k", is_truncated=True
        ),
    )
    assert versions["Versions"][0]["VersionId"] == "null"
    assert versions["Versions"][0]["IsLatest"] is True
    assert versions["NextVersionIdMarker"] == "null"


KEYS = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(key=KEYS, prefix=st.text(max_size=10), delim=st.sampled_from(["/", "+", " ", "%"]))
def test_encoding_type_url_round_trips_through_botocore(key: str, prefix: str, delim: str) -> None:
    body = s3xml.list_objects_v2(
        bucket="pool",
        prefix=prefix,
        delimiter=delim,
        start_after=key,
        contents=[ObjectEntry(key, T0, "e", 1)],
        common_prefixes=[key + delim],
        encoding_type="url",
    )
    out = parse("ListObjectsV2", body)
    assert out["EncodingType"] == "url"
    handlers.decode_list_object_v2(out, {"encoding_type_auto_set": True})
    assert out["Contents"][0]["Key"] == key
    assert out["CommonPrefixes"][0]["Prefix"] == key + delim
    assert (out["Prefix"], out["Delimiter"], out["StartAfter"]) == (prefix, delim, key)
    v1 = parse(
        "ListObjects",
        s3xml.list_objects_v1(
            bucket="pool",
            marker=key,
            next_marker=key,
            contents=[ObjectEntry(key, T0, "e", 1)],
            encoding_type="url",
        ),
    )
    handlers.decode_list_object(v1, {"encoding_type_auto_set": True})
    assert v1["Contents"][0]["Key"] == v1["Marker"] == v1["NextMarker"] == key


def test_encoding_type_encodes_what_xml_cannot_carry() -> None:
    body = s3xml.list_objects_v2(
        bucket="pool", contents=[ObjectEntry("a\x01b c+d", T0, "e", 1)], encoding_type="url"
    )
    assert b"<Key>a%01b%20c%2Bd</Key>" in body
    with pytest.raises(S3Error) as e:
        s3xml.list_objects_v2(bucket="pool", encoding_type="base64")
    assert e.value.code == "InvalidArgument"


def test_multipart_documents() -> None:
    assert parse("CreateMultipartUpload", s3xml.initiate_multipart_upload("b", "k", "u1")) == {
        "Bucket": "b",
        "Key": "k",
        "UploadId": "u1",
    }
    done = parse(
        "CompleteMultipartUpload",
        s3xml.complete_multipart_upload(location="http://x/b/k", bucket="b", key="k", etag="abc-2"),
    )
    assert done["ETag"] == '"abc-2"' and done["Location"] == "http://x/b/k"
    parts = parse(
        "ListParts",
        s3xml.list_parts(
            bucket="b",
            key="k",
            upload_id="u1",
            parts=[PartEntry(1, T0, "p1", 5), PartEntry(2, T0, "p2", 6)],
            max_parts=2,
            is_truncated=True,
        ),
    )
    assert [p["PartNumber"] for p in parts["Parts"]] == [1, 2]
    assert parts["NextPartNumberMarker"] == 2 and parts["IsTruncated"] is True
    ups = parse(
        "ListMultipartUploads",
        s3xml.list_multipart_uploads(
            bucket="b", uploads=[UploadEntry("k", "u1", T0)], common_prefixes=["d/"]
        ),
    )
    assert ups["Uploads"][0]["UploadId"] == "u1" and ups["Uploads"][0]["Initiated"] == T0
    copy = parse("UploadPartCopy", s3xml.copy_part_result("e1", T0))
    assert copy["CopyPartResult"]["ETag"] == '"e1"'
    obj = parse("CopyObject", s3xml.copy_object_result("e2", T0))
    assert obj["CopyObjectResult"]["LastModified"] == T0


def test_location_and_delete_result() -> None:
    assert location(s3xml.location_constraint(None)) is None
    assert location(s3xml.location_constraint("eu-west-1")) == "eu-west-1"
    body = s3xml.delete_result(
        [DeletedEntry("a"), DeletedEntry("b")], [DeleteErrorEntry("c", "AccessDenied", "no")]
    )
    out = parse("DeleteObjects", body)
    assert [d["Key"] for d in out["Deleted"]] == ["a", "b"]
    assert out["Errors"] == [{"Key": "c", "Code": "AccessDenied", "Message": "no"}]
    quiet = parse("DeleteObjects", s3xml.delete_result([DeletedEntry("a")], [], quiet=True))
    assert "Deleted" not in quiet


def test_error_document_reads_as_botocore_error() -> None:
    err = S3Error("NoSuchKey", resource="/pool/main/k", Key="main/k")
    shape = _MODEL.operation_model("GetObject").output_shape
    parsed = RestXMLParser().parse(
        {"body": err.to_xml("req-1"), "headers": {}, "status_code": err.status}, shape
    )
    assert parsed["Error"]["Code"] == "NoSuchKey"
    assert parsed["Error"]["Message"] == "The specified key does not exist."
    assert b"<RequestId>req-1</RequestId>" in err.to_xml("req-1")
    assert S3Error("NotModified").to_xml() == b""


# -- request bodies ------------------------------------------------------------------------


def _serialized(operation: str, params: dict[str, Any]) -> bytes:
    """The XML body botocore serializes for ``operation``."""
    from botocore.serialize import create_serializer

    body = create_serializer("rest-xml").serialize_to_request(
        params, _MODEL.operation_model(operation)
    )["body"]
    assert isinstance(body, bytes)
    return body


def test_parse_boto_delete_and_complete_bodies() -> None:
    keys = [f"k{i} &<>" for i in range(1000)]
    body = _serialized(
        "DeleteObjects",
        {"Bucket": "b", "Delete": {"Objects": [{"Key": k} for k in keys], "Quiet": True}},
    )
    req = s3xml.parse_delete(body)
    assert [o.key for o in req.objects] == keys and req.quiet
    body = _serialized(
        "CompleteMultipartUpload",
        {
            "Bucket": "b",
            "Key": "k",
            "UploadId": "u",
            "MultipartUpload": {
                "Parts": [
                    {"PartNumber": 1, "ETag": '"e1"', "ChecksumCRC32": "AAAAAA=="},
                    {"PartNumber": 3, "ETag": "e3"},
                ]
            },
        },
    )
    parts = s3xml.parse_complete_multipart(body)
    assert [(p.part_number, p.etag) for p in parts] == [(1, "e1"), (3, "e3")]
    assert parts[0].checksums == {"ChecksumCRC32": "AAAAAA=="}
    body = _serialized(
        "CreateBucket",
        {"Bucket": "b", "CreateBucketConfiguration": {"LocationConstraint": "eu-west-1"}},
    )
    assert s3xml.parse_create_bucket(body) == "eu-west-1"
    assert s3xml.parse_create_bucket(b"") is None


@pytest.mark.parametrize(
    ("parser", "body", "code"),
    [
        (s3xml.parse_delete, b"<Delete><Object><Key>a</Key>", "MalformedXML"),
        (s3xml.parse_delete, b"<Delete></Delete>", "MalformedXML"),
        (s3xml.parse_delete, b"<Other><Object><Key>a</Key></Object></Other>", "MalformedXML"),
        (
            s3xml.parse_delete,
            b"<Delete>" + b"<Object><Key>a</Key></Object>" * 1001 + b"</Delete>",
            "MalformedXML",
        ),
        (
            s3xml.parse_delete,
            b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x "aaaa">]>'
            b"<Delete><Object><Key>&x;</Key></Object></Delete>",
            "MalformedXML",
        ),
        (
            s3xml.parse_complete_multipart,
            b"<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>a</ETag></Part>"
            b"<Part><PartNumber>1</PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>",
            "InvalidPartOrder",
        ),
        (
            s3xml.parse_complete_multipart,
            b"<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>a</ETag></Part>"
            b"</CompleteMultipartUpload>",
            "InvalidArgument",
        ),
        (s3xml.parse_complete_multipart, b"<CompleteMultipartUpload/>", "MalformedXML"),
        (s3xml.parse_create_bucket, b"<CreateBucketConfiguration><", "MalformedXML"),
    ],
)
def test_bad_bodies(parser: Any, body: bytes, code: str) -> None:
    with pytest.raises(S3Error) as e:
        parser(body)
    assert e.value.code == code


def test_etag_quoting() -> None:
    assert s3xml.quote_etag("abc") == '"abc"' == s3xml.quote_etag('"abc"')
    assert s3xml.unquote_etag('"abc"') == "abc" == s3xml.unquote_etag('W/"abc"')
    assert s3xml.unquote_etag("&quot;abc&quot;") == "abc"
