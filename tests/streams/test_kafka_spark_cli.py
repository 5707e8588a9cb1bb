"""``limno kafka from --engine spark``: the sync as a Spark Structured Streaming query
run by the CLI, on the session's real broker, in processes of its own (a JVM each).

One lake goes through three runs: the local engine takes the topic's first
messages, a Spark run (a fresh checkpoint) starts after them, and a second Spark run
(the same checkpoint: a restart) takes only what was produced since. Each record is
in the pool exactly once, values parsed by --value-schema, each Spark micro-batch a
commit with its batch id. Flags Spark cannot honour are refused with one line; a
run that fails before its first commit leaves no pool it made behind."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bounded import DEFAULT_TIMEOUT
from git_scenarios import error_line, fail, init_lake, ok
from kafka_cli_support import kafka_commits, records, sync
from kafka_support import Broker, Topics

pytestmark = [pytest.mark.usefixtures("isolated_home")]

POOL = "events"
#: seconds a Spark run may take: a JVM start and a few micro-batches on 2 busy cores
RUN_TIMEOUT = max(DEFAULT_TIMEOUT, 300)


def _produce(topics: Topics, topic: str, first: int, count: int) -> None:
    topics.produce(
        topic, [{"n": first + i} for i in range(count)], partition=lambda i: (first + i) % 2
    )


def _spark_run(lake: str, kafka: Broker, topic: str, checkpoint: Path, log: Path) -> list[str]:
    """One ``kafka from --engine spark`` process until it is idle; its commit ids."""
    with open(log, "ab") as err:
        done = subprocess.run(
            [sys.executable, "-m", "limno", "--lake", lake, "kafka", "from", "--engine", "spark",
             "--topic", topic, "--pool", POOL, "--bootstrap", kafka.bootstrap,
             "--value-schema", "n BIGINT", "--checkpoint", str(checkpoint),
             "--batch-interval", "1s", "--exit-after", "4s"],
            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT,
        )  # fmt: skip
    assert done.returncode == 0, log.read_text()[-3000:]
    return done.stdout.decode().split()


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
def test_spark_engine_resumes_after_the_pool_and_its_checkpoint(
    tmp_path: Path, kafka: Broker, topics: Topics
) -> None:
    lake = init_lake(str(tmp_path / "lake"))
    topic = topics.create(partitions=2)
    _produce(topics, topic, 0, 10)
    sync(lake, kafka, topic, POOL)  # the local engine: offsets 0-4 of both partitions

    _produce(topics, topic, 10, 20)
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "spark.log"
    first = _spark_run(lake, kafka, topic, checkpoint, log)
    assert first, log.read_text()[-3000:]
    _produce(topics, topic, 30, 6)
    second = _spark_run(lake, kafka, topic, checkpoint, log)
    assert second and not set(second) & set(first)

    rows = records(lake, POOL)
    seen = Counter((r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows)
    assert seen == Counter({(p, o): 1 for p in (0, 1) for o in range(18)})
    assert sorted(r["value"]["n"] for r in rows) == list(range(36))
    commits = kafka_commits(lake, POOL)  # newest first
    spark = [c for c in commits if "spark" in c["meta"]]
    assert [c["id"] for c in reversed(spark)] == first + second
    batches = [c["meta"]["spark"]["batch"] for c in reversed(spark)]
    assert batches == sorted(set(batches))  # one query (one checkpoint), increasing ids
    assert commits[0]["meta"]["kafka"]["offsets"] == {topic: {"0": 17, "1": 17}}
    said = log.read_text()
    assert "kafka: spark query" in said
    assert not [line for line in said.splitlines() if " WARN " in line or " INFO " in line]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--engine", "spark", "--format", "avro"), "cannot honour --format avro"),
        (("--engine", "spark", "--shaper", "SELECT * FROM records"), "cannot honour --shaper"),
        (("--checkpoint", "x"), "need --engine spark"),
        (("--value-schema", "n BIGINT"), "need --engine spark"),
    ],
)
def test_flags_spark_cannot_honour_are_refused(
    lake: str, extra: tuple[str, ...], said: str
) -> None:
    """Refused before the broker is asked anything (none runs at this address)."""
    r = fail("--lake", lake, "kafka", "from", "--topic", "t", "--pool", POOL,
             "--bootstrap", "127.0.0.1:9", *extra)  # fmt: skip
    assert said in error_line(r)
    assert POOL not in ok("--lake", lake, "ls").text


@pytest.mark.parametrize("mode", ["served"])  # a lake on a path runs Spark: above
def test_spark_engine_refuses_a_served_lake(lake: str) -> None:
    r = fail("--lake", lake, "kafka", "from", "--engine", "spark", "--topic", "t",
             "--pool", POOL, "--bootstrap", "127.0.0.1:9")  # fmt: skip
    assert "Spark writes to a lake path or s3:// URL" in error_line(r)


@pytest.mark.kafka
@pytest.mark.parametrize("mode", ["local"])  # Spark refuses a served lake: above
def test_a_misspelt_topic_leaves_no_pool_behind(lake: str, kafka: Broker) -> None:
    """Found missing on the real broker before Spark starts; the pool the run made is
    dropped with it."""
    r = fail("--lake", lake, "kafka", "from", "--engine", "spark", "--topic", "no-such-topic",
             "--pool", POOL, "--bootstrap", kafka.bootstrap,
             "--value-schema", "n BIGINT")  # fmt: skip
    assert "kafka topic 'no-such-topic' not found" in error_line(r)
    assert POOL not in ok("--lake", lake, "ls").text


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.slow
def test_a_query_that_fails_to_start_leaves_no_pool_behind(
    tmp_path: Path, kafka: Broker, topics: Topics
) -> None:
    lake = init_lake(str(tmp_path / "lake"))
    topic = topics.create(partitions=1)
    _produce(topics, topic, 0, 3)
    r = fail("--lake", lake, "kafka", "from", "--engine", "spark", "--topic", topic,
             "--pool", POOL, "--bootstrap", kafka.bootstrap, "--value-schema", "n NOSUCHTYPE",
             "--checkpoint", str(tmp_path / "checkpoint"), "--exit-after", "4s")  # fmt: skip
    assert "NOSUCHTYPE" in error_line(r).upper()
    assert POOL not in ok("--lake", lake, "ls").text
