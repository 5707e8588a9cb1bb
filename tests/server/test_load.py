"""A load test of ``limno serve``: 32 concurrent clients, 5,000 mixed requests.

One real server process on a local lake (loopback only), 32 client threads, each
with a connection of its own (limno's HTTP client, kept alive across calls). The
requests mix writes (small loads; branch, load, merge, delete-branch) with reads
(range scans, point lookups, SQL, log, ls, branches, objects, resolve) over four
pools. Every request is counted as it is sent; the test asserts that none failed,
that every commit a client saw acknowledged is in its pool's history, and that
each pool holds exactly the rows loaded into it. Payloads are small on purpose: the
test is about concurrency, not bandwidth (see bench/server.py for throughput).
"""

from __future__ import annotations

import threading
import traceback
from pathlib import Path

import pyarrow as pa
import pytest

from limno import Lake
from limno.api.remote import RemoteLake, RemotePool
from server_support import start_server

CLIENTS = 32
REQUESTS = 5_000
POOLS = 4
SEED_ROWS = 1_000
#: a client's ops, in the order it cycles through them (weights by repetition)
MIX = [
    *("load", "scan", "get", "log", "ls", "get", "scan", "branches", "load", "query"),
    *("get", "scan", "objects", "ls", "merge", "get", "scan", "log", "resolve", "load"),
]
TIMEOUT = 600


class Client:
    """One thread's client: what it did and what the server acknowledged."""

    def __init__(self, n: int, url: str, budget: int) -> None:
        self.n = n
        self.url = url
        self.budget = budget
        self.sent = 0
        self.errors: list[str] = []
        self.commits: dict[str, list[str]] = {f"p{i}": [] for i in range(POOLS)}
        self.keys: dict[str, list[int]] = {f"p{i}": [] for i in range(POOLS)}

    def run(self) -> None:
        lake = RemoteLake(self.url)
        try:
            pools = {f"p{i}": lake.pool(f"p{i}") for i in range(POOLS)}
            step = 0
            while (sent := lake._http.sent) < self.budget:  # every request, either way
                self.sent = sent
                op = MIX[(self.n + step) % len(MIX)]
                name = f"p{(self.n + step // len(MIX)) % POOLS}"  # a pool per cycle
                step += 1
                try:
                    self._op(op, lake, pools[name], name, step)
                except Exception:
                    self.errors.append(f"client {self.n} {op}: {traceback.format_exc()}")
            self.sent = lake._http.sent
        except Exception:
            self.errors.append(f"client {self.n}: {traceback.format_exc()}")
        finally:
            lake.close()

    def _op(self, op: str, lake: RemoteLake, pool: RemotePool, name: str, step: int) -> None:
        left = self.budget - self.sent
        if op == "merge" and left < 4:
            op = "get"  # a branch round is four requests: keep to the budget
        if op in ("load", "merge"):
            keys = [SEED_ROWS + self.n * 100_000 + step * 10 + i for i in range(3)]
            table = pa.table({"k": keys, "v": [f"c{self.n}"] * 3})
            if op == "load":
                self.commits[name].append(pool.load([table], message=f"c{self.n}").id)
            else:
                branch = f"c{self.n}-{step}"
                pool.branch(branch, "main")
                self.commits[name].append(pool.load([table], branch=branch).id)
                merged = pool.merge(branch, "main", fast_forward=False)
                assert merged.kind == "merge", merged
                self.commits[name].append(merged.commit)
                pool.delete_branch(branch)
            self.keys[name] += keys
        elif op == "scan":
            lo = (self.n * 37 + step) % (SEED_ROWS - 50)
            got = pool.scan(start=lo, end=lo + 50)
            assert got.column("k").to_pylist() == list(range(lo, lo + 50))
        elif op == "get":
            key = (self.n * 101 + step * 7) % SEED_ROWS
            assert pool.get([key]).column("k").to_pylist() == [key]
        elif op == "query":
            got = lake.query(f"SELECT count(*) AS n FROM {name} WHERE k < {SEED_ROWS}")
            assert got.column("n").to_pylist() == [SEED_ROWS]
        elif op == "log":
            assert len(pool.log(limit=5)) >= 1
        elif op == "ls":
            assert {c.name for c in lake.list_pools()} >= set(self.keys)
        elif op == "branches":
            assert "main" in pool.branches()
        elif op == "objects":
            assert pool.objects()
        elif op == "resolve":
            assert pool.resolve("main")
        else:
            raise AssertionError(op)


@pytest.mark.slow
def test_32_clients_5000_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake_dir = str(tmp_path / "lake")
    lake = Lake.init(lake_dir)
    for i in range(POOLS):
        lake.create_pool(f"p{i}", key="k").load(
            [pa.table({"k": list(range(SEED_ROWS)), "v": ["seed"] * SEED_ROWS})]
        )
    before = {f"p{i}": {c.id for c in lake.pool(f"p{i}").log()} for i in range(POOLS)}
    server = start_server(lake_dir)
    env = server.env
    clients = [
        Client(n, server.url, REQUESTS // CLIENTS + (n < REQUESTS % CLIENTS))
        for n in range(CLIENTS)
    ]
    try:
        for k, v in env.items():
            monkeypatch.setenv(k, v)  # the clients' credentials
        threads = [threading.Thread(target=c.run, name=f"client-{c.n}") for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a client did not finish in time"
    finally:
        code = server.stop()
    assert code == 0, server.lines

    errors = [e for c in clients for e in c.errors]
    assert not errors, f"{len(errors)} failed requests; first: {errors[0]}"
    assert sum(c.sent for c in clients) == REQUESTS
    for i in range(POOLS):
        name = f"p{i}"
        acknowledged = [cid for c in clients for cid in c.commits[name]]
        keys = [k for c in clients for k in c.keys[name]]
        assert acknowledged, f"no writes to {name}: the mix is wrong"
        pool = Lake.open(lake_dir).pool(name)
        assert {c.id for c in pool.log()} == before[name] | set(acknowledged)
        assert pool.scan().column("k").to_pylist() == list(range(SEED_ROWS)) + sorted(keys)
    assert list(Lake.open(lake_dir).verify()) == []
