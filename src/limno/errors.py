"""The one exception tree of limno.

Every error limno raises on purpose derives from :class:`LimnoError`. Each class
carries the HTTP status it maps to, so the server (and anything else that needs a
code) translates errors in exactly one place: :func:`http_status`.

    LimnoError
    ├── NotFoundError            404  object, pool, ref or commit does not exist
    ├── AlreadyExistsError       409  put-if-absent lost, name taken
    ├── ConflictError            409  concurrent change that cannot be rebased
    ├── PreconditionFailedError  412  an expected state did not hold (CAS)
    │   └── HookVetoError        412  a pre-commit or pre-merge hook said no
    ├── InvalidInputError        400  bad argument, name, record, schema
    │   └── MultipartError       400  a multipart upload's parts break S3's rules (404: no upload)
    ├── UnauthenticatedError     401  no credentials, or unknown key or wrong secret
    ├── ForbiddenError           403  authenticated, but the role and grants do not allow it
    │   └── ProtectedBranchError 403  a direct write to a protected branch (only merges move it)
    ├── CorruptError             500  stored bytes fail their checks
    │   └── DamagedObjectError   500  a data object's bytes fail to decode
    ├── StorageError             503  the object store itself failed
    ├── QueryTimeoutError        503  a query ran past its time limit
    └── ResultTooLargeError      413  a query's answer is over its row or byte limit

Errors of the operating system and of Arrow become these at the few places where
bytes are read or written (the storage backend, the Parquet reader and writer):
:func:`storage_error` words an ``OSError`` (``cannot write PATH: no space left on
device``) and :func:`damaged_object` names a data object whose bytes fail to decode.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

__all__ = [
    "AlreadyExistsError",
    "ConflictError",
    "CorruptError",
    "DamagedObjectError",
    "ForbiddenError",
    "HookVetoError",
    "InvalidInputError",
    "LimnoError",
    "MultipartError",
    "NotFoundError",
    "PreconditionFailedError",
    "ProtectedBranchError",
    "QueryTimeoutError",
    "ResultTooLargeError",
    "StorageError",
    "UnauthenticatedError",
    "damaged_object",
    "decode_reason",
    "http_status",
    "os_errors",
    "os_reason",
    "storage_error",
]


class LimnoError(Exception):
    """Base of every limno error."""

    status: int = 500


class NotFoundError(LimnoError):
    """A named thing (object, pool, ref, commit) does not exist."""

    status = 404


class AlreadyExistsError(LimnoError):
    """A create lost: the object or name already exists."""

    status = 409


class ConflictError(LimnoError):
    """A concurrent change conflicts with this one and cannot be rebased."""

    status = 409


class PreconditionFailedError(LimnoError):
    """An expected state (a compare-and-swap requirement) did not hold."""

    status = 412


class HookVetoError(PreconditionFailedError):
    """A pre-commit or pre-merge hook vetoed the operation; nothing was changed."""


class InvalidInputError(LimnoError):
    """Bad user input: argument, name, record or schema. Nothing was changed."""

    status = 400


class MultipartError(InvalidInputError):
    """A multipart upload cannot complete as asked; ``reason`` says which of S3's rules
    failed, for the S3 gateway's error code: ``invalid-part`` (a listed part is missing
    or has another ETag: InvalidPart), ``part-order`` (the list is not ascending:
    InvalidPartOrder), ``too-small`` (a part but the last is under 5 MiB:
    EntityTooSmall), ``no-upload`` (no such upload, or it was completed or aborted:
    NoSuchUpload, status 404)."""

    reason: str = "invalid-part"

    def __init__(self, message: str = "", reason: str = "invalid-part") -> None:
        super().__init__(message)
        self.reason = reason
        if reason == "no-upload":
            self.status = 404


class UnauthenticatedError(LimnoError):
    """A request without credentials, or with ones that do not match a key (one message
    for both an unknown key id and a wrong secret: which one is not told)."""

    status = 401


class ForbiddenError(LimnoError):
    """The caller is known, but its role and grants do not allow this; nothing was changed."""

    status = 403


class ProtectedBranchError(ForbiddenError):
    """A direct write (commit, load, staging, revert, cherry-pick, reset, delete) to a
    protected branch, which only merges may move; nothing was changed. 403 as lakeFS
    answers it, and not a PreconditionFailedError: the write is not to be retried
    (writers retry a lost compare-and-swap), whoever makes it."""


class CorruptError(LimnoError):
    """Stored bytes failed their checks (truncated, bad checksum, bad shape)."""

    status = 500
    #: what the decoder said, without the advice around it (for ``verify``'s faults)
    reason: str = ""


class DamagedObjectError(CorruptError):
    """A data object's bytes fail to decode; ``path`` is the object, ``pool`` the name
    (or id) of its pool, ``reason`` what the decoder said."""

    def __init__(self, path: str, pool: str, reason: str) -> None:
        super().__init__(
            f"data object {path} of pool {pool} is damaged ({reason});"
            f" run 'limno verify --deep {pool}'"
        )
        self.path = path
        self.pool = pool
        self.reason = reason


class StorageError(LimnoError):
    """The object store failed in a way that is none of the above."""

    status = 503


class QueryTimeoutError(LimnoError):
    """A query was stopped at its time limit; nothing was changed. 503, not 408: the
    request arrived in time, the server declines to spend longer on it."""

    status = 503


class ResultTooLargeError(LimnoError):
    """A query's answer has more rows or bytes than its limit allows."""

    status = 413


def http_status(err: BaseException) -> int:
    """The HTTP status code an error maps to (500 for anything unexpected)."""
    return err.status if isinstance(err, LimnoError) else 500


#: how an error line words the errnos a user can act on
_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large",
    errno.EROFS: "read-only file system",
    errno.EIO: "input/output error",
}


def os_reason(code: int | None, text: str = "") -> str:
    """A short lower-case reason for an errno (``text`` when it has none)."""
    if code in _REASONS:
        return _REASONS[code]
    if code is not None:
        words = os.strerror(code)
        return words[:1].lower() + words[1:]
    return text or "unknown error"


def storage_error(action: str, path: str, err: OSError) -> StorageError:
    """``cannot ACTION PATH: REASON`` for an OS error on a file or object."""
    return StorageError(f"cannot {action} {path}: {os_reason(err.errno, str(err))}")


@contextlib.contextmanager
def os_errors(action: str, path: str) -> Iterator[None]:
    """Turn an ``OSError`` with an errno raised inside into :func:`storage_error`.

    Errors without an errno pass through: Arrow raises those for bytes it cannot
    decode, which only the caller can name (see :func:`damaged_object`).
    """
    try:
        yield
    except OSError as e:
        if e.errno is None:
            raise
        raise storage_error(action, path, e) from e


def decode_reason(err: BaseException) -> str:
    """The first sentence of a decoder's message (Arrow's go on with advice)."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    first = text.split(". ")[0]
    return first.rstrip(" .:") or type(err).__name__


def damaged_object(path: str, pool: str, reason: str) -> DamagedObjectError:
    """The error for a data object whose bytes fail to decode: names it, suggests verify
    (``--deep``: only a deep verify reads every page, where such damage shows)."""
    return DamagedObjectError(path, pool, reason)
