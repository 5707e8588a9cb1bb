"""Pausing a thread at its k-th storage call, for tests that interleave a writer with
vacuum call by call (records: tests/core/test_gc_interleavings.py; files:
tests/pools/files/test_files_vacuum.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WAIT = 60.0  # seconds: a bound on every wait, never reached when all is well


@dataclass
class Pause:
    """Stops the chosen threads before their k-th storage call, until resumed."""

    k: int
    threads: Callable[[str], bool]
    count: int = 0
    paused: threading.Event = field(default_factory=threading.Event)
    resume: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, op: str, path: str) -> None:
        if not self.threads(threading.current_thread().name):
            return
        with self.lock:
            self.count += 1
            hit = self.count == self.k
        if hit:
            self.paused.set()
            assert self.resume.wait(WAIT), "the paused side was never resumed"


class Actor(threading.Thread):
    """Runs a callable in a thread named ``name``, keeping its result or error."""

    def __init__(self, fn: Callable[[], Any], name: str = "actor") -> None:
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.done.set()


def either(a: threading.Event, b: threading.Event) -> bool:
    """Wait (at most :data:`WAIT`) until ``a`` or ``b`` is set; whether one was."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if a.wait(0.01) or b.is_set():
            return True
    return False
