"""AWS Signature Version 4 as S3 checks it: the Authorization header and presigned URLs.

The verifier rebuilds the canonical request the client signed, from the bytes it sent, and
compares HMACs in constant time. S3's flavour differs from the generic one in two ways that
matter: the path is not normalized nor encoded twice (a key may hold ``//`` and ``.``), and
the payload hash is whatever ``x-amz-content-sha256`` declares, including the streaming
markers whose chunks :mod:`limno.gateway.chunked` then verifies, chained to the signature
checked here. Clients differ in how they percent-encode the path and query (botocore signs
its query exactly as sent, others re-encode), so the forms as sent and their AWS-canonical
re-encodings are all tried: every one of them names the same key and parameters.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, unquote_to_bytes

from limno.gateway.headers import HeaderMap, HeadersLike, percent_decode, query_pairs, wire_bytes
from limno.gateway.s3errors import S3Error

__all__ = [
    "ALGORITHM",
    "MAX_EXPIRES",
    "MAX_SKEW",
    "AuthResult",
    "PayloadMode",
    "SecretFor",
    "aws_quote",
    "canonical_query",
    "signing_key",
    "verify_sigv4",
]

ALGORITHM = "AWS4-HMAC-SHA256"
#: how far a request's time may be from ours (S3's limit)
MAX_SKEW = timedelta(minutes=15)
#: the longest a presigned URL may be valid (7 days, S3's limit), in seconds
MAX_EXPIRES = 7 * 24 * 3600
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

#: access key id -> its secret, None when the key is unknown
SecretFor = Callable[[str], str | None]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")


class PayloadMode(enum.StrEnum):
    """What ``x-amz-content-sha256`` says about the body, and so how to read it."""

    SIGNED = "signed"  # a hex sha256 of the body was signed: the body must match it
    UNSIGNED = "UNSIGNED-PAYLOAD"
    STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
    STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

    @property
    def streaming(self) -> bool:
        """Whether the body is ``aws-chunked``."""
        return self.value.startswith("STREAMING-")

    @property
    def signed_chunks(self) -> bool:
        """Whether each chunk carries a signature chained to the request's."""
        return self in (PayloadMode.STREAMING_SIGNED, PayloadMode.STREAMING_SIGNED_TRAILER)


@dataclass(frozen=True)
class AuthResult:
    """Who signed a request, and what reading its body needs.

    ``content_sha256`` is the hash the body must have when ``payload`` is SIGNED;
    ``seed_signature``, ``signing_key``, ``scope`` and ``amz_date`` start the chunk
    signature chain of the streaming modes.
    """

    access_key_id: str
    version: int
    presigned: bool
    payload: PayloadMode = PayloadMode.UNSIGNED
    content_sha256: str | None = None
    seed_signature: str | None = None
    signing_key: bytes | None = None
    scope: str | None = None
    amz_date: str | None = None
    region: str | None = None


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str = "s3") -> bytes:
    """The SigV4 key of one day, region and service, derived from the secret."""
    k = _hmac(("AWS4" + secret).encode("utf-8"), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def aws_quote(text: str | bytes, *, keep_slash: bool = False) -> str:
    """Percent-encode as SigV4 does: everything but ``A-Za-z0-9-._~`` (and ``/`` if kept)."""
    return quote(text, safe="/~" if keep_slash else "~")


def _requote(raw: str, *, keep_slash: bool = False) -> str:
    # decoded to bytes, not text: a %FF that is no UTF-8 must come back as %FF
    return aws_quote(unquote_to_bytes(wire_bytes(raw)), keep_slash=keep_slash)


def canonical_query(raw_query: str, *, exclude: str | None = None) -> str:
    """The canonical query string: each name and value decoded and re-encoded the AWS way,
    sorted by name then value; ``exclude`` (the presigned signature) left out."""
    pairs = [
        (_requote(name), _requote(value))
        for name, value in query_pairs(raw_query, decode=False)
        if percent_decode(name) != exclude
    ]
    pairs.sort()
    return "&".join(f"{n}={v}" for n, v in pairs)


def _canonical_queries(raw_query: str, exclude: str | None) -> list[str]:
    """The canonical query, and the query as sent merely sorted (botocore signs its query
    without re-encoding it: a client's lowercase ``%ff`` is signed as such)."""
    normalized = canonical_query(raw_query, exclude=exclude)
    pairs = sorted(
        (name, value)
        for name, value in query_pairs(raw_query, decode=False)
        if percent_decode(name) != exclude
    )
    as_sent = "&".join(f"{n}={v}" for n, v in pairs)
    return [normalized] if as_sent == normalized else [normalized, as_sent]


def _canonical_paths(raw_path: str) -> list[str]:
    path = raw_path or "/"
    normalized = _requote(path, keep_slash=True)
    return [path] if normalized == path else [path, normalized]


def _canonical_headers(headers: HeaderMap, signed: list[str]) -> str:
    lines = []
    for name in signed:
        values = headers.getall(name)
        lines.append(f"{name}:" + ",".join(" ".join(v.split()) for v in values) + "\n")
    return "".join(lines)


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _parse_amz_date(value: str, bad: S3Error) -> datetime:
    if not _AMZ_DATE.fullmatch(value):
        raise bad
    try:
        return datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError as e:
        raise bad from e


def _parse_authorization(value: str) -> dict[str, str]:
    """The fields of ``AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...``."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        if algorithm.startswith("AWS4-ECDSA"):
            raise S3Error("NotImplemented", "Signature Version 4A is not supported")
        raise S3Error("AuthorizationHeaderMalformed", f"Unsupported algorithm {algorithm!r}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, eq, val = part.strip().partition("=")
        if not eq:
            continue
        fields[name.strip()] = val.strip()
    missing = [f for f in ("Credential", "SignedHeaders", "Signature") if not fields.get(f)]
    if missing:
        raise S3Error(
            "AuthorizationHeaderMalformed",
            f"The authorization header is malformed; missing {', '.join(missing)}.",
        )
    return fields


@dataclass(frozen=True)
class _Scope:
    access_key_id: str
    date: str
    region: str

    @property
    def text(self) -> str:
        return f"{self.date}/{self.region}/s3/aws4_request"


def _parse_credential(credential: str, amz_date: str, code: str) -> _Scope:
    parts = credential.rsplit("/", 4)
    if len(parts) != 5 or not parts[0]:
        raise S3Error(code, f"The credential {credential!r} is malformed.")
    key, date, region, service, terminal = parts
    if terminal != "aws4_request":
        raise S3Error(code, "The credential must end with 'aws4_request'.")
    if service != "s3":
        raise S3Error(code, f"The credential names service {service!r}; expected 's3'.")
    if date != amz_date[:8]:
        raise S3Error(
            code,
            f"Invalid credential date {date!r}: it is not the day of the request's"
            f" X-Amz-Date {amz_date!r}.",
        )
    return _Scope(key, date, region)


def _payload_mode(value: str) -> PayloadMode:
    if _HEX64.fullmatch(value):
        return PayloadMode.SIGNED
    try:
        return PayloadMode(value)
    except ValueError:
        if value.startswith("STREAMING-AWS4-ECDSA"):
            raise S3Error("NotImplemented", "Signature Version 4A is not supported") from None
        raise S3Error(
            "InvalidArgument",
            "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING- value or a hex SHA-256",
            ArgumentName="x-amz-content-sha256",
            ArgumentValue=value,
        ) from None


def _check_signature(
    method: str,
    raw_path: str,
    queries: list[str],
    headers: HeaderMap,
    signed_headers: list[str],
    payload_hash: str,
    amz_date: str,
    scope: _Scope,
    secret: str,
    provided: str,
) -> bytes:
    """Compare ``provided`` with the signature of each canonical form; the signing key."""
    key = signing_key(secret, scope.date, scope.region)
    head = _canonical_headers(headers, signed_headers)
    heads = [head]
    # a header value sent as UTF-8 bytes (botocore sends non-ASCII metadata so) is
    # signed as that text; ``headers`` hold the wire bytes as latin-1
    recoded = _utf8_text(head)
    if recoded is not None and recoded != head:
        heads.append(recoded)
    first: tuple[str, str] | None = None
    forms = [(p, q, h) for h in heads for p in _canonical_paths(raw_path) for q in queries]
    for path, query, head in forms:
        canonical = "\n".join([method, path, query, head, ";".join(signed_headers), payload_hash])
        string_to_sign = "\n".join([ALGORITHM, amz_date, scope.text, _sha256_hex(canonical)])
        expected = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, provided.lower()):
            return key
        first = first or (canonical, string_to_sign)
    assert first is not None
    raise S3Error(
        "SignatureDoesNotMatch",
        AWSAccessKeyId=scope.access_key_id,
        StringToSign=first[1],
        SignatureProvided=provided,
        CanonicalRequest=first[0],
    )


def _utf8_text(latin1: str) -> str | None:
    """The text whose UTF-8 bytes are ``latin1``'s characters (None: no such text)."""
    try:
        return latin1.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


def _secret(secret_for: SecretFor, key: str) -> str:
    secret = secret_for(key)
    if secret is None:
        raise S3Error("InvalidAccessKeyId", AWSAccessKeyId=key)
    return secret


def _signed_header_list(text: str, code: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(";") if n.strip()]
    if "host" not in names:
        raise S3Error(code, "The host header must be signed.")
    return names


def verify_sigv4(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: HeadersLike,
    secret_for: SecretFor,
    now: datetime,
) -> AuthResult:
    """Verify a SigV4-signed S3 request (Authorization header or presigned query).

    ``raw_path`` and ``raw_query`` are exactly as sent (still percent-encoded). Raises
    :class:`S3Error` when the request is not signed by the holder of a known key, is signed
    at a time too far from ``now``, or has expired.
    """
    hm = HeaderMap.of(headers)
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now
    params = dict(query_pairs(raw_query))
    if "X-Amz-Signature" in params or params.get("X-Amz-Algorithm"):
        if hm.get("authorization"):
            raise S3Error(
                "InvalidArgument", "Only one auth mechanism allowed; use the header or the query"
            )
        return _verify_presigned(method, raw_path, raw_query, hm, params, secret_for, now)
    return _verify_header(method, raw_path, raw_query, hm, secret_for, now)


def _request_time(hm: HeaderMap) -> tuple[str, datetime]:
    bad = S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    amz = hm.get("x-amz-date")
    if amz is not None:
        return amz.strip(), _parse_amz_date(amz.strip(), bad)
    date = hm.get("date")
    if date is None:
        raise bad
    from limno.gateway.s3xml import parse_http_date

    when = parse_http_date(date) or _rfc2822_date(date)
    if when is None:
        raise bad
    return when.strftime("%Y%m%dT%H%M%SZ"), when


def _rfc2822_date(text: str) -> datetime | None:
    """A Date in RFC 2822's form with a numeric zone (``... 02:48:11 -0000``, what
    botocore's own SigV4 signer writes when the request has a Date header)."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _check_skew(when: datetime, now: datetime) -> None:
    if abs(now - when) > MAX_SKEW:
        raise S3Error(
            "RequestTimeTooSkewed",
            RequestTime=when.strftime("%Y%m%dT%H%M%SZ"),
            ServerTime=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            MaxAllowedSkewMilliseconds=str(int(MAX_SKEW.total_seconds() * 1000)),
        )


def _verify_header(
    method: str,
    raw_path: str,
    raw_query: str,
    hm: HeaderMap,
    secret_for: SecretFor,
    now: datetime,
) -> AuthResult:
    code = "AuthorizationHeaderMalformed"
    fields = _parse_authorization(hm.get("authorization") or "")
    amz_date, when = _request_time(hm)
    scope = _parse_credential(fields["Credential"], amz_date, code)
    signed = _signed_header_list(fields["SignedHeaders"], code)
    content = hm.get("x-amz-content-sha256")
    if content is None:
        raise S3Error(
            "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"
        )
    content = content.strip()
    mode = _payload_mode(content)
    secret = _secret(secret_for, scope.access_key_id)
    _check_skew(when, now)
    key = _check_signature(
        method.upper(),
        raw_path,
        _canonical_queries(raw_query, None),
        hm,
        signed,
        content,
        amz_date,
        scope,
        secret,
        fields["Signature"],
    )
    return AuthResult(
        access_key_id=scope.access_key_id,
        version=4,
        presigned=False,
        payload=mode,
        content_sha256=content if mode is PayloadMode.SIGNED else None,
        seed_signature=fields["Signature"].lower(),
        signing_key=key,
        scope=scope.text,
        amz_date=amz_date,
        region=scope.region,
    )


def _verify_presigned(
    method: str,
    raw_path: str,
    raw_query: str,
    hm: HeaderMap,
    params: dict[str, str],
    secret_for: SecretFor,
    now: datetime,
) -> AuthResult:
    code = "AuthorizationQueryParametersError"
    required = (
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-SignedHeaders",
        "X-Amz-Signature",
    )
    missing = [p for p in required if not params.get(p)]
    if missing:
        raise S3Error(
            code,
            "Query-string authentication version 4 requires the X-Amz-Algorithm,"
            " X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and"
            f" X-Amz-Expires parameters; missing {', '.join(missing)}.",
        )
    algorithm = params["X-Amz-Algorithm"]
    if algorithm != ALGORITHM:
        if algorithm.startswith("AWS4-ECDSA"):
            raise S3Error("NotImplemented", "Signature Version 4A is not supported")
        raise S3Error(code, 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
    amz_date = params["X-Amz-Date"]
    when = _parse_amz_date(amz_date, S3Error(code, "X-Amz-Date must be in the ISO8601 format"))
    expires_text = params["X-Amz-Expires"]
    if not expires_text.isdigit():
        raise S3Error(code, "X-Amz-Expires should be a number")
    expires = int(expires_text)
    if expires > MAX_EXPIRES:
        raise S3Error(code, "X-Amz-Expires must be less than a week (in seconds) that is 604800")
    scope = _parse_credential(params["X-Amz-Credential"], amz_date, code)
    signed = _signed_header_list(params["X-Amz-SignedHeaders"], code)
    payload = params.get("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
    mode = _payload_mode(payload)
    if mode.streaming:
        raise S3Error("InvalidRequest", "A presigned request cannot stream aws-chunked bodies")
    secret = _secret(secret_for, scope.access_key_id)
    if when - now > MAX_SKEW:
        raise S3Error("AccessDenied", "Request is not valid yet")
    if now > when + timedelta(seconds=expires):
        raise S3Error(
            "AccessDenied",
            "Request has expired",
            XAmzExpires=str(expires),
            Expires=(when + timedelta(seconds=expires)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ServerTime=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
    key = _check_signature(
        method.upper(),
        raw_path,
        _canonical_queries(raw_query, "X-Amz-Signature"),
        hm,
        signed,
        payload,
        amz_date,
        scope,
        secret,
        params["X-Amz-Signature"],
    )
    return AuthResult(
        access_key_id=scope.access_key_id,
        version=4,
        presigned=True,
        payload=mode,
        content_sha256=payload if mode is PayloadMode.SIGNED else None,
        signing_key=key,
        scope=scope.text,
        amz_date=amz_date,
        region=scope.region,
    )
