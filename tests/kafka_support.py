"""A real Apache Kafka broker (KRaft, one node) on loopback, for tests and for people.

The broker's jars come from Maven Central through ``make setup``
(``scripts/jars.sh kafka`` into ``.cache/kafka-jars``, or ``$LIMNO_KAFKA_JARS_DIR``).
:func:`start_broker` writes a ``server.properties`` in a directory of its own, formats
the log directory (``kafka.tools.StorageTool format``), starts
``java -cp 'JARS/*' kafka.Kafka server.properties`` on free loopback ports with its
output in ``kafka.log`` there, and returns once an AdminClient's metadata call
answers (a bounded wait; a broker that exits or never answers fails with the tail of
its log). :meth:`Broker.stop` sends SIGTERM, waits (bounded), kills if it must and
reaps the process.

``python tests/kafka_support.py`` (``make kafka``) runs one in the foreground for a
person: it prints the bootstrap address and stops on Ctrl-C.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from service_support import PORT_TRIES, Service, bind, free_port, on_free_port, spawn, started

__all__ = ["Broker", "Topics", "broker", "jars_dir", "start_broker"]

ROOT = Path(__file__).resolve().parent.parent
#: how long a broker may take to answer a metadata call after its start (2 busy cores)
READY_TIMEOUT = 180.0
#: seconds a topic's creation or a produce may take
KAFKA_TIMEOUT = 60.0
_JVM = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


def jars_dir() -> Path:
    """Where ``scripts/jars.sh kafka`` put the broker's jars."""
    return Path(os.environ.get("LIMNO_KAFKA_JARS_DIR") or ROOT / ".cache" / "kafka-jars")


@dataclass
class Broker(Service):
    """A running broker: its address, process and files (log, stop: :class:`Service`)."""

    name = "kafka"
    log_name = "kafka.log"

    bootstrap: str
    proc: subprocess.Popen[bytes]
    directory: Path


def _properties(directory: Path, port: int, controller: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={directory / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=4",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "",
        ]
    )


def _log4j(directory: Path) -> str:
    return "\n".join(
        [
            "appender.out.type=Console",
            "appender.out.name=out",
            "appender.out.layout.type=PatternLayout",
            "appender.out.layout.pattern=[%d] %p %m (%c)%n",
            "rootLogger.level=INFO",
            "rootLogger.appenderRef.out.ref=out",
            "logger.kafka.name=kafka",
            "logger.kafka.level=WARN",
            "logger.apache.name=org.apache.kafka",
            "logger.apache.level=WARN",
            "logger.started.name=kafka.server.KafkaRaftServer",
            "logger.started.level=INFO",
            "",
        ]
    )


def _java(jars: Path, directory: Path, main: str, *args: str) -> list[str]:
    log4j = f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}"
    return ["java", *_JVM, log4j, "-cp", f"{jars}/*", main, *args]


def _cluster_id() -> str:
    """A random cluster id (base64 of a UUID), never starting with '-', which the
    storage tool would read as an option (Kafka's own ids avoid it alike)."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not found.startswith("-"):
            return found


def start_broker(directory: Path, port: int | None = None) -> Broker:
    """Format and start a broker in ``directory`` (on ``port``, else a free one); it
    answers metadata calls when this returns. A free port is only free when looked at:
    another process may take it before the broker binds it, so a broker that could
    not bind ports chosen here is started again on others."""
    return on_free_port(
        lambda: _start_broker(directory, port or free_port()),
        directory / Broker.log_name,
        "Address already in use",
        1 if port else PORT_TRIES,
    )


def _start_broker(directory: Path, port: int) -> Broker:
    jars = jars_dir()
    if not any(jars.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"no Kafka jars in {jars}: run 'make setup' (scripts/jars.sh kafka)")
    directory.mkdir(parents=True, exist_ok=True)
    controller = free_port()
    while controller == port:
        controller = free_port()
    config = directory / "server.properties"
    config.write_text(_properties(directory, port, controller))
    (directory / "log4j2.properties").write_text(_log4j(directory))
    log = directory / Broker.log_name
    with open(log, "wb") as out:
        # --ignore-formatted: a second start (after a port was taken) finds it formatted
        fmt = _java(jars, directory, "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-g")
        if subprocess.run([*fmt, "-c", str(config)], stdout=out, stderr=out).returncode:
            raise RuntimeError(f"kafka-storage format failed:\n{log.read_text()}")
    proc = spawn(_java(jars, directory, "kafka.Kafka", str(config)), log, append=True)
    broker = Broker(f"127.0.0.1:{port}", proc, directory)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
    # KafkaException: not up yet; asked again until the bound
    return started(
        broker,
        lambda: bool(admin.list_topics(timeout=2.0).brokers),
        timeout=READY_TIMEOUT,
        what=f"kafka at {broker.bootstrap}",
        errors=(Exception,),
    )


class Topics:
    """Topics of the test's own on the session's broker, and producing to them."""

    def __init__(self, broker: Broker) -> None:
        self.bootstrap = broker.bootstrap
        # log_level 0: failures surface as exceptions; its log lines would be noise
        self.admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})

    def create(self, partitions: int = 1) -> str:
        name = f"t-{uuid.uuid4().hex[:12]}"
        futures = self.admin.create_topics([NewTopic(name, partitions, 1)])
        futures[name].result(KAFKA_TIMEOUT)
        return name

    def messages(self, topic: str) -> list[dict[str, Any]]:
        """Every message of ``topic`` now (up to each partition's end), by partition
        and offset: partition, offset, key, value (bytes), headers (dict)."""
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "tests", "log_level": 0}
        )
        try:
            partitions = sorted(consumer.list_topics(topic, KAFKA_TIMEOUT).topics[topic].partitions)
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), KAFKA_TIMEOUT)[1]
                for p in partitions
            }
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            got: list[dict[str, Any]] = []
            deadline = time.monotonic() + KAFKA_TIMEOUT
            while len(got) < sum(ends.values()):
                assert time.monotonic() < deadline, f"topic {topic}: {len(got)} message(s) read"
                for m in consumer.consume(1000, timeout=1.0):
                    assert m.error() is None, m.error()
                    got.append(
                        {
                            "partition": m.partition(),
                            "offset": m.offset(),
                            "key": m.key(),
                            "value": m.value(),
                            "headers": dict(m.headers() or []),
                        }
                    )
        finally:
            consumer.close()
        return sorted(got, key=lambda m: (m["partition"], m["offset"]))

    def count(self, topic: str) -> int:
        """How many messages ``topic`` holds now (its partitions' end offsets: a topic
        of no transactions, written from offset 0)."""
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "tests", "log_level": 0}
        )
        try:
            partitions = consumer.list_topics(topic, KAFKA_TIMEOUT).topics[topic].partitions
            return sum(
                consumer.get_watermark_offsets(TopicPartition(topic, p), KAFKA_TIMEOUT)[1]
                for p in partitions
            )
        finally:
            consumer.close()

    def add_partitions(self, topic: str, total: int) -> None:
        futures = self.admin.create_partitions([NewPartitions(topic, total)])
        futures[topic].result(KAFKA_TIMEOUT)

    def produce(
        self,
        topic: str,
        values: Sequence[Any],
        *,
        partition: int | Callable[[int], int] = 0,
        raw: bool = False,
        keys: Callable[[int], str | None] = lambda i: f"k{i}",
        headers: Callable[[int], list[tuple[str, str | bytes | None]]] = lambda i: [],
    ) -> None:
        """Each value (JSON-encoded unless ``raw``) as one message; all acknowledged."""
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "log_level": 0}
        )
        for i, value in enumerate(values):
            producer.produce(
                topic,
                value=value if raw else json.dumps(value).encode(),
                key=keys(i),
                partition=partition(i) if callable(partition) else partition,
                headers=headers(i),
            )
            producer.poll(0)
        assert producer.flush(KAFKA_TIMEOUT) == 0, "messages left unacknowledged"


@contextmanager
def broker(directory: Path | None = None) -> Iterator[Broker]:
    """A broker for the block (in a temporary directory unless given), stopped after."""
    with tempfile.TemporaryDirectory(prefix="limno-kafka-") as tmp:
        running = start_broker(directory or Path(tmp))
        try:
            yield running
        finally:
            running.stop()


def main() -> None:
    """``make kafka``: one broker in the foreground until Ctrl-C (port 9092 if free)."""
    wanted = int(os.environ.get("KAFKA_PORT", "9092"))
    # Ctrl-C and SIGTERM stop the broker (even where SIGINT came ignored: a background job)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="limno-kafka-") as tmp:
        print("kafka: starting a single-node broker (KRaft)...", file=sys.stderr, flush=True)
        running = start_broker(Path(tmp), bind(wanted))
        print(f"kafka: bootstrap {running.bootstrap}", flush=True)
        print(
            f"kafka: logs in {running.log}; try LIMNO_KAFKA_BOOTSTRAP={running.bootstrap} "
            "limno kafka from --topic T --pool P; Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        try:
            running.proc.wait()
        except KeyboardInterrupt:
            pass
        finally:
            code = running.stop()
            print(f"kafka: stopped (exit code {code})", file=sys.stderr)


if __name__ == "__main__":
    main()
