"""Graceful shutdown of ``limno serve``: on SIGTERM a load in flight finishes and
commits, or, if its client stops sending, commits nothing; the process exits 0."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from limno import Lake
from limno.api.local import LocalLake
from server_support import Served, start_server

#: every wait of these tests is bounded by this (seconds)
BOUND = 30.0
ROWS = b"".join(b'{"ts": %d, "v": "row %d"}\n' % (i, i) for i in range(1000))


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    """A server whose uploads spool under a directory the test watches."""
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    LocalLake.open(lake).create_pool("logs", key="ts")
    spool = tmp_path / "spool"
    spool.mkdir()
    served = start_server(lake, "--body-timeout", "2", env={"TMPDIR": str(spool)})
    try:
        yield served, spool
    finally:
        served.stop()


def _wait_for(condition: threading.Event | Path, what: str) -> None:
    """Wait (bounded) until ``condition`` is set, or the directory holds an upload."""
    ticks = threading.Event()
    for _ in range(int(BOUND / 0.02)):
        if isinstance(condition, threading.Event):
            if condition.wait(0.02):
                return
        elif any(p.name.startswith("limno-upload-") for p in condition.iterdir()):
            return
        else:
            ticks.wait(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class _SlowUpload:
    """A load whose body is sent in two halves, the second only once released."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.release = threading.Event()
        self.sent_first = threading.Event()
        self.answer: httpx.Response | BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _body(self) -> Iterator[bytes]:
        half = len(ROWS) // 2
        yield ROWS[:half]
        self.sent_first.set()
        _wait_for(self.release, "the test to release the upload")
        yield ROWS[half:]

    def _run(self) -> None:
        try:
            with httpx.Client(
                base_url=self.served.url, auth=self.served.auth, timeout=BOUND
            ) as client:
                self.answer = client.post(
                    "/v1/pools/logs/load",
                    params={"name": "slow.ndjson", "message": "slow load"},
                    content=self._body(),
                )
        except BaseException as e:
            self.answer = e


def _log(served: Served) -> list[str]:
    return [c.message for c in LocalLake.open(served.lake).pool("logs").log()]


def test_sigterm_lets_a_load_in_flight_finish(slow_server: tuple[Served, Path]) -> None:
    served, spool = slow_server
    upload = _SlowUpload(served)
    upload.thread.start()
    _wait_for(upload.sent_first, "the first half to be sent")
    _wait_for(spool, "the server to start spooling the upload")
    served.proc.send_signal(signal.SIGTERM)
    upload.release.set()
    upload.thread.join(BOUND)
    assert isinstance(upload.answer, httpx.Response), upload.answer
    assert upload.answer.status_code == 200, upload.answer.text
    assert upload.answer.json()["message"] == "slow load"
    assert served.proc.wait(BOUND) == 0, served.lines
    assert _log(served)[0] == "slow load"
    assert LocalLake.open(served.lake).pool("logs").scan().num_rows == 1000


def test_sigterm_with_a_stalled_load_commits_nothing(slow_server: tuple[Served, Path]) -> None:
    served, spool = slow_server
    before = _log(served)
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    head = (
        "POST /v1/pools/logs/load?name=s.ndjson&message=cut HTTP/1.1\r\n"
        f"Host: {host}\r\n{served.authorization}Content-Length: {len(ROWS)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=BOUND) as sock:
        sock.sendall(head.encode() + ROWS[: len(ROWS) // 2])  # then the client stalls
        _wait_for(spool, "the server to start spooling the upload")
        served.proc.send_signal(signal.SIGTERM)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"408", answer
    assert served.proc.wait(BOUND) == 0, served.lines
    assert _log(served) == before
    assert not any(spool.iterdir())  # the spooled half is gone too
