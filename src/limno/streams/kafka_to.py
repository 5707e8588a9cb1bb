"""``limno kafka to``: a pool's Kafka records back to a topic, exactly once.

What is produced: the records of a ref that ``kafka from`` made (``{kafka:{topic,
partition, offset}, key, value, headers}``), each to the SAME partition number of the
target topic, in offset order: a partition-preserving mirror. The key is the
record's key text; the value its JSON (a text value as it is: values ``kafka from``
widened to JSON text go back as that text; null: a tombstone); the headers are the
record's, plus ``limno.offset``, the record's source offset.

Where to resume: the topic itself says. On start the last message of each target
partition is read; its ``limno.offset`` header is the last source offset that
partition holds, and only records after it are produced. The producer is idempotent
(in order, no duplicates) and gapless (``enable.gapless.guarantee``: a message is never
written after one before it failed for good; such a failure stops the run), so
whatever a crash (SIGKILL included) leaves, each partition holds a prefix of its
records, and a rerun continues exactly after it. A target partition
whose last message has no such header was written by someone else: refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from limno.data.json_text import json_text
from limno.errors import InvalidInputError, LimnoError
from limno.streams.kafka_from import consumer_config, kafka_error, partitions_of
from limno.streams.kafka_records import KAFKA_TYPE

if TYPE_CHECKING:
    from confluent_kafka import Message

    from limno.api import Lake

__all__ = ["OFFSET_HEADER", "ToOptions", "sync_to"]

#: the header of a produced message naming its record's source offset
OFFSET_HEADER = "limno.offset"
#: seconds to wait for a partition's last message, and for the producer's last acks
_TIMEOUT = 60.0


@dataclass
class ToOptions:
    """What to produce where."""

    pool: str
    topic: str
    bootstrap: str
    ref: str | None = None
    #: the records of this source topic (None: the pool's only one)
    source_topic: str | None = None


def _resume_points(opts: ToOptions, needed: set[int]) -> dict[int, int]:
    """``{partition: last source offset it holds}`` (-1: none yet) of each partition of
    the topic, which must have every partition in ``needed``."""
    errors: list[KafkaError] = []
    consumer = Consumer(consumer_config(opts.bootstrap, errors))
    try:
        partitions = partitions_of(consumer, opts.topic, opts.bootstrap)
        if not needed <= set(partitions):
            raise InvalidInputError(
                f"kafka topic {opts.topic} has {len(partitions)} partition(s); the records "
                f"are of partitions up to {max(needed)}"
            )
        return {p: _last_source_offset(consumer, opts, p) for p in partitions}
    finally:
        consumer.close()


def _last_source_offset(consumer: Consumer, opts: ToOptions, partition: int) -> int:
    tp = TopicPartition(opts.topic, partition)
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT)
    except KafkaException as e:
        raise kafka_error(opts.bootstrap, e.args[0] if e.args else e) from None
    if high <= low:
        return -1
    consumer.assign([TopicPartition(opts.topic, partition, high - 1)])
    message = _one_message(consumer, opts)
    headers = message.headers() or []
    for name, value in headers.items() if isinstance(headers, dict) else headers:
        if name == OFFSET_HEADER and value is not None:
            text = value.decode() if isinstance(value, bytes) else value
            if text.isdigit():
                return int(text)
    raise InvalidInputError(
        f"kafka topic {opts.topic} partition {partition} offset {high - 1}: no "
        f"{OFFSET_HEADER} header: the topic holds messages 'kafka to' did not write"
    )


def _one_message(consumer: Consumer, opts: ToOptions) -> Message:
    for message in consumer.consume(1, timeout=_TIMEOUT):
        err = message.error()
        if err is not None:
            raise kafka_error(opts.bootstrap, err)
        return message
    raise kafka_error(opts.bootstrap, f"no message from topic {opts.topic} in {_TIMEOUT:.0f}s")


def _records(lake: Lake, opts: ToOptions) -> pa.Table:
    """The ref's records of the source topic, by partition and offset."""
    table = lake.pool(opts.pool).scan(opts.ref)
    if "kafka" not in table.column_names and table.num_rows == 0:  # nothing yet
        table = pa.table({"kafka": pa.array([], KAFKA_TYPE)})
    if "kafka" not in table.column_names:
        raise InvalidInputError(
            f"pool {opts.pool}: its records have no kafka field ('kafka to' produces the "
            "records 'kafka from' made)"
        )
    kafka = pc.struct_field(table.column("kafka"), "topic")
    topics = set(pc.unique(kafka).to_pylist())
    source = opts.source_topic
    if source is None:
        if len(topics) > 1:
            raise InvalidInputError(
                f"pool {opts.pool} holds records of topics {', '.join(sorted(map(str, topics)))}: "
                "pass --source-topic"
            )
        source = next(iter(topics), None)
    table = table.filter(pc.equal(kafka, source)) if source is not None else table
    parts = pc.struct_field(table.column("kafka"), "partition")
    offsets = pc.struct_field(table.column("kafka"), "offset")
    keyed = table.append_column("__p", parts).append_column("__o", offsets)
    return keyed.sort_by([("__p", "ascending"), ("__o", "ascending")])


def _messages(table: pa.Table, resume: dict[int, int]) -> Iterator[dict[str, Any]]:
    """produce() arguments of the records after each partition's resume point."""
    for row in table.to_pylist():
        partition, offset = row["__p"], row["__o"]
        if offset <= resume[partition]:
            continue
        value = row.get("value")
        headers = [(h["key"], h["value"]) for h in row.get("headers") or []]
        yield {
            "partition": partition,
            "key": row.get("key"),
            "value": None
            if value is None
            else (value if isinstance(value, str) else json_text(value)),
            "headers": [*headers, (OFFSET_HEADER, str(offset))],
        }


def sync_to(lake: Lake, opts: ToOptions, *, log: Callable[[str], None] = lambda _: None) -> int:
    """Produce what the topic does not hold yet; the number of messages produced."""
    table = _records(lake, opts)
    resume = _resume_points(opts, set(pc.unique(table.column("__p")).to_pylist()))
    errors: list[KafkaError] = []
    failed: list[str] = []

    def delivered(err: KafkaError | None, message: Message) -> None:
        if err is not None:
            failed.append(err.str())

    producer = Producer(
        {
            "bootstrap.servers": opts.bootstrap,
            "enable.idempotence": True,
            # a batch that fails for good while later ones land would leave a gap, which
            # the resume (after the last message) would skip: make it fatal instead
            "enable.gapless.guarantee": True,
            "acks": "all",
            "log_level": 0,
            "error_cb": errors.append,
        }
    )
    produced = 0
    for message in _messages(table, resume):
        while True:
            try:
                producer.produce(opts.topic, on_delivery=delivered, **message)
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(1.0)
        produced += 1
        producer.poll(0)
        if failed or any(e.fatal() for e in errors):
            break
    left = producer.flush(_TIMEOUT)
    problem = failed[0] if failed else next((e.str() for e in errors if e.fatal()), None)
    if problem is not None or left:
        raise LimnoError(
            f"kafka at {opts.bootstrap}: producing to {opts.topic} failed "
            f"({problem or f'{left} message(s) unacknowledged'}): rerun to resume"
        )
    log(f"kafka: {produced} record(s) of {opts.pool} produced to {opts.topic}")
    return produced
