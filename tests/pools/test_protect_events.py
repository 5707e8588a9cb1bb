"""Protecting and unprotecting a branch are events of the lake's feed
(limno.pools.events): ``branch.protected`` and ``branch.unprotected``, with the pool and
the branch, read from the branch journal like every ref event, so resuming and
following hold for them as for the others. Through a server:
tests/server/test_protect_events_sse.py."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa

from limno import Event, Lake
from limno.pools.events import NOW

#: the bound of every wait for a followed event, and of a child process (seconds)
WAIT = 60.0


def history(lake: Lake, after: str | None = None, pool: str | None = None) -> list[Event]:
    return list(lake.events(pool, after, follow=False))


def told(events: list[Event]) -> list[tuple[str, str | None, str | None]]:
    """(type, pool, branch) of the protection events among ``events``."""
    return [(e.type, e.pool, e.data.get("branch")) for e in events if e.type.endswith("protected")]


def test_protect_and_unprotect_are_told_once_each(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("logs", key="ts")
    other = lake.create_pool("other", key="ts")
    pool.branch("dev")
    assert pool.protect("main") and not pool.protect("main")  # the second changes nothing
    pool.load([pa.table({"ts": [1]})], branch="dev")
    pool.merge("dev", "main")
    assert pool.unprotect("main") and not pool.unprotect("main")
    other.protect("main")
    pool.protect("dev")
    events = history(lake)
    # each pool's events in order (pools are read one after another: see the README)
    assert [t for t in told(events) if t[1] == "logs"] == [
        ("branch.protected", "logs", "main"),
        ("branch.unprotected", "logs", "main"),
        ("branch.protected", "logs", "dev"),
    ]
    assert [t for t in told(events) if t[1] == "other"] == [("branch.protected", "other", "main")]
    first = next(e for e in events if e.type == "branch.protected" and e.pool == "logs")
    assert first.pool_id == pool.id and set(first.data) == {"branch", "since"}
    assert first.summary() == "main: only merges may move it"
    gone = next(e for e in events if e.type == "branch.unprotected")
    assert gone.data == {"branch": "main"} and gone.summary() == "main: protection lifted"
    # the merge into the protected branch is told as before, between the two
    kinds = [e.type for e in events if e.pool == "logs"]
    protected, lifted = kinds.index("branch.protected"), kinds.index("branch.unprotected")
    assert "branch.moved" in kinds[protected:lifted]
    assert told(history(lake, pool="other")) == [("branch.protected", "other", "main")]
    # resuming after any event tells exactly the rest, protection events included
    for i, event in enumerate(events):
        assert [e.id for e in history(lake, event.id)] == [e.id for e in events[i + 1 :]]
    assert Event.from_json(first.to_json()) == first


def test_a_protect_by_another_process_shows_up_in_a_follow(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("logs", key="ts")
    stop = threading.Event()
    events = lake.events("logs", NOW, stop=stop, poll_interval=0.02)
    box: queue.Queue[Event] = queue.Queue()

    def follow() -> None:
        for event in events:
            box.put(event)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        for command in ("protect", "unprotect"):
            proc = subprocess.run(
                [sys.executable, "-m", "limno", "--lake", lake.uri, "branch", command,
                 "-p", "logs", "main"],
                capture_output=True,
                text=True,
                timeout=WAIT,
                check=False,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr
        got = [box.get(timeout=WAIT) for _ in range(2)]
    finally:
        stop.set()
        thread.join(WAIT)
    assert told(got) == [
        ("branch.protected", "logs", "main"),
        ("branch.unprotected", "logs", "main"),
    ]
    assert not thread.is_alive()
