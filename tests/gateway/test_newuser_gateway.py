"""What a new user's S3 clients found against a real ``limno serve --s3-port`` (plain
HTTP, one server for the module): conditional deletes (``If-Match`` on DeleteObject, an
``ETag`` per key of DeleteObjects, as S3 has them since 2024) must never delete a file
whose ETag differs, and an error about a key holding a control character must still be
an S3 XML error a client can parse (XML 1.0 cannot hold most control characters)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, running_gateway


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("newuser-gw")) as made:
        yield made


@pytest.fixture(scope="module")
def s3(gw: Gateway) -> Any:
    return gw.client(retries={"max_attempts": 1})


def _error(e: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = e.value.response
    return str(response["Error"]["Code"]), int(response["ResponseMetadata"]["HTTPStatusCode"])


def test_delete_object_if_match_is_honoured(gw: Gateway, s3: Any) -> None:
    bucket = gw.pool()
    etag = s3.put_object(Bucket=bucket, Key="main/a.txt", Body=b"keep me")["ETag"]
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=bucket, Key="main/a.txt", IfMatch='"0123456789abcdef"')
    assert _error(e) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="main/a.txt")["Body"].read() == b"keep me"
    with pytest.raises(ClientError) as e:  # a condition not implemented is never ignored
        s3.delete_object(Bucket=bucket, Key="main/a.txt", IfMatchSize=1)
    assert _error(e) == ("NotImplemented", 501)
    assert s3.get_object(Bucket=bucket, Key="main/a.txt")["Body"].read() == b"keep me"
    with pytest.raises(ClientError) as e:  # S3: If-Match on a missing key is 404
        s3.delete_object(Bucket=bucket, Key="main/nothing.txt", IfMatch=etag)
    assert _error(e) == ("NoSuchKey", 404)
    s3.delete_object(Bucket=bucket, Key="main/a.txt", IfMatch=etag)
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/")
    s3.put_object(Bucket=bucket, Key="main/b.txt", Body=b"b")
    s3.delete_object(Bucket=bucket, Key="main/b.txt", IfMatch="*")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix="main/")


def test_delete_objects_checks_each_etag(gw: Gateway, s3: Any) -> None:
    bucket = gw.pool()
    etags = {
        k: s3.put_object(Bucket=bucket, Key=f"main/{k}", Body=k.encode())["ETag"] for k in "abc"
    }
    answer = s3.delete_objects(
        Bucket=bucket,
        Delete={
            "Objects": [
                {"Key": "main/a", "ETag": etags["a"]},
                {"Key": "main/b", "ETag": etags["a"]},  # b's ETag is another: kept
                {"Key": "main/c"},
                {"Key": "main/d", "ETag": etags["a"]},  # no such key
                {"Key": "main/b", "Size": 1},  # a condition not implemented: refused
            ]
        },
    )
    assert sorted(d["Key"] for d in answer["Deleted"]) == ["main/a", "main/c"]
    assert {(x["Key"], x["Code"]) for x in answer["Errors"]} == {
        ("main/b", "PreconditionFailed"),
        ("main/d", "NoSuchKey"),
        ("main/b", "NotImplemented"),
    }
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]
    assert [o["Key"] for o in listed] == ["main/b"]


def test_errors_about_control_character_keys_are_parseable_xml(gw: Gateway, s3: Any) -> None:
    bucket = gw.pool()
    with pytest.raises(ClientError) as e:  # a path may not hold NUL
        s3.put_object(Bucket=bucket, Key="main/odd/\x00nul", Body=b"x")
    assert _error(e) == ("InvalidArgument", 400), e.value.response
    for key in ("main/none\x01\x1f", "nosuch\x02/x"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=bucket, Key=key)
        assert _error(e) == ("NoSuchKey", 404), e.value.response
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


def test_complete_multipart_location_is_a_url(gw: Gateway, s3: Any) -> None:
    """S3 answers the object's URL, its key URL-encoded (it was the raw key, spaces and
    all, which no URL parser reads back to the key)."""
    bucket = gw.pool()
    key = "main/mp/ü file+x%.bin"
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"x")["ETag"]
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
    )
    assert done["Key"] == key
    location = urlsplit(done["Location"])
    assert " " not in done["Location"]
    assert unquote(location.path) == f"/{bucket}/{key}"
