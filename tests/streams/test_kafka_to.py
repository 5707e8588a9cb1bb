"""``limno kafka to``: a pool's Kafka records back to a topic, partition by partition,
exactly once, resuming from the topic's own last messages; also after SIGKILL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bounded import DEFAULT_TIMEOUT, stop, wait_until
from clirunner import Result
from git_scenarios import error_line, fail, init_lake, ok
from kafka_support import Broker, Topics

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]

FAST = ("--batch-interval", "100ms", "--exit-after", "1500ms")


def sync_from(lake: str, kafka: Broker, topic: str, pool: str, rows: str = "500") -> Result:
    return ok(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", pool,
        "--bootstrap", kafka.bootstrap, "--batch-rows", rows, *FAST,
    )  # fmt: skip


def sync_to(lake: str, kafka: Broker, pool: str, topic: str, *extra: str) -> int:
    r = ok(
        "--lake", lake, "kafka", "to", "--pool", pool, "--topic", topic,
        "--bootstrap", kafka.bootstrap, *extra,
    )  # fmt: skip
    return int(r.text)


def mirrored(topics: Topics, source: str, target: str) -> None:
    """``target`` holds ``source``'s messages at the same partitions and offsets."""
    got, want = topics.messages(target), topics.messages(source)
    assert [(m["partition"], m["offset"]) for m in got] == [
        (m["partition"], m["offset"]) for m in want
    ]
    for g, w in zip(got, want, strict=True):
        assert g["key"] == w["key"]
        assert g["headers"] == {**w["headers"], "limno.offset": str(w["offset"]).encode()}
        assert json.loads(g["value"]) == json.loads(w["value"])  # compact JSON, same value


def test_round_trip_resumes_from_the_topic(lake: str, kafka: Broker, topics: Topics) -> None:
    source, target = topics.create(partitions=3), topics.create(partitions=3)
    compact = [b'{"n":%d,"tags":["a"]}' % i for i in range(20)]
    topics.produce(
        source, compact, raw=True, partition=lambda i: i % 3, headers=lambda i: [("h", b"x")]
    )
    sync_from(lake, kafka, source, "events")
    assert sync_to(lake, kafka, "events", target) == 20
    mirrored(topics, source, target)
    assert sync_to(lake, kafka, "events", target) == 0  # the topic has them all
    topics.produce(source, [b'{"n":%d,"tags":[]}' % i for i in range(20, 25)], raw=True)
    sync_from(lake, kafka, source, "events")
    assert sync_to(lake, kafka, "events", target) == 5
    mirrored(topics, source, target)


@pytest.mark.parametrize("mode", ["local"])
def test_refusals(lake: str, kafka: Broker, topics: Topics) -> None:
    source, narrow, foreign = topics.create(partitions=2), topics.create(), topics.create()
    topics.produce(source, [{"n": i} for i in range(4)], partition=lambda i: i % 2)
    sync_from(lake, kafka, source, "events")
    r = fail(
        "--lake", lake, "kafka", "to", "--pool", "events", "--topic", narrow,
        "--bootstrap", kafka.bootstrap,
    )  # fmt: skip
    assert "has 1 partition(s)" in error_line(r)
    topics.produce(foreign, [{"x": 1}])
    second = topics.create()
    topics.produce(second, [{"n": 9}])
    sync_from(lake, kafka, second, "events")
    r = fail(
        "--lake", lake, "kafka", "to", "--pool", "events", "--topic", foreign,
        "--bootstrap", kafka.bootstrap,
    )  # fmt: skip
    assert "pass --source-topic" in error_line(r)
    r = fail(
        "--lake", lake, "kafka", "to", "--pool", "events", "--topic", foreign,
        "--source-topic", second, "--bootstrap", kafka.bootstrap,
    )  # fmt: skip
    assert "no limno.offset header" in error_line(r)
    assert int(
        ok(
            "--lake", lake, "kafka", "to", "--pool", "events", "--topic", narrow,
            "--source-topic", second, "--bootstrap", kafka.bootstrap,
        ).text
    ) == 1  # fmt: skip


@pytest.mark.slow
def test_sigkill_while_producing_then_rerun_is_exactly_once(
    tmp_path: Path, kafka: Broker, topics: Topics
) -> None:
    lake = init_lake(str(tmp_path / "lake"))
    source, target = topics.create(partitions=2), topics.create(partitions=2)
    total = 60_000
    topics.produce(source, [{"n": i} for i in range(total)], partition=lambda i: i % 2)
    sync_from(lake, kafka, source, "events", "100000")  # one commit

    command = [sys.executable, "-m", "limno", "--lake", lake, "kafka", "to", "--pool", "events",
               "--topic", target, "--bootstrap", kafka.bootstrap]  # fmt: skip
    mid_stream = 0
    for at_least in (1, 20_000, 40_000):
        with open(tmp_path / "err.txt", "ab") as err:
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
            try:
                wait_until(
                    lambda: topics.count(target) >= at_least,  # noqa: B023
                    f"{at_least} messages",
                    alive=proc,
                )
                proc.kill()
                assert proc.wait(DEFAULT_TIMEOUT) == -9
            finally:
                stop([proc])
        mid_stream += topics.count(target) < total
    # the producer is quick: a kill may come after its last message; most must not
    assert mid_stream >= 2, f"only {mid_stream} kill(s) came while messages were produced"
    sync_to(lake, kafka, "events", target)
    mirrored(topics, source, target)
