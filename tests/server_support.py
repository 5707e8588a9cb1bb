"""Servers for tests: a real ``limno serve`` process, or one in a thread of the test.

:func:`start_server` runs ``python -m limno --lake LAKE serve --port 0`` and waits
(bounded) for its ready line, which states the port; :meth:`Served.stop` sends
SIGTERM and returns the exit code. :func:`served` is the cheap kind for suites that
run every CLI test against a server too: the API in a thread of the test process,
up in milliseconds, stopped when the block ends.

Auth: :func:`start_server` serves with auth (unless ``--no-auth`` is among its
arguments): before the server starts it makes, in this process, an admin named
like the user running the tests (so that commit authors match a lake opened
directly) with a fresh key, and gives the server :data:`AUTH_SECRET` as
``LIMNO_AUTH_SECRET``; ``Served.env`` (= ``Served.admin_env``) is the environment a
client needs. :func:`served_user` adds another user. The in-thread :func:`served`
runs without auth (``--no-auth``'s behaviour): for suites that compare a lake's
path with a server on it, whatever the caller's credentials.

Workers: :func:`start_server` runs one server process (``--workers 1``) unless its
arguments say otherwise (``workers=None``: no ``--workers``, the default). The
default (one per core) changes only how many requests run at once, not what any
answers; the suites that start a server per test would pay a second interpreter's
start each time. Tests of several workers, and of the default, ask for them
(tests/server/test_fast_paths.py).
"""

from __future__ import annotations

import base64
import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

from limno.api.local import LocalLake
from limno.api.local_auth import LocalAuth
from limno.auth.model import NewKey, validate_user_name
from limno.core.versioning import default_author
from limno.errors import InvalidInputError, NotFoundError
from limno.server.run import serving

__all__ = ["AUTH_SECRET", "Served", "key_env", "served", "served_user", "start_server"]

#: the server secret of test servers (key secrets of their lakes are sealed with it)
AUTH_SECRET = "limno-tests-server-secret-0123456789"

_READY = re.compile(r"^limno serve: listening on (https?://\S+) \(lake (.+?)(?:, \d+ workers)?\)$")
#: the S3 gateway's ready line (``--s3-port``), said just before the API's
_S3_READY = re.compile(r"^limno serve: S3 gateway on (https?://\S+)$")


@dataclass
class Served:
    """A ``limno serve`` process and what it printed on stderr."""

    url: str
    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None
    #: the lake served, and the server secret (None: --no-auth)
    lake: str = ""
    secret: str | None = None
    #: what a client needs in its environment (the admin's key; empty: --no-auth)
    env: dict[str, str] = field(default_factory=dict)
    #: the S3 gateway's URL ('' without --s3-port)
    s3_url: str = ""

    @property
    def admin_env(self) -> dict[str, str]:
        return self.env

    @property
    def auth(self) -> httpx.BasicAuth | None:
        """The admin's key for httpx (None: --no-auth)."""
        if not self.env:
            return None
        return httpx.BasicAuth(self.env["LIMNO_ACCESS_KEY_ID"], self.env["LIMNO_SECRET_ACCESS_KEY"])

    def commits(self, pool: str = "logs", timeout: float = 300) -> int:
        """How many commits ``pool``'s main has, asked through the server."""
        r = httpx.get(f"{self.url}/v1/pools/{pool}/log", auth=self.auth, timeout=timeout)
        assert r.status_code == 200, r.text
        return len(r.json())

    @property
    def authorization(self) -> str:
        """The admin's ``Authorization`` header line with its CRLF ('' : --no-auth), for
        tests that write requests on a socket."""
        if not self.env:
            return ""
        pair = f"{self.env['LIMNO_ACCESS_KEY_ID']}:{self.env['LIMNO_SECRET_ACCESS_KEY']}"
        return f"Authorization: Basic {base64.b64encode(pair.encode()).decode()}\r\n"

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then the exit code (the process is gone afterwards)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout)
            if self._reader is not None:
                self._reader.join(timeout)
            assert self.proc.stderr is not None
            self.proc.stderr.close()
        return code


def start_server(
    lake: str,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    workers: int | None = 1,
) -> Served:
    """Start ``limno --lake LAKE serve --port 0 ARGS...``; return once it listens.

    With auth (no ``--no-auth`` in ``args``): an admin key made first (``.env``); the
    server's ``LIMNO_AUTH_SECRET`` is ``env``'s, else :data:`AUTH_SECRET`."""
    server_env = {**os.environ, **(env or {})}
    secret: str | None = None
    client: dict[str, str] = {}
    if "--no-auth" not in args:
        secret = (env or {}).get("LIMNO_AUTH_SECRET") or AUTH_SECRET
        server_env["LIMNO_AUTH_SECRET"] = secret
        client = key_env(_admin_key(lake, secret))
    if workers is not None and not any(a.startswith("--workers") for a in args):
        args = (*args, "--workers", str(workers))  # see the module's docstring
    proc = subprocess.Popen(
        [sys.executable, "-m", "limno", "--lake", lake, "serve", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line.rstrip("\n"))
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    served = Served("", proc, seen, reader, lake, secret, client)
    try:
        while True:
            line = lines.get(timeout=timeout)
            if line is None:
                raise AssertionError(f"limno serve exited ({proc.wait(timeout)}): {seen}")
            if m := _S3_READY.match(line):
                served.s3_url = m.group(1)
            if m := _READY.match(line):
                served.url = m.group(1)
                return served
    except BaseException:
        served.stop()
        raise


def key_env(key: NewKey) -> dict[str, str]:
    """The environment of a client using ``key``."""
    return {
        "LIMNO_ACCESS_KEY_ID": key.access_key_id,
        "LIMNO_SECRET_ACCESS_KEY": key.secret_access_key,
    }


def _auth(lake: str, secret: str) -> LocalAuth:
    return LocalAuth(LocalLake.open(lake), server_secret=secret)


def _admin_key(lake: str, secret: str) -> NewKey:
    """A new key of the test admin (made with the user on a lake's first server)."""
    auth = _auth(lake, secret)
    name = default_author()
    try:
        validate_user_name(name)
    except InvalidInputError:
        name = "admin"
    try:
        user = auth.user(name)
    except NotFoundError:
        _, key = auth.create_user(name, "admin")
        assert key is not None
        return key
    assert user.role == "admin", f"user {name} of {lake} is not an admin"
    return auth.create_key(name)


def served_user(served: Served, name: str, role: str) -> dict[str, str]:
    """A new user ``name`` with role ``role`` (admin, developer, analyst) of the lake
    ``served`` serves, made through the lake; the environment of a client using it."""
    assert served.secret is not None, "a --no-auth server has no users"
    _, key = _auth(served.lake, served.secret).create_user(name, role)
    assert key is not None
    return key_env(key)


@contextlib.contextmanager
def served(lake: str) -> Iterator[str]:
    """The URL of the lake at ``lake`` served from a thread while the block runs."""
    with serving(lake) as url:
        yield url
