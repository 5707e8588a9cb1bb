"""Who may do what through the S3 gateway: signatures (SigV4 headers and presigned URLs,
SigV2), wrong and unknown keys, anonymous requests, roles and per-pool grants; and
that an operation the gateway does not implement is 501 NotImplemented and changes
nothing (never taken for another operation)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, gateway, s3, signed

__all__ = ["gateway", "s3"]  # fixtures


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def status(e: pytest.ExceptionInfo[ClientError]) -> int:
    return int(e.value.response["ResponseMetadata"]["HTTPStatusCode"])


def test_bad_credentials_and_anonymous(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/x", Body=b"x")
    key_id, secret = gateway.key
    wrong = gateway.client(
        {"LIMNO_ACCESS_KEY_ID": key_id, "LIMNO_SECRET_ACCESS_KEY": secret[:-1] + "!"}
    )
    with pytest.raises(ClientError) as e:
        wrong.get_object(Bucket=bucket, Key="main/x")
    assert (code(e), status(e)) == ("SignatureDoesNotMatch", 403)
    with pytest.raises(ClientError) as e:
        wrong.put_object(Bucket=bucket, Key="main/y", Body=b"y")
    assert code(e) == "SignatureDoesNotMatch"
    unknown = gateway.client(
        {"LIMNO_ACCESS_KEY_ID": "LKIAUNKNOWNUNKNOWN00", "LIMNO_SECRET_ACCESS_KEY": secret}
    )
    with pytest.raises(ClientError) as e:
        unknown.list_buckets()
    assert (code(e), status(e)) == ("InvalidAccessKeyId", 403)
    anonymous = gateway.client(signature_version=UNSIGNED)
    for call in (
        lambda: anonymous.list_buckets(),
        lambda: anonymous.get_object(Bucket=bucket, Key="main/x"),
        lambda: anonymous.put_object(Bucket=bucket, Key="main/y", Body=b"y"),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert (code(e), status(e)) == ("AccessDenied", 403)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["main/x"]


def test_roles_and_grants(gateway: Gateway, s3: Any) -> None:
    bucket, granted, hidden = gateway.pool(), gateway.pool(), gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/x", Body=b"x")
    analyst = gateway.client(gateway.user("analyst", {granted: "write", hidden: "none"}))
    assert analyst.get_object(Bucket=bucket, Key="main/x")["Body"].read() == b"x"
    assert [o["Key"] for o in analyst.list_objects_v2(Bucket=bucket)["Contents"]] == ["main/x"]
    names = [b["Name"] for b in analyst.list_buckets()["Buckets"]]
    assert bucket in names and granted in names and hidden not in names
    source = {"Bucket": bucket, "Key": "main/x"}
    for call in (
        lambda: analyst.put_object(Bucket=bucket, Key="main/y", Body=b"y"),
        lambda: analyst.delete_object(Bucket=bucket, Key="main/x"),
        lambda: analyst.copy_object(Bucket=bucket, Key="main/z", CopySource=source),
        lambda: analyst.create_multipart_upload(Bucket=bucket, Key="main/m"),
        lambda: analyst.create_bucket(Bucket="made-by-analyst"),
        lambda: analyst.delete_bucket(Bucket=bucket),
        lambda: analyst.head_bucket(Bucket=hidden),
        lambda: analyst.get_object(Bucket=hidden, Key="main/x"),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert status(e) == 403, e.value.response
    # nothing was written or staged by what was refused
    assert gateway.lake().file_pool(bucket).uncommitted("main")[0].path == "x"
    assert len(gateway.lake().file_pool(bucket).uncommitted("main")) == 1
    assert "made-by-analyst" not in [c.name for c in gateway.lake().list_pools()]
    # a write grant widens the role on that pool, and copying into it needs read on the source
    analyst.put_object(Bucket=granted, Key="main/mine", Body=b"m")
    analyst.copy_object(Bucket=granted, Key="main/copied", CopySource=source)
    assert s3.get_object(Bucket=granted, Key="main/copied")["Body"].read() == b"x"
    developer = gateway.client(gateway.user("developer", {bucket: "read"}))
    with pytest.raises(ClientError) as e:
        developer.put_object(Bucket=bucket, Key="main/d", Body=b"d")
    assert code(e) == "AccessDenied"
    developer.put_object(Bucket=granted, Key="main/d", Body=b"d")


def test_any_region_signs(gateway: Gateway) -> None:
    bucket = gateway.pool()
    elsewhere = gateway.client(region_name="eu-west-3")
    elsewhere.put_object(Bucket=bucket, Key="main/r", Body=b"r")
    assert elsewhere.get_object(Bucket=bucket, Key="main/r")["Body"].read() == b"r"


def test_presigned_urls(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    put_url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": bucket, "Key": "main/pre.txt"}, ExpiresIn=300
    )
    with gateway.http() as http:
        assert http.put(put_url, content=b"presigned body").status_code == 200
        get_url = s3.generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": "main/pre.txt"}, ExpiresIn=300
        )
        answer = http.get(get_url)
        assert (answer.status_code, answer.content) == (200, b"presigned body")
        tampered = http.get(get_url.replace("pre.txt", "pre.txx"))
        assert tampered.status_code == 403 and b"SignatureDoesNotMatch" in tampered.content
        assert http.get(get_url.split("?")[0]).status_code == 403  # no signature at all


def test_sigv2_client(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    v2 = gateway.client(signature_version="s3")
    v2.put_object(Bucket=bucket, Key="main/v2.txt", Body=b"signed v2", Metadata={"m": "1"})
    got = v2.get_object(Bucket=bucket, Key="main/v2.txt")
    assert (got["Body"].read(), got["Metadata"]) == (b"signed v2", {"m": "1"})
    assert [o["Key"] for o in v2.list_objects(Bucket=bucket)["Contents"]] == ["main/v2.txt"]
    url = v2.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "main/v2.txt"}, ExpiresIn=300
    )
    with gateway.http() as http:
        assert http.get(url).content == b"signed v2"
    v2.delete_object(Bucket=bucket, Key="main/v2.txt")
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    key_id, secret = gateway.key
    wrong = gateway.client(
        {"LIMNO_ACCESS_KEY_ID": key_id, "LIMNO_SECRET_ACCESS_KEY": "x" + secret[1:]},
        signature_version="s3",
    )
    with pytest.raises(ClientError) as e:
        wrong.list_buckets()
    assert code(e) == "SignatureDoesNotMatch"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/{bucket}?acl"),
        ("GET", "/{bucket}?acl"),
        ("GET", "/{bucket}?tagging"),
        ("PUT", "/{bucket}/main/obj?tagging"),
        ("GET", "/{bucket}/main/obj?tagging"),
        ("DELETE", "/{bucket}/main/obj?tagging"),
        ("PUT", "/{bucket}/main/obj?acl"),
        ("GET", "/{bucket}?versioning"),
        ("PUT", "/{bucket}?lifecycle"),
        ("POST", "/{bucket}/main/obj?restore"),
    ],
)
def test_unimplemented_is_501_and_changes_nothing(
    gateway: Gateway, s3: Any, method: str, path: str
) -> None:
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/obj", Body=b"original")
    body = b"<Tagging><TagSet></TagSet></Tagging>" if method in ("PUT", "POST") else b""
    answer = signed(gateway, method, path.format(bucket=bucket), body=body)
    assert answer.status_code == 501, answer.text
    assert "<Code>NotImplemented</Code>" in answer.text
    assert answer.headers["content-type"] == "application/xml"
    assert s3.get_object(Bucket=bucket, Key="main/obj")["Body"].read() == b"original"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["main/obj"]
    assert bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]
