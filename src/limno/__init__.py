"""limno: a versioned, git-like data lake for Python and Spark.

The public API is re-exported here; submodules starting with ``_`` are private.
"""

from limno.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
    StorageError,
)
from limno.lake import Lake
from limno.storage import Storage, open_storage

__all__ = [
    "AlreadyExistsError",
    "ConflictError",
    "CorruptError",
    "InvalidInputError",
    "Lake",
    "LimnoError",
    "NotFoundError",
    "PreconditionFailedError",
    "Storage",
    "StorageError",
    "open_storage",
]
