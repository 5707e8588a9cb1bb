"""The long-lived Spark session CLI commands attach to: a Spark Connect server.

A new JVM costs every ``--engine spark`` command half a minute. ``limno spark
start`` runs PySpark's Spark Connect server (``SparkConnectServer`` through the
PySpark install's ``spark-submit``) once, detached, with the conf a classic limno
session gets (jars, ``s3a`` settings, UTC; :func:`limno.engines.spark.spark_conf`);
later commands reach it over gRPC (``sc://localhost:PORT``) in about a second.

Its state lives in a directory of its own, independent of any lake:
``$LIMNO_SPARK_STATE_DIR``, else ``$XDG_STATE_HOME/limno/spark``, else
``~/.local/state/limno/spark``. There:

* ``connect.json`` -- the running server: pid (and the pid's start time, so a
  reused pid is not mistaken for it), port, URL, master, log;
* ``connect.log`` -- the server JVM's stdout, stderr and log4j output;
* ``session.log`` -- the same for classic sessions limno starts in-process;
* ``log4j2.properties`` -- the logging setup limno hands every JVM it starts.

A server is *up* when its state file names a live process that still accepts
connections on its port; :func:`running` checks exactly that (cheaply: no PySpark
import), and the Spark engine uses the server whenever it is up.

This module is apart from :mod:`limno.engines.spark` so that ``limno spark
status`` and ``stop`` need not import PySpark.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import importlib.util
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from limno.errors import InvalidInputError, LimnoError

__all__ = [
    "DEFAULT_PORT",
    "Server",
    "log4j_options",
    "open_log",
    "read_state",
    "running",
    "session_log",
    "start",
    "state_dir",
    "stop",
]

#: Spark Connect's own default port
DEFAULT_PORT = 15002
#: how long ``start`` waits for a new server to answer (JVM starts are slow on busy hosts)
START_TIMEOUT = 180.0
#: how long ``stop`` waits after SIGTERM before it sends SIGKILL
STOP_TIMEOUT = 30.0
#: a log is moved aside to ``<name>.1`` when it has grown past this at a (re)start
LOG_ROTATE_BYTES = 32 * 2**20

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STATE_FILE = "connect.json"
SERVER_LOG = "connect.log"
SESSION_LOG = "session.log"
LOG4J_FILE = "log4j2.properties"

#: the JVM's logging: warnings and errors (plus the Connect service's start-up) on the
#: JVM's stderr, which limno points at a log file, never at the terminal
LOG4J_PROPERTIES = """\
# written by limno (limno.engines.spark_server); rewritten when limno changes it
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yyyy-MM-dd HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.connect.name = org.apache.spark.sql.connect.service.SparkConnectServer
logger.connect.level = info
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def state_dir() -> Path:
    """Where the server's state and the JVM logs live (see the module docstring)."""
    env = os.environ.get("LIMNO_SPARK_STATE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "limno" / "spark"


def _ensure_dir() -> Path:
    path = state_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise LimnoError(f"cannot create the Spark state directory {path}: {e.strerror}") from e
    return path


def session_log() -> Path:
    """The log file of classic sessions' JVMs."""
    return state_dir() / SESSION_LOG


def log4j_options() -> str | None:
    """JVM options that make a Spark JVM log through limno's log4j2 setup (the file is
    written first when missing or different); None when the state directory cannot
    be written (the JVM then keeps Spark's own logging)."""
    try:
        path = _ensure_dir() / LOG4J_FILE
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != LOG4J_PROPERTIES:
            _write_atomic(path, LOG4J_PROPERTIES)
    except (OSError, LimnoError):
        return None
    return f"-Dlog4j2.configurationFile={shlex.quote(path.as_uri())}"


def open_log(path: Path) -> IO[bytes]:
    """``path`` opened for appending (moved aside to ``.1`` first once it is large)."""
    _ensure_dir()
    with contextlib.suppress(OSError):
        if path.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    try:
        return open(path, "ab")  # noqa: SIM115 -- handed to a child process, closed by the caller
    except OSError as e:
        raise LimnoError(f"cannot open the Spark log {path}: {e.strerror}") from e


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- the state file --------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """A Spark Connect server limno started, as its state file records it."""

    pid: int
    port: int
    url: str
    master: str
    log: str
    started: str
    #: the process's start time (``/proc/<pid>/stat``), None where unknown
    pid_start: str | None = None

    def alive(self) -> bool:
        """Whether the recorded process still runs (and is the one limno started)."""
        return _alive(self.pid, self.pid_start)

    def answers(self, timeout: float = 1.0) -> bool:
        """Whether something accepts connections on the server's port."""
        return _port_answers(self.port, timeout)


def _state_path() -> Path:
    return state_dir() / STATE_FILE


def read_state() -> Server | None:
    """The recorded server (None when there is no state file); whether it is up is
    :func:`running`'s question."""
    path = _state_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise LimnoError(f"cannot read the Spark server state {path}: {e.strerror}") from e
    try:
        doc = json.loads(text)
        return Server(
            pid=int(doc["pid"]),
            port=int(doc["port"]),
            url=str(doc["url"]),
            master=str(doc["master"]),
            log=str(doc["log"]),
            started=str(doc["started"]),
            pid_start=None if doc.get("pid_start") is None else str(doc["pid_start"]),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise LimnoError(
            f"the Spark server state {path} is damaged ({e}); remove it, or run 'limno spark stop'"
        ) from e


def _write_state(server: Server) -> None:
    _write_atomic(_state_path(), json.dumps(asdict(server), indent=2) + "\n")


def _remove_state() -> None:
    with contextlib.suppress(FileNotFoundError):
        _state_path().unlink()


def running() -> Server | None:
    """The server when it is up (state file, live process, port answering), else None.

    Never raises: a missing or damaged state file means no server, and the engine
    then runs a classic session as it would without one.
    """
    server = _recorded()
    if server is None or not server.alive() or not server.answers():
        return None
    return server


# -- processes ---------------------------------------------------------------------------


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (None where absent)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def _pid_start(pid: int) -> str | None:
    fields = _proc_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def _alive(pid: int, start: str | None = None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: not ours (the pid was reused)
    fields = _proc_stat(pid)
    if fields is None:
        return True  # no /proc: the signal check is all there is
    if fields[0] in ("Z", "X"):
        return False  # exited, not yet reaped
    return start is None or len(fields) <= 19 or fields[19] == start


def _port_answers(port: int, timeout: float = 1.0) -> bool:
    with socket.socket() as s:
        s.settimeout(timeout)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def spark_home() -> Path:
    """The PySpark install (its ``bin/spark-submit`` starts the server)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise InvalidInputError("limno spark start needs PySpark: pip install 'limno[spark]'")
    return Path(spec.origin).parent


def _wait(condition: Any, deadline: float, interval: float = 0.2) -> bool:
    """Poll ``condition`` until it holds (True) or the deadline passes (False)."""
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# -- start, stop ---------------------------------------------------------------------------


def server_conf(master: str | None, conf: Mapping[str, str], port: int) -> dict[str, str]:
    """The Spark conf the server starts with: a classic limno session's, then the
    Connect port (bound to loopback unless ``conf`` says otherwise)."""
    from limno.engines.spark._session import spark_conf

    out = {"spark.connect.grpc.binding.address": "127.0.0.1"}
    out.update(spark_conf(master, conf))
    out["spark.connect.grpc.binding.port"] = str(port)
    out.pop("spark.pyspark.driver.python", None)
    return out


#: what a PySpark client process (this one, perhaps) has in its environment that
#: would make the server's spark-submit act as a client: not passed on
_CLIENT_ENV = frozenset(
    {
        "PYSPARK_GATEWAY_PORT",
        "PYSPARK_GATEWAY_SECRET",
        "_PYSPARK_DRIVER_CONN_INFO_PATH",
        "SPARK_CONNECT_MODE",
        "SPARK_CONNECT_MODE_ENABLED",
        "SPARK_LOCAL_REMOTE",
        "SPARK_REMOTE",
        "PYSPARK_SUBMIT_ARGS",
    }
)


def start(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    port: int | None = None,
    timeout: float = START_TIMEOUT,
) -> Server:
    """Start a Spark Connect server, detached, and wait until it answers a query.

    ``port`` 0 picks a free one (default :data:`DEFAULT_PORT`). Fails when a server
    is already up, when the port is taken, or when the server does not answer
    within ``timeout`` seconds (it is then stopped, and the log says why).
    """
    up = running()
    if up is not None:
        raise LimnoError(
            f"a Spark Connect server is already up at {up.url} (pid {up.pid});"
            " run 'limno spark stop' first"
        )
    recorded = _recorded()
    if recorded is not None and recorded.alive():
        raise LimnoError(
            f"a Spark Connect server (pid {recorded.pid}) is recorded but does not answer on"
            f" port {recorded.port} (still starting?); run 'limno spark stop' first"
        )
    _remove_state()  # a server that exited: its state is stale
    port = DEFAULT_PORT if port is None else port
    if port == 0:
        port = _free_port()
    elif not 0 < port < 65536:
        raise InvalidInputError(f"port must be between 1 and 65535, not {port}")
    elif not _port_free(port):
        raise LimnoError(f"port {port} is in use: pick another with --port")
    settings = server_conf(master, conf or {}, port)
    home = spark_home()
    command = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS]
    command += ["--master", settings.pop("spark.master")]
    for k, v in settings.items():
        command += ["--conf", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items() if k not in _CLIENT_ENV}
    # Python tasks of the server run this interpreter, with limno importable
    env.update(SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable)
    log_path = state_dir() / SERVER_LOG
    with open_log(log_path) as log:
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        log.write(f"== limno spark start {stamp}: {shlex.join(command)}\n".encode())
        log.flush()
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            raise LimnoError(f"cannot run {command[0]}: {e.strerror}") from e
    server = Server(
        pid=proc.pid,
        port=port,
        url=f"sc://localhost:{port}",
        master=command[4],
        log=str(log_path),
        started=stamp,
        pid_start=_pid_start(proc.pid),
    )
    # recorded before the wait: were this command killed, 'stop' still finds the server
    _write_state(server)
    try:
        _wait_ready(server, proc, timeout)
    except BaseException:
        _terminate(proc.pid, server.pid_start, STOP_TIMEOUT, proc)
        _remove_state()
        raise
    return server


def _recorded() -> Server | None:
    """The recorded server, None also when the state file is damaged."""
    try:
        return read_state()
    except LimnoError:
        return None


def _wait_ready(server: Server, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until the server accepts connections and runs a trivial query; then warm
    it up."""
    deadline = time.monotonic() + timeout

    def exited() -> bool:
        return proc.poll() is not None

    def listening() -> bool:
        return exited() or server.answers(timeout=0.5)

    if not _wait(listening, deadline) or exited():
        _not_ready(server, proc, timeout)
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    probe = RemoteSession(connection=server.url)
    try:
        while True:
            try:
                probe.sql("SELECT 1").collect()
                break
            except Exception:
                if exited() or time.monotonic() >= deadline:
                    _not_ready(server, proc, timeout)
                time.sleep(0.5)
        _warm_up(probe)
    finally:
        probe.stop()


def _warm_up(spark: Any) -> None:
    """Run what a small ``query`` runs (a Parquet scan, SQL over a view, an aggregate,
    Arrow results) once, so that the first real query does not pay for loading and
    compiling those code paths in the fresh JVM (best effort: a failure here is not
    the server's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="limno-warm-up-") as tmp:
        path = Path(tmp) / "warm-up.parquet"
        pq.write_table(pa.table({"k": list(range(64)), "v": [str(i % 4) for i in range(64)]}), path)
        with contextlib.suppress(Exception):
            spark.read.parquet(path.as_uri()).createOrReplaceTempView("limno_warm_up")
            spark.sql("SELECT v, count(*), max(k) FROM limno_warm_up GROUP BY v").toArrow()


def _not_ready(server: Server, proc: subprocess.Popen[bytes], timeout: float) -> None:
    code = proc.poll()
    if code is not None:
        raise LimnoError(
            f"the Spark Connect server exited with code {code} before it was ready;"
            f" see {server.log}"
        )
    raise LimnoError(
        f"the Spark Connect server did not answer within {timeout:g}s; see {server.log}"
    )


def stop(timeout: float = STOP_TIMEOUT) -> Server | None:
    """Stop the recorded server (SIGTERM, then SIGKILL after ``timeout`` seconds) and
    remove its state; the server that was stopped, or None when none was recorded."""
    try:
        server = read_state()
    except LimnoError:
        _remove_state()  # a damaged state file names nothing that could be stopped
        return None
    if server is None:
        return None
    _terminate(server.pid, server.pid_start, timeout)
    _remove_state()
    return server


def _terminate(
    pid: int,
    start: str | None,
    timeout: float,
    proc: subprocess.Popen[bytes] | None = None,
) -> None:
    """End the process group of ``pid`` (the JVM and its Python workers): SIGTERM,
    a bounded wait, then SIGKILL and another bounded wait."""

    def gone() -> bool:
        if proc is not None:
            return proc.poll() is not None
        return not _alive(pid, start)

    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, STOP_TIMEOUT)):
        if gone():
            return
        _signal_group(pid, sig)
        if _wait(gone, time.monotonic() + wait):
            return
    raise LimnoError(f"the Spark Connect server (pid {pid}) did not exit after SIGKILL")


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the server's process group (it leads its own session), else the pid."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
