"""Helpers of the Spark tests: one small local session per module, a real standalone
cluster (master and two workers as separate processes on 127.0.0.1), and value
normalization for comparing answers across engines."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from limno.engines.spark import session

#: small and quick: two cores, few shuffle partitions, no UI
TEST_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.adaptive.enabled": "true",
}


def start_session(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> SparkSession:
    """A fresh limno session (stopping any running one first)."""
    stop_session()
    return session(master, {**TEST_CONF, **(conf or {})})


def stop_session() -> None:
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()


def module_session(
    master: str = "local[2]", conf: Mapping[str, str] | None = None
) -> Iterator[SparkSession]:
    """Body of a module-scoped fixture: a session for the module, stopped after it."""
    spark = start_session(master, conf)
    try:
        yield spark
    finally:
        stop_session()


# -- comparing answers -------------------------------------------------------------------


def norm(value: Any) -> Any:
    """A value as both engines can agree on it: integral decimals as ints, zoned
    datetimes in UTC, dicts and lists recursively."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [norm(v) for v in value]
    return value


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return [norm(r) for r in table.to_pylist()]


# -- a standalone cluster ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _wait_port(port: int, procs: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"a Spark process exited early ({p.args!r})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


class Cluster:
    """A Spark standalone master and two workers, each its own JVM process."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1) -> None:
        self.workdir = workdir
        self.workers = workers
        self.cores = cores
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, cls: str, *args: str) -> subprocess.Popen[bytes]:
        home = spark_home()
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_WORKER_DIR": str(self.workdir / f"{name}-work"),
            "SPARK_LOG_DIR": str(self.workdir),
        }
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 -- kept by the process
        proc = subprocess.Popen(
            [str(home / "bin" / "spark-class"), cls, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def start(self) -> Cluster:
        """Master and workers up and registered; on any failure none is left running."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Cluster:
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(free_port()),
        )
        _wait_port(self.port, self.procs)
        for i in range(self.workers):
            self._spawn(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                "1g",
                "--webui-port",
                str(free_port()),
                self.url,
            )
        self._wait_workers()
        return self

    def _wait_workers(self, timeout: float = 240) -> None:  # JVM starts are slow at load
        deadline = time.monotonic() + timeout
        logs = [self.workdir / f"worker{i}.log" for i in range(self.workers)]
        while time.monotonic() < deadline:
            if all(p.exists() and b"Successfully registered" in p.read_bytes() for p in logs):
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark process exited early ({p.args!r})")
            time.sleep(0.3)
        raise RuntimeError("the workers did not register with the master")

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
