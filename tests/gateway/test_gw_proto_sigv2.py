"""SigV2 verification against botocore's HmacV1 signers (header and presigned)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.proto_capture import ACCESS_KEY, DOMAIN, Capturer, Sent, secret_for
from limno.gateway.authenticate import authenticate
from limno.gateway.operations import resolve_address
from limno.gateway.s3errors import S3Error
from limno.gateway.sigv2 import string_to_sign, verify_sigv2
from limno.gateway.sigv4 import AuthResult

_CAPS: dict[str, Capturer] = {}


def cap(style: str = "path") -> Capturer:
    if style not in _CAPS:
        _CAPS[style] = Capturer(signature_version="s3", addressing_style=style)
    return _CAPS[style]


def verify(sent: Sent, when: datetime | None = None) -> AuthResult | None:
    bucket, _key, virtual = resolve_address(sent.host, sent.raw_path, DOMAIN)
    return authenticate(
        sent.method,
        sent.raw_path,
        sent.raw_query,
        sent.headers,
        secret_for,
        when or datetime.now(UTC),
        bucket_from_host=bucket if virtual else None,
    )


def test_documented_string_to_sign_shape() -> None:
    # the S3 developer guide's SigV2 GET example (its credentials and date)
    text = string_to_sign(
        "GET",
        "/photos/puppy.jpg",
        "",
        {"Date": "Tue, 27 Mar 2007 19:36:42 +0000"},
        date="Tue, 27 Mar 2007 19:36:42 +0000",
        bucket_from_host="johnsmith",
    )
    assert text == "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/johnsmith/photos/puppy.jpg"
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    digest = hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()
    assert base64.b64encode(digest).decode() == "bWq2s1WEIj+Ydj0vQ697zp+IXMU="


@settings(max_examples=40, deadline=None)
@given(
    key=st.text(
        st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
        min_size=1,
        max_size=60,
    ),
    style=st.sampled_from(["path", "virtual"]),
)
def test_boto_v2_requests_verify(key: str, style: str) -> None:
    c = cap(style)
    for sent in (
        c.sent(c.client.get_object, Bucket="pool", Key=key, ResponseContentType="text/plain"),
        c.sent(
            c.client.put_object,
            Bucket="pool",
            Key=key,
            Body=b"abc",
            ContentType="x/y",
            Metadata={"Color": "blue"},
        ),
        c.sent(c.client.list_parts, Bucket="pool", Key=key, UploadId="u 1+2"),
        c.presigned("get_object", {"Bucket": "pool", "Key": key}),
    ):
        result = verify(sent)
        assert result is not None and result.version == 2
        assert result.access_key_id == ACCESS_KEY


def test_subresources_are_signed() -> None:
    c = cap()
    sent = c.sent(c.client.list_parts, Bucket="pool", Key="k", UploadId="abc")
    other = Sent(sent.method, sent.url.replace("uploadId=abc", "uploadId=abd"), sent.headers, b"")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify(other)
    # an unsigned parameter may change (S3 signs only sub-resources in SigV2)
    extra = Sent(sent.method, sent.url + "&max-parts=5", sent.headers, b"")
    assert verify(extra) is not None


def test_tampered_headers_fail() -> None:
    c = cap()
    sent = c.sent(
        c.client.put_object,
        Bucket="pool",
        Key="k",
        Body=b"abc",
        ContentType="a/b",
        Metadata={"m": "1"},
    )
    for name, value in (("Content-Type", "a/c"), ("x-amz-meta-m", "2"), ("x-amz-acl", "public")):
        with pytest.raises(S3Error) as e:
            verify(sent.with_header(name, value))
        assert e.value.code == "SignatureDoesNotMatch"
    auth = sent.header("Authorization") or ""
    with pytest.raises(S3Error, match="InvalidAccessKeyId"):
        verify(sent.with_header("Authorization", auth.replace(ACCESS_KEY, "NOPE")))


def test_date_skew_and_presigned_expiry() -> None:
    c = cap()
    sent = c.sent(c.client.head_object, Bucket="pool", Key="k")
    with pytest.raises(S3Error, match="RequestTimeTooSkewed"):
        verify(sent, datetime.now(UTC) + timedelta(minutes=20))
    url = c.presigned("get_object", {"Bucket": "pool", "Key": "k"}, expires=60)
    assert verify(url) is not None
    with pytest.raises(S3Error, match="Request has expired"):
        verify(url, datetime.now(UTC) + timedelta(seconds=120))
    longer = Sent("GET", url.url.replace("Expires=", "Expires=1"), url.headers, b"")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify(longer)


def test_x_amz_date_blanks_the_date_line() -> None:
    secret = secret_for(ACCESS_KEY) or ""
    stamp = datetime.now(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
    headers = {"x-amz-date": stamp, "Host": "h"}
    text = string_to_sign("GET", "/pool/k", "", headers, date="")
    assert f"\n\nx-amz-date:{stamp}\n/pool/k" in text
    sig = base64.b64encode(hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest())
    headers["Authorization"] = f"AWS {ACCESS_KEY}:{sig.decode()}"
    result = verify_sigv2("GET", "/pool/k", "", headers, secret_for, datetime.now(UTC))
    assert result.version == 2 and not result.presigned
