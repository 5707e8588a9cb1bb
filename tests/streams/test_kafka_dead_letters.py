"""``kafka from --dead-letter POOL``: messages that do not decode go to a pool of their
own, exactly once with the target (dead letters first, their offsets in the meta),
against a real broker; on a lake path and behind ``limno serve``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from clirunner import Result
from git_scenarios import init_lake, ok
from kafka_support import KAFKA_TIMEOUT, Broker, Topics
from limno.api.local import LocalLake
from limno.streams.dead_letters import DeadLetters
from limno.streams.kafka_from import FromOptions, sync_from
from limno.streams.kafka_records import decode_records

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]

FAST = ("--batch-interval", "100ms", "--exit-after", "1500ms")
#: values of offsets 0..5: 1, 3 and 4 are not JSON (4 is not even UTF-8)
VALUES = [b'{"n": 0}', b"{oops", b'{"n": 2}', b"[1,", b"\xffx", b'{"n": 5}']
BAD = {1: "invalid JSON", 3: "invalid JSON", 4: "its value is not UTF-8"}


def synced(lake: str, kafka: Broker, topic: str, *extra: str) -> Result:
    return ok(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", "events",
        "--dead-letter", "dead", "--bootstrap", kafka.bootstrap, *FAST, *extra,
    )  # fmt: skip


def sync(lake: str, kafka: Broker, topic: str, *extra: str) -> list[str]:
    return synced(lake, kafka, topic, *extra).text.split()


def rows(lake: str, pool: str) -> list[dict[str, Any]]:
    return ok("--lake", lake, "-f", "ndjson", "scan", "-p", pool).rows()


def test_bad_messages_go_to_the_dead_letter_pool(lake: str, kafka: Broker, topics: Topics) -> None:
    topic = topics.create()
    topics.produce(topic, VALUES, raw=True, headers=lambda i: [("h", b"\x01")])
    first = synced(lake, kafka, topic)
    assert len(first.text.split()) == 1  # the target's commit
    # what went where: 3 records to the target, 3 set aside (not 6 records)
    assert f"kafka: 3 record(s) of {topic} in 1 commit(s), 3 set aside in dead" in first.err
    assert [r["value"]["n"] for r in rows(lake, "events")] == [0, 2, 5]
    dead = rows(lake, "dead")
    assert [d["kafka"]["offset"] for d in dead] == [1, 3, 4]
    for d in dead:
        assert d["kafka"]["topic"] == topic and d["key"] is not None
        assert d["reason"].startswith(BAD[d["kafka"]["offset"]])
    # the raw value, whatever it was
    values = ok(
        "--lake", lake, "-f", "ndjson", "query", "SELECT value FROM dead ORDER BY kafka.offset"
    ).rows()
    assert [v["value"] for v in values] == [
        json.loads(json.dumps(x))
        for x in ("e29vcHM=", "WzEs", "/3g=")  # base64 of b"{oops", b"[1,", b"\xffx"
    ]
    # a rerun, and a batch of dead letters only: each set aside once
    assert sync(lake, kafka, topic) == []
    topics.produce(topic, [b"nope", b"{"], raw=True)
    assert len(sync(lake, kafka, topic)) == 1  # the dead-letter pool's commit
    assert sync(lake, kafka, topic) == []  # read again (the target is behind), none repeated
    assert [d["kafka"]["offset"] for d in rows(lake, "dead")] == [1, 3, 4, 6, 7]
    topics.produce(topic, [b'{"n": 8}'], raw=True)
    sync(lake, kafka, topic)
    assert [r["value"]["n"] for r in rows(lake, "events")] == [0, 2, 5, 8]
    assert len(rows(lake, "dead")) == 5


def test_crash_between_the_two_commits(lake_path: str, kafka: Broker, topics: Topics) -> None:
    """A run that committed a batch's dead letters and died before the target's commit:
    the restart commits the batch's good records, and no dead letter twice."""
    lake = LocalLake.open(init_lake(lake_path))
    topic = topics.create()
    topics.produce(topic, VALUES, raw=True)
    # the first half of a run: the batch of offsets 0-3 read, its dead letters committed
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "t", "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        batch: list[Any] = []
        while len(batch) < 4:
            batch += consumer.consume(4 - len(batch), timeout=KAFKA_TIMEOUT)
    finally:
        consumer.close()
    _, bad = decode_records(batch, keep_bad=True)
    dead = DeadLetters.open(lake, "dead", [topic], lambda _: None)
    assert dead.commit(bad, batch) is not None
    # the restart
    opts = FromOptions(
        topic=topic, pool="events", bootstrap=kafka.bootstrap, dead_letter="dead",
        batch_interval=0.1, exit_after=1.5,
    )  # fmt: skip
    report = sync_from(lake, opts)
    assert report.commits
    records = lake.pool("events").scan().column("value").to_pylist()
    assert [v["n"] for v in records] == [0, 2, 5]
    letters = lake.pool("dead").scan()
    offsets = [k["offset"] for k in letters.column("kafka").to_pylist()]
    assert offsets == [1, 3, 4]  # 1 and 3 from the first half, 4 from the restart
