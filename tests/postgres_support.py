"""A real PostgreSQL server (Debian's packages) on loopback, for the CDC chain.

``make cdc-setup`` (``scripts/postgres.sh``) installs the ``postgresql`` package when
it is missing. :func:`start_postgres` runs ``initdb`` in a directory of its own and
starts ``postgres`` there on a free loopback port with ``wal_level=logical`` (what
Debezium's logical decoding needs), trust authentication for loopback (replication
connections included) and durability off (a test's data need not survive a crash of
the machine). PostgreSQL refuses to run as root, so under root both run as the
``postgres`` user the package creates, in a directory it owns. It returns once a
connection succeeds (a bounded wait; a server that exits or never answers fails with
the tail of its log). :meth:`Postgres.stop` asks for a fast shutdown (SIGINT), waits
(bounded), kills if it must and reaps the process.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from kafka_support import _free_port as free_port

__all__ = ["Postgres", "postgres", "start_postgres"]

#: how long a fresh server may take to accept a connection (2 busy cores)
READY_TIMEOUT = 120.0
#: how long a server told to stop may take to exit before it is killed
STOP_TIMEOUT = 60.0
_PORT_TRIES = 3
#: the account that runs the server when this process is root
_SERVICE_USER = "postgres"


def bin_dir() -> Path:
    """The newest installed PostgreSQL's programs (Debian keeps them off PATH)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("postgres")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError("no PostgreSQL server installed: run 'make cdc-setup' (scripts/postgres.sh)")


@dataclass
class Postgres:
    """A running server: its port, process and files."""

    port: int
    proc: subprocess.Popen[bytes]
    directory: Path
    user: str = "postgres"
    dbname: str = "postgres"

    @property
    def log(self) -> Path:
        return self.directory / "postgres.log"

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={self.dbname}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{self.dbname}"

    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        return psycopg.connect(self.dsn, connect_timeout=10, **kwargs)

    def execute(self, sql: str, params: Any = None) -> None:
        """Run one statement (or several, without ``params``) in its own transaction."""
        with self.connect() as conn:
            conn.execute(sql, params)

    def rows(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.connect() as conn:
            return list(conn.execute(sql, params).fetchall())

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> int:
        """A fast shutdown (SIGINT: sessions ended, no wait for clients), a bounded
        wait, SIGKILL if needed; the exit code (reaped)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        return int(self.proc.returncode)


def _as_service_user() -> dict[str, Any]:
    """Popen arguments that run a program as the service user when this is root."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(_SERVICE_USER)
    except KeyError:
        raise RuntimeError(
            f"running as root and there is no '{_SERVICE_USER}' user to run PostgreSQL as"
        ) from None
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _own(path: Path) -> None:
    """Give ``path`` to the service user (under root), so the server may write there."""
    if os.geteuid() == 0:
        entry = pwd.getpwnam(_SERVICE_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def start_postgres(directory: Path) -> Postgres:
    """initdb in ``directory`` (a fresh one: under root the service user must be able
    to reach it) and start a server on a free loopback port; it accepts connections
    when this returns. A port found free may be taken before the server binds it: then
    it is started again on another."""
    programs = bin_dir()
    directory.mkdir(parents=True, exist_ok=True)
    _own(directory)
    data = directory / "data"
    with open(directory / "postgres.log", "wb") as log:
        _own(directory / "postgres.log")
        initdb = [
            str(programs / "initdb"),
            *("-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"),
            *("--locale=C", "--no-sync"),
        ]
        done = subprocess.run(initdb, stdout=log, stderr=log, **_as_service_user())
    if done.returncode:
        raise RuntimeError(f"initdb failed:\n{(directory / 'postgres.log').read_text()}")
    for attempt in range(1, _PORT_TRIES + 1):
        try:
            return _start(programs, directory, free_port())
        except RuntimeError:
            taken = "could not bind" in (directory / "postgres.log").read_text(errors="replace")
            if attempt == _PORT_TRIES or not taken:
                raise
    raise AssertionError("unreachable")


def _start(programs: Path, directory: Path, port: int) -> Postgres:
    settings = {
        "port": str(port),
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": str(directory),
        "wal_level": "logical",
        "max_wal_senders": "10",
        "max_replication_slots": "10",
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "shared_buffers": "32MB",
    }
    options = [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
    with open(directory / "postgres.log", "ab") as log:
        proc = subprocess.Popen(
            [str(programs / "postgres"), "-D", str(directory / "data"), *options],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C of `make cdc-demo` reaches it through stop() only
            **_as_service_user(),
        )
    started = Postgres(port, proc, directory)
    try:
        _wait_ready(started)
    except BaseException:
        started.stop()
        raise
    return started


def _wait_ready(server: Postgres) -> None:
    """Until a connection succeeds, the server exits, or :data:`READY_TIMEOUT`."""
    deadline = time.monotonic() + READY_TIMEOUT
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"postgres exited with code {server.proc.returncode}:\n{server.log_tail()}"
            )
        try:
            with psycopg.connect(server.dsn, connect_timeout=2):
                return
        except psycopg.OperationalError as e:  # not accepting connections yet
            last = e
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.proc.wait(0.1)  # a short wait that ends at once should it exit
    raise RuntimeError(
        f"postgres on port {server.port} did not answer in {READY_TIMEOUT:.0f}s ({last}):\n"
        + server.log_tail()
    )


@contextmanager
def postgres() -> Iterator[Postgres]:
    """A server for the block, in a fresh temporary directory, stopped and removed after."""
    with tempfile.TemporaryDirectory(prefix="limno-postgres-") as tmp:
        os.chmod(tmp, 0o755)  # the service user passes through it to its own directory
        started = start_postgres(Path(tmp) / "pg")
        try:
            yield started
        finally:
            started.stop()
