"""``limno kafka from``: a topic into a pool, exactly once, the pool as the source of truth.

On start the offsets already in the branch are read from its commits' meta
(:mod:`.kafka_offsets`), and each partition of the topic is assigned at the offset
after its last one (the beginning for a partition the pool has none of). No
consumer group offsets are used or committed. Messages are gathered into batches
(``batch_rows`` records, or ``batch_interval`` after a batch's first message) and
each batch is ONE commit whose meta records the offsets it covers and the topic's
full offset map after it. A crash at any moment (SIGKILL included) loses only an
uncommitted batch, which the restart reads again: nothing is duplicated or skipped.

This holds for one ``kafka from`` of a topic per branch at a time. Before each
commit the branch's offsets of the topic are read again: when another writer has
moved them, the sync stops with a ConflictError instead of committing what the
other may hold too (a second sync that commits in the moment between that check
and the commit is not caught).

Records of all partitions share the pool: the pool made here is keyed on
``kafka.offset`` (SPEC section 5), so equal offsets of different partitions are
distinct records side by side; ``kafka.partition`` tells them apart. A pool made
beforehand with another key (``kafka.partition,kafka.offset``) is used as it is.

A partition whose next offset Kafka no longer has (retention deleted it) fails the
sync (``auto.offset.reset=error``) rather than skipping records. Transactional
producers' aborted messages are not read (``read_committed``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from limno.errors import ConflictError, LimnoError, NotFoundError
from limno.streams.kafka_offsets import batch_meta, committed_offsets
from limno.streams.kafka_records import position, records_table

if TYPE_CHECKING:
    from confluent_kafka import Message

    from limno.api import Lake, Pool
    from limno.core.commits import Commit

__all__ = [
    "POOL_KEY",
    "FromOptions",
    "SyncReport",
    "consumer_config",
    "kafka_error",
    "partitions_of",
    "sync_from",
]

#: the key of a pool ``kafka from`` creates (SPEC section 5)
POOL_KEY = "kafka.offset"
#: most messages asked of the client at once
_CONSUME_MAX = 10_000
#: seconds between looks for partitions added to the topic
_REFRESH = 5.0
#: seconds a metadata call may take
_METADATA_TIMEOUT = 15.0


@dataclass
class FromOptions:
    """What to sync, and how often to commit."""

    topic: str
    pool: str
    bootstrap: str
    branch: str = "main"
    batch_rows: int = 100_000
    batch_interval: float = 5.0
    #: stop after this many seconds without a new message (None: run until stopped)
    exit_after: float | None = None


@dataclass
class SyncReport:
    """What a sync committed."""

    commits: list[Commit] = field(default_factory=list)
    records: int = 0


def kafka_error(bootstrap: str, err: object) -> LimnoError:
    """A Kafka client error as one line naming the broker."""
    text = err.str() if isinstance(err, KafkaError) else str(err)
    return LimnoError(f"kafka at {bootstrap}: {text}")


def _pool(lake: Lake, name: str, log: Callable[[str], None]) -> Pool:
    try:
        return lake.pool(name)
    except NotFoundError:
        log(f"kafka: creating pool {name} (key {POOL_KEY})")
        return lake.create_pool(name, POOL_KEY)


def partitions_of(consumer: Consumer, topic: str, bootstrap: str) -> list[int]:
    """The partition numbers of ``topic`` (NotFoundError: no such topic)."""
    try:
        metadata = consumer.list_topics(topic, timeout=_METADATA_TIMEOUT)
    except KafkaException as e:
        raise kafka_error(bootstrap, e.args[0] if e.args else e) from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        if found is None or found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise NotFoundError(f"kafka topic {topic!r} not found at {bootstrap}")
        raise kafka_error(bootstrap, found.error)
    return sorted(found.partitions)


def consumer_config(bootstrap: str, errors: list[KafkaError]) -> dict[str, object]:
    """A consumer that reads assigned partitions only, commits nothing to Kafka, and
    stops at a gap rather than skipping."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "limno-kafka-from",  # required by the client; never joined nor committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "isolation.level": "read_committed",
        "log_level": 0,  # its log lines would interleave with ours: errors come via error_cb
        "error_cb": errors.append,
    }


class _Sync:
    """One run: the consumer, the offsets so far, the batch being gathered."""

    def __init__(
        self, pool: Pool, consumer: Consumer, opts: FromOptions, log: Callable[[str], None]
    ):
        self.pool, self.consumer, self.opts, self.log = pool, consumer, opts, log
        self.offsets = committed_offsets(pool, opts.branch, opts.topic)
        self.assigned: set[int] = set()
        self.pending: list[Message] = []
        self.report = SyncReport()

    def assign_new(self) -> None:
        """Assign partitions not assigned yet: after their last committed offset."""
        found = partitions_of(self.consumer, self.opts.topic, self.opts.bootstrap)
        new = [p for p in found if p not in self.assigned]
        if not new:
            return
        starts = [
            TopicPartition(
                self.opts.topic, p, self.offsets[p] + 1 if p in self.offsets else OFFSET_BEGINNING
            )
            for p in new
        ]
        self.consumer.incremental_assign(starts)
        self.assigned.update(new)

    def take(self, messages: list[Message]) -> None:
        for m in messages:
            err = m.error()
            if err is not None:
                raise kafka_error(self.opts.bootstrap, err)
        self.pending += messages

    def commit(self) -> None:
        """The pending messages as one commit (nothing when there are none)."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        table = records_table(batch)
        if committed_offsets(self.pool, self.opts.branch, self.opts.topic) != self.offsets:
            raise ConflictError(
                f"kafka topic {self.opts.topic}: {self.pool.name}@{self.opts.branch} got "
                "offsets of it from another writer meanwhile: stopped (one 'kafka from' of a "
                "topic per branch at a time)"
            )
        ranges: dict[int, tuple[int, int]] = {}
        for m in batch:
            p, o = position(m)
            first, last = ranges.get(p, (o, o))
            ranges[p] = (min(first, o), max(last, o))
        offsets = {**self.offsets, **{p: last for p, (_, last) in ranges.items()}}
        spans = ", ".join(f"{p}:{a}-{b}" for p, (a, b) in sorted(ranges.items()))
        commit = self.pool.load(
            [table],
            branch=self.opts.branch,
            message=f"kafka {self.opts.topic}: {len(batch)} record(s), partition:offsets {spans}",
            meta=batch_meta(self.opts.topic, ranges, offsets),
        )
        self.offsets = offsets
        self.report.commits.append(commit)
        self.report.records += len(batch)
        self.log(f"kafka: {commit.id} {len(batch)} record(s) of {self.opts.topic} ({spans})")


def sync_from(
    lake: Lake,
    opts: FromOptions,
    *,
    log: Callable[[str], None] = lambda _: None,
    on_commit: Callable[[Commit], None] = lambda _: None,
    stop: threading.Event | None = None,
) -> SyncReport:
    """Sync ``opts.topic`` into ``opts.pool`` until ``stop`` (the records gathered so
    far are committed first), or ``opts.exit_after`` seconds without a message;
    ``on_commit`` hears of each commit as it lands."""
    pool = _pool(lake, opts.pool, log)
    errors: list[KafkaError] = []
    consumer = Consumer(consumer_config(opts.bootstrap, errors))
    try:
        sync = _Sync(pool, consumer, opts, log)
        sync.assign_new()
        _run(sync, errors, on_commit, stop or threading.Event())
        return sync.report
    finally:
        consumer.close()


def _run(
    sync: _Sync,
    errors: list[KafkaError],
    on_commit: Callable[[Commit], None],
    stop: threading.Event,
) -> None:
    opts = sync.opts
    now = time.monotonic()
    last_message, batch_start, refresh_at = now, now, now + _REFRESH
    while not stop.is_set():
        if sync.pending:
            wait = batch_start + opts.batch_interval - now
        elif opts.exit_after is not None:
            wait = last_message + opts.exit_after - now
        else:
            wait = _REFRESH
        wanted = min(_CONSUME_MAX, opts.batch_rows - len(sync.pending))
        messages = sync.consumer.consume(wanted, timeout=max(0.0, min(wait, 1.0)))
        now = time.monotonic()
        if messages:
            if not sync.pending:
                batch_start = now
            sync.take(messages)
            last_message = now
        fatal = [e for e in errors if e.fatal()]
        if fatal:
            raise kafka_error(opts.bootstrap, fatal[0])
        if sync.pending and (
            len(sync.pending) >= opts.batch_rows or now - batch_start >= opts.batch_interval
        ):
            sync.commit()
            on_commit(sync.report.commits[-1])
        elif (
            not sync.pending
            and opts.exit_after is not None
            and now - last_message >= opts.exit_after
        ):
            return
        if now >= refresh_at:
            sync.assign_new()
            refresh_at = now + _REFRESH
    if sync.pending:  # stopped: what was gathered is committed, as at a batch's end
        sync.commit()
        on_commit(sync.report.commits[-1])
