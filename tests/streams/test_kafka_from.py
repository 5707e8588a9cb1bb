"""``limno kafka from`` against a real broker: records, batches as commits with their
offsets in the meta, resuming without duplicates, bad input, on a lake path and
behind ``limno serve``."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pytest

from clirunner import run
from git_scenarios import error_line, fail, ok
from kafka_cli_support import FAST, kafka_commits, records, sync
from kafka_support import Broker, Topics
from limno.api import Lake
from limno.core.commits import Commit
from limno.errors import ConflictError
from limno.streams.kafka_from import FromOptions, sync_from
from limno.streams.kafka_offsets import batch_meta

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]


def test_partitions_batches_and_resume(
    lake: str, kafka: Broker, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = topics.create(partitions=3)
    topics.produce(
        topic,
        [{"n": i, "name": f"r{i}"} for i in range(30)],
        partition=lambda i: i % 3,
        headers=lambda i: [("source", b"test"), ("i", str(i).encode())],
    )
    r = sync(lake, kafka, topic, "events", "--batch-rows", "7")
    ids = r.text.split()
    assert len(ids) >= 5  # 30 records in batches of at most 7
    rows = records(lake, "events")
    assert sorted(row["value"]["n"] for row in rows) == list(range(30))
    assert [row["kafka"]["offset"] for row in rows] == sorted(r["kafka"]["offset"] for r in rows)
    by_n = {row["value"]["n"]: row for row in rows}
    assert by_n[4]["kafka"]["partition"] == 1 and by_n[4]["kafka"]["topic"] == topic
    assert by_n[4]["kafka"]["offset"] == 1  # the second message of partition 1
    assert by_n[4]["key"] == "k4" and by_n[4]["value"]["name"] == "r4"
    assert by_n[4]["headers"] == [{"key": "source", "value": "test"}, {"key": "i", "value": "4"}]
    assert by_n[4]["kafka"]["timestamp"]

    # each commit's meta: its own ranges, and the topic's full offset map after it
    commits = kafka_commits(lake, "events")
    assert [c["id"] for c in commits] == ids[::-1]
    head = commits[0]["meta"]["kafka"]
    assert head["offsets"] == {topic: {"0": 9, "1": 9, "2": 9}}
    covered = Counter[tuple[str, int]]()
    for c in commits:
        for p, (first, last) in c["meta"]["kafka"]["batch"][topic].items():
            covered.update((p, o) for o in range(first, last + 1))
    assert covered == Counter({(str(p), o): 1 for p in range(3) for o in range(10)})

    # the topic grows: a second run takes only the new records (the env names the broker)
    topics.produce(topic, [{"n": i} for i in range(30, 36)], partition=lambda i: i % 2)
    monkeypatch.setenv("LIMNO_KAFKA_BOOTSTRAP", kafka.bootstrap)
    r = ok(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", "events", *FAST,
    )  # fmt: skip
    assert len(r.text.split()) == 1
    assert "6 record(s)" in r.err
    assert sorted(row["value"]["n"] for row in records(lake, "events")) == list(range(36))
    assert kafka_commits(lake, "events")[0]["meta"]["kafka"]["offsets"] == {
        topic: {"0": 12, "1": 12, "2": 9}
    }
    # nothing new: nothing committed
    r = sync(lake, kafka, topic, "events")
    assert r.text == "" and "0 record(s)" in r.err


def test_branch_and_two_topics_in_one_pool(lake: str, kafka: Broker, topics: Topics) -> None:
    """Offsets are per branch and per topic: a branch syncs on its own, and a second
    topic in the pool resumes from its own offsets."""
    ok("--lake", lake, "create", "mixed", "-k", "kafka.topic,kafka.partition,kafka.offset")
    ok("--lake", lake, "branch", "-p", "mixed", "dev")
    first, second = topics.create(), topics.create()
    topics.produce(first, [{"a": i} for i in range(5)])
    topics.produce(second, [{"b": i} for i in range(3)])
    sync(lake, kafka, first, "mixed@dev")
    sync(lake, kafka, second, "mixed@dev")
    sync(lake, kafka, first, "mixed")
    dev = ok("--lake", lake, "-f", "ndjson", "scan", "-p", "mixed@dev").rows()
    assert Counter(row["kafka"]["topic"] for row in dev) == {first: 5, second: 3}
    assert len(records(lake, "mixed")) == 5
    topics.produce(first, [{"a": 5}])
    r = sync(lake, kafka, first, "mixed@dev")
    assert "1 record(s)" in r.err
    dev = ok("--lake", lake, "-f", "ndjson", "scan", "-p", "mixed@dev").rows()
    firsts = [row["value"]["a"] for row in dev if row["kafka"]["topic"] == first]
    assert sorted(firsts) == [0, 1, 2, 3, 4, 5] and len(dev) == 9


def test_bad_json_fails_its_batch_naming_the_message(
    lake: str, kafka: Broker, topics: Topics
) -> None:
    topic = topics.create()
    good = [json.dumps({"n": i}).encode() for i in range(5)]
    topics.produce(topic, [*good, b'{"n": 5,', *good], raw=True)
    r = fail(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", "strict",
        "--bootstrap", kafka.bootstrap, "--batch-rows", "3", *FAST,
    )  # fmt: skip
    assert error_line(r).startswith(
        f"error: kafka topic {topic} partition 0 offset 5: invalid JSON ("
    ), r.err
    # the batch before it (offsets 0-2) is committed; the failing one (3-5) is not
    assert sorted(row["kafka"]["offset"] for row in records(lake, "strict")) == [0, 1, 2]
    r = run(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", "strict",
        "--bootstrap", kafka.bootstrap, "--batch-rows", "3", *FAST,
    )  # fmt: skip
    assert r.code == 1 and "offset 5: invalid JSON" in r.err
    assert len(records(lake, "strict")) == 3


def test_a_failed_first_batch_leaves_no_new_pool(lake: str, kafka: Broker, topics: Topics) -> None:
    topic = topics.create()
    topics.produce(topic, [b'{"n": 0', b'{"n": 1}'], raw=True)
    args = ("--lake", lake, "kafka", "from", "--topic", topic, "--bootstrap", kafka.bootstrap)
    r = fail(*args, "--pool", "fresh", *FAST)
    assert "offset 0: invalid JSON" in error_line(r)
    assert "fresh" not in ok("--lake", lake, "-f", "ndjson", "ls").text
    # a pool that was there before stays, as it was
    ok("--lake", lake, "create", "kept", "-k", "kafka.offset")
    fail(*args, "--pool", "kept", *FAST)
    assert [p["name"] for p in ok("--lake", lake, "-f", "ndjson", "ls").rows()] == ["kept"]


def test_values_widen_like_load_and_tombstones(lake: str, kafka: Broker, topics: Topics) -> None:
    """Values of one batch take one type by ``limno load``'s widening rule: fields of
    disagreeing types become text; a value that is no object makes each JSON text."""
    topic = topics.create()
    values = [b'{"a": 1}', b'{"a": "x", "b": [1]}', None, b"{\n}"]
    topics.produce(topic, values, raw=True, keys=lambda i: None if i == 0 else "k")
    sync(lake, kafka, topic, "shapes")
    rows = records(lake, "shapes")
    assert [row["key"] for row in rows] == [None, "k", "k", "k"]
    got = [row["value"] for row in rows]
    assert got[:3] == [{"a": "1", "b": None}, {"a": "x", "b": [1]}, None]
    assert got[3] in ({}, {"a": None, "b": None})

    other = topics.create()
    topics.produce(other, [b'{"a": 1}', b"7", b'"text"'], raw=True)
    sync(lake, kafka, other, "mixed")
    assert [row["value"] for row in records(lake, "mixed")] == ['{"a":1}', "7", "text"]


@pytest.mark.parametrize("mode", ["local"])
def test_errors_name_what_is_missing(
    lake: str, kafka: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LIMNO_KAFKA_BOOTSTRAP", raising=False)
    r = fail("--lake", lake, "kafka", "from", "--topic", "t", "--pool", "p")
    assert "--bootstrap" in error_line(r) and "LIMNO_KAFKA_BOOTSTRAP" in error_line(r)
    r = fail(
        "--lake", lake, "kafka", "from", "--topic", "no-such-topic", "--pool", "p",
        "--bootstrap", kafka.bootstrap, *FAST,
    )  # fmt: skip
    assert error_line(r) == f"error: kafka topic 'no-such-topic' not found at {kafka.bootstrap}"


@pytest.mark.parametrize("mode", ["local"])
def test_another_writer_of_the_topic_stops_the_sync(
    lake: str, kafka: Broker, topics: Topics
) -> None:
    """Offsets of the topic committed by someone else while a sync runs: its next
    commit is refused (ConflictError), not made on top of them."""
    topic = topics.create()
    topics.produce(topic, [{"n": i} for i in range(10)])
    handle = Lake.open(lake)
    opts = FromOptions(
        topic, "events", kafka.bootstrap, batch_rows=5, batch_interval=60.0, exit_after=10.0
    )

    def foreign(_: Commit) -> None:
        pool = handle.pool("events")
        if len(pool.log("main")) == 2:  # after the sync's first commit
            meta = batch_meta(topic, {0: (5, 9)}, {0: 9})
            pool.load([pa.table({"n": [-1]})], meta=meta, message="another writer")

    with pytest.raises(ConflictError, match="another writer meanwhile"):
        sync_from(handle, opts, on_commit=foreign)
    assert len(handle.pool("events").scan()) == 6  # the sync's first 5, the other's 1


def test_exit_after_first_reads_what_the_topic_held(
    lake: str, kafka: Broker, topics: Topics
) -> None:
    """``--exit-after`` counts idle time only once the records the topic held at the
    start are read: a first fetch slower than it (a loaded broker) does not end the run
    with nothing. 1 ms is shorter than any fetch, so the old rule read nothing here."""
    topic = topics.create(partitions=3)
    topics.produce(topic, [{"n": i} for i in range(20)], partition=lambda i: i % 3)
    quick = ("--bootstrap", kafka.bootstrap, "--batch-interval", "100ms", "--exit-after", "1ms")
    r = ok("--lake", lake, "kafka", "from", "--topic", topic, "--pool", "events", *quick)
    assert sorted(row["value"]["n"] for row in records(lake, "events")) == list(range(20))
    assert "20 record(s)" in r.err
    empty = topics.create(partitions=2)  # nothing to wait for: idle at once
    r = ok("--lake", lake, "kafka", "from", "--topic", empty, "--pool", "quiet", *quick)
    assert r.text == "" and "0 record(s)" in r.err
