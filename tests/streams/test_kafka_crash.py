"""``limno kafka from`` as a running process: killed with SIGKILL at different moments
and restarted, it neither loses nor duplicates a record; a topic that grows (in
records and in partitions) while it runs arrives whole."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bounded import DEFAULT_TIMEOUT, stop, wait_until
from git_scenarios import assert_verified, init_lake, ok
from kafka_support import Broker, Topics
from limno.api import Lake

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.usefixtures("isolated_home")]

POOL = "events"


@contextmanager
def syncing(
    lake: str, kafka: Broker, topic: str, tmp_path: Path, *extra: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A ``limno kafka from`` process (output in files), killed and reaped after."""
    with open(tmp_path / "out.txt", "ab") as out, open(tmp_path / "err.txt", "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "limno", "--lake", lake, "kafka", "from", "--topic", topic,
             "--pool", POOL, "--bootstrap", kafka.bootstrap, *extra],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            yield proc
        finally:
            stop([proc])


def made(lake: str) -> bool:
    """Whether the sync has made the pool yet."""
    return POOL in {c.name for c in Lake.open(lake).list_pools()}


def kafka_commits(lake: str) -> int:
    """How many commits of ``kafka from`` the pool's main has (0 before the pool)."""
    if not made(lake):
        return 0
    return sum("kafka" in c.meta for c in Lake.open(lake).pool(POOL).log("main"))


def stored(lake: str) -> Counter[tuple[int, int]]:
    """How often each (partition, offset) is in the pool (none before the pool)."""
    if not made(lake):
        return Counter()
    rows = ok("--lake", lake, "-f", "ndjson", "scan", "-p", POOL).rows()
    return Counter((row["kafka"]["partition"], row["kafka"]["offset"]) for row in rows)


class Feed:
    """Messages ``{"n": 0}``, ``{"n": 1}``, ... spread over a topic's partitions."""

    def __init__(self, topics: Topics, topic: str, partitions: int) -> None:
        self.topics, self.topic, self.partitions = topics, topic, partitions
        self.per_partition = Counter[int]()
        self.sent = 0

    def send(self, count: int) -> None:
        first = self.sent
        where = [(first + i) % self.partitions for i in range(count)]
        self.topics.produce(
            self.topic, [{"n": first + i} for i in range(count)], partition=lambda i: where[i]
        )
        self.per_partition.update(where)
        self.sent += count

    def expected(self) -> Counter[tuple[int, int]]:
        return Counter({(p, o): 1 for p, n in self.per_partition.items() for o in range(n)})


def test_sigkill_at_any_moment_then_restart_is_exactly_once(
    tmp_path: Path, kafka: Broker, topics: Topics
) -> None:
    lake = init_lake(str(tmp_path / "lake"))
    feed = Feed(topics, topics.create(partitions=4), 4)
    # killed: at once (before or while the pool is made), after 1, 2, 4 and 7 more
    # commits (of 25 records: a backlog of more is there), while messages are still
    # being produced
    for more in (0, 1, 2, 4, 7):
        feed.send(25 * (more + 2))
        before = kafka_commits(lake)
        with syncing(
            lake, kafka, feed.topic, tmp_path, "--batch-rows", "25", "--batch-interval", "50ms"
        ) as proc:
            if more:
                wait_until(
                    lambda: kafka_commits(lake) >= before + more,  # noqa: B023
                    f"{more} more commit(s)",
                    alive=proc,
                )
            feed.send(40)
            proc.kill()
            assert proc.wait(DEFAULT_TIMEOUT) == -9
    got = stored(lake)
    assert set(got.values()) <= {1}, "a record stored twice"
    ok(
        "--lake", lake, "kafka", "from", "--topic", feed.topic, "--pool", POOL,
        "--bootstrap", kafka.bootstrap, "--batch-rows", "25", "--batch-interval", "50ms",
        "--exit-after", "1500ms",
    )  # fmt: skip
    assert stored(lake) == feed.expected()
    values = ok("--lake", lake, "-f", "ndjson", "scan", "-p", POOL).rows()
    assert sorted(row["value"]["n"] for row in values) == list(range(feed.sent))
    assert_verified(lake)


def test_topic_that_grows_in_records_and_partitions(
    tmp_path: Path, kafka: Broker, topics: Topics
) -> None:
    lake = init_lake(str(tmp_path / "lake"))
    feed = Feed(topics, topics.create(partitions=2), 2)
    with syncing(lake, kafka, feed.topic, tmp_path, "--batch-interval", "100ms") as proc:
        for _ in range(3):
            feed.send(20)
            wait_until(lambda: stored(lake) == feed.expected(), "the records", alive=proc)
        topics.add_partitions(feed.topic, 3)
        feed.partitions = 3
        feed.send(30)  # 10 of them to the new partition, found by the running sync
        wait_until(lambda: stored(lake) == feed.expected(), "the new partition", alive=proc)
        assert feed.per_partition[2] == 10
        feed.send(5)  # SIGTERM: what the sync gathered is committed, then exit 0
        proc.terminate()
        assert proc.wait(DEFAULT_TIMEOUT) == 0
    # each commit of the process printed one line (whether it had the last 5 records
    # yet is timing: the run below commits them if not, and prints elsewhere)
    assert (tmp_path / "out.txt").read_text().count("\n") == kafka_commits(lake)
    assert set(stored(lake).values()) == {1}
    ok(
        "--lake", lake, "kafka", "from", "--topic", feed.topic, "--pool", POOL,
        "--bootstrap", kafka.bootstrap, "--exit-after", "1500ms",
    )  # fmt: skip
    assert stored(lake) == feed.expected()
