"""Request bodies: ``aws-chunked`` decoding and every integrity check a request asks for.

An S3 upload can vouch for its bytes in several ways at once: a signed SHA-256 of the body,
a chain of per-chunk signatures (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD``), a ``Content-MD5``,
an ``x-amz-checksum-*`` header or the same checksum as a trailer after the last chunk. The
decoders here apply all of them as the bytes stream through, in bounded memory (one chunk
header line at most is buffered, never a chunk), and report the verdict in ``finish()``:
a handler must not make a write visible before ``finish()`` returned.

Wire format (``Content-Encoding: aws-chunked``), per chunk: ``<hex size>[;chunk-signature=
<sig>]\\r\\n<data>\\r\\n``; then a zero-size chunk, then trailer lines ``name:value\\r\\n`` (the
signed variant ends them with ``x-amz-trailer-signature``) and an empty line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping

from limno.gateway.checksums import (
    DIGEST_SIZES,
    Checksum,
    algorithm_of_header,
    header_of,
    new_checksum,
)
from limno.gateway.headers import HeaderMap, HeadersLike
from limno.gateway.s3errors import S3Error
from limno.gateway.sigv4 import EMPTY_SHA256, AuthResult, PayloadMode
from limno.pools.files.blobs import ThreadedDigest

__all__ = [
    "MAX_LINE",
    "AwsChunkedDecoder",
    "BodyChecks",
    "BodyDecoder",
    "PlainBody",
    "decode_async",
    "decode_iter",
    "request_body_decoder",
    "stored_content_encoding",
]

#: the longest chunk header or trailer line accepted (a signed header is ~90 bytes)
MAX_LINE = 4096
#: the most trailer lines accepted
MAX_TRAILERS = 8


def _b64_size(value: str) -> int | None:
    try:
        return len(base64.b64decode(value.strip(), validate=True))
    except (binascii.Error, ValueError):
        return None


class BodyChecks:
    """The digests a body must match, computed as its bytes flow.

    ``content_md5`` is the ``Content-MD5`` header (base64), ``checksums`` the
    ``x-amz-checksum-<algorithm>`` values sent as headers, ``sha256`` the signed hex SHA-256,
    ``trailer_algorithms`` the checksums announced by ``x-amz-trailer`` whose values come
    after the body (see :meth:`set_trailer`).
    """

    def __init__(
        self,
        *,
        content_md5: str | None = None,
        checksums: Mapping[str, str] | None = None,
        sha256: str | None = None,
        trailer_algorithms: Iterable[str] = (),
    ) -> None:
        self._md5_expected: bytes | None = None
        self._md5: ThreadedDigest[hashlib._Hash] | None = None
        if content_md5 is not None:
            try:
                self._md5_expected = base64.b64decode(content_md5.strip(), validate=True)
            except (binascii.Error, ValueError):
                self._md5_expected = b""
            if len(self._md5_expected) != 16:
                raise S3Error("InvalidDigest")
            self._md5 = ThreadedDigest(hashlib.md5(usedforsecurity=False))
        self._expected: dict[str, str | None] = {}
        for algorithm, value in (checksums or {}).items():
            self._expected[algorithm.lower()] = self._valid(algorithm.lower(), value)
        for algorithm in trailer_algorithms:
            self._expected.setdefault(algorithm.lower(), None)
        if len(self._expected) > 1:
            raise S3Error("InvalidRequest", "Expecting a single x-amz-checksum- header")
        # each digest runs in a worker thread of its own, side by side (see ThreadedDigest)
        self._running: dict[str, ThreadedDigest[Checksum]] = {
            a: ThreadedDigest(new_checksum(a)) for a in self._expected
        }
        self._sha_expected = sha256.lower() if sha256 is not None else None
        self._sha = ThreadedDigest(hashlib.sha256()) if sha256 is not None else None
        self._computed: dict[str, str] = {}

    @staticmethod
    def _valid(algorithm: str, value: str) -> str:
        size = DIGEST_SIZES.get(algorithm)
        if size is None:
            raise S3Error("InvalidRequest", f"Unsupported checksum algorithm {algorithm!r}")
        if _b64_size(value) != size:
            raise S3Error("InvalidRequest", f"Value for {header_of(algorithm)} header is invalid.")
        return value.strip()

    @classmethod
    def from_headers(
        cls, headers: HeadersLike, auth: AuthResult | None = None, *, sha256: str | None = None
    ) -> BodyChecks:
        """The checks a request's headers and its signed payload hash ask for (``sha256``:
        the hash to check when no signature was verified)."""
        hm = HeaderMap.of(headers)
        checksums = {}
        for name, value in hm.items():
            algorithm = algorithm_of_header(name)
            if algorithm is not None:
                checksums[algorithm] = value
        trailers = []
        for name in (hm.get("x-amz-trailer") or "").split(","):
            algorithm = algorithm_of_header(name.strip())
            if algorithm is not None:
                trailers.append(algorithm)
        sha = auth.content_sha256 if auth is not None else sha256
        return cls(
            content_md5=hm.get("content-md5"),
            checksums=checksums,
            sha256=sha,
            trailer_algorithms=trailers,
        )

    @property
    def trailer_names(self) -> list[str]:
        """The trailer headers still awaited (``x-amz-checksum-...``)."""
        return [header_of(a) for a, v in self._expected.items() if v is None]

    def set_trailer(self, name: str, value: str) -> None:
        """The value of a checksum trailer, read after the body."""
        algorithm = algorithm_of_header(name)
        if algorithm is None or algorithm not in self._expected:
            raise S3Error("MalformedTrailerError", f"Unexpected trailer {name!r}")
        self._expected[algorithm] = self._valid(algorithm, value)

    def update(self, data: bytes) -> None:
        """Fold in the next bytes of the (decoded) body."""
        if self._md5 is not None:
            self._md5.update(data)
        if self._sha is not None:
            self._sha.update(data)
        for running in self._running.values():
            running.update(data)

    def finish(self) -> None:
        """Raise the S3 error of the first digest the body does not match."""
        sha = self._sha.result().hexdigest() if self._sha is not None else None
        if sha is not None and not hmac.compare_digest(sha, self._sha_expected or ""):
            raise S3Error(
                "XAmzContentSHA256Mismatch",
                ClientComputedContentSHA256=self._sha_expected or "",
                S3ComputedContentSHA256=sha,
            )
        md5 = self._md5.result().digest() if self._md5 is not None else None
        if md5 is not None and md5 != self._md5_expected:
            raise S3Error(
                "BadDigest",
                "The Content-MD5 you specified did not match what we received.",
                ExpectedDigest=base64.b64encode(self._md5_expected or b"").decode("ascii"),
                CalculatedDigest=base64.b64encode(md5).decode("ascii"),
            )
        for algorithm, expected in self._expected.items():
            if expected is None:
                raise S3Error(
                    "MalformedTrailerError",
                    f"The trailer {header_of(algorithm)} announced by x-amz-trailer is missing",
                )
            got = self._running[algorithm].result().b64digest()
            if got != expected:
                raise S3Error(
                    "BadDigest",
                    f"The {algorithm.upper()} you specified did not match the calculated checksum.",
                )
            self._computed[header_of(algorithm)] = got

    def checksum_headers(self) -> dict[str, str]:
        """After :meth:`finish`: the verified ``x-amz-checksum-*`` values, to echo back."""
        return dict(self._computed)


class BodyDecoder:
    """A request body being read: ``feed`` the bytes as received, get the decoded bytes;
    ``finish`` at the end raises the S3 error of any check that failed."""

    #: the length of the decoded body as announced by the request (None when not said)
    decoded_length: int | None = None

    def __init__(self, checks: BodyChecks) -> None:
        self.checks = checks

    def feed(self, data: bytes) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def finish(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def checksum_headers(self) -> dict[str, str]:
        """After :meth:`finish`: the ``x-amz-checksum-*`` values sent and verified."""
        return self.checks.checksum_headers()


class PlainBody(BodyDecoder):
    """A body sent as is: counted against Content-Length and hashed."""

    def __init__(self, checks: BodyChecks, decoded_length: int | None) -> None:
        super().__init__(checks)
        self.decoded_length = decoded_length
        self._received = 0

    def feed(self, data: bytes) -> bytes:
        self._received += len(data)
        if self.decoded_length is not None and self._received > self.decoded_length:
            raise S3Error("IncompleteBody", "The body is longer than its Content-Length")
        self.checks.update(data)
        return data

    def finish(self) -> None:
        if self.decoded_length is not None and self._received != self.decoded_length:
            raise S3Error("IncompleteBody")
        self.checks.finish()


class AwsChunkedDecoder(BodyDecoder):
    """An incremental ``aws-chunked`` decoder that checks the chunk signature chain.

    Any split of the input is accepted (mid-line, mid-signature, byte by byte). The data of
    a chunk is passed through as it arrives; its signature is checked when its last byte
    has been read, so a forged chunk fails the request before the next one is decoded.
    """

    _HEADER, _DATA, _DATA_END, _TRAILER, _DONE = range(5)

    def __init__(
        self,
        mode: PayloadMode,
        *,
        decoded_length: int | None,
        checks: BodyChecks | None = None,
        signing_key: bytes | None = None,
        seed_signature: str | None = None,
        amz_date: str | None = None,
        scope: str | None = None,
        verify_signatures: bool = True,
    ) -> None:
        super().__init__(checks or BodyChecks())
        self.mode = mode
        self.decoded_length = decoded_length
        self._signed = mode.signed_chunks
        # no signing key (a server without auth): the chunks are read, their signatures not
        self._verify = self._signed and verify_signatures
        self._trailer_mode = mode in (
            PayloadMode.STREAMING_SIGNED_TRAILER,
            PayloadMode.STREAMING_UNSIGNED_TRAILER,
        )
        if self._verify and not (signing_key and seed_signature and amz_date and scope):
            raise S3Error("AccessDenied", "A signed aws-chunked body needs a SigV4 signature")
        self._key = signing_key or b""
        self._previous = (seed_signature or "").lower()
        self._prefix = f"{amz_date}\n{scope}\n"
        self._state = self._HEADER
        self._line = bytearray()
        self._remaining = 0
        self._chunk_signature = ""
        self._chunk_hash = hashlib.sha256()
        self._decoded = 0
        self._trailers: list[tuple[str, str]] = []

    # -- the state machine ---------------------------------------------------------------

    def feed(self, data: bytes) -> bytes:
        # pieces joined once: a feed that is all chunk data comes back without a copy
        out: list[bytes] = []
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            if self._state == self._DATA:
                take = min(self._remaining, len(view) - pos)
                piece = data[pos : pos + take]
                self._chunk_hash.update(piece)
                self.checks.update(piece)
                out.append(piece)
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._end_of_chunk_data()
                continue
            if self._state == self._DONE:
                raise S3Error("IncompleteBody", "Bytes after the end of the aws-chunked body")
            end = data.find(b"\n", pos)
            stop = len(view) if end < 0 else end + 1
            self._line += view[pos:stop]
            pos = stop
            if len(self._line) > MAX_LINE:
                raise S3Error("IncompleteBody", "An aws-chunked header line is too long")
            if end >= 0:
                line = bytes(self._line)
                self._line.clear()
                if not line.endswith(b"\r\n"):
                    raise S3Error("IncompleteBody", "An aws-chunked line does not end in CRLF")
                self._on_line(line[:-2])
        return b"".join(out)

    def _on_line(self, line: bytes) -> None:
        if self._state == self._HEADER:
            self._on_chunk_header(line)
        elif self._state == self._DATA_END:
            if line:
                raise S3Error("IncompleteBody", "A chunk is longer than its declared size")
            self._state = self._HEADER
        elif self._state == self._TRAILER:
            self._on_trailer_line(line)

    def _on_chunk_header(self, line: bytes) -> None:
        try:
            text = line.decode("ascii")
        except UnicodeDecodeError:
            raise S3Error("IncompleteBody", "A malformed aws-chunked header") from None
        size_text, _, extension = text.partition(";")
        size_text = size_text.strip()
        if not size_text or len(size_text) > 16:
            raise S3Error("IncompleteBody", "A malformed aws-chunked chunk size")
        try:
            size = int(size_text, 16)
        except ValueError:
            raise S3Error("IncompleteBody", "A malformed aws-chunked chunk size") from None
        self._chunk_signature = ""
        if self._signed:
            name, _, signature = extension.strip().partition("=")
            if name != "chunk-signature" or not signature:
                raise S3Error("IncompleteBody", "An aws-chunked chunk lacks its signature")
            self._chunk_signature = signature.lower()
        self._decoded += size
        if self.decoded_length is not None and self._decoded > self.decoded_length:
            raise S3Error(
                "IncompleteBody", "The chunks hold more than x-amz-decoded-content-length"
            )
        self._chunk_hash = hashlib.sha256()
        if size == 0:
            self._verify_chunk()
            self._state = self._TRAILER
        else:
            self._remaining = size
            self._state = self._DATA

    def _end_of_chunk_data(self) -> None:
        self._verify_chunk()
        self._state = self._DATA_END

    def _verify_chunk(self) -> None:
        if not self._verify:
            return
        to_sign = (
            "AWS4-HMAC-SHA256-PAYLOAD\n"
            + self._prefix
            + f"{self._previous}\n{EMPTY_SHA256}\n{self._chunk_hash.hexdigest()}"
        )
        expected = hmac.new(self._key, to_sign.encode("ascii"), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, self._chunk_signature):
            raise S3Error(
                "SignatureDoesNotMatch",
                "The chunk signature we calculated does not match the one you provided.",
            )
        self._previous = expected

    def _on_trailer_line(self, line: bytes) -> None:
        if not line:
            self._end_of_trailers()
            self._state = self._DONE
            return
        if not self._trailer_mode or len(self._trailers) >= MAX_TRAILERS:
            raise S3Error("MalformedTrailerError", "Unexpected trailing data")
        try:
            text = line.decode("ascii")
        except UnicodeDecodeError:
            raise S3Error("MalformedTrailerError") from None
        name, colon, value = text.partition(":")
        if not colon:
            raise S3Error("MalformedTrailerError")
        self._trailers.append((name.strip().lower(), value.strip()))

    def _end_of_trailers(self) -> None:
        signature = None
        values = []
        for name, value in self._trailers:
            if name == "x-amz-trailer-signature":
                signature = value.lower()
            else:
                values.append((name, value))
        if self.mode is PayloadMode.STREAMING_SIGNED_TRAILER and self._verify:
            if signature is None:
                raise S3Error("MalformedTrailerError", "The trailer signature is missing")
            canonical = "".join(f"{n}:{v}\n" for n, v in sorted(values))
            to_sign = (
                "AWS4-HMAC-SHA256-TRAILER\n"
                + self._prefix
                + f"{self._previous}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
            )
            expected = hmac.new(self._key, to_sign.encode("ascii"), hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, signature):
                raise S3Error(
                    "SignatureDoesNotMatch",
                    "The trailer signature we calculated does not match the one you provided.",
                )
        elif signature is not None and self.mode is not PayloadMode.STREAMING_SIGNED_TRAILER:
            raise S3Error("MalformedTrailerError", "A trailer signature in an unsigned trailer")
        for name, value in values:
            self.checks.set_trailer(name, value)

    def finish(self) -> None:
        if self._state != self._DONE:
            raise S3Error("IncompleteBody", "The aws-chunked body ended before its last chunk")
        if self.decoded_length is not None and self._decoded != self.decoded_length:
            raise S3Error(
                "IncompleteBody", "The chunks hold less than x-amz-decoded-content-length"
            )
        self.checks.finish()


def _length(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit():
        raise S3Error("InvalidArgument", f"Invalid length {value!r}")
    return int(text)


def _is_aws_chunked(hm: HeaderMap) -> bool:
    tokens = (hm.get("content-encoding") or "").split(",")
    return any(t.strip().lower() == "aws-chunked" for t in tokens)


def _declared_mode(declared: str) -> PayloadMode:
    if re.fullmatch(r"[0-9a-f]{64}", declared):
        return PayloadMode.SIGNED
    try:
        return PayloadMode(declared)
    except ValueError:
        return PayloadMode.UNSIGNED


def stored_content_encoding(headers: HeadersLike) -> str | None:
    """The Content-Encoding to store with the object: the request's without
    ``aws-chunked``, which describes the transfer, not the object (None when nothing is
    left)."""
    hm = HeaderMap.of(headers)
    tokens = [t.strip() for t in (hm.get("content-encoding") or "").split(",")]
    kept = [t for t in tokens if t and t.lower() != "aws-chunked"]
    return ",".join(kept) or None


def request_body_decoder(
    auth: AuthResult | None, headers: HeadersLike, *, require_length: bool = False
) -> BodyDecoder:
    """The decoder for a request's body, with every check its headers and signature ask for.

    The streaming payload modes (or ``Content-Encoding: aws-chunked``) get an
    :class:`AwsChunkedDecoder`, anything else a :class:`PlainBody`. ``require_length``:
    a body whose length is not announced is ``MissingContentLength`` (PutObject, UploadPart).
    """
    hm = HeaderMap.of(headers)
    declared = (hm.get("x-amz-content-sha256") or "").strip()
    if auth is not None:
        mode = auth.payload
        if not mode.streaming and declared == PayloadMode.STREAMING_UNSIGNED_TRAILER.value:
            mode = PayloadMode.STREAMING_UNSIGNED_TRAILER
    else:
        # nothing was verified (a server without auth): read the body the way it says it is
        mode = _declared_mode(declared)
    if not mode.streaming and _is_aws_chunked(hm):
        raise S3Error(
            "InvalidRequest", "An aws-chunked body needs a STREAMING- x-amz-content-sha256"
        )
    unverified_sha = declared if auth is None and mode is PayloadMode.SIGNED else None
    checks = BodyChecks.from_headers(hm, auth, sha256=unverified_sha)
    if mode.streaming:
        decoded = _length(hm.get("x-amz-decoded-content-length"))
        if decoded is None:
            raise S3Error("MissingContentLength", "x-amz-decoded-content-length is required")
        return AwsChunkedDecoder(
            mode,
            decoded_length=decoded,
            checks=checks,
            signing_key=auth.signing_key if auth is not None else None,
            seed_signature=auth.seed_signature if auth is not None else None,
            amz_date=auth.amz_date if auth is not None else None,
            scope=auth.scope if auth is not None else None,
            verify_signatures=auth is not None,
        )
    length = _length(hm.get("content-length"))
    if length is None and require_length:
        raise S3Error("MissingContentLength")
    if checks.trailer_names:
        raise S3Error("InvalidRequest", "x-amz-trailer needs an aws-chunked body")
    return PlainBody(checks, length)


def decode_iter(decoder: BodyDecoder, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The decoded body of ``chunks``; ``finish()`` is called before the iterator ends, so
    a consumer never sees the end of a body that fails its checks."""
    for chunk in chunks:
        out = decoder.feed(chunk)
        if out:
            yield out
    decoder.finish()


async def decode_async(decoder: BodyDecoder, chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """:func:`decode_iter` for an async body (an ASGI ``receive`` loop)."""
    async for chunk in chunks:
        out = decoder.feed(chunk)
        if out:
            yield out
    decoder.finish()
