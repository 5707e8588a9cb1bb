"""The CLI suites run twice: on a lake's path, and on the same lake behind a real server.

A test's lake fixture asks for ``mode`` (``local`` or ``served``, a parameter of
tests/cli/conftest.py) and wraps its lake in :func:`located`: in ``served`` mode it
starts ``limno --lake PATH serve --port 0`` as a subprocess
(tests/server_support.py), puts the client's credentials in the environment and
yields the server's URL, which the test passes to ``--lake`` exactly as it would
the path. Tests that look at the lake's files keep the path (``lake_path``).

A server serves one lake, so each test has its own: the honest setup, at about
0.6 s per test for the server's start (its stop overlaps the next test).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import pytest

from server_support import Served, start_server

__all__ = ["MODES", "SERVED", "local_only", "located", "reap"]

MODES = ("local", "served")
SERVED = "served"
#: how long a server told to stop may take to exit
STOP_TIMEOUT = 60.0


#: servers told to stop whose exit is not yet checked: the next test starts meanwhile
_stopping: list[Served] = []


def reap() -> None:
    """Wait for the servers told to stop; each must have exited with code 0."""
    while _stopping:
        server = _stopping.pop()
        try:
            server.proc.wait(STOP_TIMEOUT)  # stop() would signal one still exiting again
        finally:
            code = server.stop()
        assert code == 0, f"limno serve of {server.lake} exited {code}: {server.lines}"


@contextlib.contextmanager
def located(
    path: str, mode: str, monkeypatch: pytest.MonkeyPatch, *, auth: bool = True
) -> Iterator[str]:
    """What ``--lake`` names for the lake at ``path`` in ``mode``: the path itself,
    or the URL of a ``limno serve`` on it.

    The server checks credentials (an admin key made for the test, in the
    environment) unless ``auth`` is false: ``--no-auth``, for tests of the lake's
    users themselves, which a server with auth would hold one more of. Afterwards
    it gets SIGTERM; its exit (code 0) is awaited when the next server starts or the
    session ends (:func:`reap`), so that its shutdown overlaps the next test."""
    if mode != SERVED:
        yield path
        return
    reap()
    server = start_server(path) if auth else start_server(path, "--no-auth")
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    try:
        yield server.url
    finally:
        server.proc.send_signal(signal.SIGTERM)
        _stopping.append(server)


def local_only(reason: str) -> pytest.MarkDecorator:
    """A test that cannot hold through a server, for ``reason`` (stated where the test
    is, as this decorator's argument): it runs in the local mode only. There is no
    served item at all, so nothing passes by being skipped."""
    assert reason.strip(), "say why the test cannot run through a server"
    return pytest.mark.parametrize("mode", ["local"])
