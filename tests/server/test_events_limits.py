"""The limits of ``GET /v1/events`` on a real ``limno serve``: an open stream goes on
only while its caller may read (keys deleted, users deleted and grants taken away
end or filter it), and a server holds at most ``--max-event-streams`` streams (one
more gets 503 with ``Retry-After``; ``limno watch`` waits and gets in).

Every wait is bounded: reads by the client's timeout (the servers send keep-alives
every 0.2 s), conditions by :data:`BOUND`. A change made through the server applies
at a stream's next check (within ``RECHECK_SECONDS``); one made next to the lake,
within the server's key cache too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bounded import read_line, wait_until
from events_support import BOUND, Message, Stream, connect
from limno import Lake
from limno.api.local import LocalLake
from limno.api.local_auth import LocalAuth
from server_support import Served, served_user, start_server


@pytest.fixture
def streams() -> Iterator[list[Stream]]:
    """Streams a test opens, closed after it whatever happened."""
    opened: list[Stream] = []
    try:
        yield opened
    finally:
        for stream in opened:
            stream.close()


def _past(stream: Stream, lake: Lake, branch: str) -> list[Message]:
    """Make ``branch`` in pool other, then read ``stream`` until it has surely passed
    that event (told it or left it out): what it told meanwhile. Three branches of
    logs follow, each made once the one before is told. A feed reads every journal
    once per round, rounds one after another, and tells what it reads as it goes: the
    round telling the first mark may have read other before the branch was made, and
    the next one may tell the second mark before it reads other; the round telling
    the third began after that one ended, so it comes after other's branch was read."""
    lake.pool("other").branch(branch)
    told: list[Message] = []
    for mark in (f"{branch}-mark", f"{branch}-mark-2", f"{branch}-mark-3"):
        lake.pool("logs").branch(mark)
        told += stream.until(_branch(mark))
    return told


def test_a_grant_taken_away_ends_a_stream_of_that_pool(
    events_server: Served, events_lake: str, streams: list[Stream]
) -> None:
    env = served_user(events_server, "ann", "analyst")
    with connect(events_server, env) as ann, connect(events_server) as admin:
        stream = Stream(ann, {"pool": "other"})
        streams.append(stream)
        assert stream.next() is not None  # open: its starting point
        Lake.open(events_lake).pool("other").branch("before")
        assert stream.until(lambda m: m.branch == "before")[-1].event == "branch.created"
        took = admin.put("/v1/auth/users/ann/grants/other", json={"level": "none"})
        assert took.status_code == 200, took.text
        told = stream.rest()  # ended by the server, not by the read timeout
        assert ann.get("/v1/events", params={"pool": "other"}).status_code == 403
    assert told and told[-1].event == "error", told
    error = told[-1].data
    assert error is not None
    assert (error["status"], error["error"]) == (403, "ForbiddenError")
    assert "may no longer read pool" in error["detail"]


def test_a_grant_taken_away_filters_an_open_stream_of_every_pool(
    events_server: Served, events_lake: str, streams: list[Stream]
) -> None:
    env = served_user(events_server, "bea", "analyst")
    lake = Lake.open(events_lake)
    with connect(events_server, env) as bea, connect(events_server) as admin:
        stream = Stream(bea)
        streams.append(stream)
        assert stream.next() is not None
        lake.pool("other").branch("shown")
        assert stream.until(_branch("shown"))[-1].pool == "other"  # readable while granted
        took = admin.put("/v1/auth/users/bea/grants/other", json={"level": "none"})
        assert took.status_code == 200, took.text
        # the stream applies the change at its next check (within seconds): until then
        # other's events may still come; from then on none does, and logs' go on
        for i in range(1, 40):
            told = _past(stream, lake, f"hidden-{i}")
            if all(m.pool != "other" for m in told):
                break
        else:
            pytest.fail("other's events kept coming after its grant was taken away")
        told = _past(stream, lake, "hidden-last")
    assert [m.pool for m in told] == ["logs", "logs", "logs"], told
    assert all(m.event != "error" for m in told)  # filtered, not ended


def test_a_deleted_key_or_user_ends_open_streams(
    events_server: Served, events_lake: str, streams: list[Stream]
) -> None:
    cid = served_user(events_server, "cid", "analyst")
    dee = served_user(events_server, "dee", "developer")
    with (
        connect(events_server, cid) as by_cid,
        connect(events_server, dee) as by_dee,
        connect(events_server) as admin,
    ):
        cids, dees = Stream(by_cid), Stream(by_dee, {"pool": "logs"})
        streams.extend([cids, dees])
        for stream in (cids, dees):
            assert stream.next() is not None
        Lake.open(events_lake).pool("logs").branch("seen-by-both")
        for stream in (cids, dees):
            assert stream.until(lambda m: m.branch == "seen-by-both")
        # the user next to the lake (another process: the server sees it once its few
        # seconds of cache are up), then the key through the server (it forgets at once)
        assert events_server.secret is not None
        LocalAuth(LocalLake.open(events_lake), server_secret=events_server.secret).delete_user(
            "dee"
        )
        ended = [dees.rest()]  # before the server changes anything itself: its cache expires
        Lake.open(events_lake).pool("logs").branch("after-dee")
        assert cids.until(lambda m: m.branch == "after-dee")  # the others' streams go on
        gone = admin.delete(f"/v1/auth/keys/{cid['LIMNO_ACCESS_KEY_ID']}")
        assert gone.status_code == 200, gone.text
        ended.append(cids.rest())
        assert by_cid.get("/v1/events").status_code == 401
    for told in ended:
        assert told and told[-1].event == "error", told
        error = told[-1].data
        assert error is not None
        assert (error["status"], error["error"]) == (401, "UnauthenticatedError")
        assert "no longer authenticates" in error["detail"]


def _open(client: httpx.Client, streams: list[Stream], path: str = "/v1/events") -> httpx.Response:
    """Open a stream: kept in ``streams`` when it is one, else the refusal (read)."""
    stream = Stream(client, path=path)
    if stream.response.status_code != 200:
        stream.response.read()
        stream.close()
        return stream.response
    streams.append(stream)
    assert stream.next() is not None  # its starting point: it is open
    return stream.response


def _branch(name: str) -> Callable[[Message], bool]:
    return lambda m: m.branch == name


@pytest.fixture
def full(tmp_path: Path) -> Iterator[Served]:
    """A server of a fresh lake that holds two event streams at most."""
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("logs", key="ts")
    served = start_server(lake, "--max-event-streams", "2", "--events-heartbeat", "0.2")
    try:
        yield served
    finally:
        assert served.stop() == 0, served.lines


def test_one_stream_over_the_cap_gets_503_until_a_slot_frees(
    full: Served, streams: list[Stream]
) -> None:
    with connect(full) as client:
        assert _open(client, streams).status_code == 200
        assert _open(client, streams).status_code == 200
        for path in ("/v1/events", "/events"):  # the short path counts the same streams
            refused = _open(client, streams, path)
            assert refused.status_code == 503
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.headers["retry-after"] == "2"
            problem = refused.json()
            assert problem["error"] == "StorageError"
            assert "2 event streams at most" in problem["detail"]
        assert len(streams) == 2
        # a client gone frees its slot (once the server sees it go)
        streams.pop(0).close()
        wait_until(lambda: _open(client, streams).status_code == 200, "a free slot", BOUND)
        assert _open(client, streams).status_code == 503  # full again
        # a stream the server ends (follow=0: at the current end) frees its slot too
        streams.pop(0).close()
        wait_until(lambda: _short(client) == ["end"], "a slot for a short stream", BOUND)
        # its slot is let go once the answer is over on the server's side, which may
        # come a moment after the client has read its end
        wait_until(lambda: _open(client, streams).status_code == 200, "its slot", BOUND)
        assert _open(client, streams).status_code == 503
        # requests that are not streams are not counted
        assert client.get("/v1/pools").status_code == 200


def _short(client: httpx.Client) -> list[str]:
    """The events of a ``follow=0`` stream of new events: its end ([] when refused)."""
    with client.stream("GET", "/v1/events", params={"follow": "0"}) as response:
        if response.status_code != 200:
            response.read()
            return []
        return [line.removeprefix("event: ") for line in response.iter_lines() if "event:" in line]


def test_watch_waits_for_a_full_server_and_gets_in(full: Served, streams: list[Stream]) -> None:
    with connect(full) as client:
        assert _open(client, streams).status_code == 200
        assert _open(client, streams).status_code == 200
        watch = subprocess.Popen(
            [sys.executable, "-m", "limno", "--lake", full.url]
            + ["watch", "--from-start", "--exit-after", "1", "-f", "ndjson"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **full.env},
        )
        try:
            assert watch.stderr is not None
            said = read_line(watch.stderr, BOUND)
            assert "has no free event stream (503" in said and full.url in said, said
            streams.pop().close()  # a slot frees: the watch gets in on its next try
            out, err = watch.communicate(timeout=BOUND * 2)
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.communicate()
    assert watch.returncode == 0, err
    assert err == ""  # said once, before the slot freed
    (line,) = out.splitlines()
    assert json.loads(line)["type"] == "pool.created"
