"""S3's error model: the codes clients branch on, their HTTP statuses, the XML body.

S3 clients act on the ``<Code>`` of an error, not on its text: boto retries ``SlowDown``,
s3a turns ``NoSuchKey`` into ``FileNotFoundException``, the AWS CLI stops a sync on
``AccessDenied``. So every failure of the gateway leaves as an :class:`S3Error` carrying one
of S3's own codes, and limno's exception tree is translated to those codes in exactly one
place, :func:`from_limno`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote
from xml.sax.saxutils import escape as _escape

from limno.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptError,
    ForbiddenError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
    QueryTimeoutError,
    ResultTooLargeError,
    StorageError,
    UnauthenticatedError,
)

__all__ = ["CODES", "S3Error", "from_limno"]

#: characters XML 1.0 cannot hold at all, not even as a character reference
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def escape(text: str) -> str:
    """``text`` for an error document: XML-escaped, and each character XML 1.0 cannot
    hold (a key may have any but NUL, such as U+0001) percent-encoded, as in a URL, so that
    every client can still parse the document and read its ``<Code>``."""
    return _escape(_NOT_XML.sub(lambda m: quote(m.group(), safe="", errors="surrogatepass"), text))


#: S3 error code -> (HTTP status, the message S3 words it with)
CODES: dict[str, tuple[int, str]] = {
    "AccessDenied": (403, "Access Denied"),
    "AuthorizationHeaderMalformed": (400, "The authorization header is malformed."),
    "AuthorizationQueryParametersError": (
        400,
        "The query parameters that authenticate the request are malformed.",
    ),
    "BadDigest": (400, "The Content-MD5 or checksum you specified did not match what we received."),
    "BucketAlreadyExists": (409, "The requested bucket name is not available."),
    "BucketAlreadyOwnedByYou": (
        409,
        "The bucket you tried to create already exists, and you own it.",
    ),
    "BucketNotEmpty": (409, "The bucket you tried to delete is not empty."),
    "ConditionalRequestConflict": (
        409,
        "A conflicting operation occurred. If using PutObject you can retry the request.",
    ),
    "EntityTooLarge": (400, "Your proposed upload exceeds the maximum allowed object size."),
    "EntityTooSmall": (
        400,
        "Your proposed upload is smaller than the minimum allowed object size.",
    ),
    "IncompleteBody": (
        400,
        "You did not provide the number of bytes specified by the Content-Length HTTP header.",
    ),
    "InternalError": (500, "We encountered an internal error. Please try again."),
    "InvalidAccessKeyId": (
        403,
        "The AWS Access Key Id you provided does not exist in our records.",
    ),
    "InvalidArgument": (400, "Invalid Argument"),
    "InvalidBucketName": (400, "The specified bucket is not valid."),
    "InvalidChunkSizeError": (
        403,
        "Only the last chunk is allowed to have a size less than 8192 bytes",
    ),
    "InvalidDigest": (400, "The Content-MD5 or checksum you specified is not valid."),
    "InvalidObjectState": (403, "The operation is not valid for the object's state."),
    "InvalidPart": (
        400,
        "One or more of the specified parts could not be found. The part might not have been"
        " uploaded, or the specified entity tag might not have matched the part's entity tag.",
    ),
    "InvalidPartOrder": (
        400,
        "The list of parts was not in ascending order. The parts list must be specified in"
        " order by part number.",
    ),
    "InvalidURI": (400, "Couldn't parse the specified URI."),
    "InvalidRange": (416, "The requested range is not satisfiable"),
    "InvalidRequest": (400, "Invalid Request"),
    "KeyTooLongError": (400, "Your key is too long"),
    "MalformedXML": (
        400,
        "The XML you provided was not well-formed or did not validate against our published schema",
    ),
    "MalformedTrailerError": (
        400,
        "The request contained trailing data that was not well-formed or did not conform to"
        " our published schema.",
    ),
    "MaxMessageLengthExceeded": (400, "Your request was too big."),
    "MethodNotAllowed": (405, "The specified method is not allowed against this resource."),
    "MissingContentLength": (411, "You must provide the Content-Length HTTP header."),
    "MissingSecurityHeader": (400, "Your request is missing a required header."),
    "NoSuchBucket": (404, "The specified bucket does not exist"),
    "NoSuchKey": (404, "The specified key does not exist."),
    "NoSuchVersion": (404, "The specified version does not exist."),
    "NoSuchUpload": (
        404,
        "The specified multipart upload does not exist. The upload ID may be invalid, or the"
        " upload may have been aborted or completed.",
    ),
    "NotImplemented": (
        501,
        "A header or query you provided implies functionality that is not implemented",
    ),
    "NotModified": (304, "Not Modified"),
    "OperationAborted": (
        409,
        "A conflicting conditional operation is currently in progress against this resource."
        " Try again.",
    ),
    "PreconditionFailed": (412, "At least one of the pre-conditions you specified did not hold"),
    "RequestTimeTooSkewed": (
        403,
        "The difference between the request time and the current time is too large.",
    ),
    "ServiceUnavailable": (503, "Please reduce your request rate."),
    "SignatureDoesNotMatch": (
        403,
        "The request signature we calculated does not match the signature you provided. Check"
        " your key and signing method.",
    ),
    "SlowDown": (503, "Please reduce your request rate."),
    "XAmzContentSHA256Mismatch": (
        400,
        "The provided 'x-amz-content-sha256' header does not match what was computed.",
    ),
}


class S3Error(Exception):
    """One S3 error response: ``code`` (S3's), ``status`` (HTTP), ``message``, ``resource``.

    ``extra`` holds further elements of the ``<Error>`` document that S3 adds for some codes
    (``Key``, ``BucketName``, ``UploadId``, ``ArgumentName``, ...), ``headers`` response
    headers the error needs (``Allow`` for MethodNotAllowed). A code not in :data:`CODES` is
    allowed (status 400 unless given), so a handler can answer any code S3 has.
    """

    def __init__(
        self,
        code: str,
        message: str | None = None,
        *,
        status: int | None = None,
        resource: str | None = None,
        headers: Mapping[str, str] | None = None,
        **extra: str,
    ) -> None:
        default_status, default_message = CODES.get(code, (400, code))
        self.code = code
        self.status = status if status is not None else default_status
        self.message = message if message is not None else default_message
        self.resource = resource
        self.headers: dict[str, str] = dict(headers or {})
        self.extra: dict[str, str] = dict(extra)
        super().__init__(f"{code}: {self.message}")

    @property
    def has_body(self) -> bool:
        """False when the response must have no body (304 Not Modified, any non-error)."""
        return self.status >= 400

    def to_xml(self, request_id: str = "", host_id: str = "") -> bytes:
        """The ``<Error>`` document S3 answers with (``b""`` when :attr:`has_body` is false)."""
        if not self.has_body:
            return b""
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error>',
            f"<Code>{escape(self.code)}</Code>",
            f"<Message>{escape(self.message)}</Message>",
        ]
        for name, value in self.extra.items():
            parts.append(f"<{name}>{escape(value)}</{name}>")
        if self.resource is not None:
            parts.append(f"<Resource>{escape(self.resource)}</Resource>")
        parts.append(f"<RequestId>{escape(request_id)}</RequestId>")
        if host_id:
            parts.append(f"<HostId>{escape(host_id)}</HostId>")
        parts.append("</Error>")
        return "".join(parts).encode("utf-8")


def _resource(bucket: str | None, key: str | None) -> str | None:
    if bucket is None:
        return None
    return f"/{bucket}/{key}" if key is not None else f"/{bucket}"


def from_limno(
    err: BaseException,
    *,
    bucket: str | None = None,
    key: str | None = None,
    upload_id: str | None = None,
    op: str | None = None,
) -> S3Error:
    """The S3 error for any exception raised while serving a request.

    The context says which S3 code a limno error means: a NotFoundError is ``NoSuchUpload``
    when an upload was named, ``NoSuchKey`` when a key was, else ``NoSuchBucket``. ``op`` is
    the S3 operation's name (``"DeleteBucket"``, ``"CreateBucket"``) where the same limno
    error means something specific there. Errors that are not limno's own become an
    ``InternalError`` whose message tells nothing of the internals.
    """
    if isinstance(err, S3Error):
        return err
    resource = _resource(bucket, key)
    message = str(err) or None
    extra: dict[str, str] = {}

    def make(code: str, text: str | None = message) -> S3Error:
        made = S3Error(code, text, resource=resource)
        made.extra.update(extra)
        return made

    if isinstance(err, NotFoundError):
        if upload_id is not None:
            extra["UploadId"] = upload_id
            return make("NoSuchUpload")
        if key is not None:
            extra["Key"] = key
            return make("NoSuchKey")
        if bucket is not None:
            extra["BucketName"] = bucket
        return make("NoSuchBucket")
    if isinstance(err, AlreadyExistsError):
        if key is None:
            if bucket is not None:
                extra["BucketName"] = bucket
            return make("BucketAlreadyOwnedByYou")
        return make("PreconditionFailed")
    if isinstance(err, ConflictError):
        if op == "DeleteBucket":
            if bucket is not None:
                extra["BucketName"] = bucket
            return make("BucketNotEmpty")
        return make("OperationAborted")
    if isinstance(err, PreconditionFailedError):
        return make("PreconditionFailed")
    if isinstance(err, InvalidInputError):
        if op == "CreateBucket":
            if bucket is not None:
                extra["BucketName"] = bucket
            return make("InvalidBucketName")
        return make("InvalidArgument")
    if isinstance(err, UnauthenticatedError | ForbiddenError):
        # S3 answers 403 for both: an S3 client has no use for 401
        return make("AccessDenied")
    if isinstance(err, ResultTooLargeError):
        return make("EntityTooLarge")
    if isinstance(err, StorageError | QueryTimeoutError):
        return make("ServiceUnavailable")
    if isinstance(err, CorruptError | LimnoError):
        return make("InternalError")
    # not ours: its text may name internals, so the client gets S3's generic wording
    return make("InternalError", None)
