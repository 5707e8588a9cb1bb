"""Fixtures of the stream tests: one real Kafka broker for the session
(tests/kafka_support.py), fresh topics, and lakes on a path and behind a server
(``mode``, tests/lake_modes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from git_fixtures import isolated_home, lake, lake_path, mode
from kafka_support import Broker, Topics, start_broker
from lake_modes import reap

__all__ = ["isolated_home", "kafka", "lake", "lake_path", "mode", "topics"]


@pytest.fixture(scope="session", autouse=True)
def _servers_exit() -> Iterator[None]:
    """The last test's server must exit (with code 0) too."""
    yield
    reap()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the session; stopped (and reaped) after the last test."""
    broker = start_broker(Path(tmp_path_factory.mktemp("kafka")))
    try:
        yield broker
    finally:
        broker.stop()
        assert broker.proc.poll() is not None


@pytest.fixture
def topics(kafka: Broker) -> Topics:
    return Topics(kafka)
