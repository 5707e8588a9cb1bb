"""Servers for tests: a real ``limno serve`` process, or one in a thread of the test.

:func:`start_server` runs ``python -m limno --lake LAKE serve --port 0`` and waits
(bounded) for its ready line, which states the port; :meth:`Served.stop` sends
SIGTERM and returns the exit code. :func:`served` is the cheap kind for suites that
run every CLI test against a server too: the API in a thread of the test process,
up in milliseconds, stopped when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from limno.server.run import serving

__all__ = ["Served", "served", "start_server"]

_READY = re.compile(r"^limno serve: listening on (http://\S+) \(lake (.+)\)$")


@dataclass
class Served:
    """A ``limno serve`` process and what it printed on stderr."""

    url: str
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then the exit code (the process is gone afterwards)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout)
            if self._reader is not None:
                self._reader.join(timeout)
            assert self.proc.stderr is not None
            self.proc.stderr.close()
        return code


def start_server(
    lake: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> Served:
    """Start ``limno --lake LAKE serve --port 0 ARGS...``; return once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "limno", "--lake", lake, "serve", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line.rstrip("\n"))
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    served = Served("", proc, seen, reader)
    try:
        while True:
            line = lines.get(timeout=timeout)
            if line is None:
                raise AssertionError(f"limno serve exited ({proc.wait(timeout)}): {seen}")
            if m := _READY.match(line):
                served.url = m.group(1)
                return served
    except BaseException:
        served.stop()
        raise


@contextlib.contextmanager
def served(lake: str) -> Iterator[str]:
    """The URL of the lake at ``lake`` served from a thread while the block runs."""
    with serving(lake) as url:
        yield url
