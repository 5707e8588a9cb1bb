"""``branch.protected`` / ``branch.unprotected`` through a real ``limno serve``: in its
event stream (``GET /v1/events``, read by the remote lake's client) when another
process protects a branch next to the lake, and ``limno watch`` on the server's URL
printing what it prints on the lake's path. Every wait is bounded."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from limno import Event, Lake
from limno.api.remote import RemoteLake
from server_support import Served, start_server

#: every wait of these tests is bounded by this (seconds)
BOUND = 30.0


def limno(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "limno", *args],
        capture_output=True,
        text=True,
        timeout=BOUND * 2,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture(scope="module")
def lake_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    lake = str(tmp_path_factory.mktemp("protect-events") / "lake")
    Lake.init(lake).create_pool("logs", key="ts").branch("dev")
    return lake


@pytest.fixture(scope="module")
def server(lake_dir: str) -> Iterator[Served]:
    proc = start_server(lake_dir, "--events-heartbeat", "0.2")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.lines


def test_the_stream_tells_a_protect_made_by_another_process(
    server: Served, lake_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    # resumed after the last event so far: the stream tells what comes next, whenever
    # the server starts reading it
    *_, last = Lake.open(lake_dir).events(None, None, follow=False)
    stop = threading.Event()
    box: queue.Queue[Event] = queue.Queue()
    with RemoteLake.open(server.url) as remote:
        events = remote.events("logs", last.id, stop=stop, poll_interval=0.05)

        def follow() -> None:
            for event in events:
                box.put(event)

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        try:
            for command in ("protect", "unprotect"):
                done = limno("--lake", lake_dir, "branch", command, "-p", "logs", "dev")
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


def test_watch_prints_the_same_remote_as_local(server: Served, lake_dir: str) -> None:
    made = limno("--lake", server.url, "branch", "protect", "-p", "logs", "main", env=server.env)
    assert made.returncode == 0, made.stderr  # through the server (an admin's)
    n = len(list(Lake.open(lake_dir).events(None, None, follow=False)))
    args = ("watch", "--from-start", "--exit-after", str(n), "-f", "ndjson")
    local = limno("--lake", lake_dir, *args)
    remote = limno("--lake", server.url, *args, env=server.env)
    assert (remote.returncode, remote.stderr) == (0, ""), remote.stderr
    assert remote.stdout == local.stdout
    assert '"type": "branch.protected"' in local.stdout
    table = ("watch", "--from-start", "--exit-after", str(n), "-f", "table", "logs")
    lines = limno("--lake", server.url, *table, env=server.env).stdout.splitlines()
    assert lines == limno("--lake", lake_dir, *table).stdout.splitlines()
    assert any(
        "branch.protected" in line and "main: only merges may move it" in line for line in lines
    )
