"""``limno kafka to --follow``: one process producing each new commit's records of a
pool (commits made by the test's process), one line per run; exactly once across a
SIGKILL mid-run and a restart, and across SIGTERM (exit 0); ``--exit-after`` ends it
when idle."""

from __future__ import annotations

from collections import Counter
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from subprocess import Popen

import pyarrow as pa
import pytest

from bounded import DEFAULT_TIMEOUT, read_line, wait_until
from clirunner import ok
from follow_support import limno_process
from kafka_support import Broker, Topics
from limno.api import Lake
from limno.errors import NotFoundError

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]

POOL, SOURCE = "staged", "src"


def following(
    lake: str, kafka: Broker, topic: str, err: Path, *extra: str
) -> ContextManager[Popen[str]]:
    """``limno kafka to --follow`` (stdout a pipe, stderr in ``err``), killed and
    reaped after."""
    args = ["--lake", lake, "kafka", "to", "--pool", POOL, "--topic", topic]
    args += ["--source-topic", SOURCE, "--bootstrap", kafka.bootstrap]
    args += ["--follow", "--interval", "20ms", *extra]
    return limno_process(args, err)


class Staged:
    """Records of topic :data:`SOURCE` over two partitions, loaded in commits."""

    def __init__(self, lake: str) -> None:
        self.handle = Lake.open(lake)
        self.next = [0, 0]  # per partition

    def load(self, count: int) -> None:
        rows = []
        for i in range(count):
            p = i % 2
            rows.append({"kafka": {"topic": SOURCE, "partition": p, "offset": self.next[p]},
                         "key": f"k{p}-{self.next[p]}", "value": {"n": self.next[p]}})  # fmt: skip
            self.next[p] += 1
        try:
            pool = self.handle.pool(POOL)
        except NotFoundError:
            pool = self.handle.create_pool(POOL, "kafka.offset")
        pool.load([pa.Table.from_pylist(rows)])

    def total(self) -> int:
        return sum(self.next)


def produced(topics: Topics, topic: str) -> Counter[tuple[int, int]]:
    """How often each (partition, source offset) is in the topic."""
    return Counter(
        (m["partition"], int(m["headers"]["limno.offset"])) for m in topics.messages(topic)
    )


def exactly(staged: Staged) -> Counter[tuple[int, int]]:
    return Counter((p, o) for p in (0, 1) for o in range(staged.next[p]))


def test_follow_produces_each_commit(
    lake: str, kafka: Broker, topics: Topics, tmp_path: Path
) -> None:
    target = topics.create(partitions=2)
    staged = Staged(lake)
    err = tmp_path / "err.txt"
    with following(lake, kafka, target, err) as proc:
        assert proc.stdout is not None
        wait_until(lambda: f"waiting for pool {POOL}" in err.read_text(), "its wait", alive=proc)
        staged.load(10)  # makes the pool: it was waited for
        assert read_line(proc.stdout) == "10"
        staged.load(5)
        assert read_line(proc.stdout) == "5"
        assert produced(topics, target) == exactly(staged)
        messages = topics.messages(target)
        assert [m["key"] for m in messages if m["partition"] == 1][:2] == [b"k1-0", b"k1-1"]
        proc.terminate()
        assert proc.wait(DEFAULT_TIMEOUT) == 0
        assert proc.stdout.read() == ""
    assert "Traceback" not in err.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["local"])
def test_sigkill_and_sigterm_mid_run_exactly_once(
    lake: str, kafka: Broker, topics: Topics, tmp_path: Path
) -> None:
    target = topics.create(partitions=2)
    staged = Staged(lake)
    err = tmp_path / "err.txt"
    staged.load(40_000)
    with following(lake, kafka, target, err) as first:
        wait_until(lambda: topics.count(target) > 0, "a first message", alive=first)
        first.kill()  # mid-run, or (on a fast run) after it: either is exactly once
        first.wait(DEFAULT_TIMEOUT)
    with following(lake, kafka, target, err) as second:
        wait_until(lambda: topics.count(target) == staged.total(), "the restart", alive=second)
        before = staged.total()
        staged.load(40_000)
        wait_until(lambda: topics.count(target) > before, "the next run", alive=second)
        second.terminate()  # it stops producing, flushes what it produced, exits 0
        assert second.wait(DEFAULT_TIMEOUT) == 0
    assert sum(produced(topics, target).values()) <= staged.total()
    with following(lake, kafka, target, err, "--exit-after", "300ms") as third:
        assert third.wait(DEFAULT_TIMEOUT) == 0  # the rest, then idle: it ends by itself
    assert produced(topics, target) == exactly(staged)
    again = ok("--lake", lake, "kafka", "to", "--pool", POOL, "--topic", target,
               "--source-topic", SOURCE, "--bootstrap", kafka.bootstrap)  # fmt: skip
    assert again.text.strip() == "0"
    assert "Traceback" not in err.read_text()


def test_a_partition_added_to_the_topic_is_produced_whole(
    lake: str, kafka: Broker, topics: Topics, tmp_path: Path
) -> None:
    """Once the resume points are known a run reads from the lowest one on; a partition
    added to the topic meanwhile has records below it, and they are produced too."""
    from confluent_kafka.admin import NewPartitions

    target = topics.create(partitions=1)
    handle = Lake.open(lake)
    pool = handle.create_pool(POOL, "kafka.offset")

    def load(partition: int, offsets: range) -> None:
        rows = [{"kafka": {"topic": SOURCE, "partition": partition, "offset": o},
                 "key": f"k{partition}-{o}", "value": {"n": o}} for o in offsets]  # fmt: skip
        pool.load([pa.Table.from_pylist(rows)])

    load(0, range(10))
    err = tmp_path / "err.txt"
    with following(lake, kafka, target, err) as proc:
        assert proc.stdout is not None
        assert read_line(proc.stdout) == "10"
        load(0, range(10, 12))
        assert read_line(proc.stdout) == "2"  # read from offset 10 on
        for future in topics.admin.create_partitions([NewPartitions(target, 2)]).values():
            future.result(DEFAULT_TIMEOUT)
        load(1, range(5))  # offsets 0-4: below partition 0's resume point
        assert read_line(proc.stdout) == "5"
        proc.terminate()
        assert proc.wait(DEFAULT_TIMEOUT) == 0
    want = Counter([(0, o) for o in range(12)] + [(1, o) for o in range(5)])
    assert produced(topics, target) == want
    assert "Traceback" not in err.read_text()
