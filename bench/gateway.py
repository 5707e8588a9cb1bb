"""The S3 gateway: bytes through ``limno serve --s3-port`` with boto3, against the same
bytes through the lake's own storage layer in process (column ``in-process``).

- ``gateway_get_64mb``: a 64 MiB object (quick: 4 MiB) read whole with boto3's
  ``get_object(...)["Body"].read()``; the peer reads the object's blob with the
  lake's ``Storage.get``. MB/s (10^6 bytes); target >= 0.5x.
- ``gateway_put_64mb``: the same bytes written with one ``put_object`` onto a branch
  (staged: the gateway hashes, checks and stores them, then stages the entry); the
  peer writes them with ``Storage.put``. MB/s; target >= 0.5x.
- ``gateway_small_put_p50``: 4 KB ``put_object`` latency, p50 over every put of every
  repetition; the peer is the same put in process (``FilePool.put`` on the lake: the
  staged write the gateway makes, without HTTP, SigV4 and S3's checks).

The server is a real ``limno serve`` process with auth on (a key made first, as a
deployment would) and its default workers, on loopback over plain HTTP; boto3 runs
with its default settings (over plain HTTP it signs the payload's SHA-256, and sends
a CRC32 of it; the gateway checks both, and hashes MD5 for the ETag). Gateway and
peer alternate within each repetition, so that load from elsewhere on the machine
falls on both.
"""

from __future__ import annotations

import gc
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Config, Result, median, percentile, timed

__all__ = ["gateway_get_64mb", "gateway_put_64mb", "gateway_small_put_p50"]

PEER = "in-process"
MIB = 1 << 20
SMALL = 4096
#: the server secret of the benchmark's lakes (they live as long as the run)
SECRET = "limno-bench-gateway-secret-0123456789abcdef"
_S3_READY = re.compile(r"^limno serve: S3 gateway on (http://\S+)$")
_READY = re.compile(r"^limno serve: listening on (http://\S+) ")


@dataclass
class Served:
    """A lake served with the gateway, a boto3 client of it, and the lake in process."""

    lake: str
    s3: Any
    bucket: str


def gateway_get_64mb(cfg: Config) -> list[Result]:
    size = _size(cfg)
    with _served(cfg, "get") as srv:
        from limno.api.local import LocalLake
        from limno.pools.files.blobs import blob_path

        data = os.urandom(size)
        srv.s3.put_object(Bucket=srv.bucket, Key="main/big.bin", Body=data)
        lake = LocalLake.open(srv.lake)
        pool = lake.file_pool(srv.bucket)
        entry = pool.stat("big.bin", "main")
        assert entry.object is not None
        path = blob_path(pool.id, entry.object)
        storage = lake.storage

        def through_gateway() -> None:
            body = srv.s3.get_object(Bucket=srv.bucket, Key="main/big.bin")["Body"]
            try:
                got = body.read()
            finally:
                body.close()
            if len(got) != size:
                raise RuntimeError(f"GET answered {len(got)} bytes, not {size}")

        def straight() -> None:
            if len(storage.get(path)) != size:
                raise RuntimeError("the blob is not the object's size")

        rates = _alternate(cfg, size, through_gateway, straight)
    return [
        Result(
            "gateway_get_64mb",
            "throughput",
            "MB/s",
            rates["gateway"],
            {PEER: rates[PEER]},
            True,
            note=f"{size // MIB} MiB, boto3 get_object vs Storage.get; target >= 0.5x",
        )
    ]


def gateway_put_64mb(cfg: Config) -> list[Result]:
    size = _size(cfg)
    with _served(cfg, "put") as srv:
        from limno.storage import open_storage

        data = os.urandom(size)
        storage = open_storage(srv.lake)
        n = iter(range(1_000_000))

        def through_gateway() -> None:
            srv.s3.put_object(Bucket=srv.bucket, Key=f"main/big-{next(n)}.bin", Body=data)

        def straight() -> None:
            storage.put(f"bench-put/big-{next(n)}.bin", data)

        rates = _alternate(cfg, size, through_gateway, straight)
    return [
        Result(
            "gateway_put_64mb",
            "throughput",
            "MB/s",
            rates["gateway"],
            {PEER: rates[PEER]},
            True,
            note=f"{size // MIB} MiB, boto3 put_object (one request) vs Storage.put;"
            " target >= 0.5x",
        )
    ]


def gateway_small_put_p50(cfg: Config) -> list[Result]:
    count = 30 if cfg.quick else 200
    with _served(cfg, "small") as srv:
        from limno import Lake

        pool = Lake.open(srv.lake).file_pool(srv.bucket)
        pool.branch("direct")
        data = os.urandom(SMALL)
        n = iter(range(1_000_000))

        def through_gateway() -> None:
            srv.s3.put_object(Bucket=srv.bucket, Key=f"main/small/{next(n):06}", Body=data)

        def in_process() -> None:
            pool.put("direct", f"small/{next(n):06}", data)

        for _ in range(10):  # warm up: the connection, imports, caches
            through_gateway()
            in_process()
        gc.collect()
        latencies: dict[str, list[float]] = {"gateway": [], PEER: []}
        for _ in range(cfg.repeat):
            for _ in range(count):
                latencies["gateway"].append(timed(through_gateway, False) * 1000)
                latencies[PEER].append(timed(in_process, False) * 1000)
    return [
        Result(
            "gateway_small_put_p50",
            "latency",
            "ms",
            percentile(latencies["gateway"], 50),
            {PEER: percentile(latencies[PEER], 50)},
            False,
            note="4 KB put_object with boto3 vs FilePool.put in process",
        )
    ]


# -- helpers --------------------------------------------------------------------------------


def _size(cfg: Config) -> int:
    return (4 if cfg.quick else 64) * MIB


def _alternate(
    cfg: Config, size: int, through_gateway: Callable[[], None], straight: Callable[[], None]
) -> dict[str, float]:
    """MB/s of each, the median of ``cfg.repeat`` runs, the two alternating."""
    through_gateway()  # warm up
    straight()
    seconds: dict[str, list[float]] = {"gateway": [], PEER: []}
    for _ in range(cfg.repeat):
        seconds["gateway"].append(timed(through_gateway))
        seconds[PEER].append(timed(straight))
    return {name: size / 1e6 / median(times) for name, times in seconds.items()}


@contextmanager
def _served(cfg: Config, name: str) -> Iterator[Served]:
    """A new lake with one file pool, served with the gateway (auth on, default
    workers), and an admin's boto3 client of it; all gone after the block."""
    import boto3

    from limno import Lake
    from limno.api.local import LocalLake
    from limno.api.local_auth import LocalAuth

    root = cfg.workdir / f"gateway-{name}"
    lake = str(root / "lake")
    Lake.init(lake).create_pool("bench", kind="files")
    _, key = LocalAuth(LocalLake.open(lake), server_secret=SECRET).create_user("bench", "admin")
    assert key is not None
    try:
        with _serve(lake) as url:
            s3 = boto3.client(
                "s3",
                endpoint_url=url,
                aws_access_key_id=key.access_key_id,
                aws_secret_access_key=key.secret_access_key,
                region_name="us-east-1",
            )
            try:
                yield Served(lake, s3, "bench")
            finally:
                s3.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _serve(lake: str) -> Iterator[str]:
    """``limno serve --port 0 --s3-port 0`` on ``lake``; the gateway's URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "limno", "--lake", lake, "serve", "--port", "0", "--s3-port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LIMNO_AUTH_SECRET": SECRET},
        cwd=Path(lake).parent,
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
        url, seen = "", list[str]()
        while True:
            line = lines.get(timeout=120)
            if line is None:
                raise RuntimeError(f"limno serve exited: {seen}")
            seen.append(line)
            if m := _S3_READY.match(line):
                url = m.group(1)
            if _READY.match(line):
                break
        if not url:
            raise RuntimeError(f"limno serve said no gateway URL: {seen}")
        yield url
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
