"""``limno kafka from``: a topic into a pool, exactly once, the pool as the source of truth.

On start the offsets already in the branch are read from its commits' meta
(:mod:`.kafka_offsets`), and each partition of the topic is assigned at the offset
after its last one (the beginning for a partition the pool has none of). No
consumer group offsets are used or committed. Messages are gathered into batches
(``batch_rows`` records, or ``batch_interval`` after a batch's first message) and
each batch is ONE commit whose meta records the offsets it covers and the topic's
full offset map after it (batches are committed in a thread of their own, one at a
time and in order, while the next one is consumed). A crash at any moment (SIGKILL
included) loses only uncommitted batches, which the restart reads again: nothing is
duplicated or skipped.

Two ``kafka from`` of a topic into one branch cannot both commit a record: before
each commit the branch's offsets of the topic are read again, and when another writer
has moved them, the sync stops with a ConflictError instead of committing what the
other may hold too. The commit itself lands only on the head those offsets were read
from (``load(expect_head=...)``): a writer that commits in between makes it fail,
and the check is made again on the new head.

Several topics (``topic`` a list, or names separated by commas) go into one pool in
one run: a batch gathers messages of all of them and is one commit whose meta
records every topic's offsets. A pool made for several topics is keyed on
``kafka.topic,kafka.partition,kafka.offset``. ``shaper`` (:mod:`.kafka_shaper`): a
SQL query over each batch's records whose answer is what is committed.

Keys and values are read in ``format`` (:mod:`.formats`: JSON, the Kafka Connect
envelope, Avro with a schema registry). A message that does not decode fails its
batch, or with ``dead_letter`` goes to that pool, committed BEFORE the batch's good
records with the batch's offsets in its meta, so the pair is exactly once without a
commit across pools (:mod:`.dead_letters` says why).

Records of all partitions share the pool: the pool made here is keyed on
``kafka.offset`` (SPEC section 5), so equal offsets of different partitions are
distinct records side by side; ``kafka.partition`` tells them apart. A pool made
beforehand with another key (``kafka.partition,kafka.offset``) is used as it is.

A partition whose next offset Kafka no longer has (retention deleted it) fails the
sync (``auto.offset.reset=error``) rather than skipping records. Transactional
producers' aborted messages are not read (``read_committed``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from limno.errors import (
    ConflictError,
    InvalidInputError,
    LimnoError,
    NotFoundError,
    PreconditionFailedError,
)
from limno.streams.dead_letters import DeadLetters, check_own_branch
from limno.streams.formats import decoder_for
from limno.streams.kafka_offsets import branch_offsets, topics_meta
from limno.streams.kafka_records import batch_ranges, decode_records
from limno.streams.kafka_shaper import Shaper

if TYPE_CHECKING:
    import pyarrow as pa
    from confluent_kafka import Message

    from limno.api import Lake, Pool
    from limno.core.commits import Commit

__all__ = [
    "POOL_KEY",
    "TOPICS_KEY",
    "FromOptions",
    "SyncReport",
    "consumer_config",
    "kafka_error",
    "made_pool",
    "partitions_of",
    "sync_from",
]

#: the key of a pool ``kafka from`` creates (SPEC section 5)
POOL_KEY = "kafka.offset"
#: the key of a pool ``kafka from`` creates for several topics
TOPICS_KEY = "kafka.topic,kafka.partition,kafka.offset"
#: most messages asked of the client at once
_CONSUME_MAX = 10_000
#: seconds between looks for partitions added to the topic
_REFRESH = 5.0
#: commits tried on a branch other writers keep moving
_ATTEMPTS = 20
#: seconds a metadata call may take
_METADATA_TIMEOUT = 15.0
#: seconds past ``exit_after`` that a run still waits for records its topic held when
#: their partition was assigned (a loaded broker can be slow to send the first ones)
_CATCH_UP_GRACE = 60.0


@dataclass
class FromOptions:
    """What to sync, and how often to commit."""

    #: the topic, or several (a list, or names separated by commas)
    topic: str | Sequence[str]
    pool: str
    bootstrap: str
    branch: str = "main"
    batch_rows: int = 100_000
    batch_interval: float = 5.0
    #: stop after this many seconds without a new message (None: run until stopped)
    exit_after: float | None = None
    #: how keys and values are read: a name of :data:`limno.streams.formats.FORMATS`
    format: str = "json"
    #: the schema registry of ``format`` avro (None: ``$LIMNO_SCHEMA_REGISTRY``)
    registry: str | None = None
    #: ``POOL[@BRANCH]`` for messages that do not decode (None: they fail their batch)
    dead_letter: str | None = None
    #: a DuckDB query over each batch's records (:mod:`.kafka_shaper`)
    shaper: str | None = None

    @property
    def topics(self) -> list[str]:
        """The topics, each once, in order."""
        given = [self.topic] if isinstance(self.topic, str) else list(self.topic)
        names = [t.strip() for text in given for t in text.split(",")]
        found = list(dict.fromkeys(t for t in names if t))
        if not found:
            raise InvalidInputError("kafka from: no topic named")
        return found


@dataclass
class SyncReport:
    """What a sync committed: its commits (the target's and the dead-letter pool's),
    the records committed to the target (after the shaper), and the messages set
    aside in the dead-letter pool."""

    commits: list[Commit] = field(default_factory=list)
    records: int = 0
    dead: int = 0


def kafka_error(bootstrap: str, err: object) -> LimnoError:
    """A Kafka client error as one line naming the broker."""
    text = err.str() if isinstance(err, KafkaError) else str(err)
    return LimnoError(f"kafka at {bootstrap}: {text}")


@contextlib.contextmanager
def made_pool(lake: Lake, name: str, topics: int, log: Callable[[str], None]) -> Iterator[Pool]:
    """The pool ``name`` for a run of the ``with`` block, made keyed as the module
    docstring says when missing. A pool made here is dropped when the block fails
    before anything was committed to it (a misspelt topic found late, a bad first
    batch, a broker gone): a failed sync leaves no empty pool behind. It is kept when
    anything committed to it (this run's batches before the failure, or another
    writer's) or it has another branch; a failure to drop it is only logged."""
    try:
        pool, made = lake.pool(name), False
    except NotFoundError:
        key = POOL_KEY if topics == 1 else TOPICS_KEY
        log(f"kafka: creating pool {name} (key {key})")
        pool, made = lake.create_pool(name, key), True
    try:
        yield pool
    except BaseException:
        if made:
            _drop_if_untouched(lake, pool, log)
        raise


def partitions_of(consumer: Consumer | Producer, topic: str, bootstrap: str) -> list[int]:
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
        self,
        pool: Pool,
        consumer: Consumer,
        opts: FromOptions,
        log: Callable[[str], None],
        shaper: Shaper | None,
    ):
        self.pool, self.consumer, self.opts, self.log = pool, consumer, opts, log
        self.topics = opts.topics
        self.shaper = shaper
        self.offsets = branch_offsets(pool, opts.branch, self.topics)[1]
        self.decoder = decoder_for(opts.format, opts.registry)
        self.dead: DeadLetters | None = None  # set by sync_from (--dead-letter)
        self.assigned: set[tuple[str, int]] = set()
        #: with ``exit_after``: partitions not yet read up to the end offset they had
        #: when assigned, and that offset (an idle run does not stop before them)
        self.behind: dict[tuple[str, int], int] = {}
        self.pending: list[Message] = []
        self.report = SyncReport()

    def assign_new(self) -> None:
        """Assign partitions not assigned yet: after their last committed offset."""
        starts = []
        for topic in self.topics:
            done = self.offsets[topic]
            for p in partitions_of(self.consumer, topic, self.opts.bootstrap):
                if (topic, p) not in self.assigned:
                    starts.append(
                        TopicPartition(topic, p, done[p] + 1 if p in done else OFFSET_BEGINNING)
                    )
        if starts:
            if self.opts.exit_after is not None:
                self._note_ends(starts)
            self.consumer.incremental_assign(starts)
            self.assigned.update((tp.topic, tp.partition) for tp in starts)

    def _note_ends(self, starts: list[TopicPartition]) -> None:
        """Each new partition's end offset, where its start lies before it."""
        for tp in starts:
            try:
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout=_METADATA_TIMEOUT
                )
            except KafkaException as e:
                raise kafka_error(self.opts.bootstrap, e.args[0] if e.args else e) from None
            start = low if tp.offset == OFFSET_BEGINNING else max(tp.offset, low)
            if start < high:
                self.behind[(tp.topic, tp.partition)] = high

    def caught_up(self) -> bool:
        """Whether every partition has been read up to the end it had when assigned
        (its position there: transaction markers hold offsets no message carries)."""
        if self.behind:
            keys = list(self.behind)
            positions = self.consumer.position([TopicPartition(t, p) for t, p in keys])
            for key, tp in zip(keys, positions, strict=True):
                if tp.offset >= self.behind[key]:
                    del self.behind[key]
        return not self.behind

    def _load(self, table: pa.Table, message: str, meta: dict[str, Any]) -> Commit:
        """Commit ``table`` onto the head at which the branch's offsets were checked to
        be this sync's (``expect_head``): another writer that commits in between makes
        the load fail, and the check is made again on the new head."""
        for _ in range(_ATTEMPTS):
            head, offsets = branch_offsets(self.pool, self.opts.branch, self.topics)
            if offsets != self.offsets:
                raise ConflictError(
                    f"kafka topic {', '.join(self.topics)}: {self.pool.name}@"
                    f"{self.opts.branch} got offsets of it from another writer meanwhile: "
                    "stopped (one 'kafka from' of a topic per branch at a time)"
                )
            try:
                return self.pool.load(
                    [table], branch=self.opts.branch, message=message, meta=meta, expect_head=head
                )
            except PreconditionFailedError:
                continue  # the branch moved since the check: checked again
        raise ConflictError(
            f"{self.pool.name}@{self.opts.branch} moved under each of {_ATTEMPTS} commits"
        )

    def take(self, messages: list[Message]) -> None:
        for m in messages:
            err = m.error()
            if err is not None:
                raise kafka_error(self.opts.bootstrap, err)
            where = (str(m.topic()), int(m.partition() or 0))
            end = self.behind.get(where)
            if end is not None and int(m.offset() or 0) + 1 >= end:
                del self.behind[where]
        self.pending += messages

    def commit(self, batch: list[Message]) -> bool:
        """``batch`` as one commit (nothing when it is empty); whether a commit was
        made (the last of ``report.commits``). One at a time, in batch order."""
        if not batch:
            return False
        # dead letters (when kept) first: see limno.streams.dead_letters
        table, bad = decode_records(batch, self.decoder, keep_bad=self.dead is not None)
        if bad and self.dead is not None:
            dead = self.dead.commit(bad, batch)
            self.report.dead = self.dead.count
            if not table.num_rows:  # nothing else in the batch: the target gets no commit
                self.report.commits += [dead] if dead is not None else []
                return dead is not None
        if self.shaper is not None:
            table = self.shaper(table)
        if not table.num_rows:  # the shaper dropped them all: a restart reads them again
            self.log(f"kafka: {len(batch)} record(s) dropped by the shaper: nothing committed")
            return False
        ranges = batch_ranges(batch)
        offsets = {
            topic: {**done, **{p: last for p, (_, last) in ranges.get(topic, {}).items()}}
            for topic, done in self.offsets.items()
        }
        several = len(self.topics) > 1
        described = "; ".join(
            (f"{topic} " if several else "")
            + ", ".join(f"{p}:{a}-{b}" for p, (a, b) in sorted(spans.items()))
            for topic, spans in sorted(ranges.items())
        )
        names = ", ".join(self.topics)
        commit = self._load(
            table,
            f"kafka {names}: {len(batch)} record(s), partition:offsets {described}",
            topics_meta(ranges, offsets),
        )
        self.offsets = offsets
        self.report.commits.append(commit)
        self.report.records += table.num_rows
        self.log(f"kafka: {commit.id} {len(batch)} record(s) of {names} ({described})")
        return True


def sync_from(
    lake: Lake,
    opts: FromOptions,
    *,
    log: Callable[[str], None] = lambda _: None,
    on_commit: Callable[[Commit], None] = lambda _: None,
    stop: threading.Event | None = None,
) -> SyncReport:
    """Sync ``opts.topics`` into ``opts.pool`` until ``stop`` (the records gathered so
    far are committed first), or ``opts.exit_after`` seconds without a message;
    ``on_commit`` hears of each commit as it lands. A bad shaper is refused first."""
    shaper = None if opts.shaper is None else Shaper(opts.shaper)
    if opts.dead_letter is not None:
        check_own_branch(opts.dead_letter, opts.pool, opts.branch)
    errors: list[KafkaError] = []
    consumer = Consumer(consumer_config(opts.bootstrap, errors))
    try:
        for topic in opts.topics:  # a misspelt topic leaves no new, empty pool behind
            partitions_of(consumer, topic, opts.bootstrap)
        with made_pool(lake, opts.pool, len(opts.topics), log) as pool:
            sync = _Sync(pool, consumer, opts, log, shaper)
            if opts.dead_letter is not None:
                target = (pool, opts.branch)
                sync.dead = DeadLetters.open(lake, opts.dead_letter, opts.topics, log, target)
            sync.assign_new()
            _run(sync, errors, on_commit, stop or threading.Event())
        return sync.report
    finally:
        consumer.close()


def _drop_if_untouched(lake: Lake, pool: Pool, log: Callable[[str], None]) -> None:
    try:
        if len(pool.branches()) == 1 and len(pool.log(limit=2)) == 1:
            lake.drop_pool(pool.name)
            log(f"kafka: dropped pool {pool.name}, made by this run: nothing was committed")
    except Exception as e:  # noqa: BLE001 -- the run's own error is what matters
        log(f"kafka: pool {pool.name} made by this run is left (could not drop it: {e})")


class _Committer:
    """Batches committed in a thread of their own, one at a time and in order, while
    the next batch is consumed (the client fetches without the GIL; writing a batch's
    objects releases it too). A commit's failure is raised by the next call."""

    def __init__(self, sync: _Sync, on_commit: Callable[[Commit], None]) -> None:
        self.sync, self.on_commit = sync, on_commit
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="kafka-commit")
        self.inflight: Future[bool] | None = None

    def settle(self, wait: bool = True) -> None:
        """The commit in flight waited for (``wait``; else only when done) and heard of."""
        done = self.inflight
        if done is None or not (wait or done.done()):
            return
        self.inflight = None
        if done.result():
            self.on_commit(self.sync.report.commits[-1])

    def launch(self) -> None:
        """The pending messages committed in the thread, once the one before landed."""
        self.settle()
        batch, self.sync.pending = self.sync.pending, []
        self.inflight = self.pool.submit(self.sync.commit, batch)

    def close(self) -> None:
        """The thread ended once a commit in flight has ended (its failure not raised:
        a failure already on its way is)."""
        self.pool.shutdown(wait=True)


def _run(
    sync: _Sync,
    errors: list[KafkaError],
    on_commit: Callable[[Commit], None],
    stop: threading.Event,
) -> None:
    committer = _Committer(sync, on_commit)
    try:
        _consume(sync, errors, committer, stop)
        # stopped (or idle): what was gathered is committed, as at a batch's end
        if sync.pending:
            committer.launch()
        committer.settle()
    finally:
        committer.close()


def _consume(
    sync: _Sync, errors: list[KafkaError], committer: _Committer, stop: threading.Event
) -> None:
    opts = sync.opts
    now = time.monotonic()
    last_message, batch_start, refresh_at = now, now, now + _REFRESH
    while not stop.is_set():
        committer.settle(wait=False)
        if sync.pending:
            wait = batch_start + opts.batch_interval - now
        elif opts.exit_after is not None:
            wait = last_message + opts.exit_after - now
            if wait <= 0:  # idle long enough, but records its topic held are still due
                wait = 1.0
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
            committer.launch()
        elif (
            not sync.pending
            and opts.exit_after is not None
            and now - last_message >= opts.exit_after
            and (sync.caught_up() or now - last_message >= opts.exit_after + _CATCH_UP_GRACE)
        ):
            return
        if now >= refresh_at:
            sync.assign_new()
            refresh_at = now + _REFRESH
