"""``limno spark start|status|stop`` and ``--engine spark`` through the Spark Connect
server: the real CLI in child processes, a real server (one per module, on a free
port, with its state in a temporary directory), answers compared with the local
engine's, and no JVM output on the commands' stderr."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from limno.api.local import LocalLake as Lake
from limno.engines import spark_server
from limno.engines.local import query as local_query

#: a JVM start on a busy two-core machine: the server's own wait, and the command's
START_TIMEOUT = 240
COMMAND_TIMEOUT = 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Run:
    code: int
    out: str
    err: str


def limno(state: Path, *args: str, lake: Path | None = None, **env: str) -> Run:
    """``limno ARGS...`` in a child process, its server state in ``state`` (bounded)."""
    child = {k: v for k, v in os.environ.items() if not k.startswith(("LIMNO_", "SPARK_"))}
    child["LIMNO_SPARK_STATE_DIR"] = str(state)
    if lake is not None:
        child["LIMNO_LAKE"] = str(lake)
    child.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", "from limno.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=child,
        timeout=COMMAND_TIMEOUT,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def rows(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def classic_started(state: Path) -> bool:
    """Whether a command started a classic session's JVM (limno logs each start)."""
    log = state / "session.log"
    return log.exists() and "== limno: classic Spark session" in log.read_text()


@dataclass
class Server:
    state: Path
    port: int
    lake: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server started by ``limno spark start``; stopped (and killed if it must be)."""
    root = tmp_path_factory.mktemp("connect")
    state, port = root / "state", free_port()
    lake = Lake.init(str(root / "lake"))
    pool = lake.create_pool("pool", key="k")
    pool.load([pa.table({"k": list(range(1000)), "tag": [str(i % 7) for i in range(1000)]})])
    pool.load([pa.table({"k": list(range(500, 1500)), "tag": ["x"] * 1000})])
    try:
        started = limno(
            state,
            "spark",
            "start",
            "--master",
            "local[2]",
            "--port",
            str(port),
            "--timeout",
            str(START_TIMEOUT),
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=4",
        )
        assert started.code == 0, started.err
        assert started.out == f"sc://localhost:{port}\n"
        yield Server(state, port, root / "lake")
    finally:
        _stop(state)


def _stop(state: Path) -> None:
    """Stop the server; kill its process group if ``stop`` did not (bounded)."""
    recorded = (
        json.loads((state / "connect.json").read_text())
        if (state / "connect.json").exists()
        else None
    )
    with contextlib.suppress(subprocess.TimeoutExpired):
        limno(state, "spark", "stop", "--timeout", "30")
    if recorded is not None and spark_server._alive(recorded["pid"], recorded.get("pid_start")):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(recorded["pid"], signal.SIGKILL)


@pytest.mark.spark
@pytest.mark.slow
def test_status_says_up_with_url_and_pid(server: Server) -> None:
    r = limno(server.state, "spark", "status")
    assert r.code == 0 and r.err == ""
    recorded = json.loads((server.state / "connect.json").read_text())
    assert r.out.startswith(f"up sc://localhost:{server.port} (pid {recorded['pid']}, ")
    assert recorded["url"] == f"sc://localhost:{server.port}"
    assert spark_server._alive(recorded["pid"], recorded["pid_start"])


@pytest.mark.spark
@pytest.mark.slow
def test_query_runs_on_the_server_like_the_local_engine(server: Server) -> None:
    sql = (
        "SELECT tag, count(*) AS n, min(k) AS lo, max(k) AS hi FROM pool GROUP BY tag ORDER BY tag"
    )
    r = limno(server.state, "query", "--engine", "spark", sql, lake=server.lake)
    assert r.code == 0, r.err
    assert r.err == ""  # no JVM, log4j or PySpark output on the terminal
    assert rows(r.out) == local_query(Lake.open(str(server.lake)), sql).to_pylist()
    # the statement ran in the server's session: its settings substitute into SQL
    marker = "SELECT '${spark.connect.grpc.binding.port}' AS port, count(*) AS n FROM pool"
    r = limno(server.state, "query", "--engine", "spark", marker, lake=server.lake)
    assert r.code == 0 and r.err == "", r.err
    assert rows(r.out) == [{"port": str(server.port), "n": 2000}]
    assert not classic_started(server.state)


@pytest.mark.spark
@pytest.mark.slow
def test_query_errors_are_one_line_through_the_server(server: Server) -> None:
    r = limno(server.state, "query", "--engine", "spark", "SELECT nope FROM pool", lake=server.lake)
    assert r.code == 1
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: SQL: "), r.err
    assert "nope" in lines[0]


@pytest.mark.spark
@pytest.mark.slow
def test_load_and_compact_run_on_the_server(server: Server, tmp_path: Path) -> None:
    lake = Lake.open(str(server.lake))
    lake.create_pool("loaded", key="k")
    data = tmp_path / "in.ndjson"
    data.write_text("".join(json.dumps({"k": (i * 7) % 300, "v": i}) + "\n" for i in range(300)))
    for _ in range(2):
        r = limno(
            server.state, "load", "-p", "loaded", "--engine", "spark", str(data), lake=server.lake
        )
        assert r.code == 0, r.err
    ids = [o.id for o in lake.pool("loaded").objects()]
    assert len(ids) == 2
    r = limno(server.state, "compact", "-p", "loaded", "--engine", "spark", *ids, lake=server.lake)
    assert r.code == 0, r.err
    pool = lake.pool("loaded")
    assert {o.id for o in pool.objects()}.isdisjoint(ids)
    assert sum(o.rows for o in pool.objects()) == 600
    assert sorted(r["k"] for r in pool.table().to_pylist()) == sorted(
        [(i * 7) % 300 for i in range(300)] * 2
    )
    assert list(lake.verify()) == []
    assert not classic_started(server.state)


@pytest.mark.spark
@pytest.mark.slow
def test_a_second_start_fails_while_the_server_is_up(server: Server) -> None:
    r = limno(server.state, "spark", "start", "--port", str(free_port()))
    assert r.code == 1 and r.out == ""
    assert r.err.splitlines() == [
        f"error: a Spark Connect server is already up at sc://localhost:{server.port}"
        f" (pid {json.loads((server.state / 'connect.json').read_text())['pid']});"
        " run 'limno spark stop' first"
    ]


@pytest.mark.spark
@pytest.mark.slow
def test_safe_query_runs_in_a_classic_session_with_its_jvm_output_in_the_log(
    server: Server,
) -> None:
    sql = "SELECT count(*) AS n FROM pool"
    r = limno(server.state, "query", "--engine", "spark", "--safe", sql, lake=server.lake)
    assert r.code == 0, r.err
    assert r.err == ""
    assert rows(r.out) == [{"n": 2000}]
    assert classic_started(server.state)


@pytest.mark.spark
@pytest.mark.slow
def test_stop_ends_the_server_and_forgets_it(server: Server) -> None:
    pid = json.loads((server.state / "connect.json").read_text())["pid"]
    r = limno(server.state, "spark", "stop")
    assert r.code == 0, r.err
    assert r.err == f"stopped the Spark Connect server (pid {pid})\n"
    assert not (server.state / "connect.json").exists()
    assert not spark_server._alive(pid)
    assert limno(server.state, "spark", "status").out == "down\n"
    r = limno(server.state, "spark", "stop")
    assert r.code == 0 and r.err == "no Spark Connect server was running\n"


# -- without a server ---------------------------------------------------------------------


def test_a_state_file_of_a_process_that_exited_means_down(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    dead = int(proc.stdout)
    state = tmp_path / "state"
    state.mkdir()
    (state / "connect.json").write_text(
        json.dumps(
            {
                "pid": dead,
                "port": free_port(),
                "url": "sc://localhost:1",
                "master": "local[*]",
                "log": str(state / "connect.log"),
                "started": "2026-01-01T00:00:00+00:00",
                # no process started at boot: should the pid be reused, it is not this one
                "pid_start": "0",
            }
        )
    )
    assert limno(state, "spark", "status").out == "down\n"
    r = limno(state, "spark", "stop")
    assert r.code == 0 and not (state / "connect.json").exists()


def test_a_damaged_state_file_means_down_and_stop_removes_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "connect.json").write_text("{not json")
    assert limno(state, "spark", "status").out == "down\n"
    r = limno(state, "spark", "stop")
    assert r.code == 0 and not (state / "connect.json").exists()


@pytest.mark.spark
def test_an_unreachable_remote_is_one_error_line(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    lake.create_pool("p", key="k").load([pa.table({"k": [1]})])
    url = f"sc://127.0.0.1:{free_port()}"
    r = limno(
        tmp_path / "state",
        "query",
        "--engine",
        "spark",
        "SELECT count(*) FROM p",
        lake=tmp_path / "lake",
        LIMNO_SPARK_REMOTE=url,
    )
    assert r.code == 1
    assert r.err.splitlines() == [
        f"error: cannot reach the Spark Connect server at {url}: Connection refused"
    ]
