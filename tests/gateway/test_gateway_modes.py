"""The gateway's serving modes: ``--s3-root-branch`` (keys are paths on one branch of
every pool; CreateBucket and DeleteBucket create and drop file pools) with
``--s3-autocommit`` (one commit per completed write), virtual-host addressing
(``--s3-domain``), two server processes (``--workers 2``), and the options' checks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, new_gateway, signed

DOMAIN = "s3.limno.test"


@pytest.fixture(scope="module")
def rooted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    made = new_gateway(
        tmp_path_factory.mktemp("rooted"),
        "--s3-root-branch",
        "live",
        "--s3-autocommit",
        "--s3-domain",
        DOMAIN,
        "--body-timeout",
        "1",
        workers=2,
    )
    try:
        yield made
    finally:
        made.close()
        assert made.served.stop() == 0, made.served.lines


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def messages(gateway: Gateway, bucket: str) -> list[str]:
    return [c.message for c in gateway.lake().file_pool(bucket).log("live")]


def test_buckets_are_pools_and_writes_commit(rooted: Gateway) -> None:
    s3 = rooted.client()
    s3.create_bucket(Bucket="fresh")
    pool = rooted.lake().file_pool("fresh")
    assert "live" in pool.branches()
    assert "fresh" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.put_object(Bucket="fresh", Key="data/x.csv", Body=b"a,b\n1,2\n")
    assert pool.uncommitted("live") == []
    assert messages(rooted, "fresh")[0] == "S3 PutObject data/x.csv"
    assert s3.get_object(Bucket="fresh", Key="data/x.csv")["Body"].read() == b"a,b\n1,2\n"
    listed = s3.list_objects_v2(Bucket="fresh", Delimiter="/")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["data/"]
    s3.copy_object(Bucket="fresh", Key="data/y.csv", CopySource="fresh/data/x.csv")
    upload = s3.create_multipart_upload(Bucket="fresh", Key="data/z.bin")["UploadId"]
    etag = s3.upload_part(
        Bucket="fresh", Key="data/z.bin", UploadId=upload, PartNumber=1, Body=b"z"
    )
    s3.complete_multipart_upload(
        Bucket="fresh",
        Key="data/z.bin",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag["ETag"]}]},
    )
    assert messages(rooted, "fresh")[:2] == [
        "S3 CompleteMultipartUpload data/z.bin",
        "S3 CopyObject data/y.csv",
    ]
    assert pool.uncommitted("live") == []
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="fresh")
    assert code(e) == "BucketAlreadyOwnedByYou"
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="fresh")
    assert code(e) == "BucketNotEmpty"
    s3.delete_objects(
        Bucket="fresh",
        Delete={"Objects": [{"Key": k} for k in ("data/x.csv", "data/y.csv", "data/z.bin")]},
    )
    assert messages(rooted, "fresh")[0] == "S3 DeleteObjects (3 keys)"
    assert "Contents" not in s3.list_objects_v2(Bucket="fresh")
    s3.delete_bucket(Bucket="fresh")
    assert "fresh" not in [c.name for c in rooted.lake().list_pools()]
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket="fresh")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_create_bucket_refusals(rooted: Gateway) -> None:
    s3 = rooted.client()
    rooted.lake().create_pool("records-pool", key="ts")
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="records-pool")
    assert code(e) == "BucketAlreadyExists"
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="bad..name")
    assert code(e) == "InvalidBucketName"


def test_virtual_host_addressing(rooted: Gateway) -> None:
    s3 = rooted.client()
    s3.create_bucket(Bucket="vhost")
    s3.put_object(Bucket="vhost", Key="dir/file.txt", Body=b"by host")
    port = rooted.url.rsplit(":", 1)[1]
    host = f"vhost.{DOMAIN}:{port}"
    got = signed(rooted, "GET", "/dir/file.txt", host=host)
    assert (got.status_code, got.content) == (200, b"by host")
    listed = signed(rooted, "GET", "/?list-type=2&prefix=dir%2F", host=host)
    assert listed.status_code == 200 and "<Key>dir/file.txt</Key>" in listed.text
    put = signed(rooted, "PUT", "/dir/new.txt", body=b"new", host=host)
    assert put.status_code == 200
    assert s3.get_object(Bucket="vhost", Key="dir/new.txt")["Body"].read() == b"new"
    # the domain itself is path-style
    plain = signed(rooted, "GET", "/vhost/dir/file.txt", host=f"{DOMAIN}:{port}")
    assert plain.content == b"by host"


def test_a_stalled_body_times_out(rooted: Gateway) -> None:
    """A client that stops sending its body gets RequestTimeout (--body-timeout 1), and
    nothing is written."""
    s3 = rooted.client()
    s3.create_bucket(Bucket="stalled")
    body = b"x" * 100
    key_id, secret = rooted.key
    url = f"{rooted.url}/stalled/half.bin"
    host, port = rooted.url.removeprefix("http://").rsplit(":", 1)
    request = AWSRequest(method="PUT", url=url, data=body, headers={"Host": f"{host}:{port}"})
    S3SigV4Auth(Credentials(key_id, secret), "s3", "us-east-1").add_auth(request)
    head = "".join(f"{k}: {v}\r\n" for k, v in request.prepare().headers.items())
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(f"PUT /stalled/half.bin HTTP/1.1\r\n{head}\r\n".encode() + body[:10])
        answer = b""
        while b"</Error>" not in answer:
            piece = conn.recv(65536)
            if not piece:
                break
            answer += piece
    assert answer.startswith(b"HTTP/1.1 400") and b"<Code>RequestTimeout</Code>" in answer
    assert "Contents" not in s3.list_objects_v2(Bucket="stalled")


def test_no_auth_server(tmp_path: Path) -> None:
    """--no-auth: no signature is checked, bodies are decoded all the same (aws-chunked
    with trailing checksums over TLS, which a wrong checksum still fails)."""
    made = new_gateway(tmp_path, "--no-auth", tls=True)
    try:
        s3 = made.client()
        bucket = made.pool()
        s3.put_object(Bucket=bucket, Key="main/open", Body=b"o" * 100_000)
        assert s3.get_object(Bucket=bucket, Key="main/open")["Body"].read() == b"o" * 100_000
        bad = signed(
            made,
            "PUT",
            f"/{bucket}/main/bad",
            body=b"abc",
            headers={"x-amz-checksum-crc32": "AAAAAA=="},
        )
        assert bad.status_code == 400 and "BadDigest" in bad.text
    finally:
        made.close()
        assert made.served.stop() == 0, made.served.lines


def test_options_need_the_port(tmp_path: Path) -> None:
    for args in (["--s3-domain", "x.test"], ["--s3-autocommit"], ["--s3-root-branch", "main"]):
        done = subprocess.run(
            [sys.executable, "-m", "limno", "--lake", str(tmp_path / "lake"), "serve", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "LIMNO_AUTH_SECRET": "x" * 32},
            check=False,
        )
        assert done.returncode == 1, done
        assert "needs --s3-port" in done.stderr


def test_same_port_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "limno",
            "--lake",
            str(tmp_path / "lake"),
            "serve",
            "--port",
            "19999",
            "--s3-port",
            "19999",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LIMNO_AUTH_SECRET": "x" * 32},
        check=False,
    )
    assert done.returncode == 1 and "API's port" in done.stderr, done
