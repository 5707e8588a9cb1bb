"""``branch.protected`` / ``branch.unprotected`` through a real ``limno serve``: in its
event stream (``GET /v1/events``, read by the remote lake's client) when another
process protects a branch next to the lake, and ``limno watch`` on the server's URL
printing what it prints on the lake's path. Every wait is bounded."""

from __future__ import annotations

import queue
import threading

import pytest

from events_support import BOUND, limno
from limno import Event, Lake
from limno.api.remote import RemoteLake
from server_support import Served


def test_the_stream_tells_a_protect_made_by_another_process(
    events_server: Served, events_lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in events_server.env.items():
        monkeypatch.setenv(name, value)
    Lake.open(events_lake).pool("logs").branch("dev")
    # resumed after the last event so far: the stream tells what comes next, whenever
    # the server starts reading it
    *_, last = Lake.open(events_lake).events(None, None, follow=False)
    stop = threading.Event()
    box: queue.Queue[Event] = queue.Queue()
    with RemoteLake.open(events_server.url) as remote:
        events = remote.events("logs", last.id, stop=stop, poll_interval=0.05)

        def follow() -> None:
            for event in events:
                box.put(event)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        try:
            for command in ("protect", "unprotect"):
                done = limno("--lake", events_lake, "branch", command, "-p", "logs", "dev")
                assert done.returncode == 0, done.stderr
            got = [box.get(timeout=BOUND) for _ in range(2)]
        finally:
            stop.set()
            thread.join(BOUND)
    assert not thread.is_alive()
    assert [(e.type, e.pool, e.data.get("branch")) for e in got] == [
        ("branch.protected", "logs", "dev"),
        ("branch.unprotected", "logs", "dev"),
    ]
    assert "since" in got[0].data and got[1].data == {"branch": "dev"}


def test_watch_prints_the_same_remote_as_local(events_server: Served, events_lake: str) -> None:
    url, env = events_server.url, events_server.env
    made = limno("--lake", url, "branch", "protect", "-p", "logs", "main", env=env)
    assert made.returncode == 0, made.stderr  # through the server (an admin's)
    n = len(list(Lake.open(events_lake).events(None, None, follow=False)))
    args = ("watch", "--from-start", "--exit-after", str(n), "-f", "ndjson")
    local = limno("--lake", events_lake, *args)
    remote = limno("--lake", url, *args, env=env)
    assert (remote.returncode, remote.stderr) == (0, ""), remote.stderr
    assert remote.stdout == local.stdout
    assert '"type": "branch.protected"' in local.stdout
    of_logs = len(list(Lake.open(events_lake).events("logs", None, follow=False)))
    table = ("watch", "--from-start", "--exit-after", str(of_logs), "-f", "table", "logs")
    lines = limno("--lake", url, *table, env=env).stdout.splitlines()
    assert lines == limno("--lake", events_lake, *table).stdout.splitlines()
    assert any(
        "branch.protected" in line and "main: only merges may move it" in line for line in lines
    )
