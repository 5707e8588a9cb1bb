"""The lake interface in this process: a local or S3 lake, the engines beside it.

:class:`LocalLake` is :class:`limno.lake.Lake` (pools, registry, verify, manage)
plus what needs an engine — SQL on DuckDB or Spark; :class:`LocalPool` is
:class:`~limno.pools.records.pool.RecordPool` plus loads and compactions that
may run on Spark. Everything else they inherit, so the in-process objects are the
pool layer's own: scripts and tests reach every lower-level method too, while the
CLI and the server see only :mod:`limno.api.base`.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from limno.api.base import Engine, Lake, Pool, Source, register
from limno.core.commits import Commit
from limno.data.typed_schema import TypedSchema
from limno.engines.choice import use_spark
from limno.lake import Lake as InProcessLake
from limno.lazy import lazy_module
from limno.pools.records.compaction import JobResult, Runner, local_runner
from limno.pools.records.pool import RecordPool

if TYPE_CHECKING:
    import pyarrow as pa

    from limno.engines import local as local_engine
else:
    local_engine = lazy_module("limno.engines.local")  # DuckDB: only for SQL

__all__ = ["LocalLake", "LocalPool"]


class LocalPool(RecordPool, Pool):
    """A pool of a lake in this process."""

    def load(
        self,
        sources: Iterable[Source],
        fmt: str | None = None,
        branch: str = "main",
        message: str = "",
        author: str | None = None,
        meta: Mapping[str, Any] | None = None,
        *,
        engine: Engine = "local",
        spark_master: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
    ) -> Commit:
        """Write ``sources`` and commit them, here or (files only) on Spark."""
        sources = list(sources)
        files = [s for s in sources if isinstance(s, str)]
        size = sum(os.path.getsize(f) for f in files if f != "-" and os.path.isfile(f))
        spark = use_spark(engine, size) and len(files) == len(sources)
        if spark and not (engine == "auto" and "-" in files):
            from limno.engines import spark as spark_engine  # PySpark loads only when used

            return spark_engine.load(
                self,
                files,
                fmt,
                branch,
                message,
                author,
                meta,
                spark=spark_engine.session(spark_master, dict(spark_conf or {})),
            )
        return super().load(sources, fmt, branch, message, author, meta)

    def compact(
        self,
        ids: Sequence[str] = (),
        branch: str = "main",
        strategy: str | None = None,
        message: str = "",
        author: str | None = None,
        runner: Runner = local_runner,
        *,
        engine: Engine = "local",
    ) -> tuple[Commit | None, list[JobResult]]:
        """Compact here, or with each job's merge as a Spark task (``engine="spark"``)."""
        if engine == "spark":
            from limno.engines import spark as spark_engine  # PySpark loads only when used

            runner = spark_engine.compaction_runner
        return super().compact(ids, branch, strategy, message, author, runner)


class LocalLake(InProcessLake, Lake):
    """A lake in this process: a local directory, ``memory://`` or ``s3://``."""

    def pool(self, name: str) -> LocalPool:
        return LocalPool(self.storage, self.registry.find(name), self.registry)

    def create_pool(
        self,
        name: str,
        key: str | None = None,
        kind: str = "records",
        target_size: int = 256 * 2**20,
        schema: TypedSchema | None = None,
        author: str | None = None,
        iterators: Sequence[str] = (),
        split_threshold: int | None = None,
        compaction: Mapping[str, Any] | None = None,
        retention: Mapping[str, dt.timedelta] | None = None,
    ) -> LocalPool:
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
        return LocalPool(self.storage, created.config, self.registry)

    def query(
        self,
        sql: str,
        *,
        engine: Engine = "local",
        safe: bool = False,
        spark_master: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
    ) -> pa.Table:
        """SQL over pools on DuckDB, or on Spark (``auto``: by the snapshots' size)."""
        size = local_engine.query_size(self, sql) if engine == "auto" else 0
        if use_spark(engine, size):
            from limno.engines import spark as spark_engine  # PySpark loads only when used

            remote = False if safe else None  # safe mode's checks need a JVM in this process
            spark = spark_engine.session(spark_master, dict(spark_conf or {}), remote=remote)
            return spark_engine.query(self, sql, spark, safe=safe)
        return local_engine.query(self, sql, safe=safe)


register(("file", "s3", "s3a", "memory"), LocalLake)
