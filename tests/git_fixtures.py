"""Fixtures of the git scenarios (used by tests/cli and tests/api through their
conftest.py): a fresh verified lake, a scenario helper bound to it, a pool with a
branch, and a HOME of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from git_scenarios import Lk, fork, isolate_home, verified_lake


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_home(tmp_path, monkeypatch)


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[str]:
    """A fresh lake; after the scenario, ``limno verify`` must pass on it."""
    yield from verified_lake(tmp_path)


@pytest.fixture
def lk(lake: str, tmp_path: Path) -> Lk:
    return Lk(lake, tmp_path)


@pytest.fixture
def forked(lk: Lk) -> Lk:
    """Pool ``logs`` (key ts) with one object [1, 2, 3] on main, and branch dev at main."""
    return fork(lk)
