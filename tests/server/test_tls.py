"""``limno serve --tls-cert/--tls-key``: HTTPS with a certificate made by the test; the
client trusts it through ``LIMNO_CA_BUNDLE``."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from events_support import watching
from limno import Lake
from limno.api.remote import RemoteLake
from server_support import Served, start_server
from tls_support import self_signed

#: every wait of these tests is bounded by this (seconds)
BOUND = 60.0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    root = tmp_path_factory.mktemp("tls")
    cert, key = self_signed(root)
    lake = str(root / "lake")
    Lake.init(lake)
    served = start_server(lake, "--tls-cert", cert, "--tls-key", key)
    try:
        yield served, cert
    finally:
        assert served.stop() == 0, served.lines


def _limno(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "limno", *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**os.environ, **env},
        check=False,
    )


def test_https_with_a_trusted_certificate(tls: tuple[Served, str]) -> None:
    served, cert = tls
    assert served.url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=cert)
    with httpx.Client(base_url=served.url, auth=served.auth, verify=context, timeout=BOUND) as c:
        assert c.get("/health").json()["status"] == "ok"
        assert c.post("/v1/pools", json={"name": "logs", "key": "ts"}).status_code == 201
        assert [p["name"] for p in c.get("/v1/pools").json()] == ["logs"]


def test_the_cli_trusts_limno_ca_bundle(tls: tuple[Served, str]) -> None:
    served, cert = tls
    env = {**served.env, "LIMNO_CA_BUNDLE": cert}
    created = _limno("--lake", served.url, "create", "events", "-k", "ts", env=env)
    assert created.returncode == 0, created.stderr
    listed = _limno("--lake", served.url, "-f", "ndjson", "ls", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "events" in listed.stdout
    untrusted = _limno("--lake", served.url, "ls", env={**served.env, "LIMNO_CA_BUNDLE": ""})
    assert untrusted.returncode == 1
    assert untrusted.stderr.startswith("error: cannot reach limno server")
    assert "certificate" in untrusted.stderr.lower()
    assert len(untrusted.stderr.splitlines()) == 1


def test_stop_cuts_a_followed_event_stream_over_tls(
    tls: tuple[Served, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C of ``limno watch`` on an HTTPS server: the TLS socket shut down under a
    blocked read ends it at once and quietly, as on plain HTTP."""
    served, cert = tls
    for k, v in {**served.env, "LIMNO_CA_BUNDLE": cert}.items():
        monkeypatch.setenv(k, v)
    with RemoteLake(served.url) as remote:
        remote.create_pool("watched", key="ts")
    stop = threading.Event()
    thread, got = watching(served.url, stop, 10, "watched", after=None)  # keep-alives 15 s apart
    try:  # the pool's two events so far: then the reader waits on the stream for more
        events = [got.get(timeout=BOUND) for _ in range(2)]
        assert [getattr(e, "type", e) for e in events] == ["pool.created", "branch.created"]
    finally:
        stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert got.empty()


def test_plain_http_to_the_tls_port_fails(tls: tuple[Served, str]) -> None:
    served, _ = tls
    plain = served.url.replace("https://", "http://")
    with httpx.Client(base_url=plain, timeout=BOUND) as c, pytest.raises(httpx.HTTPError):
        c.get("/health")


def test_tls_needs_both_files(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    Lake.init(lake)
    cert, _ = self_signed(tmp_path)
    done = _limno("--lake", lake, "serve", "--no-auth", "--port", "0", "--tls-cert", cert, env={})
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == "error: TLS needs both --tls-cert and --tls-key"
