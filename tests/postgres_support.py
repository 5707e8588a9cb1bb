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

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from service_support import Service, free_port, on_free_port, spawn, started

__all__ = ["Postgres", "postgres", "start_postgres"]

#: how long a fresh server may take to accept a connection (2 busy cores)
READY_TIMEOUT = 120.0
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
class Postgres(Service):
    """A running server: its port, process and files (log, stop: :class:`Service`)."""

    name = "postgres"
    log_name = "postgres.log"
    #: a fast shutdown: sessions ended, no wait for clients
    stop_signal = signal.SIGINT

    port: int
    proc: subprocess.Popen[bytes]
    directory: Path
    user: str = "postgres"
    dbname: str = "postgres"

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
    log_path = directory / Postgres.log_name
    with open(log_path, "wb") as log:
        _own(log_path)
        initdb = [
            str(programs / "initdb"),
            *("-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"),
            *("--locale=C", "--no-sync"),
        ]
        done = subprocess.run(initdb, stdout=log, stderr=log, **_as_service_user())
    if done.returncode:
        raise RuntimeError(f"initdb failed:\n{log_path.read_text()}")
    return on_free_port(
        lambda: _start(programs, directory, free_port()), log_path, "could not bind"
    )


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
    command = [str(programs / "postgres"), "-D", str(directory / "data"), *options]
    # appended to initdb's output; a session of its own: Ctrl-C of `make cdc-demo`
    # reaches it through stop() only
    proc = spawn(command, directory / Postgres.log_name, append=True, **_as_service_user())
    server = Postgres(port, proc, directory)
    # ready once a connection succeeds (OperationalError: not accepting them yet)
    return started(
        server,
        lambda: _connects(server),
        timeout=READY_TIMEOUT,
        what=f"postgres on port {port}",
        errors=(psycopg.OperationalError,),
    )


def _connects(server: Postgres) -> bool:
    with psycopg.connect(server.dsn, connect_timeout=2):
        return True


@contextmanager
def postgres() -> Iterator[Postgres]:
    """A server for the block, in a fresh temporary directory, stopped and removed after."""
    with tempfile.TemporaryDirectory(prefix="limno-postgres-") as tmp:
        os.chmod(tmp, 0o755)  # the service user passes through it to its own directory
        running = start_postgres(Path(tmp) / "pg")
        try:
            yield running
        finally:
            running.stop()
