"""Spark Structured Streaming both ways, on real PySpark and the session's real broker.

Kafka -> pool: each micro-batch ONE commit recording the query id, batch id and
offsets, records shaped as ``limno kafka from``'s; a batch Spark replays (its end
removed from the checkpoint's commit log, or its driver killed after the limno
commit) commits nothing. Pool -> stream: ``readStream.format("limno")`` returns the
records each new commit added, nothing for a compaction. One SparkSession for the
module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from kafka_support import Broker, Topics
from limno.api.local import LocalLake as Lake
from limno.core.commits import Commit
from limno.engines import spark as ls
from limno.streams.kafka_from import FromOptions, sync_from
from spark_support import module_session, norm

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

#: seconds a streaming query may take to finish what the topic holds (2 busy cores)
QUERY_TIMEOUT = 240


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield from module_session("local[2]")


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


def _produce(topics: Topics, topic: str, first: int, n: int) -> None:
    topics.produce(
        topic,
        [{"id": i, "name": f"n{i}"} for i in range(first, first + n)],
        partition=lambda i: i % 2,
        keys=lambda i: f"k{first + i}",
        headers=lambda i: [("source", "test")] if i % 3 == 0 else [],
    )


def _drain(
    spark: SparkSession, lake: Lake, kafka: Broker, topic: str, checkpoint: Path
) -> tuple[list[Commit], list[int]]:
    """Run the query until it has processed what the topic holds now, then stop it."""
    commits: list[Commit] = []
    skipped: list[int] = []
    query = ls.kafka_to_pool(
        "orders",
        topic=topic,
        bootstrap=kafka.bootstrap,
        checkpoint=str(checkpoint),
        lake=lake.uri,
        value_schema="id BIGINT, name STRING",
        trigger="1 second",
        spark=spark,
        on_commit=commits.append,
        on_skip=skipped.append,
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    return commits, skipped


def _forget(checkpoint: Path, batch: int) -> None:
    """Roll the checkpoint's commit log back before ``batch`` (the file and its CRC)."""
    (checkpoint / "commits" / str(batch)).unlink()
    (checkpoint / "commits" / f".{batch}.crc").unlink(missing_ok=True)


def _records(lake: Lake, pool: str) -> list[dict[str, Any]]:
    got = [norm(r) for r in lake.pool(pool).scan().to_pylist()]
    return sorted(got, key=lambda r: (r["kafka"]["partition"], r["kafka"]["offset"]))


def test_kafka_batches_commit_once_and_a_replayed_batch_commits_nothing(
    spark: SparkSession, lake: Lake, kafka: Broker, topics: Topics, tmp_path: Path
) -> None:
    topic = topics.create(partitions=2)
    _produce(topics, topic, 0, 10)
    checkpoint = tmp_path / "chk"
    commits, skipped = _drain(spark, lake, kafka, topic, checkpoint)
    assert len(commits) == 1 and skipped == []
    meta = commits[0].meta
    assert meta["spark"]["batch"] == 0 and meta["spark"]["query"]
    assert meta["kafka"] == {
        "batch": {topic: {"0": [0, 4], "1": [0, 4]}},
        "offsets": {topic: {"0": 4, "1": 4}},
    }
    # the same records, in the same shape, as `limno kafka from` makes
    sync_from(lake, FromOptions(topic, "same", kafka.bootstrap, batch_interval=0.1, exit_after=1))
    assert lake.pool("orders").scan().schema == lake.pool("same").scan().schema
    assert _records(lake, "orders") == _records(lake, "same")
    first = _records(lake, "orders")[0]
    assert first["key"] == "k0" and first["value"] == {"id": 0, "name": "n0"}
    assert first["headers"] == [{"key": "source", "value": "test"}]

    # Spark forgets it finished batch 0: the restarted query replays it, and it commits nothing
    head = lake.pool("orders").resolve()
    _forget(checkpoint, 0)
    commits, skipped = _drain(spark, lake, kafka, topic, checkpoint)
    assert commits == [] and skipped == [0]
    assert lake.pool("orders").resolve() == head
    assert len(lake.pool("orders").scan()) == 10

    # new messages: the next batch, its offsets after the first's
    _produce(topics, topic, 10, 4)
    commits, skipped = _drain(spark, lake, kafka, topic, checkpoint)
    assert [c.meta["spark"]["batch"] for c in commits] == [1] and skipped == []
    assert commits[0].meta["spark"]["query"] == meta["spark"]["query"]
    assert commits[0].meta["kafka"]["batch"] == {topic: {"0": [5, 6], "1": [5, 6]}}
    assert commits[0].meta["kafka"]["offsets"] == {topic: {"0": 6, "1": 6}}
    offsets = [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in _records(lake, "orders")]
    assert offsets == [(p, o) for p in (0, 1) for o in range(7)]


def test_a_value_that_does_not_parse_fails_the_batch(
    spark: SparkSession, lake: Lake, kafka: Broker, topics: Topics, tmp_path: Path
) -> None:
    topic = topics.create()
    topics.produce(topic, [b'{"id": 1, "name": "a"}', b"not json"], raw=True)
    query = ls.kafka_to_pool(
        "bad",
        topic=topic,
        bootstrap=kafka.bootstrap,
        checkpoint=str(tmp_path / "chk"),
        lake=lake.uri,
        value_schema="id BIGINT, name STRING",
        available_now=True,
        spark=spark,
    )
    with pytest.raises(Exception, match="(?i)malformed"):
        query.awaitTermination(QUERY_TIMEOUT)
    pool = lake.pool("bad")
    assert len(pool.log()) == 1  # its first commit only: nothing of the batch
    assert pool.scan().num_rows == 0


DRIVER = textwrap.dedent(
    """
    import sys, time
    from limno.engines import spark as ls

    lake, topic, bootstrap, checkpoint = sys.argv[1:5]
    spark = ls.session("local[1]", {"spark.ui.enabled": "false"})

    def landed(commit):  # the limno commit is made; Spark has not recorded the batch yet
        print("committed", commit.id, flush=True)
        time.sleep(600)

    ls.kafka_to_pool("orders", topic=topic, bootstrap=bootstrap, checkpoint=checkpoint,
                     lake=lake, trigger="1 second", spark=spark, on_commit=landed)
    time.sleep(600)
    """
)


@pytest.mark.slow
def test_a_batch_replayed_after_its_driver_was_killed_commits_nothing(
    spark: SparkSession, lake: Lake, kafka: Broker, topics: Topics, tmp_path: Path
) -> None:
    topic = topics.create(partitions=2)
    _produce(topics, topic, 0, 6)
    checkpoint = tmp_path / "chk"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.Popen(
        [sys.executable, str(script), lake.uri, topic, kafka.bootstrap, str(checkpoint)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # a whole line, or EOF when the driver dies
        assert line.startswith(b"committed "), line
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()
    landed = line.split()[1].decode()
    pool = lake.pool("orders")
    assert pool.resolve() == landed
    assert not (checkpoint / "commits" / "0").exists()
    commits, skipped = _drain(spark, lake, kafka, topic, checkpoint)
    assert commits == [] and skipped == [0]
    assert lake.pool("orders").resolve() == landed
    assert len(lake.pool("orders").scan()) == 6


def _wait_rows(spark: SparkSession, query: Any, table: str, n: int) -> list[dict[str, Any]]:
    """The memory sink's rows once the query has processed everything available."""
    query.processAllAvailable()
    rows = [r.asDict(recursive=True) for r in spark.table(table).collect()]
    assert len(rows) == n, rows
    return rows


def test_read_stream_returns_the_records_of_new_commits(
    spark: SparkSession, lake: Lake, tmp_path: Path
) -> None:
    pool = lake.create_pool("logs", key="k")
    pool.load([pa.table({"k": [1, 2], "v": ["a", "b"]})])
    pool.load([pa.table({"k": [3], "v": ["c"]})])
    stream = spark.readStream.format("limno").option("lake", lake.uri).load("logs@main")
    assert stream.isStreaming and stream.schema.fieldNames() == ["k", "v"]
    query = (
        stream.writeStream.format("memory")
        .queryName("logs_all")
        .option("checkpointLocation", str(tmp_path / "chk"))
        .start()
    )
    latest = (
        spark.readStream.format("limno")
        .option("lake", lake.uri)
        .option("pool", "logs")
        .option("startingCommit", "latest")
        .load()
        .writeStream.format("memory")
        .queryName("logs_new")
        .option("checkpointLocation", str(tmp_path / "chk2"))
        .start()
    )
    try:
        rows = _wait_rows(spark, query, "logs_all", 3)
        assert sorted((r["k"], r["v"]) for r in rows) == [(1, "a"), (2, "b"), (3, "c")]
        _wait_rows(spark, latest, "logs_new", 0)
        pool.load([pa.table({"k": [4, 1], "v": ["d", "e"]})])
        rows = _wait_rows(spark, query, "logs_all", 5)
        assert sorted((r["k"], r["v"]) for r in rows)[-2:] == [(3, "c"), (4, "d")]
        new = _wait_rows(spark, latest, "logs_new", 2)
        assert sorted((r["k"], r["v"]) for r in new) == [(1, "e"), (4, "d")]
        # a compaction rewrites objects but adds no record: nothing streams
        before = pool.resolve()
        pool.compact([o.id for o in pool.objects()])
        assert pool.resolve() != before
        _wait_rows(spark, query, "logs_all", 5)
        # a merge of another branch's commit streams what it brought
        pool.branch("dev")
        pool.load([pa.table({"k": [9], "v": ["z"]})], branch="dev")
        pool.merge("dev", "main")
        rows = _wait_rows(spark, query, "logs_all", 6)
        assert (9, "z") in {(r["k"], r["v"]) for r in rows}
    finally:
        query.stop()
        latest.stop()
