"""Shared fixtures: a real S3-compatible server on loopback, and stores of every kind.

The S3 server is moto in server mode (one request at a time, so conditional writes are
atomic as on S3: tests/moto_serial.py), started once per test session as a separate
process on 127.0.0.1 (a free port). Tests that use it talk HTTP to it exactly as
they would to S3; nothing is mocked in-process.

``LIMNO_TEST_TIMES=FILE`` writes, at the end of the run, the seconds each test file
took (the setup, call and teardown of its tests, so its module and session fixtures
too) as JSON, slowest first: where the suite's time goes, also under pytest-xdist
(whose controller receives every worker's reports).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from limno.storage import Storage, open_storage
from s3_support import S3_ENV, make_bucket

_TIMES_FILE = os.environ.get("LIMNO_TEST_TIMES")
_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _TIMES_FILE:
        path = report.nodeid.split("::", 1)[0]
        _file_seconds[path] = _file_seconds.get(path, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _TIMES_FILE and _file_seconds and not hasattr(session.config, "workerinput"):
        slowest = sorted(_file_seconds.items(), key=lambda kv: -kv[1])
        Path(_TIMES_FILE).write_text(json.dumps({k: round(v, 2) for k, v in slowest}, indent=1))


#: a file with a test of these marks starts first under pytest-xdist (see below)
_HEAVY = ("slow", "spark", "kafka", "browser")


@pytest.hookimpl(trylast=True)  # after tests/ui's hook marks its tests ``browser``
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``): the files holding slow, Spark, Kafka or
    browser tests first, the rest after, each group in its own order. Workers take
    whole files in this order, so the long ones overlap each other early and the
    many short ones fill in at the end, rather than one worker running a long file
    alone while the other has finished. The same order in every worker (xdist
    checks it); a run without workers keeps pytest's order."""
    if not hasattr(config, "workerinput"):  # pytest-xdist's workers have it
        return
    heavy = {item.path for item in items if any(item.get_closest_marker(m) for m in _HEAVY)}
    items.sort(key=lambda item: item.path not in heavy)


@pytest.fixture(scope="session", autouse=True)
def spark_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Spark's state directory (session logs, a `limno spark start` server's state) in
    a temporary directory: tests never attach to a developer's running server, nor
    write under their home."""
    saved = {k: os.environ.pop(k, None) for k in ("LIMNO_SPARK_STATE_DIR", "LIMNO_SPARK_REMOTE")}
    os.environ["LIMNO_SPARK_STATE_DIR"] = str(tmp_path_factory.mktemp("spark-state"))
    try:
        yield
    finally:
        os.environ.pop("LIMNO_SPARK_STATE_DIR", None)
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto server exited early with code {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"moto server did not listen on 127.0.0.1:{port} in {timeout}s")


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start moto's S3 server on loopback; set the AWS_* environment to reach it."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("moto_serial.py")), "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in [*S3_ENV, "AWS_ENDPOINT_URL"]}
    try:
        _wait_for_port(port, proc)
        os.environ.update(S3_ENV)
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        yield endpoint
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture
def s3_uri(s3_endpoint: str) -> str:
    """The URI of a fresh bucket (with a prefix) on the loopback S3 server."""
    return f"s3://{make_bucket(s3_endpoint)}/lake"


@pytest.fixture(
    params=[
        "local",
        "memory",
        pytest.param("s3", marks=pytest.mark.s3),
    ]
)
def store_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URI for an empty store of each backend kind."""
    if request.param == "local":
        return str(tmp_path / "store")
    if request.param == "memory":
        return f"memory://{uuid.uuid4().hex}"
    endpoint = request.getfixturevalue("s3_endpoint")
    return f"s3://{make_bucket(endpoint)}/prefix"


@pytest.fixture
def store(store_uri: str) -> Storage:
    """An empty store of each backend kind."""
    return open_storage(store_uri, create=True)
