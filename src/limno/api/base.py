"""The one lake interface: what the CLI, the Python API and the server do with a lake.

:class:`Lake` and :class:`Pool` are abstract. The in-process implementation
(:mod:`limno.api.local`) runs everything here on a local or S3 lake; an HTTP
client of ``limno serve`` is the second, so that every command and every
script works the same against a lake path and against a server URL. Everything
they return is a model type (:class:`~limno.core.commits.Commit`,
:class:`~limno.data.objects.DataObject`, ...) or an Arrow table, which both
implementations produce alike.

``Lake.open(location)`` and ``Lake.init(location)`` pick the implementation from
the location: a path, ``file://`` or ``s3://`` is a lake in this process;
``http(s)://`` is a lake behind ``limno serve`` (its client loads on first use).
"""

from __future__ import annotations

import datetime as dt
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from limno.api.base_versioned import VersionedPool
from limno.api.sources import Source, Sources
from limno.config import lake_location
from limno.errors import InvalidInputError, NotFoundError
from limno.pools.vacuum import DEFAULT_GRACE

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.auth_admin import AuthAdmin
    from limno.api.base_files import FilePool
    from limno.core.commits import Commit
    from limno.data.indexes import IndexSpec
    from limno.data.objects import DataObject
    from limno.data.typed_schema import TypedSchema
    from limno.engines.query_limits import QueryLimits
    from limno.faults import Fault
    from limno.pools.events import Event
    from limno.pools.ingest_queue import IngestJob, QueuedFile
    from limno.pools.records.compaction import JobResult
    from limno.pools.registry import PoolConfig
    from limno.pools.settings import BatcherSettings

__all__ = [
    "DEFAULT_TARGET_SIZE",
    "Engine",
    "Kind",
    "Lake",
    "Pool",
    "Source",
    "VersionedPool",
    "register",
    "sql_text",
]

#: where work runs: in this process, on Spark, or by size (``LIMNO_SPARK_THRESHOLD``)
Engine = Literal["local", "spark", "auto"]
#: what a pool holds: rows sorted by a key, or files by path
Kind = Literal["records", "files"]
DEFAULT_TARGET_SIZE = 256 * 2**20


def sql_text(sql: object) -> str:
    """``sql`` checked to be text: bytes or a number reach the engines' parsers (or the
    JSON of a request) as a TypeError, not as the caller's mistake."""
    if not isinstance(sql, str):
        raise InvalidInputError(f"SQL is text, not a {type(sql).__name__}")
    return sql


def _silent(message: str) -> None:
    """A log that drops its messages."""


class Pool(VersionedPool):
    """A record pool: branches, commits and data (see the README for each operation).

    Its git operations are :class:`~limno.api.base_versioned.VersionedPool`'s, which
    file pools (:class:`~limno.api.base_files.FilePool`) share."""

    # -- iterators ---------------------------------------------------------------------
    @abstractmethod
    def set_iterators(
        self,
        iterators: Sequence[str],
        file_text: str | None = None,
        file_name: str | None = None,
    ) -> PoolConfig:
        """Replace the pool's iterators (none: clear them); the new config.

        ``file_text`` is a Python iterator file (named ``file_name``) stored in the
        pool's configuration, whose class a ``python(CLASS,k=v)`` item names (see
        :mod:`limno.data.user_iterators`). The class is loaded and constructed first,
        so one that cannot be is refused. It runs wherever the pool is read, a server's
        process included: through a server this needs ``admin``."""

    # -- writing -------------------------------------------------------------------------
    @abstractmethod
    def load(
        self,
        sources: Sources,
        fmt: str | None = None,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        *,
        engine: Engine = "local",
        spark_master: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        expect_head: str | None = None,
    ) -> Commit:
        """Write ``sources`` (one, or a list: :mod:`limno.api.sources`) and commit them:
        one commit per call. ``engine`` says where
        (``auto``: Spark for large files); the Spark options are for a new session.
        ``expect_head``: commit only onto this head commit of ``branch``, never
        rebased; PreconditionFailedError if the branch moved (a writer's check of the
        branch and its commit, made one step)."""

    @abstractmethod
    def add(
        self, sources: Sources, fmt: str | None = None, branch: str = "main"
    ) -> list[DataObject]:
        """Write objects and stage them on ``branch`` (see :meth:`commit`)."""

    @abstractmethod
    def staged(self, branch: str = "main") -> list[DataObject]: ...

    @abstractmethod
    def unstage(self, ids: Sequence[str], branch: str = "main") -> None: ...

    @abstractmethod
    def commit(
        self,
        ids: Sequence[str] | None = None,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Commit:
        """Commit staged objects (all, or ``ids``) in one commit."""

    @abstractmethod
    def delete_objects(
        self, ids: Sequence[str], branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit: ...

    @abstractmethod
    def delete_where(
        self, predicate: str, branch: str = "main", message: str = "", author: str | None = None
    ) -> Commit:
        """Delete the rows matching one SQL expression over a row's columns."""

    # -- reading -------------------------------------------------------------------------
    @abstractmethod
    def iter_scan(
        self,
        ref: str | None = None,
        start: Any = None,
        end: Any = None,
        order: str = "asc",
        limit: int | None = None,
        as_of: dt.datetime | None = None,
        *,
        ranges: Iterable[tuple[Any, Any]] | None = None,
    ) -> Iterator[pa.Table]:
        """A sorted scan, streamed: ``start`` inclusive, ``end`` exclusive; or instead the
        union of ``ranges``, ``(from, to)`` pairs, in one pass without repeated rows
        (see :mod:`limno.pools.records.key_ranges`).

        A bound is a value of the first key field, a tuple or list of values of the
        key's first fields in order (a full key, or a prefix of one: ``["acme"]`` or
        ``["acme", 5]`` for key ``tenant,ts``), or text parsed into the key's types
        (``"acme,5"``). A tuple or list of no value, or of more values than the key
        has fields, is an InvalidInputError."""

    @abstractmethod
    def scan(
        self,
        ref: str | None = None,
        start: Any = None,
        end: Any = None,
        order: str = "asc",
        limit: int | None = None,
        as_of: dt.datetime | None = None,
        *,
        ranges: Iterable[tuple[Any, Any]] | None = None,
    ) -> pa.Table:
        """The whole of :meth:`iter_scan` as one table. Bounds as there: a first-field
        value, a tuple or list of the key's first fields (``start=["acme", 5]``),
        or text; a tuple or list of more values than the key has fields (or none)
        is an InvalidInputError."""

    @abstractmethod
    def get(
        self, keys: Sequence[Any], ref: str | None = None, *, as_of: dt.datetime | None = None
    ) -> pa.Table:
        """Point lookup: the records whose key equals one of ``keys``."""

    @abstractmethod
    def objects(self, ref: str | None = None, as_of: dt.datetime | None = None) -> list[DataObject]:
        """The data objects of a ref, in write order."""

    @abstractmethod
    def meta_table(self, name: str, ref: str | None = None) -> pa.Table:
        """``objects``, ``commits``, ``branches`` or ``partitions`` (see limno.pools.inspect)."""

    # -- search indexes (limno.pools.records.indexing) -------------------------------------
    @abstractmethod
    def create_index(
        self,
        fields: Sequence[str],
        branch: str = "main",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        """Index non-key ``fields`` on ``branch``: one commit (AddIndex); every object then
        has a sidecar per index, kept by later loads, compactions and rewrites."""

    @abstractmethod
    def drop_index(
        self,
        fields: Sequence[str],
        branch: str = "main",
        message: str = "",
        author: str | None = None,
    ) -> Commit:
        """Drop the indexes on ``fields`` from ``branch``: one commit (DeleteIndex)."""

    @abstractmethod
    def indexes(self, ref: str | None = None) -> list[IndexSpec]:
        """The search indexes of a ref, by field."""

    @abstractmethod
    def search(
        self,
        field: str,
        values: Sequence[Any],
        ref: str | None = None,
        *,
        as_of: dt.datetime | None = None,
    ) -> pa.Table:
        """The records whose ``field`` equals one of ``values`` (text is read in the
        field's type): a filtered scan's answer, reading only the objects and row groups
        an index on ``field`` says may hold a value."""

    # -- maintenance ---------------------------------------------------------------------
    @abstractmethod
    def compact(
        self,
        ids: Sequence[str] = (),
        branch: str = "main",
        strategy: str | None = None,
        message: str = "",
        author: str | None = None,
        *,
        engine: Engine = "local",
    ) -> tuple[Commit | None, list[JobResult]]:
        """Compact ``ids`` (or the strategy's jobs) in one commit; (None, []) if nothing."""

    @abstractmethod
    def split(self, partition: str, branch: str = "main", at: Any = None) -> Commit | None:
        """Split a leaf partition (at ``at``: a value, or text in the key's type)."""

    @abstractmethod
    def status(
        self, ref: str | None = None, limit: int = 20, rows: int | None = None
    ) -> dict[str, pa.Table]:
        """``limno status``'s reports: partitions, files, jobs, ingest jobs (with ``rows``:
        partitions and files cut to their first ``rows``; ``inspect.total_rows`` counts)."""

    # -- the ingest batcher (Sleeper's; limno.pools.ingest_queue) ------------------------
    @abstractmethod
    def ingest_submit(
        self,
        paths: Sequence[str],
        fmt: str | None = None,
        branch: str = "main",
        *,
        copy: bool = False,
    ) -> list[QueuedFile]:
        """Queue files (local paths, ``s3://`` URLs; each checked to exist now) for
        ``branch``, all or none. In this process a local path is this machine's and is
        read when its job runs (``copy``: a copy is kept in the lake instead); through a
        server a local path is uploaded, and ``s3://`` URLs (read by the server) need
        an admin."""

    @abstractmethod
    def ingest_run(self, branch: str | None = None, *, force: bool = False) -> list[IngestJob]:
        """Batch the waiting files (of ``branch``, or all) by the pool's batcher settings
        (``force``: all of them, now) and run due jobs, one commit each; the jobs run."""

    @abstractmethod
    def ingest_queue(self) -> list[QueuedFile]:
        """The queued files (waiting, batched, done and failed), oldest first."""

    @abstractmethod
    def ingest_jobs(self) -> list[IngestJob]:
        """The batcher's jobs, oldest first."""

    @abstractmethod
    def ingest_retry(self, ids: Sequence[str]) -> list[QueuedFile]:
        """Queue failed files again (``ids``: files, or jobs standing for their files)."""

    @abstractmethod
    def ingest_drop(self, ids: Sequence[str]) -> list[QueuedFile]:
        """Remove waiting or failed files from the queue."""

    @abstractmethod
    def ingest_settings(self, changes: str | None = None) -> BatcherSettings:
        """The batcher's settings, after ``changes`` (``min-files=2,max-age=10m``)."""


class Lake(ABC):
    """A lake: its pools, SQL over them, checks and maintenance."""

    @property
    @abstractmethod
    def uri(self) -> str: ...

    @classmethod
    def open(cls, location: str | None = None) -> Lake:
        """The lake at ``location`` (``--lake``, ``$LIMNO_LAKE``, the default path)."""
        return _implementation(location).open(location)

    @classmethod
    def init(cls, location: str | None = None) -> Lake:
        """Create a lake at ``location``."""
        return _implementation(location).init(location)

    def auth(self) -> AuthAdmin:
        """Users, API keys and per-pool grants (``limno auth``), where this kind of
        lake keeps them; a lake that has none raises InvalidInputError."""
        raise InvalidInputError(f"{self.uri}: users and keys are not managed through this lake")

    @abstractmethod
    def list_pools(self) -> list[PoolConfig]: ...

    @abstractmethod
    def pool(self, name: str) -> Pool:
        """An existing record pool, by name or id (NotFoundError otherwise; a file
        pool: InvalidInputError, see :meth:`file_pool` and :meth:`versioned_pool`)."""

    @abstractmethod
    def file_pool(self, name: str) -> FilePool:
        """An existing file pool, by name or id (a record pool: InvalidInputError)."""

    @abstractmethod
    def versioned_pool(self, name: str) -> VersionedPool:
        """An existing pool of either kind (a :class:`Pool` or a :class:`FilePool`): what
        git operations take."""

    @overload
    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: Literal["records"] = "records",
        target_size: int = DEFAULT_TARGET_SIZE,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> Pool: ...

    @overload
    def create_pool(
        self,
        name: str,
        key: None = None,
        *,
        kind: Literal["files"],
        author: str | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> FilePool: ...

    @overload
    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: str = "records",
        target_size: int = DEFAULT_TARGET_SIZE,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> VersionedPool: ...

    @abstractmethod
    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: str = "records",
        target_size: int = DEFAULT_TARGET_SIZE,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> VersionedPool:
        """A new pool with branch ``main`` at an empty root commit: a record pool
        (``key``, ``schema``, ``iterators``... apply) or, ``kind="files"``, a file pool
        (those options refused)."""

    @abstractmethod
    def drop_pool(self, name: str) -> PoolConfig: ...

    @abstractmethod
    def rename_pool(self, old: str, new: str) -> PoolConfig: ...

    @abstractmethod
    def verify(self, pool: str | None = None, deep: bool = False) -> Iterator[Fault]:
        """Every broken invariant of the lake (or of one pool)."""

    @abstractmethod
    def meta_table(self, ref: str, name: str) -> pa.Table:
        """``(":", "pools")``'s form: ``("", "pools")``, or ``("logs@dev", "objects")``."""

    @abstractmethod
    def manage(
        self,
        pools: Sequence[str] = (),
        once: bool = False,
        interval: dt.timedelta = dt.timedelta(seconds=60),
        grace: dt.timedelta = DEFAULT_GRACE,
        stop: threading.Event | None = None,
        log: Callable[[str], None] = _silent,
    ) -> int:
        """Maintenance passes (ingest jobs, splits, compactions, vacuum) until ``stop``;
        passes run. With ``once``, a LimnoError naming the ingest jobs that failed in
        the pass (and why), raised once the rest of the pass is done."""

    @abstractmethod
    def query(
        self,
        sql: str,
        *,
        engine: Engine = "local",
        safe: bool = False,
        spark_master: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        limits: QueryLimits | None = None,
        readable: Callable[[str], bool] | None = None,
        as_of: dt.datetime | None = None,
    ) -> pa.Table:
        """SQL over pools (table names are refs and meta tables); ``safe`` for SQL
        someone else wrote (see :mod:`limno.data.sql_safety`); ``limits`` (None:
        unlimited) and ``readable(pool)`` (None: every pool) as in
        :func:`limno.engines.local.query`; ``as_of`` reads every branch the SQL names
        as it was at that time (tags, commit ids and meta tables as they are)."""

    def events(
        self,
        pool: str | None = None,
        after: str | None = None,
        follow: bool = True,
        stop: threading.Event | None = None,
        *,
        poll_interval: float = 1.0,
    ) -> Iterator[Event]:
        """The lake's events (see :mod:`limno.pools.events`), read from its journals.

        ``after`` is an event id to resume after, ``"now"`` for new events only, or
        None for every event from the lake's start. With ``follow`` it waits for new
        ones until ``stop`` is set; ``pool`` keeps one pool's events (resume with the
        same filter). Not abstract: a lake that cannot tell events says so.
        """
        raise InvalidInputError("events are not supported by this lake")


#: implementations by the scheme of a lake location (each registers itself on import)
_IMPLEMENTATIONS: dict[str, type[Lake]] = {}


def register(schemes: Sequence[str], implementation: type[Lake]) -> None:
    """Make ``Lake.open``/``Lake.init`` use ``implementation`` for these schemes."""
    for scheme in schemes:
        _IMPLEMENTATIONS[scheme] = implementation


def _implementation(location: str | None) -> type[Lake]:
    where = lake_location(location)
    scheme = where.split("://", 1)[0].lower() if "://" in where else "file"
    if scheme in ("http", "https") and scheme not in _IMPLEMENTATIONS:
        import limno.api.remote  # noqa: F401 -- registers itself; httpx only when used
    if scheme not in _IMPLEMENTATIONS:
        raise NotFoundError(f"unsupported lake location {where!r}")
    return _IMPLEMENTATIONS[scheme]
