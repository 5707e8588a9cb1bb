"""Which signature a request carries, checked: the one entry point of gateway auth.

S3 clients sign with SigV4 in a header (boto3, the AWS CLI, s3a), SigV4 in the query
(presigned URLs), or, older ones, SigV2 either way. The handler calls :func:`authenticate`
once per request and gets the signer's access key id (to look up roles and grants) and what
the body decoder needs; a request with no credentials at all gets None, so the handler can
decide what anonymous callers may do (normally nothing).
"""

from __future__ import annotations

from datetime import datetime

from limno.gateway.headers import HeaderMap, HeadersLike, query_pairs
from limno.gateway.s3errors import S3Error
from limno.gateway.sigv2 import verify_sigv2
from limno.gateway.sigv4 import AuthResult, PayloadMode, SecretFor, verify_sigv4

__all__ = ["AuthResult", "PayloadMode", "SecretFor", "authenticate"]


def authenticate(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: HeadersLike,
    secret_for: SecretFor,
    now: datetime,
    *,
    bucket_from_host: str | None = None,
) -> AuthResult | None:
    """Verify the request's signature, whichever kind it is; None for an anonymous request.

    ``raw_path`` is the path as sent (percent-encoded, no query), ``raw_query`` the query
    string as sent, ``bucket_from_host`` the bucket of a virtual-host addressed request
    (SigV2 signs it as part of the path). Raises :class:`S3Error` for any credentials that
    do not check out.
    """
    hm = HeaderMap.of(headers)
    authorization = (hm.get("authorization") or "").strip()
    if authorization.startswith("AWS4-"):
        return verify_sigv4(method, raw_path, raw_query, hm, secret_for, now)
    if authorization.startswith("AWS "):
        return verify_sigv2(
            method, raw_path, raw_query, hm, secret_for, now, bucket_from_host=bucket_from_host
        )
    if authorization:
        raise S3Error("InvalidArgument", "Unsupported Authorization Type")
    names = {name for name, _ in query_pairs(raw_query)}
    if "X-Amz-Algorithm" in names or "X-Amz-Signature" in names or "X-Amz-Credential" in names:
        return verify_sigv4(method, raw_path, raw_query, hm, secret_for, now)
    if "AWSAccessKeyId" in names or "Signature" in names:
        return verify_sigv2(
            method, raw_path, raw_query, hm, secret_for, now, bucket_from_host=bucket_from_host
        )
    return None
