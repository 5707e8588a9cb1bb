"""What a new user's messages did to ``kafka from``: ``NaN``, ``Infinity`` and a
number past a double's range (``1e400``) were taken as JSON (Python's and pyarrow's
readers accept them) and kept as ``NaN``/``inf``, or as JSON text no JSON reader takes
(``{"n":Infinity}``); now each is a message that does not decode, against a real
broker, on a lake's path and through a server."""

from __future__ import annotations

from typing import Any

import pytest

from git_scenarios import error_line, fail, ok
from kafka_support import Broker, Topics

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("isolated_home")]

FAST = ("--batch-interval", "100ms", "--exit-after", "1500ms")
VALUES = [
    b'{"n": 0}',
    b'{"n": NaN}',
    b'{"n": 1e400}',
    b'{"n": -Infinity}',
    b'{"n": "NaN"}',
    b'{"n": 1.7976931348623159e308}',  # just past a double: pyarrow's reader made it inf
]
REASONS = {
    1: "invalid JSON (NaN is not a JSON number)",
    2: "invalid JSON (number 1e400 is out of range)",
    3: "invalid JSON (-Infinity is not a JSON number)",
    5: "invalid JSON (number 1.7976931348623159e308 is out of range)",
}


def rows(lake: str, pool: str) -> list[dict[str, Any]]:
    return ok("--lake", lake, "-f", "ndjson", "scan", "-p", pool).rows()


def test_nan_infinity_and_huge_numbers_are_not_json(
    lake: str, kafka: Broker, topics: Topics
) -> None:
    topic = topics.create()
    topics.produce(topic, VALUES, raw=True)
    base = ("--lake", lake, "kafka", "from", "--topic", topic, "--bootstrap", kafka.bootstrap)
    line = error_line(fail(*base, "--pool", "events", *FAST))
    assert line == f"error: kafka topic {topic} partition 0 offset 1: {REASONS[1]}"
    ok(*base, "--pool", "events", "--dead-letter", "dead", *FAST)
    assert [(r["kafka"]["offset"], r["value"]) for r in rows(lake, "events")] == [
        (0, {"n": "0"}),
        (4, {"n": "NaN"}),
    ]
    dead = {d["kafka"]["offset"]: d["reason"] for d in rows(lake, "dead")}
    assert dead == REASONS


def test_a_misspelt_topic_creates_no_pool(lake: str, kafka: Broker, topics: Topics) -> None:
    """``kafka from --topic ordres`` created pool ``orders`` (empty) and then failed."""
    topic = topics.create()
    cmd = ("--lake", lake, "kafka", "from", "--pool", "orders", "--bootstrap", kafka.bootstrap)
    line = error_line(fail(*cmd, "--topic", f"{topic},nosuch", *FAST))
    assert line == f"error: kafka topic 'nosuch' not found at {kafka.bootstrap}"
    assert "orders" not in [p["name"] for p in ok("--lake", lake, "ls").rows()]
    assert "creating pool" not in fail(*cmd, "--topic", "nosuch", *FAST).err
