"""limno: a versioned, git-like data lake for Python and Spark.

The public API, re-exported here: :class:`Lake` and :class:`Pool` (the one lake
interface, :mod:`limno.api`), the model types they return, and the exception tree
(:mod:`limno.errors`). ``Lake.open(location)`` / ``Lake.init(location)`` give a lake
(a path, ``file://``, ``s3://bucket/prefix``)::

    import limno
    lake = limno.Lake.open("my-lake")
    logs = lake.pool("logs")
    logs.scan("main", start=100, end=200)
"""

from __future__ import annotations

import importlib
import typing  # whole: dir(limno) holds no names but the API's

from limno.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptError,
    DamagedObjectError,
    ForbiddenError,
    HookVetoError,
    InvalidInputError,
    LimnoError,
    MultipartError,
    NotFoundError,
    PreconditionFailedError,
    ProtectedBranchError,
    QueryTimeoutError,
    ResultTooLargeError,
    StorageError,
    UnauthenticatedError,
)

if typing.TYPE_CHECKING:
    from limno.api import Engine, FilePool, Lake, Pool, VersionedPool
    from limno.core.commits import Action, Commit
    from limno.core.hooks import HookSpec, HookVerdict
    from limno.core.versioning import DiffEntry, MergeResult
    from limno.data.indexes import IndexSpec
    from limno.data.objects import DataObject
    from limno.data.typed_schema import TypedSchema
    from limno.faults import Fault
    from limno.pools.events import Event
    from limno.pools.files.entries import FileChange, FileEntry
    from limno.pools.files.listing import Listing
    from limno.pools.ingest_queue import IngestJob, QueuedFile
    from limno.pools.records.compaction import CompactionJob, JobResult
    from limno.pools.registry import PoolConfig
    from limno.pools.review_compare import Comparison, Sampled
    from limno.pools.reviews import MergeAttempt, MergeRequest
    from limno.pools.settings import BatcherSettings, CompactionSettings, PoolSettings
    from limno.pools.vacuum import VacuumReport

#: the re-exports imported on first use (PEP 562), so that ``import limno.cli``
#: loads only what a command needs (see limno.lazy)
_LAZY = {
    "Engine": "limno.api",
    "Lake": "limno.api",
    "Pool": "limno.api",
    "FilePool": "limno.api",
    "VersionedPool": "limno.api",
    "FileEntry": "limno.pools.files.entries",
    "FileChange": "limno.pools.files.entries",
    "Listing": "limno.pools.files.listing",
    "Action": "limno.core.commits",
    "Commit": "limno.core.commits",
    "HookSpec": "limno.core.hooks",
    "HookVerdict": "limno.core.hooks",
    "DiffEntry": "limno.core.versioning",
    "MergeResult": "limno.core.versioning",
    "IndexSpec": "limno.data.indexes",
    "DataObject": "limno.data.objects",
    "TypedSchema": "limno.data.typed_schema",
    "Fault": "limno.faults",
    "CompactionJob": "limno.pools.records.compaction",
    "JobResult": "limno.pools.records.compaction",
    "Event": "limno.pools.events",
    "IngestJob": "limno.pools.ingest_queue",
    "QueuedFile": "limno.pools.ingest_queue",
    "PoolConfig": "limno.pools.registry",
    "Comparison": "limno.pools.review_compare",
    "Sampled": "limno.pools.review_compare",
    "MergeAttempt": "limno.pools.reviews",
    "MergeRequest": "limno.pools.reviews",
    "BatcherSettings": "limno.pools.settings",
    "CompactionSettings": "limno.pools.settings",
    "PoolSettings": "limno.pools.settings",
    "VacuumReport": "limno.pools.vacuum",
}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'limno' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Action",
    "AlreadyExistsError",
    "BatcherSettings",
    "Commit",
    "CompactionJob",
    "CompactionSettings",
    "Comparison",
    "ConflictError",
    "CorruptError",
    "DamagedObjectError",
    "DataObject",
    "DiffEntry",
    "Engine",
    "Event",
    "Fault",
    "FileChange",
    "FileEntry",
    "FilePool",
    "ForbiddenError",
    "HookSpec",
    "HookVerdict",
    "HookVetoError",
    "IndexSpec",
    "IngestJob",
    "InvalidInputError",
    "JobResult",
    "Lake",
    "LimnoError",
    "Listing",
    "MergeAttempt",
    "MergeRequest",
    "MergeResult",
    "MultipartError",
    "NotFoundError",
    "Pool",
    "PoolConfig",
    "PoolSettings",
    "PreconditionFailedError",
    "ProtectedBranchError",
    "QueryTimeoutError",
    "QueuedFile",
    "ResultTooLargeError",
    "Sampled",
    "StorageError",
    "TypedSchema",
    "UnauthenticatedError",
    "VacuumReport",
    "VersionedPool",
]
