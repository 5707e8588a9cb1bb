"""aws-chunked decoding and body checks: AWS's streaming example, boto3's real bodies."""

from __future__ import annotations

import base64
import hashlib
import hmac
import zlib
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.proto_capture import Capturer, Sent, secret_for
from limno.gateway.authenticate import authenticate
from limno.gateway.checksums import new_checksum
from limno.gateway.chunked import (
    MAX_LINE,
    AwsChunkedDecoder,
    BodyChecks,
    decode_iter,
    request_body_decoder,
    stored_content_encoding,
)
from limno.gateway.s3errors import S3Error
from limno.gateway.sigv4 import AuthResult, PayloadMode, verify_sigv4

# -- AWS's chunked-upload example (sigv4-streaming) ----------------------------------------

DOC_KEY = "AKIAIOSFODNN7EXAMPLE"
DOC_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
CHUNK_SIGS = [
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
]
DOC_HEADERS = {
    "Host": "s3.amazonaws.com",
    "x-amz-date": "20130524T000000Z",
    "x-amz-storage-class": "REDUCED_REDUNDANCY",
    "Authorization": (
        f"AWS4-HMAC-SHA256 Credential={DOC_KEY}/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
        f"x-amz-decoded-content-length;x-amz-storage-class,Signature={SEED}"
    ),
    "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    "Content-Encoding": "aws-chunked",
    "x-amz-decoded-content-length": "66560",
    "Content-Length": "66824",
}
DOC_DATA = b"a" * 66560


def doc_body(sigs: list[str] = CHUNK_SIGS) -> bytes:
    return (
        b"10000;chunk-signature="
        + sigs[0].encode()
        + b"\r\n"
        + b"a" * 65536
        + b"\r\n"
        + b"400;chunk-signature="
        + sigs[1].encode()
        + b"\r\n"
        + b"a" * 1024
        + b"\r\n"
        + b"0;chunk-signature="
        + sigs[2].encode()
        + b"\r\n\r\n"
    )


def doc_auth() -> AuthResult:
    return verify_sigv4(
        "PUT",
        "/examplebucket/chunkObject.txt",
        "",
        DOC_HEADERS,
        lambda k: DOC_SECRET if k == DOC_KEY else None,
        datetime(2013, 5, 24, 0, 1, tzinfo=UTC),
    )


def test_documented_seed_signature_and_chunk_chain() -> None:
    auth = doc_auth()
    assert auth.payload is PayloadMode.STREAMING_SIGNED and auth.seed_signature == SEED
    body = doc_body()
    assert len(body) == 66824
    decoder = request_body_decoder(auth, DOC_HEADERS)
    assert isinstance(decoder, AwsChunkedDecoder)
    assert b"".join(decode_iter(decoder, [body])) == DOC_DATA


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=66824), max_size=12))
def test_any_split_decodes_identically(cuts: list[int]) -> None:
    body = doc_body()
    bounds = [0, *sorted(cuts), len(body)]
    pieces = [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    decoder = request_body_decoder(doc_auth(), DOC_HEADERS)
    assert b"".join(decode_iter(decoder, pieces)) == DOC_DATA


def test_byte_at_a_time_decodes() -> None:
    body = doc_body()
    decoder = request_body_decoder(doc_auth(), DOC_HEADERS)
    out = bytearray()
    out += decoder.feed(body[: len(body) - 300])
    for i in range(len(body) - 300, len(body)):
        out += decoder.feed(body[i : i + 1])
    decoder.finish()
    assert bytes(out) == DOC_DATA


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:200] + b"b" + b[201:],  # a data byte
        lambda b: b.replace(CHUNK_SIGS[1].encode(), CHUNK_SIGS[0].encode()),  # a signature
        lambda b: b.replace(b"400;", b"3ff;", 1),  # a size
    ],
)
def test_tampering_fails(mutate: object) -> None:
    decoder = request_body_decoder(doc_auth(), DOC_HEADERS)
    with pytest.raises(S3Error) as e:
        list(decode_iter(decoder, [mutate(doc_body())]))  # type: ignore[operator]
    assert e.value.code in ("SignatureDoesNotMatch", "IncompleteBody")


def test_truncated_and_overlong_bodies_fail() -> None:
    body = doc_body()
    for cut in (100, 65626, len(body) - 2):
        decoder = request_body_decoder(doc_auth(), DOC_HEADERS)
        decoder.feed(body[:cut])
        with pytest.raises(S3Error, match="IncompleteBody"):
            decoder.finish()
    decoder = request_body_decoder(doc_auth(), DOC_HEADERS)
    with pytest.raises(S3Error, match="IncompleteBody"):
        decoder.feed(body + b"x")
    short = dict(DOC_HEADERS, **{"x-amz-decoded-content-length": "1000"})
    decoder = request_body_decoder(doc_auth(), short)
    with pytest.raises(S3Error, match="IncompleteBody"):
        decoder.feed(body)


def test_header_line_is_bounded() -> None:
    decoder = request_body_decoder(doc_auth(), DOC_HEADERS)
    with pytest.raises(S3Error, match="too long"):
        decoder.feed(b"1" * (MAX_LINE + 1))


def test_without_auth_chunks_are_decoded_unverified() -> None:
    decoder = request_body_decoder(None, DOC_HEADERS)
    forged = doc_body(["0" * 64] * 3)
    assert b"".join(decode_iter(decoder, [forged])) == DOC_DATA


# -- signed trailers (the chain continued into the trailer) --------------------------------


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def signed_trailer_body(auth: AuthResult, data: bytes, crc: str) -> bytes:
    """A STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER body, signed as the S3 docs describe."""
    assert auth.signing_key and auth.seed_signature
    empty = hashlib.sha256(b"").hexdigest()
    prefix = f"{auth.amz_date}\n{auth.scope}\n"
    previous = auth.seed_signature
    out = b""
    for piece in (data[:10], data[10:], b""):
        sig = _sign(
            auth.signing_key,
            "AWS4-HMAC-SHA256-PAYLOAD\n"
            + prefix
            + f"{previous}\n{empty}\n{hashlib.sha256(piece).hexdigest()}",
        )
        out += f"{len(piece):x};chunk-signature={sig}\r\n".encode() + piece
        out += b"\r\n" if piece else b""
        previous = sig
    trailer = f"x-amz-checksum-crc32:{crc}\n"
    sig = _sign(
        auth.signing_key,
        "AWS4-HMAC-SHA256-TRAILER\n"
        + prefix
        + f"{previous}\n{hashlib.sha256(trailer.encode()).hexdigest()}",
    )
    return out + f"x-amz-checksum-crc32:{crc}\r\nx-amz-trailer-signature:{sig}\r\n\r\n".encode()


def test_signed_trailer_chain() -> None:
    base = doc_auth()
    auth = AuthResult(
        access_key_id=DOC_KEY,
        version=4,
        presigned=False,
        payload=PayloadMode.STREAMING_SIGNED_TRAILER,
        seed_signature=SEED,
        signing_key=base.signing_key,
        scope=base.scope,
        amz_date=base.amz_date,
    )
    data = b"hello, trailing world"
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    headers = {
        "x-amz-trailer": "x-amz-checksum-crc32",
        "x-amz-decoded-content-length": str(len(data)),
        "Content-Encoding": "aws-chunked",
    }
    body = signed_trailer_body(auth, data, crc)
    decoder = request_body_decoder(auth, headers)
    assert b"".join(decode_iter(decoder, [body])) == data
    assert decoder.checksum_headers() == {"x-amz-checksum-crc32": crc}
    wrong = base64.b64encode((zlib.crc32(data) ^ 1).to_bytes(4, "big")).decode()
    forged = body.replace(f"crc32:{crc}".encode(), f"crc32:{wrong}".encode())
    with pytest.raises(S3Error, match="SignatureDoesNotMatch"):
        list(decode_iter(request_body_decoder(auth, headers), [forged]))


# -- boto3's own bodies --------------------------------------------------------------------

_CAPS: dict[str, Capturer] = {}


def cap(endpoint: str = "https://s3.local.limno:9868") -> Capturer:
    if endpoint not in _CAPS:
        _CAPS[endpoint] = Capturer(endpoint=endpoint)
    return _CAPS[endpoint]


def pipeline(sent: Sent, pieces: list[bytes] | None = None) -> tuple[bytes, dict[str, str]]:
    auth = authenticate(
        sent.method, sent.raw_path, sent.raw_query, sent.headers, secret_for, datetime.now(UTC)
    )
    decoder = request_body_decoder(auth, sent.headers, require_length=True)
    data = b"".join(decode_iter(decoder, pieces if pieces is not None else [sent.body]))
    return data, decoder.checksum_headers()


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"])
def test_boto_trailer_checksums(algorithm: str) -> None:
    data = bytes(range(256)) * 40
    c = cap()
    sent = c.sent(
        c.client.put_object, Bucket="pool", Key="k", Body=data, ChecksumAlgorithm=algorithm
    )
    assert sent.header("Content-Encoding") == "aws-chunked"
    got, checksums = pipeline(sent)
    assert got == data
    header = f"x-amz-checksum-{algorithm.lower()}"
    assert header in checksums
    running = new_checksum(algorithm)
    running.update(data)
    assert checksums[header] == running.b64digest()
    flipped = sent.body.replace(bytes(range(256)), bytes(range(1, 256)) + b"\x00", 1)
    with pytest.raises(S3Error) as e:
        pipeline(Sent(sent.method, sent.url, sent.headers, flipped))
    assert e.value.code == "BadDigest"


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 4000), max_size=8))
def test_boto_streaming_bodies_any_split(data: bytes, cuts: list[int]) -> None:
    c = cap()
    sent = c.sent(c.client.put_object, Bucket="pool", Key="k", Body=data)
    body = sent.body
    bounds = [0, *sorted(min(x, len(body)) for x in cuts), len(body)]
    got, _ = pipeline(sent, [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)])
    assert got == data


def test_plain_http_put_checks_sha256_and_checksum_header() -> None:
    c = cap("http://127.0.0.1:9868")
    sent = c.sent(c.client.put_object, Bucket="pool", Key="k", Body=b"plain body")
    assert sent.header("x-amz-checksum-crc32") is not None
    got, checksums = pipeline(sent)
    assert got == b"plain body" and "x-amz-checksum-crc32" in checksums
    with pytest.raises(S3Error) as e:
        pipeline(Sent(sent.method, sent.url, sent.headers, b"plain bodY"))
    assert e.value.code == "XAmzContentSHA256Mismatch"
    with pytest.raises(S3Error, match="IncompleteBody"):
        pipeline(Sent(sent.method, sent.url, sent.headers, b"plain"))


def test_content_md5() -> None:
    body = b"md5 me"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    checks = BodyChecks(content_md5=good)
    checks.update(body)
    checks.finish()
    checks = BodyChecks(content_md5=good)
    checks.update(b"md5 m3")
    with pytest.raises(S3Error, match="BadDigest"):
        checks.finish()
    for malformed in ("not base64!", base64.b64encode(b"short").decode()):
        with pytest.raises(S3Error, match="InvalidDigest"):
            BodyChecks(content_md5=malformed)


def test_checksum_header_validation() -> None:
    with pytest.raises(S3Error, match="InvalidRequest"):
        BodyChecks(checksums={"crc32": "AAAA", "sha1": "AAAA"})
    with pytest.raises(S3Error, match="InvalidRequest"):
        BodyChecks(checksums={"crc32": "AAAAAAAA"})  # 6 bytes, not 4
    decoder = request_body_decoder(
        None, {"Content-Length": "3", "x-amz-checksum-crc32": "AAAAAA=="}
    )
    decoder.feed(b"abc")
    with pytest.raises(S3Error, match="BadDigest"):
        decoder.finish()


def test_missing_lengths() -> None:
    with pytest.raises(S3Error) as e:
        request_body_decoder(None, {}, require_length=True)
    assert e.value.code == "MissingContentLength" and e.value.status == 411
    headers = {"x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"}
    with pytest.raises(S3Error, match="MissingContentLength"):
        request_body_decoder(None, headers)


def test_stored_content_encoding_drops_aws_chunked() -> None:
    assert stored_content_encoding({"Content-Encoding": "aws-chunked"}) is None
    assert stored_content_encoding({"Content-Encoding": "aws-chunked,gzip"}) == "gzip"
    assert stored_content_encoding({}) is None
