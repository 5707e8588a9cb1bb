"""Fixtures of the git scenarios (used by tests/cli and tests/api through their
conftest.py): a fresh verified lake, a scenario helper bound to it, a pool with a
branch, and a HOME of the test's own.

``mode`` runs each test that uses a lake twice: on the lake's path (``local``) and
on the same lake behind a real ``limno serve`` (``served``, tests/lake_modes.py).
``lake`` is what ``--lake`` names (the path or the server's URL); ``lake_path`` is
the directory, for tests that look at the lake's files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from git_scenarios import Lk, assert_verified, fork, init_lake, isolate_home
from lake_modes import MODES, located


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_home(tmp_path, monkeypatch)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """``local`` or ``served``: how the test's commands reach its lake."""
    return str(request.param)


@pytest.fixture
def lake_path(tmp_path: Path) -> str:
    return str(tmp_path / "lake")


@pytest.fixture
def lake(lake_path: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh lake; after the scenario, ``limno verify`` must pass on it."""
    with located(init_lake(lake_path), mode, monkeypatch) as location:
        yield location
        assert_verified(location)


@pytest.fixture
def lk(lake: str, lake_path: str, tmp_path: Path) -> Lk:
    return Lk(lake, tmp_path, lake_path)


@pytest.fixture
def forked(lk: Lk) -> Lk:
    """Pool ``logs`` (key ts) with one object [1, 2, 3] on main, and branch dev at main."""
    return fork(lk)
