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
    ├── CorruptError             500  stored bytes fail their checks
    └── StorageError             503  the object store itself failed
"""

from __future__ import annotations

__all__ = [
    "AlreadyExistsError",
    "ConflictError",
    "CorruptError",
    "HookVetoError",
    "InvalidInputError",
    "LimnoError",
    "NotFoundError",
    "PreconditionFailedError",
    "StorageError",
    "http_status",
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


class CorruptError(LimnoError):
    """Stored bytes failed their checks (truncated, bad checksum, bad shape)."""

    status = 500


class StorageError(LimnoError):
    """The object store failed in a way that is none of the above."""

    status = 503


def http_status(err: BaseException) -> int:
    """The HTTP status code an error maps to (500 for anything unexpected)."""
    return err.status if isinstance(err, LimnoError) else 500
