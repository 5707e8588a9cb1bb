"""``limno kafka from`` beyond one topic as it is (``--shaper SQL``, several topics in
one run, the broker from the lake's config), on a lake path and behind ``limno serve``;
``limno kafka to --transactional-id``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from bounded import DEFAULT_TIMEOUT, stop
from git_scenarios import error_line, fail, ok
from kafka_cli_support import FAST, kafka_commits, records, sync
from kafka_support import KAFKA_TIMEOUT, Broker, Topics
from limno.api import Lake
from limno.errors import PreconditionFailedError

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]


def test_shaper_shapes_filters_and_fails_cleanly(lake: str, kafka: Broker, topics: Topics) -> None:
    topic = topics.create()
    topics.produce(topic, [{"n": i, "name": f"r{i}", "ok": i % 2 == 0} for i in range(6)])
    shaper = (
        "SELECT kafka, value.n * 10 AS tens, upper(value.name) AS name FROM records WHERE value.ok"
    )
    r = sync(lake, kafka, topic, "shaped", "--shaper", shaper)
    rows = records(lake, "shaped")
    assert [(row["tens"], row["name"]) for row in rows] == [(0, "R0"), (20, "R2"), (40, "R4")]
    assert set(rows[0]) == {"kafka", "tens", "name"}
    # the dropped records count as synced: nothing is read again
    assert kafka_commits(lake, "shaped")[0]["meta"]["kafka"]["offsets"] == {topic: {"0": 5}}
    r = sync(lake, kafka, topic, "shaped", "--shaper", shaper)
    assert r.text == ""
    r = sync(lake, kafka, topic, "none", "--shaper", "SELECT * FROM records WHERE false")
    assert r.text == "" and "6 record(s) dropped by the shaper: nothing committed" in r.err

    # no kafka column: refused before anything is consumed (no pool made)
    r = fail(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", "nokafka",
        "--bootstrap", kafka.bootstrap, "--shaper", "SELECT value FROM records", *FAST,
    )  # fmt: skip
    assert error_line(r) == (
        "error: kafka --shaper: its answer must keep the kafka column (it has value)"
    )
    assert "nokafka" not in ok("--lake", lake, "ls").text
    r = fail(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", "nokafka",
        "--bootstrap", kafka.bootstrap, "--shaper", "SELECT * FROM read_text('/etc/hosts')",
        *FAST,
    )  # fmt: skip
    assert "not allowed in safe mode" in error_line(r)

    # an error on a batch fails it: one line, nothing of it committed
    r = fail(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", "failing",
        "--bootstrap", kafka.bootstrap, *FAST,
        "--shaper", "SELECT kafka, CAST(value.name AS INTEGER) AS n FROM records",
    )  # fmt: skip
    assert error_line(r).startswith("error: kafka --shaper: Conversion Error:"), r.err
    # the "creating pool" line, the pool dropped again (nothing was committed), the error
    assert r.err.strip().splitlines()[:2] == [
        "kafka: creating pool failing (key kafka.offset)",
        "kafka: dropped pool failing, made by this run: nothing was committed",
    ]
    assert len(r.err.strip().splitlines()) == 3
    assert "failing" not in ok("--lake", lake, "ls").text


def test_several_topics_one_commit_per_batch(lake: str, kafka: Broker, topics: Topics) -> None:
    a, b, c = topics.create(partitions=2), topics.create(), topics.create()
    topics.produce(a, [{"a": i} for i in range(6)], partition=lambda i: i % 2)
    topics.produce(b, [{"b": i} for i in range(3)])
    topics.produce(c, [{"c": i} for i in range(2)])
    r = sync(lake, kafka, a, "multi", "--topic", f"{b},{c}", "--batch-rows", "100")
    assert len(r.text.split()) == 1  # one batch across the topics
    assert "key kafka.topic,kafka.partition,kafka.offset" in r.err
    rows = records(lake, "multi")
    assert Counter(row["kafka"]["topic"] for row in rows) == {a: 6, b: 3, c: 2}
    head = kafka_commits(lake, "multi")[0]["meta"]["kafka"]
    assert head["offsets"] == {a: {"0": 2, "1": 2}, b: {"0": 2}, c: {"0": 1}}
    assert head["batch"] == {a: {"0": [0, 2], "1": [0, 2]}, b: {"0": [0, 2]}, c: {"0": [0, 1]}}

    # only one topic grows: the next commit still carries every topic's offsets
    topics.produce(b, [{"b": 3}])
    r = sync(lake, kafka, a, "multi", "--topic", b, "--topic", c)
    assert len(r.text.split()) == 1 and "1 record(s)" in r.err
    head = kafka_commits(lake, "multi")[0]["meta"]["kafka"]
    assert head["batch"] == {b: {"0": [3, 3]}}
    assert head["offsets"] == {a: {"0": 2, "1": 2}, b: {"0": 3}, c: {"0": 1}}
    # a topic alone resumes from the same offsets
    topics.produce(c, [{"c": 2}])
    r = sync(lake, kafka, c, "multi")
    assert "1 record(s)" in r.err
    assert Counter(row["kafka"]["topic"] for row in records(lake, "multi")) == {a: 6, b: 4, c: 3}


@pytest.mark.parametrize("mode", ["local"])
def test_broker_from_the_lakes_config(
    lake: str, kafka: Broker, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--bootstrap, then $LIMNO_KAFKA_BOOTSTRAP, then the config key kafka.bootstrap."""
    monkeypatch.delenv("LIMNO_KAFKA_BOOTSTRAP", raising=False)
    topic = topics.create()
    topics.produce(topic, [{"n": 1}])
    r = fail("--lake", lake, "kafka", "from", "--topic", topic, "--pool", "p", *FAST)
    assert "limno config set kafka.bootstrap" in error_line(r)
    ok("--lake", lake, "config", "set", "--scope", "lake", "kafka.bootstrap", kafka.bootstrap)
    got = ok("--lake", lake, "config", "get", "kafka.bootstrap").text.strip()
    assert got == kafka.bootstrap
    r = ok("--lake", lake, "kafka", "from", "--topic", topic, "--pool", "p", *FAST)
    assert "1 record(s)" in r.err
    # the flag wins over the file
    ok("--lake", lake, "config", "set", "--scope", "lake", "kafka.bootstrap", "127.0.0.1:1")
    topics.produce(topic, [{"n": 2}])
    r = sync(lake, kafka, topic, "p")
    assert "1 record(s)" in r.err
    assert [row["value"]["n"] for row in records(lake, "p")] == [1, 2]


def committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, Any, str]]:
    """(partition, value, limno.offset) of each message a read_committed consumer sees,
    by partition and offset (up to each partition's end: markers and aborted
    messages do not count as messages)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tests",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "log_level": 0,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: list[tuple[int, int, Any, dict[str, Any]]] = []
        ended: set[int] = set()
        deadline = time.monotonic() + KAFKA_TIMEOUT
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"topic {topic}: {len(got)} message(s) read"
            for m in consumer.consume(1000, timeout=1.0):
                err, partition, offset = m.error(), m.partition(), m.offset()
                assert partition is not None
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    ended.add(partition)
                    continue
                headers = dict(m.headers() or [])
                raw = m.value()
                assert raw is not None and offset is not None
                got.append((partition, offset, json.loads(raw), headers))
    finally:
        consumer.close()
    return [(p, v, h["limno.offset"].decode()) for p, _, v, h in sorted(got, key=lambda g: g[:2])]


@pytest.mark.parametrize("mode", ["local"])
def test_transactional_to_fences_a_zombie(lake: str, kafka: Broker, topics: Topics) -> None:
    source, target = topics.create(partitions=2), topics.create(partitions=2)
    topics.produce(source, [{"n": i} for i in range(10)], partition=lambda i: i % 2)
    sync(lake, kafka, source, "events")
    tid = f"limno-test-{uuid.uuid4().hex[:8]}"
    # a zombie: an older producer of the id, its transaction open with a message in it
    zombie = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": tid})
    zombie.init_transactions(KAFKA_TIMEOUT)
    zombie.begin_transaction()
    zombie.produce(target, b'{"n": -1}', partition=0, headers=[("limno.offset", b"99")])
    assert zombie.flush(KAFKA_TIMEOUT) == 0

    def to() -> int:
        return int(
            ok(
                "--lake", lake, "kafka", "to", "--pool", "events", "--topic", target,
                "--bootstrap", kafka.bootstrap, "--transactional-id", tid,
            ).text
        )  # fmt: skip

    assert to() == 10
    with pytest.raises(KafkaException):  # fenced: its message stays aborted
        zombie.commit_transaction(KAFKA_TIMEOUT)
    want = [(i % 2, {"n": i}, str(i // 2)) for i in sorted(range(10), key=lambda i: i % 2)]
    assert committed(kafka.bootstrap, target, 2) == want
    # the resume reads back past the transaction markers and the aborted message
    assert to() == 0
    topics.produce(source, [{"n": 10}, {"n": 11}], partition=lambda i: 1)
    sync(lake, kafka, source, "events")
    assert to() == 2
    assert committed(kafka.bootstrap, target, 2) == [
        *want,
        (1, {"n": 10}, "5"),
        (1, {"n": 11}, "6"),
    ]


def test_load_expecting_a_head_fails_once_the_branch_moved(lake: str) -> None:
    """The commit protocol's precondition, through the lake interface (and a server)."""
    pool = Lake.open(lake).create_pool("p", "n")
    head = pool.log("main", limit=1)[0].id
    first = pool.load([pa.table({"n": [1]})], expect_head=head)
    assert first.parents[0] == head
    with pytest.raises(PreconditionFailedError, match="moved"):
        pool.load([pa.table({"n": [2]})], expect_head=head)
    pool.load([pa.table({"n": [3]})], expect_head=first.id)
    assert pool.scan().column("n").to_pylist() == [1, 3]


@pytest.mark.parametrize("mode", ["local"])
def test_two_concurrent_syncs_never_duplicate(
    lake: str, kafka: Broker, topics: Topics, tmp_path: Path
) -> None:
    """Two ``kafka from`` of a topic into one branch at once, committing small batches
    as fast as they can: whichever commits first, no record lands twice (the other
    stops with a conflict, or commits what the first did not); a third run completes
    the topic."""
    topic = topics.create(partitions=2)
    total = 400
    topics.produce(topic, [{"n": i} for i in range(total)], partition=lambda i: i % 2)
    ok("--lake", lake, "create", "events", "-k", "kafka.partition,kafka.offset")
    command = [
        sys.executable, "-m", "limno", "--lake", lake, "kafka", "from", "--topic", topic,
        "--pool", "events", "--bootstrap", kafka.bootstrap, "--batch-rows", "10", *FAST,
    ]  # fmt: skip
    errs = [tmp_path / f"err{i}.txt" for i in range(2)]
    procs = []
    for err in errs:
        with open(err, "wb") as out:
            procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=out))
    try:
        codes = [p.wait(DEFAULT_TIMEOUT) for p in procs]
    finally:
        stop(procs)
    for code, err in zip(codes, errs, strict=True):
        text = err.read_text()
        assert code == 0 or "from another writer meanwhile" in text, text
    sync(lake, kafka, topic, "events")
    rows = records(lake, "events")
    seen = Counter((r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows)
    assert max(seen.values()) == 1 and len(rows) == total
