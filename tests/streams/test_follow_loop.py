"""The follow loop's own logic (limno.streams.follow): when it runs its step, when it
waits, when it ends. Stand-in heads and steps (the real commands are tested in
tests/cli/test_etl_follow.py and tests/streams/test_kafka_to_follow.py)."""

from __future__ import annotations

import threading
from collections.abc import Hashable

from limno.streams.follow import follow


class Script:
    """Heads that read from a list, one value per look (its last value repeats), and a
    step that records the heads it ran at and sets ``stop`` after ``runs`` steps."""

    def __init__(self, heads: list[Hashable | None], runs: int) -> None:
        self.values, self.runs = heads, runs
        self.looks = 0
        self.ran_at: list[Hashable | None] = []
        self.stop = threading.Event()

    def heads(self) -> Hashable | None:
        value = self.values[min(self.looks, len(self.values) - 1)]
        self.looks += 1
        return value

    def step(self) -> bool:
        self.ran_at.append(self.values[min(self.looks - 1, len(self.values) - 1)])
        if len(self.ran_at) >= self.runs:
            self.stop.set()
        return True


def test_a_step_per_new_head_none_waits() -> None:
    script = Script([None, None, "a", "a", "a", "b", "b", "c"], runs=3)
    ran = follow(script.heads, script.step, stop=script.stop, interval=0.001)
    assert ran == 3
    assert script.ran_at == ["a", "b", "c"]  # once at the start, then on each change


def test_idle_exit_and_stop() -> None:
    idle = Script(["a"], runs=99)
    assert follow(idle.heads, lambda: False, stop=idle.stop, interval=0.001, exit_after=0.05) == 1
    assert idle.looks > 1  # it looked again while idle, then ended by itself
    stopped = threading.Event()
    stopped.set()
    assert follow(lambda: "a", lambda: True, stop=stopped) == 0  # stopped before a look
