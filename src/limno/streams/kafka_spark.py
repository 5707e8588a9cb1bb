"""``limno kafka from --engine spark``: the sync run as a Spark Structured Streaming query.

The query is :func:`limno.engines.spark.kafka_to_pool` (Spark's Kafka source, one
limno commit per micro-batch, exactly once across restarts of the query by the
batch id recorded in each commit), in a classic SparkSession of this process whose
JVM logs to a file (:func:`limno.engines.spark_server.session_log`), not the
terminal. ``kafka from``'s flags map onto it:

* ``--batch-interval``: the trigger (a micro-batch every so often);
* ``--batch-rows``, when given: ``maxOffsetsPerTrigger`` (at most so many records a
  micro-batch; without it a micro-batch takes what the topic holds);
* ``--exit-after``: the query is stopped once it has run no micro-batch for that
  long (Spark has no idle stop of its own);
* ``--format json``: values parsed by ``--value-schema`` (a Spark DDL string, e.g.
  ``id BIGINT, name STRING``) or, without one, kept as their JSON text. Spark cannot
  honour ``--format connect|avro``, ``--shaper`` nor ``--dead-letter``: refused.

Where a query starts: from its checkpoint (``--checkpoint``; by default a directory
of the lake, pool, branch and topics under limno's state directory), which Spark
resumes from; a query with a new checkpoint starts after the offsets the branch
already holds (``kafka from``'s meta, written by either engine), each partition the
branch has none of from its beginning. So a lost checkpoint neither duplicates nor
skips, and the two engines may take turns on one pool.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError

from limno.errors import InvalidInputError, LimnoError
from limno.streams.kafka_from import (
    FromOptions,
    SyncReport,
    consumer_config,
    made_pool,
    partitions_of,
)
from limno.streams.kafka_offsets import branch_offsets

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from limno.api import Lake, Pool
    from limno.core.commits import Commit

__all__ = ["default_checkpoint", "refusals", "starting_offsets", "sync_with_spark"]

#: Spark's startingOffsets for a partition's beginning
_EARLIEST = -2
#: seconds between looks at the query (a stop, idle time)
_LOOK = 1


def refusals(opts: FromOptions) -> list[str]:
    """The flags of ``opts`` Spark cannot honour (empty: none)."""
    refused = []
    if opts.format != "json":
        refused.append(f"--format {opts.format} (Spark reads --format json only)")
    if opts.shaper is not None:
        refused.append("--shaper")
    if opts.dead_letter is not None:
        refused.append("--dead-letter")
    if opts.registry is not None:
        refused.append("--registry")
    return refused


def default_checkpoint(location: str, opts: FromOptions) -> str:
    """The checkpoint of a query when none is given: one directory per lake, pool,
    branch and topics under limno's Spark state directory (a rerun finds it)."""
    from limno.engines.spark_server import state_dir

    what = json.dumps([location, opts.pool, opts.branch, sorted(opts.topics)])
    name = hashlib.sha256(what.encode()).hexdigest()[:24]
    return str(state_dir() / "kafka-checkpoints" / name)


def starting_offsets(pool: Pool, opts: FromOptions) -> str:
    """Spark's ``startingOffsets`` (JSON) after what the branch holds of each topic:
    every partition of each topic named (Spark asks for all), those the branch has
    none of from their beginning."""
    errors: list[KafkaError] = []
    consumer = Consumer(consumer_config(opts.bootstrap, errors))
    try:
        done = branch_offsets(pool, opts.branch, opts.topics)[1]
        starts = {
            topic: {
                str(p): done[topic][p] + 1 if p in done[topic] else _EARLIEST
                for p in partitions_of(consumer, topic, opts.bootstrap)
            }
            for topic in opts.topics
        }
    finally:
        consumer.close()
    return json.dumps(starts)


def _spark_location(location: str) -> str:
    if "://" in location and not location.startswith(("s3://", "file://")):
        raise InvalidInputError(
            f"kafka from --engine spark: Spark writes to a lake path or s3:// URL, not {location}"
        )
    return location


def sync_with_spark(
    lake: Lake,
    location: str,
    opts: FromOptions,
    *,
    checkpoint: str | None = None,
    value_schema: str | None = None,
    max_batch_rows: int | None = None,
    log: Callable[[str], None] = lambda _: None,
    on_commit: Callable[[Commit], None] = lambda _: None,
    stop: threading.Event | None = None,
) -> SyncReport:
    """Run the streaming query until ``stop``, or until it has run no micro-batch for
    ``opts.exit_after`` seconds, or fails (its error raised). A pool this run made is
    dropped again when the run fails before anything was committed to it (a misspelt
    topic, a bad ``value_schema``), as the local engine's sync does."""
    refused = refusals(opts)
    if refused:
        raise InvalidInputError(f"kafka from --engine spark cannot honour {', '.join(refused)}")
    location = _spark_location(location)
    # a misspelt topic, a bad --value-schema, a query failed at once: no pool left
    with made_pool(lake, opts.pool, len(opts.topics), log) as pool:
        return _run_query(pool, location, opts, checkpoint, value_schema, max_batch_rows,
                          log, on_commit, stop)  # fmt: skip


def _run_query(
    pool: Pool,
    location: str,
    opts: FromOptions,
    checkpoint: str | None,
    value_schema: str | None,
    max_batch_rows: int | None,
    log: Callable[[str], None],
    on_commit: Callable[[Commit], None],
    stop: threading.Event | None,
) -> SyncReport:
    checkpoint = checkpoint or default_checkpoint(location, opts)
    fresh = not (Path(checkpoint) / "offsets").exists()
    starting = starting_offsets(pool, opts)
    log(
        f"kafka: spark query, checkpoint {checkpoint}"
        + (f", starting at {starting}" if fresh else " (resumed)")
    )
    report = SyncReport()
    lock = threading.Lock()
    last_commit = [time.monotonic()]

    def committed(commit: Commit) -> None:
        rows = sum(int(a.value.get("rows", 0)) for a in commit.actions if a.op == "add")
        with lock:
            report.commits.append(commit)
            report.records += rows
            last_commit[0] = time.monotonic()
        log(f"kafka: {commit.id} {rows} record(s) ({commit.message})")
        on_commit(commit)

    from limno.engines import spark as ls

    options = {} if max_batch_rows is None else {"maxOffsetsPerTrigger": str(max_batch_rows)}
    query = ls.kafka_to_pool(
        f"{opts.pool}@{opts.branch}",
        topic=opts.topics,
        bootstrap=opts.bootstrap,
        checkpoint=checkpoint,
        lake=location,
        value_schema=value_schema,
        trigger=f"{opts.batch_interval:g} seconds",
        starting_offsets=starting,
        options=options,
        on_commit=committed,
        on_skip=lambda batch: log(f"kafka: spark batch {batch} committed before: skipped"),
    )
    try:
        _watch(query, opts.exit_after, stop or threading.Event(), lambda: last_commit[0])
    finally:
        query.stop()
    failure = query.exception()
    if failure is not None:
        raise LimnoError(f"kafka from --engine spark: {_first_line(str(failure))}")
    return report


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def _watch(
    query: StreamingQuery,
    exit_after: float | None,
    stop: threading.Event,
    last_commit: Callable[[], float],
) -> None:
    """Until ``stop``, the query's end (a failure included: the caller reads it), or
    ``exit_after`` seconds without new data nor a commit (counted once the query first
    waits for data: starting one takes a while)."""
    from pyspark.errors import StreamingQueryException

    busy_at: float | None = None
    while not stop.is_set():
        try:
            if query.awaitTermination(_LOOK):
                return
        except StreamingQueryException:
            return
        if exit_after is None:
            continue
        now = time.monotonic()
        status = query.status
        waiting = str(status.get("message", "")).startswith("Waiting")
        if status.get("isDataAvailable") or not waiting or busy_at is None:
            busy_at = now
        if now - max(busy_at, last_commit()) >= exit_after:
            return
