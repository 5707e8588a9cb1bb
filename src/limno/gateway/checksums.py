"""The checksum algorithms of S3's ``x-amz-checksum-*`` headers and trailers.

Current SDKs send a checksum with every upload by default (boto3 >= 1.36 a CRC32 in an
``aws-chunked`` trailer), so the gateway must compute them all to verify what it stores.
CRC32 comes from zlib and the SHAs from hashlib; CRC32C and CRC64NVME from ``awscrt``, AWS's
own C runtime (the library botocore itself uses for them), imported only when a client asks.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from typing import Protocol

from limno.gateway.s3errors import S3Error

__all__ = [
    "ALGORITHMS",
    "DIGEST_SIZES",
    "Checksum",
    "algorithm_of_header",
    "header_of",
    "new_checksum",
]

#: algorithm name (lower case, as in the header name) -> digest size in bytes
DIGEST_SIZES = {"crc32": 4, "crc32c": 4, "crc64nvme": 8, "sha1": 20, "sha256": 32}
ALGORITHMS = tuple(DIGEST_SIZES)
_PREFIX = "x-amz-checksum-"


class Checksum(Protocol):
    """A running checksum: ``update`` with the bytes as they flow, ``b64digest`` at the end."""

    def update(self, data: bytes) -> None: ...

    def b64digest(self) -> str: ...


class _Crc:
    """A CRC kept as an int, folded over each piece (zlib and awscrt both take the previous
    value), rendered big-endian as S3 does."""

    def __init__(self, fold: _Fold, size: int) -> None:
        self._fold = fold
        self._size = size
        self._value = 0

    def update(self, data: bytes) -> None:
        if data:
            self._value = self._fold(data, self._value)

    def b64digest(self) -> str:
        return base64.b64encode(self._value.to_bytes(self._size, "big")).decode("ascii")


class _Fold(Protocol):
    def __call__(self, data: bytes, previous: int, /) -> int: ...


class _Hash:
    def __init__(self, name: str) -> None:
        self._hash = hashlib.new(name)

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def b64digest(self) -> str:
        return base64.b64encode(self._hash.digest()).decode("ascii")


def _crt(name: str) -> _Fold:
    try:
        from awscrt import checksums
    except ImportError:  # pragma: no cover - awscrt is a dependency
        raise S3Error(
            "NotImplemented", f"The {name.upper()} checksum needs the awscrt package"
        ) from None
    fold: _Fold = getattr(checksums, name)
    return fold


def new_checksum(algorithm: str) -> Checksum:
    """A fresh running checksum of ``algorithm`` (``crc32``, ``crc32c``, ``crc64nvme``,
    ``sha1``, ``sha256``; any case). An unknown one is ``InvalidRequest``."""
    name = algorithm.lower()
    if name == "crc32":
        return _Crc(zlib.crc32, 4)
    if name in ("crc32c", "crc64nvme"):
        return _Crc(_crt(name), DIGEST_SIZES[name])
    if name in ("sha1", "sha256"):
        return _Hash(name)
    raise S3Error("InvalidRequest", f"Unsupported checksum algorithm {algorithm!r}")


def header_of(algorithm: str) -> str:
    """``x-amz-checksum-<algorithm>``."""
    return _PREFIX + algorithm.lower()


def algorithm_of_header(name: str) -> str | None:
    """The algorithm an ``x-amz-checksum-*`` header names (None for other headers, and for
    ``x-amz-checksum-algorithm`` / ``-type``, which name no value)."""
    lower = name.lower()
    if not lower.startswith(_PREFIX):
        return None
    algorithm = lower[len(_PREFIX) :]
    if algorithm in ("algorithm", "type", "mode"):
        return None
    return algorithm
