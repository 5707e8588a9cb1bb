"""``server``: limno's figures through ``limno serve`` against the same calls in process.

The peer of each line is limno itself, called in process on the same lake (column
``in-process``); the ratio says what the HTTP hop costs. The server is a real
``limno serve`` process with auth on (an admin key made first, as a deployment
would), on loopback; the client is limno's Python client (``Lake.open(url)``).

- ``server_small_commits``: 1,000-row loads, each its own commit, from 8 client
  processes at once (a pool each), through the server and in process; commits/s
  of the whole run (all commits / wall time from the first start to the last end).
  ``server_small_commits`` runs ``limno serve`` as deployed (its default: one process
  per core, at most 4); ``server_small_commits_workers1``: the same through
  ``limno serve --workers 1``.
- ``server_scan``: a full scan of 5M rows (quick: 50,000) to the client (its
  objects do not overlap: the server sends the stored Parquet objects, which the
  client decodes; see limno.api.wire_objects); rows/s. Server and in-process scans
  take turns in each repetition.
- ``server_scan_ipc``: the same scan with a limit of all its rows, which the server
  answers as an Arrow IPC stream (it merges and encodes; the client decodes IPC).
- ``server_get_p50``: ``get`` of one random key of those rows; p50 latency, ms.

Run as ``python -m bench.server commits LOCATION POOL COUNT`` it is one client
process of ``server_small_commits`` (what :func:`_commit_clients` starts).
"""

from __future__ import annotations

import gc
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from bench.data import rows_table, sample_keys
from bench.harness import Config, Result, median, percentile, timed

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 8
#: the server processes of the extra line of server_small_commits
WORKERS = 1
COMMIT_ROWS = 1000
PEER = "in-process"
#: the server secret of the benchmark's lakes (they live as long as the run)
SECRET = "limno-bench-server-secret-0123456789abcdef"
_READY = re.compile(r"^limno serve: listening on (http://\S+) ")


def server(cfg: Config) -> list[Result]:
    """The three lines (see the module's docstring)."""
    root = cfg.workdir / "server"
    try:
        return [*_small_commits(cfg, root / "commits"), *_reads(cfg, root / "reads")]
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- the server -----------------------------------------------------------------------------


@dataclass
class Running:
    url: str
    env: dict[str, str]


@contextmanager
def serving(lake: str, workers: int | None = None) -> Iterator[Running]:
    """A ``limno serve`` process on ``lake`` with auth (``--workers``: ``workers``, or
    the server's default); its URL and a client's environment."""
    from limno.api.local import LocalLake
    from limno.api.local_auth import LocalAuth
    from limno.errors import AlreadyExistsError

    secret = SECRET
    auth = LocalAuth(LocalLake.open(lake), server_secret=secret)
    try:
        _, key = auth.create_user("bench", "admin")
    except AlreadyExistsError:
        key = auth.create_key("bench")
    assert key is not None
    client = {
        "LIMNO_ACCESS_KEY_ID": key.access_key_id,
        "LIMNO_SECRET_ACCESS_KEY": key.secret_access_key,
    }
    env = {**os.environ, "LIMNO_AUTH_SECRET": secret}
    proc = subprocess.Popen(
        [sys.executable, "-m", "limno", "--lake", lake, "serve", "--port", "0"]
        + ([] if workers is None else ["--workers", str(workers)]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        seen: list[str] = []
        while True:
            line = lines.get(timeout=120)
            if line is None:
                raise RuntimeError(f"limno serve exited: {seen}")
            seen.append(line)
            if m := _READY.match(line):
                break
        yield Running(m.group(1), client)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(60)
        reader.join(60)
        assert proc.stderr is not None
        proc.stderr.close()


@contextmanager
def _client_env(env: dict[str, str]) -> Iterator[None]:
    """This process's environment with a client's credentials while the block runs."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- small commits from 8 processes -----------------------------------------------------------


def _small_commits(cfg: Config, root: Path) -> list[Result]:
    from limno import Lake
    from limno.cli._serve import default_workers

    count = 5 if cfg.quick else 40
    rates: dict[str, list[float]] = {"server": [], "workers": [], PEER: []}
    for run in range(cfg.repeat):
        lake = str(root / f"lake-{run}")
        created = Lake.init(lake)
        for i in range(CLIENTS):
            created.create_pool(f"c{i}", key="k")
        rates[PEER].append(_commit_clients([lake], count, {}))
        with serving(lake) as srv:
            rates["server"].append(_commit_clients([srv.url], count, srv.env))
        with serving(lake, WORKERS) as srv:
            rates["workers"].append(_commit_clients([srv.url], count, srv.env))
        shutil.rmtree(lake, ignore_errors=True)
    local = median(rates[PEER])
    return [
        Result(
            "server_small_commits",
            "throughput",
            "commits/s",
            median(rates["server"]),
            {PEER: local},
            True,
            note=f"{CLIENTS} processes, {COMMIT_ROWS}-row loads, a pool each; limno serve's"
            f" default workers ({default_workers()}); target >= 0.7x",
        ),
        Result(
            f"server_small_commits_workers{WORKERS}",
            "throughput",
            "commits/s",
            median(rates["workers"]),
            {PEER: local},
            True,
            note=f"the same through limno serve --workers {WORKERS}",
        ),
    ]


def _commit_clients(locations: list[str], count: int, env: dict[str, str]) -> float:
    """Commits/s of :data:`CLIENTS` processes each loading ``count`` times at once
    (client ``i`` through ``locations[i % len(locations)]``)."""
    procs = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "bench.server", "commits"),
                *(locations[i % len(locations)], f"c{i}", str(count)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        )
        for i in range(CLIENTS)
    ]

    def kill_all() -> None:
        for p in procs:
            p.kill()

    watchdog = threading.Timer(600, kill_all)
    watchdog.start()
    try:
        for p in procs:  # each has imported, opened its pool and made one untimed commit
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a commit client failed to start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        spans = []
        for p in procs:
            out, _ = p.communicate()
            if p.returncode:
                raise subprocess.CalledProcessError(p.returncode, p.args)
            spans.append(json.loads(out))
    finally:
        watchdog.cancel()
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    wall = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    return CLIENTS * count / wall


def _commit_client(location: str, pool_name: str, count: int) -> None:
    """One process of :func:`_commit_clients`: ready, wait for go, ``count`` loads."""
    from limno import Lake

    pool = Lake.open(location).pool(pool_name)
    n = int(pool_name[1:])
    tables = [
        rows_table(COMMIT_ROWS, start=(n * (count + 1) + i) * COMMIT_ROWS) for i in range(count + 1)
    ]
    pool.load([tables[0]])
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit(1)
    start = time.time()
    for t in tables[1:]:
        pool.load([t])
    print(json.dumps({"start": start, "end": time.time()}), flush=True)


# -- scan and get ---------------------------------------------------------------------------


def _reads(cfg: Config, root: Path) -> list[Result]:
    from limno import Lake

    rows = cfg.rows(5_000_000, 50_000)
    lake = str(root / "lake")
    pool = Lake.init(lake).create_pool("reads", key="k")
    pool.load([rows_table(rows)])
    local = Lake.open(lake).pool("reads")
    lookups = 30 if cfg.quick else 200
    keys = sample_keys(rows, lookups)
    p50: dict[str, float] = {}
    with serving(lake) as srv, _client_env(srv.env):
        remote_lake = Lake.open(srv.url)
        try:
            remote = remote_lake.pool("reads")
            ipc_scan = _LimitedScan(remote, rows)  # a limit: the server's Arrow IPC stream
            pools = {"server": remote, "ipc": ipc_scan, PEER: local}
            scan_rate = _scan_rates(cfg, pools, rows)
            for name, reader in (("server", remote), (PEER, local)):
                p50[name] = _get_p50(cfg, reader, keys)
        finally:
            close: Any = getattr(remote_lake, "close", None)
            if close is not None:
                close()
    return [
        Result(
            "server_scan",
            "throughput",
            "rows/s",
            scan_rate["server"],
            {PEER: scan_rate[PEER]},
            True,
            note="a full scan streamed to a Python client (the stored Parquet objects when"
            " they need no merging, else Arrow IPC); target >= 0.7x",
        ),
        Result(
            "server_scan_ipc",
            "throughput",
            "rows/s",
            scan_rate["ipc"],
            {PEER: scan_rate[PEER]},
            True,
            note="the same scan with a limit of all its rows: streamed as Arrow IPC (the"
            " server merges and encodes, the client decodes IPC)",
        ),
        Result(
            "server_get_p50",
            "latency",
            "ms",
            p50["server"],
            {PEER: p50[PEER]},
            False,
            note=f"one key of {rows:,} rows; target: within 2 ms of in-process",
        ),
    ]


@dataclass
class _LimitedScan:
    """A pool whose full scan asks for a limit of all its rows: the server then sends
    Arrow IPC, not the stored objects (limno.server.parquet_objects)."""

    pool: Any
    rows: int

    def scan(self) -> Any:
        return self.pool.scan(limit=self.rows)


def _scan_rates(cfg: Config, pools: dict[str, Any], rows: int) -> dict[str, float]:
    """Rows/s of a full scan of each pool: the pools take turns in every repetition, so
    that what the machine does meanwhile (the load's writeback, other work) falls on
    each alike."""

    def scan(pool: Any) -> None:
        got = pool.scan()
        if got.num_rows != rows:
            raise RuntimeError(f"scan returned {got.num_rows} rows, not {rows}")

    for pool in pools.values():
        scan(pool)  # warm up
    times: dict[str, list[float]] = {name: [] for name in pools}
    for _ in range(cfg.repeat):
        for name, pool in pools.items():
            times[name].append(timed(partial(scan, pool)))
    return {name: rows / median(t) for name, t in times.items()}


def _get_p50(cfg: Config, pool: Any, keys: list[int]) -> float:
    def get(k: int) -> None:
        if pool.get([k]).num_rows != 1:
            raise RuntimeError(f"get({k}) did not find its row")

    for k in keys[:10]:  # warm up: imports, caches, the connection
        get(k)
    gc.collect()
    latencies = [timed(partial(get, k), False) * 1000 for _ in range(cfg.repeat) for k in keys]
    return percentile(latencies, 50)


def main(argv: list[str]) -> None:
    if len(argv) == 4 and argv[0] == "commits":
        _commit_client(argv[1], argv[2], int(argv[3]))
        return
    raise SystemExit("usage: python -m bench.server commits LOCATION POOL COUNT")


if __name__ == "__main__":
    main(sys.argv[1:])
