"""The git scenarios' fixtures (tests/git_fixtures.py): every test with a lake runs
on its path and behind a real ``limno serve`` (``mode``, tests/lake_modes.py)."""

from collections.abc import Iterator

import pytest

from git_fixtures import forked, isolated_home, lake, lake_path, lk, mode
from lake_modes import reap

__all__ = ["forked", "isolated_home", "lake", "lake_path", "lk", "mode"]


@pytest.fixture(scope="session", autouse=True)
def _servers_exit() -> Iterator[None]:
    """The last test's server must exit (with code 0) too."""
    yield
    reap()
