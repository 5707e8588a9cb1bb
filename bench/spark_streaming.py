"""``spark_streaming`` (issue 16): sustained rows/s of Spark Structured Streaming from
Kafka into a pool, with 5 s micro-batches.

One broker (bench/kafka.py's), a topic of 2M small JSON messages over 4 partitions
(quick: 50k), read by :func:`limno.engines.spark.kafka_to_pool` (trigger every 5 s,
at most a fifth of the topic per micro-batch, so the query runs several batches
back to back, each ONE commit) against the same Spark query (same Kafka source,
same record shaping and JSON parsing, same trigger and batch cap) writing to
Spark's ``noop`` sink: the limit, where nothing is stored. A quick run's batches
are small enough to finish within the trigger, so its figure is trigger-bound
(about a fifth of the topic per 5 s); the full run's are not. Rows/s from the query's
start until the last row is committed (limno: counted from the commits' meta) or
processed (noop); the two alternate, ``repeat`` times each. The JVM starts once,
and one untimed noop query reads the whole topic first (class loading, page cache).
"""

from __future__ import annotations

import shutil
import time
import uuid
from typing import Any

from bench.harness import Config, Result, Skipped, median
from bench.kafka import _broker, kafka_missing

__all__ = ["spark_streaming", "spark_streaming_missing"]

TRIGGER = "5 seconds"
VALUE_SCHEMA = "id BIGINT, user STRING, amount DOUBLE, ok BOOLEAN"
_TIMEOUT = 1800.0


def spark_streaming_missing() -> str | None:
    """Why it cannot run here (None: it can)."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed"
    reason = kafka_missing()
    if reason is not None:
        return reason
    from limno.engines.spark import jars

    if not any("spark-sql-kafka" in j for j in jars()):
        return "no spark-sql-kafka jar: run 'make setup' (scripts/jars.sh)"
    return None


def _limno(spark: Any, cfg: Config, bootstrap: str, topic: str, cap: int, total: int) -> float:
    from limno.core.commits import Commit
    from limno.engines import spark as ls
    from limno.lake import Lake

    lake = cfg.workdir / f"stream-lake-{uuid.uuid4().hex[:8]}"
    Lake.init(str(lake))
    synced = 0

    def committed(commit: Commit) -> None:
        nonlocal synced
        spans = commit.meta["kafka"]["batch"].values()
        synced += sum(last - first + 1 for t in spans for first, last in t.values())

    checkpoint = cfg.workdir / f"stream-chk-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    query = ls.kafka_to_pool(
        "events",
        topic=topic,
        bootstrap=bootstrap,
        checkpoint=str(checkpoint),
        lake=str(lake),
        value_schema=VALUE_SCHEMA,
        trigger=TRIGGER,
        options={"maxOffsetsPerTrigger": str(cap)},
        spark=spark,
        on_commit=committed,
    )
    try:
        _wait(query, lambda: synced >= total)
        took = time.perf_counter() - start
    finally:
        query.stop()
    if synced != total:
        raise RuntimeError(f"spark_streaming: {synced} of {total} record(s) committed")
    shutil.rmtree(lake, ignore_errors=True)
    return took


def _noop(spark: Any, cfg: Config, bootstrap: str, topic: str, cap: int) -> float:
    from limno.engines import spark as ls

    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", str(cap))
        .load()
    )
    checkpoint = cfg.workdir / f"noop-chk-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    query = (
        ls.kafka_records(source, VALUE_SCHEMA)
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=TRIGGER)
        .start()
    )
    try:
        query.processAllAvailable()
        return time.perf_counter() - start
    finally:
        query.stop()


def _wait(query: Any, done: Any) -> None:
    deadline = time.monotonic() + _TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError("spark_streaming: the query did not catch up in time")
        if query.awaitTermination(1):
            raise RuntimeError(f"spark_streaming: the query stopped ({query.exception()})")


def spark_streaming(cfg: Config) -> list[Result]:
    """Rows/s into a pool by 5 s micro-batches against Spark's noop sink."""
    if (reason := spark_streaming_missing()) is not None:
        raise Skipped(reason)
    from limno.engines import spark as ls

    spark = ls.session(conf={"spark.driver.memory": "2g", "spark.ui.enabled": "false"})
    with _broker(cfg) as setup:
        total = setup.messages
        cap = max(1, total // 5)
        _noop(spark, cfg, setup.bootstrap, setup.source, total)  # warm-up, not timed
        limno, peer = [], []
        for _ in range(cfg.repeat):
            peer.append(total / _noop(spark, cfg, setup.bootstrap, setup.source, cap))
            limno.append(total / _limno(spark, cfg, setup.bootstrap, setup.source, cap, total))
    return [
        Result(
            "spark_streaming",
            "throughput",
            "rows/s",
            median(limno),
            {"spark noop sink": median(peer)},
            True,
            note=f"{TRIGGER} micro-batches of at most {cap} rows",
        )
    ]
