"""What the ``limno kafka`` CLI tests share: a sync that stops once the topic is idle,
and a pool's records and ``kafka from`` commits as the CLI lists them."""

from __future__ import annotations

from typing import Any

from clirunner import Result
from git_scenarios import ok
from kafka_support import Broker

__all__ = ["FAST", "kafka_commits", "records", "sync"]

FAST = ("--batch-interval", "100ms", "--exit-after", "1500ms")


def sync(lake: str, kafka: Broker, topic: str, pool: str, *extra: str) -> Result:
    return ok(
        "--lake", lake, "kafka", "from", "--topic", topic, "--pool", pool,
        "--bootstrap", kafka.bootstrap, *FAST, *extra,
    )  # fmt: skip


def records(lake: str, pool: str) -> list[dict[str, Any]]:
    return ok("--lake", lake, "-f", "ndjson", "scan", "-p", pool).rows()


def kafka_commits(lake: str, pool: str) -> list[dict[str, Any]]:
    """The pool's commits that ``kafka from`` made, newest first."""
    log = ok("--lake", lake, "-f", "ndjson", "log", "-p", pool).rows()
    return [c for c in log if "kafka" in (c.get("meta") or {})]
