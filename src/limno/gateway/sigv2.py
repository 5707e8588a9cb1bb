"""AWS Signature Version 2 for S3: ``Authorization: AWS AKID:sig`` and presigned URLs.

Older tools (s3cmd's default, boto2, some Hadoop builds, signature_version='s3' in boto3)
still sign this way. The string to sign is the method, Content-MD5, Content-Type, the date
(the Expires second for a presigned URL), the ``x-amz-*`` headers canonicalized, and the
resource: the path (with the bucket in front for virtual-host requests) plus the
sub-resources S3 lists, decoded and sorted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from urllib.parse import unquote

from limno.gateway.headers import HeaderMap, HeadersLike, query_pairs
from limno.gateway.s3errors import S3Error
from limno.gateway.s3xml import parse_http_date
from limno.gateway.sigv4 import MAX_SKEW, AuthResult, PayloadMode, SecretFor

__all__ = ["SUBRESOURCES", "string_to_sign", "verify_sigv2"]

#: the query parameters that are part of the signed resource (S3's list, which clients
#: follow; anything else in the query is not signed)
SUBRESOURCES = frozenset(
    {
        "accelerate",
        "acl",
        "analytics",
        "cors",
        "defaultObjectAcl",
        "delete",
        "inventory",
        "legal-hold",
        "lifecycle",
        "location",
        "logging",
        "metrics",
        "notification",
        "object-lock",
        "partNumber",
        "policy",
        "replication",
        "requestPayment",
        "response-cache-control",
        "response-content-disposition",
        "response-content-encoding",
        "response-content-language",
        "response-content-type",
        "response-expires",
        "restore",
        "retention",
        "select",
        "select-type",
        "storageClass",
        "tagging",
        "torrent",
        "uploadId",
        "uploads",
        "versionId",
        "versioning",
        "versions",
        "website",
    }
)


def _canonical_resource(raw_path: str, raw_query: str, bucket_from_host: str | None) -> str:
    path = raw_path or "/"
    if bucket_from_host is not None:
        path = "/" + bucket_from_host + path
    subs: list[tuple[str, str | None]] = []
    for item in raw_query.split("&"):
        name, eq, value = item.partition("=")
        if name in SUBRESOURCES:
            # values are signed decoded; a bare flag (``?uploads``) has no ``=``
            subs.append((name, unquote(value) if eq else None))
    if not subs:
        return path
    subs.sort(key=lambda s: s[0])
    return path + "?" + "&".join(n if v is None else f"{n}={v}" for n, v in subs)


def _signed_paths(raw_path: str, bucket_from_host: str | None) -> list[str]:
    """The paths a client may have signed: botocore sends a path-style bucket request as
    ``/bk`` but signs ``/bk/`` (its auth path), so both are tried."""
    paths = [raw_path]
    if bucket_from_host is None and len(raw_path) > 1 and raw_path.count("/") == 1:
        paths.append(raw_path + "/")
    return paths


def _canonical_amz_headers(hm: HeaderMap) -> str:
    lines = []
    for name, _ in sorted(hm.items()):
        if name.startswith("x-amz-"):
            value = ",".join(v.strip() for v in hm.getall(name))
            lines.append(f"{name}:{value}\n")
    return "".join(lines)


def string_to_sign(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: HeadersLike,
    *,
    date: str,
    bucket_from_host: str | None = None,
) -> str:
    """The SigV2 string to sign, with ``date`` on its date line (the Date header, ``""``
    when x-amz-date is sent, or the Expires second of a presigned URL)."""
    hm = HeaderMap.of(headers)
    return (
        f"{method.upper()}\n"
        f"{(hm.get('content-md5') or '').strip()}\n"
        f"{(hm.get('content-type') or '').strip()}\n"
        f"{date}\n"
        f"{_canonical_amz_headers(hm)}"
        f"{_canonical_resource(raw_path, raw_query, bucket_from_host)}"
    )


def _sign(secret: str, text: str) -> str:
    digest = hmac.new(secret.encode("utf-8"), text.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def _matches(secret: str, texts: list[str], provided: str, key: str) -> None:
    for text in texts:
        if hmac.compare_digest(_sign(secret, text), provided):
            return
    raise S3Error(
        "SignatureDoesNotMatch",
        AWSAccessKeyId=key,
        StringToSign=texts[0],
        SignatureProvided=provided,
    )


def verify_sigv2(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: HeadersLike,
    secret_for: SecretFor,
    now: datetime,
    *,
    bucket_from_host: str | None = None,
) -> AuthResult:
    """Verify a SigV2-signed S3 request (Authorization header or presigned query).

    ``bucket_from_host`` is the bucket of a virtual-host addressed request: SigV2 signs the
    path with the bucket in front whichever way the bucket was addressed.
    """
    hm = HeaderMap.of(headers)
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now
    params = {n: v for n, v in query_pairs(raw_query)}
    auth = hm.get("authorization")
    if auth is None:
        return _verify_presigned(
            method, raw_path, raw_query, hm, params, secret_for, now, bucket_from_host
        )
    if "Signature" in params:
        raise S3Error(
            "InvalidArgument", "Only one auth mechanism allowed; use the header or the query"
        )
    scheme, _, credentials = auth.strip().partition(" ")
    key, colon, provided = credentials.strip().rpartition(":")
    if scheme != "AWS" or not colon or not key or not provided:
        raise S3Error(
            "InvalidArgument",
            "Authorization header is invalid -- one and only one ' ' (space) required",
        )
    secret = secret_for(key)
    if secret is None:
        raise S3Error("InvalidAccessKeyId", AWSAccessKeyId=key)
    amz_date = hm.get("x-amz-date")
    date_text = amz_date if amz_date is not None else hm.get("date")
    when = parse_http_date(date_text) if date_text is not None else None
    if when is None or when.year < 1970:  # before the epoch: no valid date, as S3 says
        raise S3Error(
            "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header"
        )
    if abs(now - when) > MAX_SKEW:
        raise S3Error(
            "RequestTimeTooSkewed",
            RequestTime=date_text or "",
            ServerTime=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            MaxAllowedSkewMilliseconds=str(int(MAX_SKEW.total_seconds() * 1000)),
        )
    # with x-amz-date the date line is empty (S3's rule); some clients still put Date there
    dates = [""] if amz_date is not None else []
    dates.append((hm.get("date") or "").strip())
    texts = [
        string_to_sign(method, path, raw_query, hm, date=d, bucket_from_host=bucket_from_host)
        for d in dict.fromkeys(dates)
        for path in _signed_paths(raw_path, bucket_from_host)
    ]
    _matches(secret, texts, provided.strip(), key)
    return AuthResult(access_key_id=key, version=2, presigned=False, payload=PayloadMode.UNSIGNED)


def _verify_presigned(
    method: str,
    raw_path: str,
    raw_query: str,
    hm: HeaderMap,
    params: dict[str, str],
    secret_for: SecretFor,
    now: datetime,
    bucket_from_host: str | None,
) -> AuthResult:
    key = params.get("AWSAccessKeyId")
    provided = params.get("Signature")
    expires = params.get("Expires")
    if not key or not provided or not expires:
        raise S3Error(
            "AccessDenied",
            "Query-string authentication requires the Signature, Expires and AWSAccessKeyId"
            " parameters",
        )
    if not expires.isdigit():
        raise S3Error("AccessDenied", "Invalid date (should be seconds since epoch)")
    secret = secret_for(key)
    if secret is None:
        raise S3Error("InvalidAccessKeyId", AWSAccessKeyId=key)
    if now.timestamp() > int(expires):
        raise S3Error(
            "AccessDenied",
            "Request has expired",
            Expires=datetime.fromtimestamp(int(expires), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            ServerTime=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
    texts = [
        string_to_sign(method, path, raw_query, hm, date=expires, bucket_from_host=bucket_from_host)
        for path in _signed_paths(raw_path, bucket_from_host)
    ]
    _matches(secret, texts, provided, key)
    return AuthResult(access_key_id=key, version=2, presigned=True, payload=PayloadMode.UNSIGNED)
