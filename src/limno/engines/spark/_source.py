"""``spark.read.format("limno")`` and ``df.write.format("limno")``: a Python Data Source.

For Spark users who prefer the reader/writer API to :func:`~._read.read` and
:func:`~._write.write` (which stay the fast path: a native Parquet scan, and Spark's
own Parquet writer)::

    ls.register(spark)                                  # once per session
    df = spark.read.format("limno").option("lake", "/data/lake").load("logs@main")
    df.write.format("limno").option("lake", "/data/lake").mode("append").save("logs@dev")

Reading plans one Spark partition per cluster of objects whose key ranges overlap
and reads each with limno's merge-on-read (the pool's iterators and partition clips
apply), conformed to the snapshot's unified schema: the rows are exactly those of
``limno scan``. Writing sorts each task's rows by the pool key and writes them as
data objects (cut at the target size and at the leaf partitions' bounds); the
driver then makes one commit of every task's objects, or, if the job fails,
deletes them. ``mode("overwrite")`` replaces the branch's objects in that same
commit. Options: ``lake`` (else ``LIMNO_LAKE`` or the default location),
``message`` and ``author`` for the commit; the ref may also be given as the options
``pool`` and ``branch``. ``spark.readStream.format("limno")`` streams a branch's new
commits (:mod:`._stream`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from limno.core.commits import Action
from limno.core.leases import Leases
from limno.data import scan as _scan
from limno.data.keys import PoolKey
from limno.data.objects import DataObject
from limno.data.schema import unify
from limno.data.writer import delete_objects
from limno.errors import InvalidInputError
from limno.lake import Lake

from ._read import open_pool
from ._session import LakeSpec
from ._stream import LimnoStreamReader, conformed_batches
from ._types import spark_arrow_schema, spark_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from limno.pools.records.pool import RecordPool

__all__ = ["LimnoDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("limno")`` available in ``spark``."""
    spark.dataSource.register(LimnoDataSource)


class LimnoDataSource(DataSource):
    """Pools as a Spark data source: ``load``/``save`` take a ref, ``pool[@ref]``."""

    @classmethod
    def name(cls) -> str:
        return "limno"

    def _open(self) -> tuple[RecordPool, str]:
        target = self.options.get("path")
        if not target and self.options.get("pool"):
            branch = self.options.get("branch")
            target = self.options["pool"] + (f"@{branch}" if branch else "")
        if not target:
            raise InvalidInputError('format("limno") needs a ref: .load("pool@ref") or .save(...)')
        pool, ref = open_pool(target, self.options.get("lake"))
        return pool, ref or "main"

    def schema(self) -> StructType:
        from pyspark.sql.types import StructField, StructType

        pool, ref = self._open()
        target = _snapshot_schema(pool.objects(ref))
        return StructType([StructField(f.name, spark_type(f.type), True) for f in target])

    def reader(self, schema: StructType) -> DataSourceReader:
        pool, ref = self._open()
        return _Reader(pool, pool.objects(ref))

    def streamReader(self, schema: StructType) -> LimnoStreamReader:
        from pyspark.sql.pandas.types import to_arrow_schema

        pool, branch = self._open()
        target = to_arrow_schema(schema)
        starting = self.options.get("startingCommit") or "earliest"
        return LimnoStreamReader(pool, branch, starting, target, spark_arrow_schema(target))

    def writer(self, schema: StructType, overwrite: bool) -> _Writer:
        pool, branch = self._open()
        # a missing branch (or a tag) or a protected one fails before any work
        pool.versioned.writable_head(branch)
        # held on the driver until commit or abort: vacuum leaves the tasks' objects be
        since = pool.versioned.gc.ticket()
        lease = pool.versioned.gc.leases.acquire("spark data source write")
        return _Writer(
            LakeSpec.of(pool.storage),
            pool.id,
            branch,
            overwrite,
            self.options.get("message", ""),
            self.options.get("author"),
            since,
            lease.path,
        )


def _snapshot_schema(objs: Sequence[DataObject]) -> pa.Schema:

    return unify(o.schema for o in objs if o.schema_b64)


class _Cluster(InputPartition):
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        super().__init__(objects)
        self.objects = objects


class _Reader(DataSourceReader):
    def __init__(self, pool: RecordPool, objs: Sequence[DataObject]) -> None:

        self.spec = LakeSpec.of(pool.storage)
        self.pool_id = pool.id
        self.key: PoolKey = pool.key
        self.target = _snapshot_schema(objs)
        self.clusters = [[o.to_json() for o in c] for c in _scan.plan(objs, pool.key, None, None)]

    def partitions(self) -> Sequence[InputPartition]:
        return [_Cluster(c) for c in self.clusters]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:

        assert isinstance(partition, _Cluster)
        store = self.spec.open()
        pool = Lake(store).pool(self.pool_id)
        objs = [DataObject.from_json(o) for o in partition.objects]
        out = spark_arrow_schema(self.target)
        for t in pool.iterated(_scan.scan(store, self.pool_id, objs, self.key)):
            yield from conformed_batches(t, self.target, out)


@dataclass
class _Written(WriterCommitMessage):
    objects: list[str]  # DataObject JSON, one per written object


@dataclass
class _Writer(DataSourceArrowWriter):
    spec: LakeSpec
    pool_id: str
    branch: str
    overwrite: bool
    message: str
    author: str | None
    since: int
    lease: str

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:

        batches = [b for b in iterator if b.num_rows]
        if not batches:
            return _Written([])
        pool = Lake(self.spec.open()).pool(self.pool_id)
        # an overwrite replaces every object, so its keys need not sort with theirs
        objs = pool.write(batches, branch=self.branch, check_keys=not self.overwrite)
        return _Written([json.dumps(o.to_json()) for o in objs])

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:

        pool = Lake(self.spec.open()).pool(self.pool_id)
        try:
            self._commit(pool, _objects(messages), messages)
        finally:
            pool.versioned.gc.leases.release(self.lease)

    def _commit(
        self,
        pool: RecordPool,
        objs: list[DataObject],
        messages: list[WriterCommitMessage | None],
    ) -> None:
        current, tree = pool.snapshot(self.branch)
        try:
            pool.check_key_types([] if self.overwrite else current, objs)
        except InvalidInputError:
            self.abort(messages)
            raise
        actions = []
        if self.overwrite:
            actions += [Action("delete", o.id, o.to_json()) for o in current]
        actions += [Action("add", o.id, o.to_json()) for o in tree.referencing(objs)]
        if not actions:
            return
        rows = sum(o.rows for o in objs)
        verb = "overwrite with" if self.overwrite else "load"
        pool.versioned.commit(
            self.branch,
            actions,
            message=self.message or f"{verb} {rows} record(s) (spark data source)",
            author=self.author,
            since=self.since,
            validate=None if self.overwrite else pool.keys_fit(objs),
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing was committed: delete what the tasks wrote (vacuum gets the rest)."""
        storage = self.spec.open()
        try:
            delete_objects(storage, self.pool_id, _objects(messages))
        finally:
            Leases(storage, self.pool_id).release(self.lease)


def _objects(messages: Sequence[WriterCommitMessage | None]) -> list[DataObject]:
    out = []
    for m in messages:
        if isinstance(m, _Written):
            out += [DataObject.from_json(json.loads(o)) for o in m.objects]
    return out
