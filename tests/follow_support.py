"""A long-running ``limno`` command in a test (``--follow`` and the like): started
with its output where the test reads it, killed and reaped however the test ends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bounded import stop

__all__ = ["limno_process"]


@contextmanager
def limno_process(args: list[str], err: Path) -> Iterator[subprocess.Popen[str]]:
    """``python -m limno ARGS``: stdout a pipe (read whole lines of it), stderr
    appended to ``err``; killed (if still running) and reaped after."""
    with open(err, "a") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "limno", *args],
            stdout=subprocess.PIPE,
            stderr=errors,
            stdin=subprocess.DEVNULL,
            text=True,
        )
    try:
        yield proc
    finally:
        stop([proc])
