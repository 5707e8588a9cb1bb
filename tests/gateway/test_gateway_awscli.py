"""The AWS CLI, unchanged, against the S3 gateway: ``aws s3 cp/sync/ls/rm`` (a 20 MB
file goes up in parts) and ``aws s3api``, configured only by its environment and
``--endpoint-url``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gateway.gateway_app_support import Gateway, gateway

__all__ = ["gateway"]  # fixtures

MIB = 1 << 20


def aws(gateway: Gateway, home: Path, *args: str, data: bytes | None = None) -> str:
    """``aws --endpoint-url GATEWAY ARGS`` with the admin's key; its stdout."""
    key_id, secret = gateway.key
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "credentials"),
        "HOME": str(home),
    }
    if gateway.ca is not None:
        env["AWS_CA_BUNDLE"] = gateway.ca
    done = subprocess.run(
        [sys.executable, "-m", "awscli", "--endpoint-url", gateway.url, *args],
        input=data,
        capture_output=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (args, done.stderr.decode())
    return done.stdout.decode()


def test_aws_s3_commands(gateway: Gateway, tmp_path: Path) -> None:
    bucket = gateway.pool("cli")
    home = tmp_path / "home"
    home.mkdir()
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_bytes(b"alpha\n")
    (tree / "sub" / "b.txt").write_bytes(b"beta\n")
    big = tmp_path / "big.bin"
    payload = os.urandom(20 * MIB)
    big.write_bytes(payload)

    assert bucket in aws(gateway, home, "s3", "ls")
    aws(gateway, home, "s3", "cp", str(big), f"s3://{bucket}/main/models/big.bin")
    aws(gateway, home, "s3", "sync", str(tree), f"s3://{bucket}/main/tree/")
    listing = aws(gateway, home, "s3", "ls", "--recursive", f"s3://{bucket}/main/")
    names = [line.split()[-1] for line in listing.splitlines()]
    assert names == ["main/models/big.bin", "main/tree/a.txt", "main/tree/sub/b.txt"]
    top = aws(gateway, home, "s3", "ls", f"s3://{bucket}/")
    assert top.split() == ["PRE", "main/"]
    back = tmp_path / "back.bin"
    aws(gateway, home, "s3", "cp", f"s3://{bucket}/main/models/big.bin", str(back))
    assert back.read_bytes() == payload
    assert aws(gateway, home, "s3", "cp", f"s3://{bucket}/main/tree/a.txt", "-") == "alpha\n"
    # sync again: nothing changed, nothing to do
    assert aws(gateway, home, "s3", "sync", str(tree), f"s3://{bucket}/main/tree/") == ""
    down = tmp_path / "down"
    aws(gateway, home, "s3", "sync", f"s3://{bucket}/main/tree/", str(down))
    assert (down / "sub" / "b.txt").read_bytes() == b"beta\n"
    aws(gateway, home, "s3", "rm", "--recursive", f"s3://{bucket}/main/tree/")
    listing = aws(gateway, home, "s3", "ls", "--recursive", f"s3://{bucket}/main/")
    assert [line.split()[-1] for line in listing.splitlines()] == ["main/models/big.bin"]


def test_aws_s3api_commands(gateway: Gateway, tmp_path: Path) -> None:
    bucket = gateway.pool("api")
    home = tmp_path / "home"
    home.mkdir()
    body = tmp_path / "body.txt"
    body.write_bytes(b"s3api body")
    put = json.loads(
        aws(
            gateway,
            home,
            "s3api",
            "put-object",
            "--bucket",
            bucket,
            "--key",
            "main/k.txt",
            "--body",
            str(body),
            "--content-type",
            "text/plain",
            "--metadata",
            "team=data",
        )
    )
    head = json.loads(
        aws(gateway, home, "s3api", "head-object", "--bucket", bucket, "--key", "main/k.txt")
    )
    assert head["ETag"] == put["ETag"] and head["ContentLength"] == 10
    assert (head["ContentType"], head["Metadata"]) == ("text/plain", {"team": "data"})
    listed = json.loads(
        aws(gateway, home, "s3api", "list-objects-v2", "--bucket", bucket, "--prefix", "main/")
    )
    assert [o["Key"] for o in listed["Contents"]] == ["main/k.txt"]
    out = tmp_path / "out.txt"
    aws(
        gateway,
        home,
        "s3api",
        "get-object",
        "--bucket",
        bucket,
        "--key",
        "main/k.txt",
        "--range",
        "bytes=0-4",
        str(out),
    )
    assert out.read_bytes() == b"s3api"
    aws(gateway, home, "s3api", "delete-object", "--bucket", bucket, "--key", "main/k.txt")
    listed = json.loads(aws(gateway, home, "s3api", "list-objects-v2", "--bucket", bucket))
    assert "Contents" not in listed
