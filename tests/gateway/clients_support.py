"""What the tests of third-party clients against the S3 gateway share: a plain-HTTP
``limno serve --s3-port 0`` per module (the clients here are configured for an
``http://`` endpoint, as most S3-compatible deployments on a private network are),
the admin's key for them, and ``limno`` commands run against the server's HTTP API
as that admin (commit, tag, merge: what a user does between two client jobs).

Test modules import the fixture they use from here (``from gateway.clients_support
import plain``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clirunner import Result, ok
from gateway.gateway_app_support import Gateway, running_gateway

__all__ = ["REGION", "Gateway", "limno", "plain", "s3a_conf"]

#: any region: the gateway does not check the one in a signature
REGION = "us-east-1"


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """One ``limno serve --s3-port 0`` over plain HTTP per module; at the end, exit code
    0 and no traceback logged (an internal error a client retried past would hide)."""
    with running_gateway(tmp_path_factory.mktemp("clients")) as made:
        yield made


def limno(gateway: Gateway, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    """``limno --lake SERVER ARGS...`` as the admin (in this process, through the HTTP
    API of the server that also serves the gateway); it must succeed."""
    for name, value in gateway.served.env.items():
        monkeypatch.setenv(name, value)
    return ok("--lake", gateway.served.url, *args)


def s3a_conf(gateway: Gateway) -> dict[str, str]:
    """What a Spark job needs to reach the gateway with s3a (the README shows it)."""
    key_id, secret = gateway.key
    return {
        "spark.hadoop.fs.s3a.endpoint": gateway.url,
        "spark.hadoop.fs.s3a.endpoint.region": REGION,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": key_id,
        "spark.hadoop.fs.s3a.secret.key": secret,
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        ),
    }
