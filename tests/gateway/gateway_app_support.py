"""What the S3 gateway's end-to-end tests share: a real ``limno serve --s3-port 0``,
boto3 clients with their default settings, fresh file pools, signed raw requests.

The module fixture serves HTTPS (a certificate made here, trusted by the clients):
botocore sends its default checksums as aws-chunked trailers
(``STREAMING-UNSIGNED-PAYLOAD-TRAILER``) only over TLS; over plain HTTP it signs the
payload's SHA-256 instead, which the root-branch suite (plain HTTP) covers.

Test modules import the fixtures they use from here (``from gateway.gateway_app_support
import gateway, s3``): one server per module, a fresh pool per test (pools are made
in this process, on the lake the server serves: the server reads the registry
afresh on every request).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from limno import Lake
from limno.api.local import LocalLake
from limno.api.local_auth import LocalAuth
from server_support import Served, served_user, start_server
from tls_support import self_signed

__all__ = ["Gateway", "gateway", "new_gateway", "s3", "signed"]

_names = itertools.count()


@dataclass
class Gateway:
    """A served lake with its S3 gateway, and the clients made for it (closed at the end)."""

    served: Served
    #: the certificate clients trust (None: plain HTTP)
    ca: str | None = None
    clients: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.served.s3_url

    @property
    def key(self) -> tuple[str, str]:
        """The admin's key pair (any pair on a --no-auth server: none is checked)."""
        if not self.served.env:
            return "LKIANOAUTHNOAUTHNOAU", "any-secret-at-all"
        return self.served.env["LIMNO_ACCESS_KEY_ID"], self.served.env["LIMNO_SECRET_ACCESS_KEY"]

    def client(self, env: dict[str, str] | None = None, **config: Any) -> Any:
        """A boto3 S3 client of the gateway with boto3's defaults (``config``: a
        botocore Config's settings), signing with ``env``'s key (default: the admin's)."""
        key_id, secret = self.key
        if env is not None:
            key_id, secret = env["LIMNO_ACCESS_KEY_ID"], env["LIMNO_SECRET_ACCESS_KEY"]
        client = boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            region_name="us-east-1",
            config=Config(**config) if config else None,
            verify=self.ca,
        )
        self.clients.append(client)
        return client

    def http(self) -> httpx.Client:
        """An httpx client that trusts the gateway's certificate."""
        verify: ssl.SSLContext | bool = True
        if self.ca is not None:
            verify = ssl.create_default_context(cafile=self.ca)
        return httpx.Client(timeout=60, verify=verify)

    def lake(self) -> Any:
        return Lake.open(self.served.lake)

    def pool(self, prefix: str = "p") -> str:
        """A new file pool (its name)."""
        name = f"{prefix}{next(_names)}-{os.getpid()}"
        self.lake().create_pool(name, kind="files")
        return name

    def user(self, role: str, grants: dict[str, str] | None = None) -> dict[str, str]:
        """A new user of ``role`` with ``grants`` (pool name -> level), made before the
        server ever sees its key; the environment of a client using it."""
        name = f"{role}{next(_names)}"
        env = served_user(self.served, name, role)
        if grants:
            assert self.served.secret is not None
            auth = LocalAuth(LocalLake.open(self.served.lake), server_secret=self.served.secret)
            for pool, level in grants.items():
                auth.grant(name, pool, level)
        return env

    def close(self) -> None:
        # responses a test let go of may still hold a connection (reference cycles of
        # its tracebacks): collected first, so that closing the clients closes every
        # socket; a TLS server would otherwise wait 30 s on each at shutdown
        gc.collect()
        for client in self.clients:
            client.close()
        self.clients.clear()


def new_gateway(
    root: Path,
    *args: str,
    workers: int | None = 1,
    tls: bool = False,
    env: dict[str, str] | None = None,
) -> Gateway:
    """A new lake at ``root/lake`` served with the gateway (``args``: more serve options;
    ``tls``: HTTPS with a certificate made here; ``env``: more of the server's environment,
    ``LIMNO_FAULTS`` say)."""
    lake = str(root / "lake")
    Lake.init(lake)
    ca = None
    if tls:
        ca, key = self_signed(root)
        args = (*args, "--tls-cert", ca, "--tls-key", key)
    served = start_server(lake, "--s3-port", "0", *args, workers=workers, env=env)
    assert served.s3_url, served.lines
    return Gateway(served, ca)


@contextlib.contextmanager
def running_gateway(
    root: Path, *args: str, tls: bool = False, env: dict[str, str] | None = None
) -> Iterator[Gateway]:
    """:func:`new_gateway` for a ``with``: at the end, exit code 0 and no traceback
    logged (every failure was an S3 error answer; an internal error a client retried
    past would hide in the log)."""
    made = new_gateway(root, *args, tls=tls, env=env)
    try:
        yield made
    finally:
        made.close()
        assert made.served.stop() == 0, made.served.lines
        assert not [line for line in made.served.lines if "Traceback" in line], made.served.lines


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One ``limno serve --s3-port 0`` (HTTPS) per module."""
    with running_gateway(tmp_path_factory.mktemp("gateway"), tls=True) as made:
        yield made


@pytest.fixture(scope="module")
def s3(gateway: Gateway) -> Any:
    """The admin's boto3 client (default settings: checksums, aws-chunked uploads)."""
    return gateway.client()


def signed(
    gateway: Gateway,
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    host: str | None = None,
) -> httpx.Response:
    """A raw request signed with SigV4 (botocore's signer), sent with httpx: for what a
    client library would refuse to send. ``host``: the Host header to sign and send
    (virtual-host addressing), the request still going to the gateway's address."""
    key_id, secret = gateway.key
    url = gateway.url + path
    sent = dict(headers or {})
    if host is not None:
        sent["Host"] = host
    request = AWSRequest(method=method, url=url, data=body, headers=sent)
    request.context["payload_signing_enabled"] = True
    S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    with gateway.http() as client:
        return client.request(method, url, content=body, headers=dict(prepared.headers.items()))
