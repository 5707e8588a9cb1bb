"""``GET /v1/events`` on a real ``limno serve``: server-sent events read from the lake's
journals, so changes made by other processes next to the lake appear too."""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path

import httpx
import pytest

from events_support import BOUND, Stream, connect, limno, watching
from limno import Lake
from limno.api.local import LocalLake
from limno.api.local_auth import LocalAuth
from limno.pools.events import Event
from server_support import Served, served_user, start_server


def _load_by_cli(lake: str, pool: str, tmp_path: Path, message: str, n: int = 3) -> None:
    data = tmp_path / f"{pool}-{message}.ndjson"
    data.write_text("".join(f'{{"ts": {i}, "v": "x{i}"}}\n' for i in range(n)))
    done = limno("--lake", lake, "load", "-p", pool, "-m", message, str(data))
    assert done.returncode == 0, done.stderr


def test_commit_by_another_process_appears(
    events_server: Served, events_lake: str, tmp_path: Path
) -> None:
    with connect(events_server) as client:
        stream = Stream(client, {})
        try:
            assert stream.response.headers["content-type"].startswith("text/event-stream")
            first = stream.next()  # the starting point: an id alone
            assert first is not None and first.id and first.event is None
            _load_by_cli(events_lake, "logs", tmp_path, "by the cli")
            commit, moved = stream.events(2)
        finally:
            stream.close()
    assert commit.event == "commit" and commit.data is not None
    assert commit.id == commit.data["id"]
    assert commit.data["pool"] == "logs"
    assert commit.data["data"]["branch"] == "main"
    assert commit.data["data"]["message"] == "by the cli"
    assert commit.data["data"]["rows"] == {"added": 3, "deleted": 0}
    assert commit.data["data"]["author"]
    assert moved.event == "branch.moved" and moved.data is not None
    assert moved.data["data"]["new"] == commit.data["data"]["commit"]
    assert moved.data["data"]["old"] == commit.data["data"]["parents"][0]


def test_pool_filter_and_heartbeat(events_server: Served, events_lake: str, tmp_path: Path) -> None:
    with connect(events_server) as client:
        stream = Stream(client, {"pool": "other", "heartbeat": "0.2"})
        try:
            comments = 0
            while comments < 2:  # idle: keep-alive comments come
                m = stream.next()
                assert m is not None
                comments += m.comment
            _load_by_cli(events_lake, "logs", tmp_path, "not watched")
            _load_by_cli(events_lake, "other", tmp_path, "watched")
            (commit,) = stream.events(1)
        finally:
            stream.close()
    assert commit.data is not None
    assert (commit.data["pool"], commit.data["data"]["message"]) == ("other", "watched")


def test_resume_gives_exactly_the_rest(
    events_server: Served, events_lake: str, tmp_path: Path
) -> None:
    _load_by_cli(events_lake, "logs", tmp_path, "one")
    _load_by_cli(events_lake, "other", tmp_path, "two")
    with connect(events_server) as client:
        everything = Stream(client, {"from_start": "1", "follow": "0"})
        try:
            told = []
            while (m := everything.next()) is not None:
                if m.event is not None:
                    told.append(m)
        finally:
            everything.close()
        assert told[-1].event == "end"
        events = [m for m in told if m.event != "end"]
        assert len(events) >= 6
        half = len(events) // 2
        start = events[half].id
        assert start is not None
        # a browser's EventSource reconnects to the same URL (from_start=1 too) with the
        # header: the header wins
        tries: list[tuple[dict[str, str], dict[str, str]]] = [
            ({"from_start": "1"}, {"Last-Event-ID": start}),
            ({"after": start}, {}),
        ]
        for params, headers in tries:
            rest = Stream(client, {"follow": "0", **params}, headers=headers)
            try:
                again = rest.events(len(events) - half)  # the rest, then the end
            finally:
                rest.close()
            assert [m.id for m in again[:-1]] == [m.id for m in events[half + 1 :]]
            assert [m.data for m in again[:-1]] == [m.data for m in events[half + 1 :]]
            assert again[-1].event == "end"
        bad = client.get("/v1/events", params={"after": "not-an-id"})
        assert bad.status_code == 400 and "invalid event id" in bad.json()["detail"]


def test_watch_prints_the_same_remote_as_local(events_server: Served, events_lake: str) -> None:
    n = len(list(Lake.open(events_lake).events(None, None, follow=False)))
    args = ("watch", "--from-start", "--exit-after", str(n), "-f", "ndjson")
    local = limno("--lake", events_lake, *args)
    remote = limno("--lake", events_server.url, *args, env=events_server.env)
    assert (remote.returncode, remote.stderr) == (0, ""), remote.stderr
    assert remote.stdout == local.stdout
    assert len(remote.stdout.splitlines()) == n
    quiet = limno("--lake", events_server.url, "watch", "--timeout", "1s", env=events_server.env)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")  # stop is noticed
    table = ("watch", "--from-start", "--exit-after", "2", "logs")
    assert limno("--lake", events_server.url, *table, env=events_server.env).stdout == (
        limno("--lake", events_lake, *table).stdout
    )


def test_readers_see_only_pools_they_may_read(events_server: Served, events_lake: str) -> None:
    env = served_user(events_server, "ann", "analyst")
    assert events_server.secret is not None
    LocalAuth(LocalLake.open(events_lake), server_secret=events_server.secret).grant(
        "ann", "other", "none"
    )
    with connect(events_server, env) as client:
        stream = Stream(client, {"from_start": "1", "follow": "0"})
        try:
            seen = set()
            while (m := stream.next()) is not None:
                if m.data is not None and m.event != "end":
                    seen.add(m.data["pool"])
        finally:
            stream.close()
        assert seen == {"logs"}
        assert client.get("/v1/events", params={"pool": "other"}).status_code == 403
    with httpx.Client(base_url=events_server.url, timeout=BOUND) as anonymous:
        assert anonymous.get("/v1/events").status_code == 401


def test_sigterm_ends_open_streams_and_exits_0(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    served = start_server(lake)  # the default heartbeat (15 s): streams must be ended
    try:
        with connect(served) as client:
            streams = [Stream(client, {}), Stream(client, {"from_start": "1"})]
            try:
                for stream in streams:
                    assert stream.next() is not None  # open, and started
                # under the server's graceful wait for requests (30 s): streams did end
                code = served.stop(timeout=20)
                for stream in streams:
                    while (m := stream.next()) is not None:  # ends cleanly, not cut
                        assert m.event != "error"
            finally:
                for stream in streams:
                    stream.close()
    finally:
        served.stop()
    assert code == 0, served.lines


def test_client_resumes_across_a_server_restart(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    LocalLake.open(lake).create_pool("logs", key="ts")
    first = start_server(lake)
    port = first.url.rsplit(":", 1)[1]
    stop = threading.Event()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in first.env.items():  # the client's credentials come from the environment
            mp.setenv(k, v)
        thread, got = watching(first.url, stop, 0.1, "logs", after=None)
        try:  # from the start: nothing made before the stream opened is missed
            assert [_take(got).type for _ in range(2)] == ["pool.created", "branch.created"]
            _load_by_cli(lake, "logs", tmp_path, "before")
            assert [_take(got).type for _ in range(2)] == ["commit", "branch.moved"]
            assert first.stop() == 0
            _load_by_cli(lake, "logs", tmp_path, "while down")
            second = start_server(lake, "--port", port)
            try:
                told = [_take(got) for _ in range(2)]
                assert [e.type for e in told] == ["commit", "branch.moved"]
                assert told[0].data["message"] == "while down"  # not lost, not told twice
            finally:
                stop.set()
                code = second.stop()
            thread.join(BOUND)
        finally:
            stop.set()
    assert not thread.is_alive() and code == 0


def test_stop_cuts_a_followed_stream_between_keep_alives(
    events_server: Served, events_lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``stop`` ends a read blocked between two lines at once (Ctrl-C of ``limno
    watch``), not at the server's next keep-alive, 15 s away for a 10 s poll."""
    for k, v in events_server.env.items():
        monkeypatch.setenv(k, v)
    told = len(list(Lake.open(events_lake).events("logs", None, follow=False)))
    stop = threading.Event()
    thread, got = watching(events_server.url, stop, 10, "logs", after=None)
    try:  # the pool's events so far: then the reader waits on the stream for more
        assert len([_take(got) for _ in range(told)]) == told
    finally:
        stop.set()
    thread.join(10)  # the next keep-alive is 15 s after the last event
    assert not thread.is_alive()
    assert got.empty()  # ended quietly: no error, nothing more told


def _take(got: queue.Queue[Event | BaseException]) -> Event:
    item = got.get(timeout=BOUND)
    if isinstance(item, BaseException):
        raise item
    return item


def test_short_path_serves_the_same_stream(events_server: Served) -> None:
    """``/events`` (SPEC.md, ``curl -N HOST/events``) is ``/v1/events``: same events, same auth."""
    with connect(events_server) as client:
        long = Stream(client, {"from_start": "1", "follow": "0"})
        try:
            want = [m.data for m in iter(long.next, None) if m.event is not None]
        finally:
            long.close()
        with client.stream("GET", "/events", params={"from_start": "1", "follow": "0"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            got = [
                json.loads(line.removeprefix("data: "))
                for line in r.iter_lines()
                if line.startswith("data: ")
            ]
    assert want and got[: len(want)] == want
    with httpx.Client(base_url=events_server.url, timeout=BOUND) as anonymous:
        assert anonymous.get("/events").status_code == 401
