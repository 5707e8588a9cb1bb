"""A pool of a lake in this process: a record pool whose loads and compactions may run on
Spark.

Apart from :class:`~limno.api.local.LocalLake` so that commands which never open a pool
(``limno ls``) do not load the pool layer (:mod:`limno.pools.records.pool` and the
versioning core under it); ``limno.api.LocalPool`` is this class.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from limno.api.base import Engine, Pool
from limno.api.local_ingest import LocalIngest
from limno.api.sources import Sources, source_list
from limno.engines.choice import use_spark
from limno.pools.reviews import Reviews

if TYPE_CHECKING:
    from limno.core.commits import Commit
    from limno.data.objects import DataObject
    from limno.pools.records.compaction import JobResult, Runner
    from limno.pools.registry import PoolConfig

__all__ = ["LocalPool"]


class LocalPool(LocalIngest, Reviews, Pool):
    """A pool of a lake in this process (a record pool, with the ingest batcher)."""

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
        """Write ``sources`` and commit them, here or (files only) on Spark."""
        sources = source_list(sources)
        files = [s for s in sources if isinstance(s, str)]
        size = sum(os.path.getsize(f) for f in files if f != "-" and os.path.isfile(f))
        spark = use_spark(engine, size) and len(files) == len(sources)
        if spark and not (engine == "auto" and "-" in files) and expect_head is None:
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
        return super().load(sources, fmt, branch, message, author, meta, expect_head=expect_head)

    def add(
        self, sources: Sources, fmt: str | None = None, branch: str = "main"
    ) -> list[DataObject]:
        return super().add(source_list(sources), fmt, branch)

    def compact(
        self,
        ids: Sequence[str] = (),
        branch: str = "main",
        strategy: str | None = None,
        message: str = "",
        author: str | None = None,
        runner: Runner | None = None,
        *,
        engine: Engine = "local",
    ) -> tuple[Commit | None, list[JobResult]]:
        """Compact here, or with each job's merge as a Spark task (``engine="spark"``)."""
        if engine == "spark":
            from limno.engines import spark as spark_engine  # PySpark loads only when used

            runner = spark_engine.compaction_runner
        return super().compact(ids, branch, strategy, message, author, runner)

    def set_iterators(
        self,
        iterators: Sequence[str],
        file_text: str | None = None,
        file_name: str | None = None,
    ) -> PoolConfig:
        """Replace the pool's iterators; a user iterator's class is loaded and made first."""
        import dataclasses

        from limno.data import user_iterators
        from limno.data.iterators import parse_iterators

        spec = parse_iterators(iterators, self.key.names, file_text=file_text, file_name=file_name)
        if spec.user is not None:
            user_iterators.check(spec.user, self.key)
        self.config = self.registry.find(self.id)  # the latest: the update is a CAS on it
        settings = dataclasses.replace(self.config.settings, iterators=spec)
        self.config = self.registry.update(self.config, settings=settings)
        return self.config
