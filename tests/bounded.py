"""Bounded waits for tests that run, race and kill other processes and threads.

A test that waits must wait for a condition, never for a guessed time, and never
forever; a test that reads what a killed process printed must read whole lines
only (a line cut off by the kill is not an acknowledgement).
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO

#: how long a test waits for a child process or thread that should be quick
DEFAULT_TIMEOUT = 120.0


def whole_lines(text: str) -> list[str]:
    """The newline-terminated lines of ``text``; a last line without one is dropped."""
    return text.split("\n")[:-1]


def read_line(stream: IO[str], timeout: float = DEFAULT_TIMEOUT) -> str:
    """The next whole line of a child's output (without its newline).

    Fails when none comes within ``timeout`` seconds, or when the output ends
    without a full line (the child died). The read runs in a daemon thread, which
    ends once the caller stops the child.
    """
    box: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: box.put(stream.readline()), daemon=True).start()
    try:
        line = box.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no line from the child process within {timeout}s") from None
    assert line.endswith("\n"), f"the child's output ended without a whole line: {line!r}"
    return line[:-1]


def wait_until(
    condition: Callable[[], bool],
    what: str,
    timeout: float = DEFAULT_TIMEOUT,
    alive: subprocess.Popen[str] | subprocess.Popen[bytes] | None = None,
) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds, or as soon
    as the process ``alive`` (when given) has exited."""
    deadline = time.monotonic() + timeout
    while not condition():
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"the child exited ({alive.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def join_all(threads: Iterable[threading.Thread], timeout: float = DEFAULT_TIMEOUT) -> None:
    """Join every thread, together within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        assert not t.is_alive(), f"thread {t.name} still runs after {timeout}s"


def stop(procs: Iterable[subprocess.Popen[str] | subprocess.Popen[bytes]]) -> None:
    """Kill whichever of ``procs`` still run and reap them (cleanup after a failure)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=DEFAULT_TIMEOUT)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
