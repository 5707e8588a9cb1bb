"""Fixtures of the server tests: one real ``limno serve`` process, fresh lakes on it.

The process serves one lake for the whole module; ``served_lake`` gives each test a
fresh lake of its own, served from a thread (tests/server_support.py), so tests do
not see each other's pools.

The event stream tests (test_events_*.py, test_protect_events_sse.py; their helpers
in events_support.py) share ``events_lake`` and ``events_server``: per module, a lake
with pools ``logs`` and ``other`` and a server on it that sends keep-alives every
0.2 s, so that a stream's reads never wait long.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from limno import Lake
from server_support import Served, served, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A real ``limno serve`` on a fresh lake (its admin's key in the environment
    while the module runs); it must stop with exit code 0."""
    root = tmp_path_factory.mktemp("served")
    lake = str(root / "lake")
    Lake.init(lake)
    proc = start_server(lake)
    try:
        with pytest.MonkeyPatch.context() as env:  # the module's clients use its admin key
            for name, value in proc.env.items():
                env.setenv(name, value)
            yield proc
    finally:
        assert proc.stop() == 0, proc.lines


@pytest.fixture
def served_lake(tmp_path: Path) -> Iterator[str]:
    """The http URL of a fresh lake (served from a thread of the test)."""
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    with served(lake) as url:
        yield url


@pytest.fixture(scope="module")
def events_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The path of a lake (one per module) with pools ``logs`` and ``other`` (key ts)."""
    lake = str(tmp_path_factory.mktemp("events") / "lake")
    opened = Lake.init(lake)
    opened.create_pool("logs", key="ts")
    opened.create_pool("other", key="ts")
    return lake


@pytest.fixture(scope="module")
def events_server(events_lake: str) -> Iterator[Served]:
    """A real ``limno serve`` of ``events_lake`` (keep-alives every 0.2 s); it must stop
    with exit code 0. Its admin's credentials are in ``events_server.env``."""
    proc = start_server(events_lake, "--events-heartbeat", "0.2")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.lines
