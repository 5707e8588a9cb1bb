"""The lake interface in this process: a local or S3 lake, the engines beside it.

:class:`LocalLake` is :class:`limno.lake.Lake` (pools, registry, verify, manage)
plus what needs an engine — SQL on DuckDB or Spark; its pools,
:class:`~limno.api.local_pool.LocalPool`, are
:class:`~limno.pools.records.pool.RecordPool` plus loads and compactions that
may run on Spark. Everything else they inherit, so the in-process objects are the
pool layer's own: scripts and tests reach every lower-level method too, while the
CLI and the server see only :mod:`limno.api.base`.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from limno.api.base import DEFAULT_TARGET_SIZE, Engine, Lake, register, sql_text
from limno.api.base_files import not_files, not_records
from limno.engines.choice import use_spark
from limno.lake import Lake as InProcessLake
from limno.lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.api.local_auth import LocalAuth
    from limno.api.local_files import LocalFilePool
    from limno.api.local_pool import LocalPool
    from limno.data.typed_schema import TypedSchema
    from limno.engines import local as local_engine
    from limno.engines.query_limits import QueryLimits
    from limno.pools.events import Event
    from limno.pools.registry import PoolConfig
else:
    local_engine = lazy_module("limno.engines.local")  # DuckDB: only for SQL

__all__ = ["LocalLake"]


class LocalLake(InProcessLake, Lake):
    """A lake in this process: a local directory, ``memory://`` or ``s3://``."""

    def auth(self) -> LocalAuth:
        """Users, keys and grants kept in this lake's ``auth/`` journal (unguarded here:
        a lake opened directly trusts its caller; ``limno serve`` checks roles)."""
        from limno.api.local_auth import LocalAuth  # only 'limno auth' and servers

        return LocalAuth(self)

    def pool(self, name: str) -> LocalPool:
        from limno.api.local_pool import LocalPool  # the pool layer: not for 'limno ls'

        config = self.registry.find(name)
        if config.kind == "files":
            raise not_records(config)
        return LocalPool(self.storage, config, self.registry)

    def file_pool(self, name: str) -> LocalFilePool:
        from limno.api.local_files import LocalFilePool

        config = self.registry.find(name)
        if config.kind != "files":
            raise not_files(config)
        return LocalFilePool(self.storage, config, self.registry)

    def versioned_pool(self, name: str) -> LocalPool | LocalFilePool:
        return self._opened(self.registry.find(name))

    def _opened(self, config: PoolConfig) -> LocalPool | LocalFilePool:
        """The pool of ``config``, of the kind it is."""
        if config.kind == "files":
            from limno.api.local_files import LocalFilePool

            return LocalFilePool(self.storage, config, self.registry)
        from limno.api.local_pool import LocalPool

        return LocalPool(self.storage, config, self.registry)

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
    ) -> LocalPool: ...

    @overload
    def create_pool(
        self,
        name: str,
        key: None = None,
        *,
        kind: Literal["files"],
        author: str | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> LocalFilePool: ...

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
    ) -> LocalPool | LocalFilePool: ...

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
    ) -> LocalPool | LocalFilePool:
        created = super().create_pool(
            name,
            key,
            kind,
            target_size,
            schema,
            author,
            iterators,
            split_threshold,
            compaction,
            retention,
        )
        return self._opened(created.config)

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
        """SQL over pools on DuckDB, or on Spark (``auto``: by the snapshots' size)."""
        sql = sql_text(sql)
        size = local_engine.query_size(self, sql) if engine == "auto" else 0
        if use_spark(engine, size):
            from limno.engines import spark as spark_engine  # PySpark loads only when used

            remote = False if safe else None  # safe mode's checks need a JVM in this process
            spark = spark_engine.session(spark_master, dict(spark_conf or {}), remote=remote)
            return spark_engine.query(
                self, sql, spark, safe=safe, limits=limits, readable=readable, as_of=as_of
            )
        return local_engine.query(
            self, sql, safe=safe, limits=limits, readable=readable, as_of=as_of
        )

    def events(
        self,
        pool: str | None = None,
        after: str | None = None,
        follow: bool = True,
        stop: threading.Event | None = None,
        *,
        poll_interval: float = 1.0,
    ) -> Iterator[Event]:
        """Events read from this lake's journals (:mod:`limno.pools.events`)."""
        from limno.pools.events import EventFeed

        feed = EventFeed(self.storage, after)
        return feed.events(pool, follow=follow, stop=stop, poll_interval=poll_interval)


register(("file", "s3", "s3a", "memory"), LocalLake)
