"""Servers are stateless: two ``limno serve`` processes on one lake lose no write.

All state is in the lake, so any number of servers can serve one lake at once. The
test runs two real server processes on one lake (a local directory, and an
``s3://`` lake on the loopback S3 server), and several client processes
(tests/server/replica_worker.py) that load, branch and merge through both servers
at once, each round through the other server. Afterwards every commit a client saw
acknowledged is in main's history, main holds exactly the rows the clients loaded,
and ``limno verify`` finds nothing wrong.

A server also stops gracefully: a load still arriving when SIGTERM comes is
finished and committed, whole, before the process exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from bounded import wait_until
from limno import Lake
from server_support import Served, start_server

WORKER = Path(__file__).with_name("replica_worker.py")
CLIENTS = 4
ROUNDS = 9
TIMEOUT = 240


def _client_env(server: Served) -> dict[str, str]:
    """The environment a client process of ``server`` needs (its credentials, if any)."""
    return {**os.environ, **server.env}


def _run_clients(servers: list[Served], pool: str) -> tuple[list[str], list[int]]:
    """Run the client processes at once; what they saw acknowledged (commits, keys)."""
    urls = [s.url for s in servers]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(i), str(ROUNDS), pool, *urls],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_client_env(servers[0]),
        )
        for i in range(CLIENTS)
    ]
    commits: list[str] = []
    keys: list[int] = []
    failures = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate(timeout=30)
        if proc.returncode != 0:
            failures.append(f"client exited {proc.returncode}: {err[-3000:]}")
            continue
        done = json.loads(out)
        commits += done["commits"]
        keys += done["keys"]
    assert not failures, "\n".join(failures)
    return commits, keys


def _replicas(lake: str, tmp_path: Path) -> None:
    local = Lake.init(lake)
    pool = local.create_pool("events", key="k")
    before = {c.id for c in pool.log()}
    servers = [start_server(lake), start_server(lake)]
    try:
        commits, keys = _run_clients(servers, "events")
    finally:
        codes = [s.stop() for s in servers]
    assert codes == [0, 0], [s.lines for s in servers]

    # every acknowledged commit is in main's history, and nothing else is
    history = {c.id for c in Lake.open(lake).pool("events").log("main")}
    assert len(commits) == len(set(commits)) == CLIENTS * (ROUNDS + ROUNDS // 3)
    assert history == before | set(commits)
    # main holds exactly the rows the clients loaded, each once
    rows = Lake.open(lake).pool("events").scan("main")
    assert rows.column("k").to_pylist() == sorted(keys)
    assert len(keys) == CLIENTS * ROUNDS * 5
    # no branch left behind, and the lake is consistent
    assert set(Lake.open(lake).pool("events").branches()) == {"main"}
    assert list(Lake.open(lake).verify(deep=True)) == []
    verify = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", lake, "verify"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.slow
def test_two_servers_on_a_local_lake(tmp_path: Path) -> None:
    _replicas(str(tmp_path / "lake"), tmp_path)


@pytest.mark.s3
@pytest.mark.slow
def test_two_servers_on_an_s3_lake(s3_uri: str, tmp_path: Path) -> None:
    _replicas(s3_uri, tmp_path)


def _read_by_server(port: int) -> bool:
    """Whether the server's end of the one open connection to ``port`` on loopback
    has an empty receive queue (``/proc/net/tcp``: every byte sent was read)."""
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    mine = [r for r in rows if int(r[1].split(":")[1], 16) == port and r[3] == "01"]
    return len(mine) == 1 and int(mine[0][4].split(":")[1], 16) == 0


def test_sigterm_finishes_the_load_in_flight(tmp_path: Path) -> None:
    """SIGTERM while a load's body is still arriving: the load commits, whole; exit 0."""
    lake = str(tmp_path / "lake")
    Lake.init(lake).create_pool("events", key="k")
    server = start_server(lake)
    sent_first = threading.Event()
    signalled = threading.Event()
    rows = pa.table({"k": list(range(1000)), "v": ["x" * 20] * 1000})
    csv = "k,v\n" + "".join(f"{k},{v}\n" for k, v in zip(*rows.to_pydict().values(), strict=True))
    head, tail = csv[:4000].encode(), csv[4000:].encode()

    def body() -> Iterator[bytes]:
        yield head
        sent_first.set()
        assert signalled.wait(60), "the test never signalled the server"
        yield tail

    answer: list[httpx.Response] = []

    def send() -> None:
        with httpx.Client(base_url=server.url, timeout=120, auth=server.auth) as client:
            answer.append(
                client.post(
                    "/v1/pools/events/load",
                    params={"fmt": "csv", "message": "in flight"},
                    content=body(),
                    headers={"Content-Type": "application/octet-stream"},
                )
            )

    sender = threading.Thread(target=send)
    sender.start()
    try:
        assert sent_first.wait(60)
        # the request is in the server: its first bytes were written to the socket,
        # and the server process has read them (else uvicorn's shutdown would close
        # the connection as idle); it has answered nothing yet
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        wait_until(lambda: _read_by_server(port), "the server reading the request", 60)
        server.proc.send_signal(15)
        signalled.set()
        sender.join(120)
        assert not sender.is_alive()
    finally:
        signalled.set()
        code = server.stop()
        sender.join(120)
    assert code == 0, server.lines
    assert len(answer) == 1 and answer[0].status_code == 200, answer[0].text
    pool = Lake.open(lake).pool("events")
    assert pool.log(limit=1)[0].id == answer[0].json()["id"]
    assert pool.scan().column("k").to_pylist() == list(range(1000))
