"""SigV4 verification against AWS's published examples and against botocore's own signer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.proto_capture import ACCESS_KEY, Capturer, Sent, secret_for
from limno.gateway.authenticate import authenticate
from limno.gateway.s3errors import S3Error
from limno.gateway.sigv4 import PayloadMode, canonical_query, signing_key, verify_sigv4

# -- AWS's documented examples (S3 API reference, "Examples: Signature Calculations") -------

DOC_KEY = "AKIAIOSFODNN7EXAMPLE"
DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DOC_NOW = datetime(2013, 5, 24, 0, 5, tzinfo=UTC)
EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
CRED = f"Credential={DOC_KEY}/20130524/us-east-1/s3/aws4_request"


def doc_secret(key: str) -> str | None:
    return DOC_SECRET if key == DOC_KEY else None


def _auth(signed: str, signature: str) -> str:
    return f"AWS4-HMAC-SHA256 {CRED},SignedHeaders={signed},Signature={signature}"


DOC_CASES = [
    (  # GET Object with a Range
        "GET",
        "/test.txt",
        "",
        {
            "Host": "examplebucket.s3.amazonaws.com",
            "Range": "bytes=0-9",
            "x-amz-content-sha256": EMPTY,
            "x-amz-date": "20130524T000000Z",
            "Authorization": _auth(
                "host;range;x-amz-content-sha256;x-amz-date",
                "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
            ),
        },
    ),
    (  # PUT Object with a signed payload and a $ in the key
        "PUT",
        "/test%24file.text",
        "",
        {
            "Host": "examplebucket.s3.amazonaws.com",
            "Date": "Fri, 24 May 2013 00:00:00 GMT",
            "x-amz-date": "20130524T000000Z",
            "x-amz-storage-class": "REDUCED_REDUNDANCY",
            "x-amz-content-sha256": (
                "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
            ),
            "Authorization": _auth(
                "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
                "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
            ),
        },
    ),
    (  # GET Bucket lifecycle: a value-less sub-resource
        "GET",
        "/",
        "lifecycle",
        {
            "Host": "examplebucket.s3.amazonaws.com",
            "x-amz-date": "20130524T000000Z",
            "x-amz-content-sha256": EMPTY,
            "Authorization": _auth(
                "host;x-amz-content-sha256;x-amz-date",
                "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
            ),
        },
    ),
    (  # GET Bucket (list objects): a query to sort
        "GET",
        "/",
        "max-keys=2&prefix=J",
        {
            "Host": "examplebucket.s3.amazonaws.com",
            "x-amz-date": "20130524T000000Z",
            "x-amz-content-sha256": EMPTY,
            "Authorization": _auth(
                "host;x-amz-content-sha256;x-amz-date",
                "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
            ),
        },
    ),
]

DOC_PRESIGNED = (
    "X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
    "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
)


@pytest.mark.parametrize(("method", "path", "query", "headers"), DOC_CASES)
def test_documented_examples_verify(
    method: str, path: str, query: str, headers: dict[str, str]
) -> None:
    result = verify_sigv4(method, path, query, headers, doc_secret, DOC_NOW)
    assert result.access_key_id == DOC_KEY
    assert result.scope == "20130524/us-east-1/s3/aws4_request"
    # one changed byte of the signature, or of a signed header, fails
    bad = dict(headers, Authorization=headers["Authorization"][:-1] + "0")
    with pytest.raises(S3Error) as e:
        verify_sigv4(method, path, query, bad, doc_secret, DOC_NOW)
    assert e.value.code == "SignatureDoesNotMatch"
    moved = dict(headers, Host="otherbucket.s3.amazonaws.com")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify_sigv4(method, path, query, moved, doc_secret, DOC_NOW)


def test_documented_payload_hash_is_reported() -> None:
    method, path, query, headers = DOC_CASES[1]
    result = verify_sigv4(method, path, query, headers, doc_secret, DOC_NOW)
    assert result.payload is PayloadMode.SIGNED
    assert result.content_sha256 == headers["x-amz-content-sha256"]


def test_documented_presigned_url_and_its_expiry() -> None:
    host = {"Host": "examplebucket.s3.amazonaws.com"}
    result = verify_sigv4("GET", "/test.txt", DOC_PRESIGNED, host, doc_secret, DOC_NOW)
    assert result.presigned and result.payload is PayloadMode.UNSIGNED
    late = datetime(2013, 5, 25, 0, 0, 1, tzinfo=UTC)  # 86400 s later, plus one
    with pytest.raises(S3Error) as e:
        verify_sigv4("GET", "/test.txt", DOC_PRESIGNED, host, doc_secret, late)
    assert (e.value.code, e.value.message) == ("AccessDenied", "Request has expired")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify_sigv4("GET", "/test.txt2", DOC_PRESIGNED, host, doc_secret, DOC_NOW)


def test_signing_key_matches_the_documented_derivation() -> None:
    # the General Reference's example key: wJalr.../20120215/us-east-1/iam
    key = signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam")
    assert key.hex() == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"


def test_canonical_query_sorts_and_encodes() -> None:
    assert canonical_query("b=2&a=%7E x&a=1&uploads") == "a=1&a=~%20x&b=2&uploads="
    assert canonical_query("X-Amz-Signature=abc&z=", exclude="X-Amz-Signature") == "z="


# -- botocore's signer ---------------------------------------------------------------------

_CAP: Capturer | None = None


def cap() -> Capturer:
    global _CAP
    if _CAP is None:
        _CAP = Capturer()
    return _CAP


def now() -> datetime:
    return datetime.now(UTC)


def verify(sent: Sent, when: datetime | None = None) -> object:
    return authenticate(
        sent.method, sent.raw_path, sent.raw_query, sent.headers, secret_for, when or now()
    )


KEYS = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1
).filter(lambda k: len(k.encode()) <= 1024)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=KEYS, prefix=st.text(max_size=20), start=st.text(max_size=20))
def test_boto_signed_requests_verify(key: str, prefix: str, start: str) -> None:
    c = cap().client
    get = cap().sent(c.get_object, Bucket="pool", Key=key, Range="bytes=0-9")
    result = verify(get)
    assert getattr(result, "access_key_id", None) == ACCESS_KEY
    listing = cap().sent(c.list_objects_v2, Bucket="pool", Prefix=prefix, StartAfter=start)
    assert verify(listing) is not None
    url = cap().presigned("get_object", {"Bucket": "pool", "Key": key})
    assert getattr(verify(url), "presigned", False)


def test_boto_put_reports_the_streaming_mode() -> None:
    sent = cap().sent(cap().client.put_object, Bucket="pool", Key="a b/c+d", Body=b"x" * 100)
    result = verify(sent)
    assert getattr(result, "payload", None) is PayloadMode.STREAMING_UNSIGNED_TRAILER


def test_plain_http_put_signs_the_payload_hash() -> None:
    plain = Capturer(endpoint="http://127.0.0.1:9868")
    sent = plain.sent(plain.client.put_object, Bucket="pool", Key="k", Body=b"hello")
    result = verify(sent)
    assert getattr(result, "payload", None) is PayloadMode.SIGNED
    assert getattr(result, "content_sha256", None) == sent.header("x-amz-content-sha256")


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_tampered_byte_fails(data: st.DataObject) -> None:
    sent = cap().sent(cap().client.get_object, Bucket="pool", Key="dir/file.txt")
    target = data.draw(st.sampled_from(["path", "query", "host", "date", "sig"]))
    if target == "path":
        bad = Sent(sent.method, sent.url.replace("file", "fil3"), sent.headers, b"")
    elif target == "query":
        bad = Sent(sent.method, sent.url + "?versionId=null", sent.headers, b"")
    elif target == "host":
        bad = sent.with_header("host", "evil.example:9868")
    elif target == "date":
        stamp = sent.header("X-Amz-Date") or ""
        bad = sent.with_header("X-Amz-Date", stamp[:-3] + ("00Z" if stamp[-3:] != "00Z" else "01Z"))
    else:
        auth = sent.header("Authorization") or ""
        flip = "0" if auth[-1] != "0" else "1"
        bad = sent.with_header("Authorization", auth[:-1] + flip)
    with pytest.raises(S3Error) as e:
        verify(bad)
    assert e.value.code == "SignatureDoesNotMatch"


def test_wrong_method_fails() -> None:
    sent = cap().sent(cap().client.get_object, Bucket="pool", Key="k")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify(Sent("DELETE", sent.url, sent.headers, b""))


def test_clock_skew_limit() -> None:
    sent = cap().sent(cap().client.head_object, Bucket="pool", Key="k")
    assert verify(sent, now() + timedelta(minutes=14)) is not None
    for off in (timedelta(minutes=16), -timedelta(minutes=16)):
        with pytest.raises(S3Error) as e:
            verify(sent, now() + off)
        assert e.value.code == "RequestTimeTooSkewed" and e.value.status == 403


def test_unknown_key_and_missing_pieces() -> None:
    sent = cap().sent(cap().client.head_object, Bucket="pool", Key="k")
    with pytest.raises(S3Error, match="InvalidAccessKeyId"):
        authenticate("HEAD", sent.raw_path, "", sent.headers, lambda _k: None, now())
    with pytest.raises(S3Error, match="InvalidRequest"):
        verify(sent.with_header("x-amz-content-sha256", None))
    with pytest.raises(S3Error, match="AuthorizationHeaderMalformed"):
        verify(sent.with_header("Authorization", "AWS4-HMAC-SHA256 Credential=x"))
    anonymous = sent.with_header("Authorization", None)
    assert verify(anonymous) is None


def test_presigned_expiry_and_limits() -> None:
    url = cap().presigned("get_object", {"Bucket": "pool", "Key": "k"}, expires=60)
    assert verify(url, now() + timedelta(seconds=30)) is not None
    with pytest.raises(S3Error, match="Request has expired"):
        verify(url, now() + timedelta(seconds=120))
    week = cap().presigned("get_object", {"Bucket": "pool", "Key": "k"}, expires=604800)
    assert verify(week) is not None
    over = Sent(
        "GET", week.url.replace("X-Amz-Expires=604800", "X-Amz-Expires=604801"), week.headers, b""
    )
    with pytest.raises(S3Error) as e:
        verify(over)
    assert e.value.code == "AuthorizationQueryParametersError"


def test_presigned_put_and_tampered_query() -> None:
    url = cap().presigned("put_object", {"Bucket": "pool", "Key": "up/load"})
    assert verify(url) is not None
    forged = Sent(url.method, url.url + "&x-id=PutObject", url.headers, b"")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify(forged)
    as_get = Sent("GET", url.url, url.headers, b"")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify(as_get)


def test_path_encoded_differently_from_the_canonical_form_still_verifies() -> None:
    # a client that leaves '(' raw on the wire but signs the canonical %28 (or vice versa)
    sent = cap().sent(cap().client.get_object, Bucket="pool", Key="a(b)")
    raw = sent.raw_path
    assert "%28" in raw
    loose = Sent(sent.method, sent.url.replace("%28", "(").replace("%29", ")"), sent.headers, b"")
    assert verify(loose) is not None
    assert quote("a(b)", safe="/~") in raw


def _botocore_signed(url: str, method: str = "GET") -> Sent:
    """A request for a hand-made URL, signed by botocore's S3 SigV4 signer."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from gateway.proto_capture import SECRET_KEY

    request = AWSRequest(method=method, url=url, headers={"host": "s3.local.limno:9868"})
    S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    headers = [(k, v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()]
    return Sent(method, url, headers, b"")


@pytest.mark.parametrize(
    "tail",
    [
        "pool/k?prefix=%ff&delimiter=%2F",  # lowercase hex, and a byte that is no UTF-8
        "pool/k%C3%A9%FF?uploads",  # a path byte that is no UTF-8, a bare flag
        "pool/a%2Fb?list-type=2&start-after=%E2%82%AC",
    ],
)
def test_hand_made_urls_signed_by_botocore_verify(tail: str) -> None:
    sent = _botocore_signed("https://s3.local.limno:9868/" + tail)
    assert verify(sent) is not None
    forged = Sent(sent.method, sent.url.replace("pool", "poo1", 1), sent.headers, b"")
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        verify(forged)
