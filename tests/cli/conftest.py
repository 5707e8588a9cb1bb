"""The git scenarios' fixtures (tests/git_fixtures.py)."""

from git_fixtures import forked, isolated_home, lake, lk

__all__ = ["forked", "isolated_home", "lake", "lk"]
