"""Kafka into a pool with Spark Structured Streaming: one commit per micro-batch, exactly once.

::

    from limno.engines import spark as ls

    query = ls.kafka_to_pool("orders", topic="orders", bootstrap="127.0.0.1:9092",
                             checkpoint="/data/chk/orders", lake="/data/lake")
    query.awaitTermination()

or, for any streaming DataFrame, the sink alone::

    df.writeStream.foreachBatch(ls.PoolSink("orders@main", lake=...)) \\
        .option("checkpointLocation", ...).start()

Spark's Kafka source (``spark-sql-kafka-0-10``, a local jar of ``scripts/jars.sh``)
reads the topic; :func:`kafka_records` shapes its rows like ``limno kafka from``'s
records (``kafka{topic,partition,offset,timestamp}``, ``key`` as text, ``value``
parsed as JSON by a given schema or kept as text, ``headers`` as text pairs), so
both paths fill the same pool shape.

Exactly once: Spark replays a micro-batch whose end it did not record (a query
restarted from its checkpoint, also after the driver was killed) with the same
offsets, hence the same rows. :class:`PoolSink` makes each batch ONE commit whose
meta records the streaming query's id and the batch id (``spark: {query, batch}``),
and, for Kafka records, the offsets it holds in ``kafka from``'s form
(``kafka: {batch: {topic: {partition: [first, last]}}, offsets: {topic: {partition:
last}}}``). Before writing, and again as the commit lands on the branch (every
attempt of the commit's compare-and-swap), the branch's history is read for this
query's newest batch: a batch id at or below it commits nothing. The checkpoint is
what Spark resumes from, so a lost checkpoint starts a new query (a new id) that
reads from ``startingOffsets`` again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from limno.core.commits import Action, Commit
from limno.data.writer import delete_objects
from limno.errors import ConflictError, InvalidInputError, NotFoundError
from limno.lake import Lake

from ._read import open_pool

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

    from limno.pools.records.pool import RecordPool

__all__ = ["KAFKA_POOL_KEY", "PoolSink", "kafka_records", "kafka_to_pool"]

#: the key of a pool :func:`kafka_to_pool` creates (that of ``limno kafka from``)
KAFKA_POOL_KEY = "kafka.offset"
#: commit meta keys: the streaming batch, and the Kafka offsets (``kafka from``'s form)
SPARK_META = "spark"
KAFKA_META = "kafka"
#: the ``kafka`` column's type in a pool (``limno kafka from``'s: timestamps in ms)
_KAFKA_TYPE = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
    ]
)


def kafka_records(df: DataFrame, value_schema: StructType | str | None = None) -> DataFrame:
    """The rows of Spark's Kafka source as ``limno kafka from``'s records.

    ``value`` is parsed with ``value_schema`` (a StructType or a DDL string) by
    ``from_json`` in FAILFAST mode (a value that does not parse fails the batch:
    nothing of it is committed), else kept as text. Keys and header values become
    text (invalid UTF-8 is replaced, where ``kafka from`` refuses it); the source
    must include headers (``includeHeaders``), else ``headers`` is empty.
    """
    from pyspark.sql import functions as F

    value = F.col("value").cast("string")
    if value_schema is not None:
        value = F.from_json(value, value_schema, {"mode": "FAILFAST"})
    pairs = "array<struct<key:string,value:string>>"
    if "headers" in df.columns:
        headers = F.transform(
            "headers",
            lambda h: F.struct(h["key"].alias("key"), h["value"].cast("string").alias("value")),
        )
        headers = F.coalesce(headers, F.array().cast(pairs))
    else:
        headers = F.array().cast(pairs)
    return df.select(
        F.struct("topic", "partition", "offset", "timestamp").alias("kafka"),
        F.col("key").cast("string").alias("key"),
        value.alias("value"),
        headers.alias("headers"),
    )


@dataclass
class _Found:
    """What the branch's history says before a batch: this query's newest batch (and
    its commit), and the newest offset map of each topic."""

    batch: int | None = None
    commit: str | None = None
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)


def _history(pool: RecordPool, head: str, query: str, stop_at: str | None = None) -> _Found:
    """Walk ``head``'s history newest first until this query's newest commit (or
    ``stop_at``, a commit of it found before: nothing newer of it can lie behind it)."""
    found = _Found()
    for commit in pool.versioned.commits.log([head]):
        kafka = commit.meta.get(KAFKA_META)
        offsets = kafka.get("offsets") if isinstance(kafka, Mapping) else None
        if isinstance(offsets, Mapping):
            for topic, by_partition in offsets.items():
                if topic not in found.offsets and isinstance(by_partition, Mapping):
                    found.offsets[topic] = {str(p): int(o) for p, o in by_partition.items()}
        spark = commit.meta.get(SPARK_META)
        if isinstance(spark, Mapping) and spark.get("query") == query:
            found.batch, found.commit = int(spark["batch"]), commit.id
            return found
        if commit.id == stop_at:
            return found
    return found


def _query_id(df: DataFrame) -> str | None:
    """The running streaming query's id, from the batch's Spark job properties (a
    classic session; Spark Connect runs foreachBatch elsewhere: pass ``query_id``)."""
    try:
        context = df.sparkSession.sparkContext
    except Exception:  # Spark Connect: no SparkContext
        return None
    found = context.getLocalProperty("sql.streaming.queryId")
    return str(found) if found else None


class _Replayed(ConflictError):
    """The batch landed meanwhile (another attempt of it): this one commits nothing."""


class PoolSink:
    """A ``foreachBatch`` function: each micro-batch of a streaming query becomes ONE
    commit of ``target`` (``pool[@branch]``), exactly once (see the module docstring).

    The query's id comes from the batch's Spark job properties (or ``query_id``).
    Batches are collected to the driver as Arrow and written by limno's writer
    (sorted, cut at the leaf partitions); an empty batch commits nothing. Kafka
    records (a ``kafka`` struct column) get their offsets recorded in the meta.
    ``on_commit`` hears of each commit, ``on_skip`` of each replayed batch id.
    """

    def __init__(
        self,
        target: str,
        lake: Lake | str | None = None,
        *,
        message: str | None = None,
        author: str | None = None,
        query_id: str | None = None,
        on_commit: Callable[[Commit], None] | None = None,
        on_skip: Callable[[int], None] | None = None,
    ) -> None:
        pool, ref = open_pool(target, lake)
        self.lake = Lake(pool.storage)
        self.pool_id = pool.id
        self.branch = ref or "main"
        self.message = message
        self.author = author
        self.query_id = query_id
        self.on_commit = on_commit
        self.on_skip = on_skip
        #: this query's newest batch and its commit, as this process last saw them
        self._last: tuple[int, str] | None = None

    def _pool(self) -> RecordPool:
        return self.lake.pool(self.pool_id)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        query = self.query_id or _query_id(df)
        if not query:
            raise InvalidInputError(
                "PoolSink runs as foreachBatch of a streaming query in a classic session "
                "(else give it query_id)"
            )
        pool = self._pool()
        found = self._look(pool, pool.resolve(self.branch), query)
        if found.batch is not None and batch_id <= found.batch:
            self._skipped(batch_id)
            return
        table = df.toArrow()
        if table.num_rows == 0:
            return
        table = _kafka_conformed(table)
        try:
            commit = self._commit(pool, table, query, batch_id, found)
        except _Replayed:
            self._skipped(batch_id)
            return
        self._last = (batch_id, commit.id)
        if self.on_commit is not None:
            self.on_commit(commit)

    def _skipped(self, batch_id: int) -> None:
        if self.on_skip is not None:
            self.on_skip(batch_id)

    def _look(self, pool: RecordPool, head: str, query: str) -> _Found:
        known = self._last
        found = _history(pool, head, query, known[1] if known else None)
        if found.batch is None and known is not None:
            found.batch, found.commit = known
        return found

    def _commit(
        self, pool: RecordPool, table: pa.Table, query: str, batch_id: int, found: _Found
    ) -> Commit:
        meta: dict[str, Any] = {SPARK_META: {"query": query, "batch": batch_id}}
        ranges = _offset_ranges(table)
        if ranges:
            meta[KAFKA_META] = _kafka_meta(ranges, found.offsets)

        def fresh(parent: Commit) -> None:
            now = self._look(pool, parent.id, query)
            if now.batch is not None and batch_id <= now.batch:
                raise _Replayed(f"batch {batch_id} of query {query} is committed already")

        rows = table.num_rows
        message = self.message or f"spark stream batch {batch_id}: {rows} record(s)"
        pool.versioned.writable_head(self.branch)  # a protected branch: before any write
        with pool.versioned.writing("spark stream") as since:
            objs = pool.write([table], branch=self.branch)
            keys_fit = pool.keys_fit(objs)

            def validate(parent: Commit) -> None:
                fresh(parent)
                keys_fit(parent)

            try:
                return pool.versioned.commit(
                    self.branch,
                    [Action("add", o.id, o.to_json()) for o in objs],
                    message=message,
                    author=self.author,
                    meta=meta,
                    since=since,
                    validate=validate,
                )
            except BaseException:
                delete_objects(pool.storage, pool.id, objs)
                raise


def _kafka_conformed(table: pa.Table) -> pa.Table:
    """A ``kafka`` struct column cast to ``kafka from``'s types (Spark has µs stamps)."""
    if "kafka" not in table.column_names:
        return table
    column = table.column("kafka")
    if not pa.types.is_struct(column.type) or column.type == _KAFKA_TYPE:
        return table
    names = {column.type.field(i).name for i in range(column.type.num_fields)}
    if names != set(_KAFKA_TYPE.names):
        return table
    i = table.column_names.index("kafka")
    return table.set_column(i, "kafka", column.cast(_KAFKA_TYPE))


def _offset_ranges(table: pa.Table) -> dict[str, dict[str, tuple[int, int]]]:
    """``{topic: {partition: (first, last)}}`` of a table of Kafka records ({} if none)."""
    if "kafka" not in table.column_names or table.column("kafka").type != _KAFKA_TYPE:
        return {}
    kafka = table.column("kafka").combine_chunks()
    parts = pa.table(
        {
            "topic": pc.struct_field(kafka, "topic"),
            "partition": pc.struct_field(kafka, "partition"),
            "offset": pc.struct_field(kafka, "offset"),
        }
    )
    spans = parts.group_by(["topic", "partition"]).aggregate([("offset", "min"), ("offset", "max")])
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for row in spans.to_pylist():
        if row["topic"] is None or row["partition"] is None:
            continue
        first, last = row["offset_min"], row["offset_max"]
        out.setdefault(row["topic"], {})[str(row["partition"])] = (first, last)
    return out


def _kafka_meta(
    ranges: Mapping[str, Mapping[str, tuple[int, int]]],
    before: Mapping[str, Mapping[str, int]],
) -> dict[str, Any]:
    """``kafka from``'s meta: this batch's ranges, and each topic's full map after it."""
    batch = {t: {p: [a, b] for p, (a, b) in sorted(r.items())} for t, r in sorted(ranges.items())}
    offsets = {}
    for topic, spans in sorted(ranges.items()):
        merged = {**before.get(topic, {}), **{p: last for p, (_, last) in spans.items()}}
        offsets[topic] = dict(sorted(merged.items(), key=lambda kv: int(kv[0])))
    return {"batch": batch, "offsets": offsets}


def kafka_to_pool(
    pool: str,
    *,
    topic: str | Sequence[str],
    bootstrap: str,
    checkpoint: str,
    lake: Lake | str | None = None,
    value_schema: StructType | str | None = None,
    trigger: str = "5 seconds",
    available_now: bool = False,
    starting_offsets: str = "earliest",
    options: Mapping[str, str] | None = None,
    message: str | None = None,
    spark: SparkSession | None = None,
    on_commit: Callable[[Commit], None] | None = None,
    on_skip: Callable[[int], None] | None = None,
    replay_timeout: float = 600.0,
) -> StreamingQuery:
    """Start a streaming query syncing ``topic`` (or several) into ``pool[@branch]``:
    one commit per micro-batch (every ``trigger``; ``available_now``: what the topic
    holds now, then stop), exactly once across restarts from ``checkpoint`` (a
    directory of the query's own). A missing pool is created keyed on
    ``kafka.offset``. ``options`` go to Spark's Kafka source (``kafka.*`` client
    settings, ``maxOffsetsPerTrigger``, ...). Returns the running query.

    A restart that replays an unfinished batch (a local checkpoint whose offset log
    is ahead of its commit log) waits, up to ``replay_timeout`` seconds, for that
    batch: Spark 4.1.1's Kafka source fails the query right after it (SPARK-55271, in
    progress reporting, once the batch is recorded done), and the query is then
    started once more.
    """
    from ._session import session

    spark = session(spark=spark, remote=False)  # foreachBatch reads the job's properties
    opened = lake if isinstance(lake, Lake) else Lake.open(lake)
    name, _, _ = pool.partition("@")
    try:
        opened.pool(name)
    except NotFoundError:
        opened.create_pool(name, KAFKA_POOL_KEY)
    topics = [topic] if isinstance(topic, str) else list(topic)
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", starting_offsets)
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
    )
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    sink = PoolSink(pool, opened, message=message, on_commit=on_commit, on_skip=on_skip)
    writer = (
        kafka_records(reader.load(), value_schema)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=trigger)
    )
    replayed = pending_batch(checkpoint)
    query = writer.start()
    if replayed is not None and _failed_after_replay(query, replayed, replay_timeout):
        query = writer.start()  # the replayed batch is recorded done: on from the next
    return query


def pending_batch(checkpoint: str) -> int | None:
    """The batch Spark will replay on a restart from a local ``checkpoint``: the newest
    one of its offset log missing from its commit log (None: none, or not local)."""
    if checkpoint.startswith("file:"):
        path = "/" + checkpoint.removeprefix("file:").lstrip("/")
    elif "://" in checkpoint:
        return None  # another file system (s3a://, hdfs://): not looked at
    else:
        path = checkpoint

    def newest(log: str) -> int:
        try:
            return max(
                (int(n) for n in os.listdir(os.path.join(path, log)) if n.isdigit()), default=-1
            )
        except OSError:
            return -1

    planned = newest("offsets")
    return planned if planned > newest("commits") else None


#: Spark 4.1.1's Kafka source fails a query right after it re-ran a batch on a restart,
#: in progress reporting (SPARK-55271: its latest offsets are not known yet)
_REPLAY_BUG = 'because the return value of "scala.Option.get()" is null'


def _failed_after_replay(query: StreamingQuery, batch: int, timeout: float) -> bool:
    """Wait (up to ``timeout`` s) for ``query`` to finish replaying ``batch``: True when
    it then failed with Spark 4.1.1's progress-reporting bug, which leaves the batch
    recorded done (the query may simply be started again)."""
    from pyspark.errors import StreamingQueryException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if query.awaitTermination(1):
                return False  # stopped without an error
        except StreamingQueryException as e:
            if _REPLAY_BUG in str(e):
                return True
            raise
        progress = query.lastProgress
        if progress is not None and int(progress.get("batchId", -1)) >= batch:
            return False
    return False
