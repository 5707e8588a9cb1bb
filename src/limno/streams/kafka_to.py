"""``limno kafka to``: a pool's Kafka records back to a topic, exactly once.

What is produced: the records of a ref that ``kafka from`` made (``{kafka:{topic,
partition, offset}, key, value, headers}``), each to the SAME partition number of the
target topic, in offset order: a partition-preserving mirror. The key is the
record's key text (``key_format`` connect or avro: with its schema, a struct key kept
as JSON text, as ``limno etl`` keeps one, as that struct); the value its JSON (a text
value as it is: values ``kafka from`` widened to JSON text go back as that text; null:
a tombstone); the headers are the record's, plus ``limno.offset``, the record's source
offset.

Where to resume: the topic itself says. On start the last message of each target
partition is read; its ``limno.offset`` header is the last source offset that
partition holds, and only records after it are produced. The producer is idempotent
(in order, no duplicates) and gapless (``enable.gapless.guarantee``: a message is never
written after one before it failed for good; such a failure stops the run), so
whatever a crash (SIGKILL included) leaves, each partition holds a prefix of its
records, and a rerun continues exactly after it. A target partition
whose last message has no such header was written by someone else: refused.

Transactional (``transactional_id``): the messages go in transactions (of
:data:`_TRANSACTION` messages each), for readers that must never see a message twice
even from a producer that lived on after its run was thought dead (a zombie: a paused
process, a network partition). On start ``init_transactions`` fences every older
producer of the id (their writes fail from then on) and aborts the transaction one of
them left open; only then are the topic's last messages read. Aborted messages are
invisible to ``read_committed`` consumers (which ``kafka from`` is), and the resume
skips them and the transaction markers alike, reading back from a partition's end to
its last committed message. One id per target topic and run at a time: a second run
with the same id fences the first.

Following (:func:`follow_to`, ``--follow``): one producer produces each new commit's
records (:mod:`.follow`). The resume points are read from the topic once, then known
from what the producer wrote (after each run's flush); a failure ends the session and
the next one reads them again. With them known, a ``--source-topic`` pool keyed on
``kafka.offset`` is read from the lowest resume point on, not whole.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from limno.errors import InvalidInputError, LimnoError, NotFoundError
from limno.streams.follow import DEFAULT_INTERVAL, follow
from limno.streams.formats import encoded, encoder_for, json_keys
from limno.streams.kafka_from import consumer_config, kafka_error, partitions_of
from limno.streams.kafka_records import KAFKA_TYPE

if TYPE_CHECKING:
    from confluent_kafka import Message

    from limno.api import Lake

__all__ = ["OFFSET_HEADER", "ToOptions", "follow_to", "producer_config", "sync_to"]

#: the header of a produced message naming its record's source offset
OFFSET_HEADER = "limno.offset"
#: seconds to wait for a partition's last message, and for the producer's last acks
_TIMEOUT = 60.0
#: messages per transaction of a transactional producer
_TRANSACTION = 100_000


@dataclass
class ToOptions:
    """What to produce where."""

    pool: str
    topic: str
    bootstrap: str
    ref: str | None = None
    #: the records of this source topic (None: the pool's only one)
    source_topic: str | None = None
    #: how keys and values are written: a name of :data:`limno.streams.formats.FORMATS`
    format: str = "json"
    #: how keys are written, when not as ``format`` says: ``text`` (their text, JSON
    #: text when not text), ``connect`` or ``avro`` (with their schema, text keys that
    #: are JSON objects or arrays as those: :func:`limno.streams.formats.json_keys`)
    key_format: str | None = None
    #: the schema registry of ``format`` avro (None: ``$LIMNO_SCHEMA_REGISTRY``)
    registry: str | None = None
    #: produce in transactions with this ``transactional.id`` (None: idempotent only)
    transactional_id: str | None = None


def _resume_points(opts: ToOptions) -> dict[int, int]:
    """``{partition: last source offset it holds}`` (-1: none yet) of each partition of
    the topic."""
    errors: list[KafkaError] = []
    consumer = Consumer({**consumer_config(opts.bootstrap, errors), "enable.partition.eof": True})
    try:
        partitions = partitions_of(consumer, opts.topic, opts.bootstrap)
        return {p: _last_source_offset(consumer, opts, p) for p in partitions}
    finally:
        consumer.close()


def _last_source_offset(consumer: Consumer, opts: ToOptions, partition: int) -> int:
    """The ``limno.offset`` of the partition's last message (-1: it has none). Its last
    offsets may be transaction markers or aborted messages, which a read_committed
    consumer skips: the look goes back a window that grows until a message is found."""
    tp = TopicPartition(opts.topic, partition)
    try:
        low, high = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT)
    except KafkaException as e:
        raise kafka_error(opts.bootstrap, e.args[0] if e.args else e) from None
    window = 1
    while high > low:
        start = max(low, high - window)
        message = _last_message(consumer, opts, TopicPartition(opts.topic, partition, start))
        if message is not None:
            return _source_offset(message, opts)
        if start == low:
            break
        window *= 16
    return -1


def _last_message(consumer: Consumer, opts: ToOptions, start: TopicPartition) -> Message | None:
    """The last message from ``start`` to the partition's end (None: none there)."""
    consumer.assign([start])
    last = None
    deadline = time.monotonic() + _TIMEOUT
    while time.monotonic() < deadline:
        # poll, not consume(n, timeout): consume waits out its timeout unless n events
        # come, even after the end-of-partition event; poll returns at the first event
        message = consumer.poll(min(1.0, max(0.0, deadline - time.monotonic())))
        if message is None:
            continue
        err = message.error()
        if err is not None and err.code() == KafkaError._PARTITION_EOF:
            return last
        if err is not None:
            raise kafka_error(opts.bootstrap, err)
        last = message
    raise kafka_error(opts.bootstrap, f"topic {opts.topic}: its end not reached in {_TIMEOUT:.0f}s")


def _source_offset(message: Message, opts: ToOptions) -> int:
    headers = message.headers() or []
    for name, value in headers.items() if isinstance(headers, dict) else headers:
        if name == OFFSET_HEADER and value is not None:
            text = value.decode() if isinstance(value, bytes) else value
            if text.isdigit():
                return int(text)
    raise InvalidInputError(
        f"kafka topic {opts.topic} partition {message.partition()} offset {message.offset()}: "
        f"no {OFFSET_HEADER} header: the topic holds messages 'kafka to' did not write"
    )


def _records(lake: Lake, opts: ToOptions, resume: dict[int, int] | None) -> pa.Table:
    """The ref's records of the source topic, by partition and offset; with ``resume``
    known, of a pool keyed on ``kafka.offset`` and ``--source-topic`` given, only those
    from the lowest resume point on (a key range: a run's read follows what is new)."""
    pool = lake.pool(opts.pool)
    low = min((o + 1 for o in (resume or {}).values()), default=0)
    ranged = (
        low > 0
        and opts.source_topic is not None
        and (pool.config.key or "").replace(" ", "") == "kafka.offset"
        and not any(o.keyless for o in pool.objects(opts.ref))
    )
    table = pool.scan(opts.ref, start=(low,)) if ranged else pool.scan(opts.ref)
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
    kept = [name for name in ("key", "value", "headers") if name in table.column_names]
    keyed = table.select(kept).append_column("__p", parts).append_column("__o", offsets)
    return keyed.sort_by([("__p", "ascending"), ("__o", "ascending")])  # what is produced


def _type(table: pa.Table, column: str) -> pa.DataType:
    return table.schema.field(column).type if column in table.column_names else pa.null()


def _messages(table: pa.Table, resume: dict[int, int], opts: ToOptions) -> Iterator[dict[str, Any]]:
    """produce() arguments of the records after each partition's resume point."""
    table = _after(table, resume)
    if opts.format == "json":
        table = _json_values(table)
    typed_keys = opts.key_format in ("connect", "avro")
    key_type = _type(table, "key")
    if typed_keys and (pa.types.is_string(key_type) or pa.types.is_large_string(key_type)):
        table = table.set_column(
            table.schema.get_field_index("key"), "key", json_keys(table["key"], _where(table, opts))
        )
    encode_key, encode_value = (
        encoder_for(
            _key_format(opts) if name == "key" else opts.format,
            _type(table, name),
            key=name == "key",
            topic=opts.topic,
            registry=opts.registry,
            key_schema=typed_keys,
        )
        for name in ("key", "value")
    )
    # column by column (a whole table's to_pylist builds a dict per row: slower)
    nothing = [None] * len(table)
    keys, values = (
        encoded(encoder, table.column(name)) if name in table.column_names else nothing
        for name, encoder in (("key", encode_key), ("value", encode_value))
    )
    columns = [
        table.column("__p").to_pylist(),
        table.column("__o").cast(pa.string()).to_pylist(),
        keys,
        values,
        _headers(table) or nothing,
    ]
    for partition, offset, key, value, headers in zip(*columns, strict=True):
        yield {
            "partition": partition,
            "key": key,
            "value": value,
            "headers": [*((h["key"], h["value"]) for h in headers), (OFFSET_HEADER, offset)]
            if headers
            else [(OFFSET_HEADER, offset)],
        }


def _key_format(opts: ToOptions) -> str:
    """The format keys are written in (``text``: as ``json`` writes keys)."""
    if opts.key_format is None:
        return opts.format
    return "json" if opts.key_format == "text" else opts.key_format


def _where(table: pa.Table, opts: ToOptions) -> Callable[[int], str]:
    """The record of the i-th row, in words (for an error)."""

    def where(i: int) -> str:
        partition, offset = table["__p"][i].as_py(), table["__o"][i].as_py()
        return f"pool {opts.pool} record of partition {partition} offset {offset}"

    return where


def _headers(table: pa.Table) -> list[Any] | None:
    """The records' header lists (None: no record has one, the common case: the lists
    of dicts are not built)."""
    if "headers" not in table.column_names:
        return None
    column = table.column("headers")
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return column.to_pylist()
    return column.to_pylist() if len(pc.list_flatten(column)) else None


def _json_native(typ: pa.DataType) -> bool:
    """Whether DuckDB's ``to_json`` writes values of ``typ`` as :func:`json_text` does
    (the same JSON values: numbers, text, booleans, nulls, objects and arrays)."""
    if pa.types.is_struct(typ):
        return all(_json_native(typ.field(i).type) for i in range(typ.num_fields))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return _json_native(typ.value_type)
    return (
        pa.types.is_integer(typ)
        or pa.types.is_float64(typ)  # float32: DuckDB writes the float's shortest text
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_boolean(typ)
        or pa.types.is_null(typ)
    )


def _json_values(table: pa.Table) -> pa.Table:
    """Object or array values as their compact JSON text, made by DuckDB for the whole
    column at once (per value in Python it is the slowest step of a produce)."""
    if "value" not in table.column_names:
        return table
    typ = table.schema.field("value").type
    nested = pa.types.is_struct(typ) or pa.types.is_list(typ) or pa.types.is_large_list(typ)
    if not nested or not _json_native(typ) or not len(table):
        return table
    import duckdb  # only for a produce of JSON objects

    con = duckdb.connect()
    try:
        con.register("records", table.select(["value"]))
        texts = con.sql("SELECT to_json(value)::VARCHAR AS v FROM records").to_arrow_table()
    finally:
        con.close()
    at = table.column_names.index("value")
    return table.set_column(at, "value", texts.column("v"))


def _after(table: pa.Table, resume: dict[int, int]) -> pa.Table:
    """The rows after their partition's resume point."""
    if not len(table):
        return table
    points = pa.array([resume.get(p, -1) for p in range(max(resume, default=0) + 1)], pa.int64())
    return table.filter(pc.greater(table.column("__o"), points.take(table.column("__p"))))


def producer_config(
    bootstrap: str, errors: list[KafkaError], transactional_id: str | None = None
) -> dict[str, Any]:
    """An idempotent, gapless producer (see the module docstring); transactional with
    ``transactional_id``."""
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        # a batch that fails for good while later ones land would leave a gap, which
        # the resume (after the last message) would skip: make it fatal instead
        "enable.gapless.guarantee": True,
        "acks": "all",
        # throughput: bigger batches a little later (acks wait for the whole batch)
        "linger.ms": 20,
        "batch.num.messages": 50_000,
        "queue.buffering.max.messages": 500_000,
        # a delivery report (a Python call) for failed messages only: a failure is
        # what is looked for, and a report per message costs as much as its produce
        "delivery.report.only.error": True,
        "log_level": 0,
        "error_cb": errors.append,
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    return config


def sync_to(
    lake: Lake,
    opts: ToOptions,
    *,
    log: Callable[[str], None] = lambda _: None,
    stop: threading.Event | None = None,
) -> int:
    """Produce what the topic does not hold yet; the number of messages produced.
    ``stop`` set meanwhile: the messages produced so far are flushed, the rest left
    for the next run."""
    return _Session(lake, opts, log, stop).run()


def follow_to(
    lake: Lake,
    opts: ToOptions,
    *,
    log: Callable[[str], None] = lambda _: None,
    on_run: Callable[[int], None] = lambda _: None,
    stop: threading.Event | None = None,
    interval: float = DEFAULT_INTERVAL,
    exit_after: float | None = None,
) -> int:
    """:func:`sync_to` again each time the pool's ref moves (:mod:`.follow`), with one
    producer and the resume points kept between runs, until ``stop`` or
    ``exit_after`` seconds without a message produced; ``on_run`` hears of each run
    that produced some. How many runs there were."""
    stop = stop or threading.Event()
    session = _Session(lake, opts, log, stop)
    waiting: list[str] = []

    def heads() -> str | None:
        try:
            return lake.pool(opts.pool).resolve(opts.ref)
        except NotFoundError:
            if not waiting:  # said once: a pool not made yet is waited for
                waiting.append(opts.pool)
                log(f"kafka: waiting for pool {opts.pool}")
            return None

    def step() -> bool:
        produced = session.run()
        if produced:
            on_run(produced)
        return produced > 0

    return follow(heads, step, stop=stop, interval=interval, exit_after=exit_after)


class _Session:
    """One producer, and (after a first run) where each target partition stands: the
    topic's last messages are read once, then known from what this producer wrote
    (a failure ends the session; the next one reads them again)."""

    def __init__(
        self,
        lake: Lake,
        opts: ToOptions,
        log: Callable[[str], None],
        stop: threading.Event | None,
    ) -> None:
        self.lake, self.opts, self.log = lake, opts, log
        self.stop = stop or threading.Event()
        self.errors: list[KafkaError] = []
        self.failed: list[str] = []
        self.producer = Producer(
            producer_config(opts.bootstrap, self.errors, opts.transactional_id)
        )
        self.txn = _Transactions(self.producer, opts)
        self.txn.start()  # before the resume points are read: a fenced zombie adds nothing after
        self.resume: dict[int, int] | None = None

    def _delivered(self, err: KafkaError | None, message: Message) -> None:
        if err is not None:
            self.failed.append(err.str())

    def _partitions(self) -> list[int]:
        """The topic's partitions now (metadata through the producer's connection)."""
        return partitions_of(self.producer, self.opts.topic, self.opts.bootstrap)

    def _points(self, needed: set[int]) -> dict[int, int]:
        """The resume points, read from the topic when not known or when the records
        are of partitions not seen (the topic may have grown)."""
        if self.resume is None or not needed <= set(self.resume):
            self.resume = _resume_points(self.opts)
        if not needed <= set(self.resume):
            raise InvalidInputError(
                f"kafka topic {self.opts.topic} has {len(self.resume)} partition(s); the "
                f"records are of partitions up to {max(needed)}"
            )
        return self.resume

    def run(self) -> int:
        opts = self.opts
        if self.resume is not None and len(self._partitions()) != len(self.resume):
            # the topic grew: its new partitions' records may lie below every known
            # resume point, so this run reads whole and where each stands again
            self.resume = None
        table = _records(self.lake, opts, self.resume)
        resume = self._points(set(pc.unique(table.column("__p")).to_pylist()))
        produced = 0
        last: dict[int, str] = {}  # partition -> the last source offset produced
        producer, txn, failed = self.producer, self.txn, self.failed
        produce, topic, before, delivered = (
            producer.produce,
            opts.topic,
            txn.before_message,
            self._delivered,
        )
        for message in _messages(table, resume, opts):
            if txn.on:
                before()
            while True:
                try:
                    produce(topic, on_delivery=delivered, **message)
                    break
                except BufferError:  # the client's queue is full: let it send
                    producer.poll(1.0)
            produced += 1
            last[message["partition"]] = message["headers"][-1][1]
            if not produced % 10_000:  # delivery reports (of failures), now and then
                producer.poll(0)
                if failed or any(e.fatal() for e in self.errors) or self.stop.is_set():
                    break
        left = 0 if failed else txn.finish()
        problem = failed[0] if failed else next((e.str() for e in self.errors if e.fatal()), None)
        if problem is not None or left:
            txn.abort()
            self.resume = None
            raise LimnoError(
                f"kafka at {opts.bootstrap}: producing to {opts.topic} failed "
                f"({problem or f'{left} message(s) unacknowledged'}): rerun to resume"
            )
        resume.update({p: int(o) for p, o in last.items()})
        self.log(f"kafka: {produced} record(s) of {opts.pool} produced to {opts.topic}")
        return produced


class _Transactions:
    """With ``opts.transactional_id``: messages in transactions of :data:`_TRANSACTION`
    messages each; without, nothing but the final flush."""

    def __init__(self, producer: Producer, opts: ToOptions) -> None:
        self.producer, self.opts = producer, opts
        self.on = opts.transactional_id is not None
        self.open = 0  # messages in the open transaction

    def _call(self, what: str, fn: Callable[..., None], *args: float) -> None:
        try:
            fn(*args)
        except KafkaException as e:
            err = e.args[0] if e.args else e
            text = err.str() if isinstance(err, KafkaError) else str(err)
            raise LimnoError(
                f"kafka at {self.opts.bootstrap}: {what} of transactional id "
                f"{self.opts.transactional_id!r} failed ({text}): rerun to resume"
            ) from None

    def start(self) -> None:
        """init_transactions: fences an older producer of the id (a zombie of a crashed
        run) and aborts its open transaction."""
        if self.on:
            self._call("init_transactions", self.producer.init_transactions, _TIMEOUT)

    def before_message(self) -> None:
        if not self.on:
            return
        if self.open >= _TRANSACTION:
            self._call("commit_transaction", self.producer.commit_transaction, _TIMEOUT)
            self.open = 0
        if not self.open:
            self._call("begin_transaction", self.producer.begin_transaction)
        self.open += 1

    def finish(self) -> int:
        """The last transaction committed (or, idempotent: every message acknowledged);
        how many messages are left unacknowledged."""
        if self.on and self.open:
            self._call("commit_transaction", self.producer.commit_transaction, _TIMEOUT)
            self.open = 0
        return int(self.producer.flush(_TIMEOUT))

    def abort(self) -> None:
        """The open transaction aborted, if it can be (a rerun resumes either way)."""
        if self.on and self.open:
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(_TIMEOUT)
