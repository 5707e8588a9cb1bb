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

from limno.api import Engine, Lake, Pool
from limno.core.commits import Action, Commit
from limno.core.hooks import HookSpec
from limno.core.versioning import DiffEntry, MergeResult
from limno.data.objects import DataObject
from limno.data.typed_schema import TypedSchema
from limno.errors import (
    AlreadyExistsError,
    ConflictError,
    CorruptError,
    DamagedObjectError,
    HookVetoError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
    StorageError,
)
from limno.faults import Fault
from limno.pools.records.compaction import CompactionJob, JobResult
from limno.pools.registry import PoolConfig
from limno.pools.settings import CompactionSettings, PoolSettings
from limno.pools.vacuum import VacuumReport

__all__ = [
    "Action",
    "AlreadyExistsError",
    "Commit",
    "CompactionJob",
    "CompactionSettings",
    "ConflictError",
    "CorruptError",
    "DamagedObjectError",
    "DataObject",
    "DiffEntry",
    "Engine",
    "Fault",
    "HookSpec",
    "HookVetoError",
    "InvalidInputError",
    "JobResult",
    "Lake",
    "LimnoError",
    "MergeResult",
    "NotFoundError",
    "Pool",
    "PoolConfig",
    "PoolSettings",
    "PreconditionFailedError",
    "StorageError",
    "TypedSchema",
    "VacuumReport",
]
