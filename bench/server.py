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
- ``server_commit_cpu``, ``server_scan_ipc_cpu``, ``server_get_cpu``: the CPU time
  of one commit, one IPC scan and one ``get``, client and server processes together
  (the server's from ``/proc``), against the same in process: what the latency and
  throughput lines cost, a figure a busy machine inflates less than it does those
  (8 writers and 1-2 server processes on 2 cores measure scheduling as much as work).

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
    #: the ``limno serve`` process (its workers are its children)
    pid: int

    def cpu(self) -> float:
        """CPU seconds the server (every process of it) has used so far."""
        return process_cpu(self.pid)


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` and its live children (Linux
    ``/proc``; 0.0 elsewhere: the figure is then left out)."""
    try:
        tasks = Path(f"/proc/{pid}/task")
        children = {int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()}
    except OSError:
        return 0.0
    total = 0.0
    for p in (pid, *children):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


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
        yield Running(m.group(1), client, proc.pid)
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
    cpu: dict[str, list[float]] = {"server": [], PEER: []}  # ms per commit
    for run in range(cfg.repeat):
        lake = str(root / f"lake-{run}")
        created = Lake.init(lake)
        for i in range(CLIENTS):
            created.create_pool(f"c{i}", key="k")
        rate, spent = _commit_clients([lake], count, {})
        rates[PEER].append(rate)
        cpu[PEER].append(spent)
        with serving(lake) as srv:
            rate, spent = _commit_clients([srv.url], count, srv.env, srv)
            rates["server"].append(rate)
            cpu["server"].append(spent)
        with serving(lake, WORKERS) as srv:
            rates["workers"].append(_commit_clients([srv.url], count, srv.env)[0])
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
        Result(
            "server_commit_cpu",
            "cpu",
            "ms/commit",
            median(cpu["server"]),
            {PEER: median(cpu[PEER])},
            False,
            note="CPU of one commit of server_small_commits (default workers): the 8"
            " clients' and the server's processes together, against the 8 writers' in process",
        ),
    ]


def _commit_clients(
    locations: list[str], count: int, env: dict[str, str], srv: Running | None = None
) -> tuple[float, float]:
    """Commits/s of :data:`CLIENTS` processes each loading ``count`` times at once
    (client ``i`` through ``locations[i % len(locations)]``), and the CPU ms per commit
    they spent (with ``srv``: and the server, from the go to the last client's end)."""
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
        served_before = srv.cpu() if srv is not None else 0.0
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
        served = srv.cpu() - served_before if srv is not None else 0.0
    finally:
        watchdog.cancel()
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    wall = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    spent = sum(s["cpu"] for s in spans) + served
    return CLIENTS * count / wall, spent / (CLIENTS * count) * 1000


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
    start, cpu = time.time(), time.process_time()
    for t in tables[1:]:
        pool.load([t])
    end, cpu = time.time(), time.process_time() - cpu
    print(json.dumps({"start": start, "end": end, "cpu": cpu}), flush=True)


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
    get_cpu: dict[str, float] = {}
    with serving(lake) as srv, _client_env(srv.env):
        remote_lake = Lake.open(srv.url)
        try:
            remote = remote_lake.pool("reads")
            ipc_scan = _LimitedScan(remote, rows)  # a limit: the server's Arrow IPC stream
            pools = {"server": remote, "ipc": ipc_scan, PEER: local}
            scan_rate, scan_cpu = _scan_rates(cfg, pools, rows, srv)
            for name, reader in (("server", remote), (PEER, local)):
                p50[name], get_cpu[name] = _get_p50(cfg, reader, keys, srv)
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
        Result(
            "server_scan_ipc_cpu",
            "cpu",
            "s/scan",
            scan_cpu["ipc"],
            {PEER: scan_cpu[PEER]},
            False,
            note="CPU of one scan of server_scan_ipc, client and server together",
        ),
        Result(
            "server_get_cpu",
            "cpu",
            "ms/get",
            get_cpu["server"],
            {PEER: get_cpu[PEER]},
            False,
            note="CPU of one get of server_get_p50, client and server together",
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


def _scan_rates(
    cfg: Config, pools: dict[str, Any], rows: int, srv: Running
) -> tuple[dict[str, float], dict[str, float]]:
    """Rows/s of a full scan of each pool: the pools take turns in every repetition, so
    that what the machine does meanwhile (the load's writeback, other work) falls on
    each alike; and the median CPU seconds of one scan (this process and ``srv``)."""

    def scan(pool: Any) -> None:
        got = pool.scan()
        if got.num_rows != rows:
            raise RuntimeError(f"scan returned {got.num_rows} rows, not {rows}")

    for pool in pools.values():
        scan(pool)  # warm up
    times: dict[str, list[float]] = {name: [] for name in pools}
    cpu: dict[str, list[float]] = {name: [] for name in pools}
    for _ in range(cfg.repeat):
        for name, pool in pools.items():
            before = time.process_time() + srv.cpu()
            times[name].append(timed(partial(scan, pool)))
            cpu[name].append(time.process_time() + srv.cpu() - before)
    return {name: rows / median(t) for name, t in times.items()}, {
        name: median(c) for name, c in cpu.items()
    }


def _get_p50(cfg: Config, pool: Any, keys: list[int], srv: Running) -> tuple[float, float]:
    """The p50 ms of ``get`` of one key, and its mean CPU ms (this process and ``srv``)."""

    def get(k: int) -> None:
        if pool.get([k]).num_rows != 1:
            raise RuntimeError(f"get({k}) did not find its row")

    for k in keys[:10]:  # warm up: imports, caches, the connection
        get(k)
    gc.collect()
    before = time.process_time() + srv.cpu()
    latencies = [timed(partial(get, k), False) * 1000 for _ in range(cfg.repeat) for k in keys]
    spent = time.process_time() + srv.cpu() - before
    return percentile(latencies, 50), spent / len(latencies) * 1000


def main(argv: list[str]) -> None:
    if len(argv) == 4 and argv[0] == "commits":
        _commit_client(argv[1], argv[2], int(argv[3]))
        return
    raise SystemExit("usage: python -m bench.server commits LOCATION POOL COUNT")


if __name__ == "__main__":
    main(sys.argv[1:])
