"""Where the lake is: ``--lake``, then ``LIMNO_LAKE``, then ``~/.local/share/limno``."""

from __future__ import annotations

import os

__all__ = ["DEFAULT_LAKE", "lake_location"]

DEFAULT_LAKE = "~/.local/share/limno"


def lake_location(explicit: str | None = None) -> str:
    """The lake location to use, by SPEC precedence (flag, environment, default)."""
    if explicit:
        return explicit
    env = os.environ.get("LIMNO_LAKE")
    if env:
        return env
    return os.path.expanduser(DEFAULT_LAKE)
