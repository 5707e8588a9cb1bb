"""``kafka_from`` and ``kafka_to`` (issue 16): limno's Kafka sync against confluent-kafka.

One real broker (tests/kafka_support.py: Apache Kafka in KRaft mode from the jars
``make setup`` fetched) and one source topic for both benchmarks, on free loopback
ports; the broker is stopped when the process ends.

* ``kafka_from``: a topic of 2M small JSON messages over 4 partitions (quick: 50k)
  into a fresh pool through :func:`~limno.streams.kafka_from.sync_from` (a commit
  every 500k records, quick: a quarter of them, or 10 s, whichever comes first),
  against confluent-kafka's Consumer alone reading the same topic to its end (the
  limit: nothing is parsed nor stored). Messages/s; the two alternate, ``repeat``
  times each.
* ``kafka_to``: the pool's records back to a fresh topic through
  :func:`~limno.streams.kafka_to.sync_to`, against confluent-kafka's Producer
  producing the same messages (values, keys, headers, partitions prepared
  beforehand, not timed), idempotent like limno's; messages/s until all are
  acknowledged.

Records are counted where they land (the pool's commit, the producer's acks), so a
fast figure cannot come from skipped work.
"""

from __future__ import annotations

import atexit
import json
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import Config, Result, Skipped, median

__all__ = ["kafka_from", "kafka_missing", "kafka_to"]

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4
_TIMEOUT = 120.0


def _support() -> Any:
    """tests/kafka_support.py (the broker the tests use), imported by path."""
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    import kafka_support

    return kafka_support


def kafka_missing() -> str | None:
    """Why the Kafka benchmarks cannot run here (None: they can)."""
    if shutil.which("java") is None:
        return "no java"
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka not installed"
    if not any(_support().jars_dir().glob("kafka_2.13-*.jar")):
        return "no Kafka jars: run 'make setup' (scripts/jars.sh kafka)"
    return None


class _Setup:
    """The broker, the source topic (filled once) and a lake synced from it."""

    def __init__(self, cfg: Config, broker: Any) -> None:
        from confluent_kafka.admin import AdminClient

        self.cfg, self.broker = cfg, broker
        self.bootstrap: str = broker.bootstrap
        self.messages = cfg.rows(2_000_000, 50_000)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        self.source = self.topic()
        #: a lake holding the whole source topic in pool ``events`` (None: none yet)
        self.synced: str | None = None
        _produce(self.bootstrap, self.source, _source_messages(self.messages))

    def topic(self) -> str:
        from confluent_kafka.admin import NewTopic

        name = f"bench-{uuid.uuid4().hex[:10]}"
        self.admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(_TIMEOUT)
        return name

    def lake(self) -> str:
        from limno.lake import Lake as CoreLake

        path = self.cfg.workdir / f"kafka-lake-{uuid.uuid4().hex[:8]}"
        CoreLake.init(str(path))
        return str(path)


def _source_messages(count: int) -> Iterator[dict[str, Any]]:
    for i in range(count):
        value = {"id": i, "user": f"u{i % 1000}", "amount": i % 997 / 10, "ok": i % 3 == 0}
        yield {
            "partition": i % PARTITIONS,
            "key": f"k{i}",
            "value": json.dumps(value, separators=(",", ":")).encode(),
        }


def _produce(bootstrap: str, topic: str, messages: Any) -> int:
    """Every message produced and acknowledged (idempotent producer, limno's
    settings); how many."""
    from confluent_kafka import Producer

    from limno.streams.kafka_to import producer_config

    failed: list[str] = []

    def delivered(err: Any, _: Any) -> None:
        if err is not None:
            failed.append(str(err))

    producer = Producer(producer_config(bootstrap, []))
    n = 0
    for message in messages:
        while True:
            try:
                producer.produce(topic, on_delivery=delivered, **message)
                break
            except BufferError:
                producer.poll(0.1)
        n += 1
    left = producer.flush(_TIMEOUT)
    if failed or left:
        raise RuntimeError(f"producing to {topic}: {failed[:1]} {left} unacknowledged")
    return n


def _consume_all(bootstrap: str, topic: str, count: int) -> float:
    """Seconds confluent-kafka's Consumer takes to read ``count`` messages of ``topic``
    from its beginning (every partition assigned, no group)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from limno.streams.kafka_from import consumer_config

    consumer = Consumer(consumer_config(bootstrap, []))
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = 0
        deadline = time.monotonic() + _TIMEOUT * 10
        while got < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: only {got} of {count} message(s) consumed")
            for m in consumer.consume(10_000, timeout=1.0):
                if m.error() is None:
                    got += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def _sync_from(setup: _Setup, lake: str) -> float:
    """Seconds ``sync_from`` takes to commit the whole source topic into a new pool."""
    from limno.api import Lake
    from limno.core.commits import Commit
    from limno.streams.kafka_from import FromOptions, sync_from

    handle = Lake.open(lake)
    stop = threading.Event()
    synced = 0

    def committed(commit: Commit) -> None:
        nonlocal synced
        offsets = commit.meta["kafka"]["offsets"]  # partition: last; every one from 0
        synced = sum(last + 1 for ranges in offsets.values() for last in ranges.values())
        if synced >= setup.messages:
            stop.set()

    opts = FromOptions(
        setup.source,
        "events",
        setup.bootstrap,
        batch_rows=min(500_000, setup.messages // 4),
        batch_interval=10.0,
        exit_after=60.0,
    )
    start = time.perf_counter()
    sync_from(handle, opts, on_commit=committed, stop=stop)
    took = time.perf_counter() - start
    if synced != setup.messages:
        raise RuntimeError(f"kafka_from: {synced} of {setup.messages} record(s) synced")
    return took


def kafka_from(cfg: Config) -> list[Result]:
    """Messages/s into a pool against confluent-kafka consuming the same topic."""
    with _broker(cfg) as setup:
        limno, peer = [], []
        for _ in range(cfg.repeat):
            peer.append(
                setup.messages / _consume_all(setup.bootstrap, setup.source, setup.messages)
            )
            lake = setup.lake()
            limno.append(setup.messages / _sync_from(setup, lake))
            setup.synced = lake
    return [
        Result(
            "kafka_from",
            "throughput",
            "msgs/s",
            median(limno),
            {"confluent-kafka": median(peer)},
            True,
        )
    ]


def kafka_to(cfg: Config) -> list[Result]:
    """Messages/s produced from a pool against confluent-kafka producing the same."""
    from limno.api import Lake
    from limno.streams.kafka_to import ToOptions, sync_to

    with _broker(cfg) as setup:
        if setup.synced is None:
            setup.synced = setup.lake()
            _sync_from(setup, setup.synced)
        handle = Lake.open(setup.synced)
        same = [
            {**m, "headers": [("limno.offset", str(i // PARTITIONS))]}
            for i, m in enumerate(_source_messages(setup.messages))
        ]
        limno, peer = [], []
        for _ in range(cfg.repeat):
            target = setup.topic()
            start = time.perf_counter()
            n = _produce(setup.bootstrap, target, same)
            peer.append(n / (time.perf_counter() - start))
            target = setup.topic()
            start = time.perf_counter()
            n = sync_to(handle, ToOptions("events", target, setup.bootstrap))
            took = time.perf_counter() - start
            if n != setup.messages:
                raise RuntimeError(f"kafka_to: {n} of {setup.messages} produced")
            limno.append(n / took)
    return [
        Result(
            "kafka_to",
            "throughput",
            "msgs/s",
            median(limno),
            {"confluent-kafka": median(peer)},
            True,
        )
    ]


#: the setup both benchmarks share (one broker, one source topic), stopped at exit
_SHARED: list[_Setup] = []


@contextmanager
def _broker(cfg: Config) -> Iterator[_Setup]:
    """The shared setup, made on first use (its broker stopped when the process ends)."""
    if (reason := kafka_missing()) is not None:
        raise Skipped(reason)
    if not _SHARED or _SHARED[0].cfg != cfg:
        broker = _support().start_broker(cfg.workdir / f"kafka-{uuid.uuid4().hex[:6]}")
        atexit.register(broker.stop)
        try:
            _SHARED[:] = [_Setup(cfg, broker)]
        except BaseException:
            broker.stop()
            raise
    yield _SHARED[0]
