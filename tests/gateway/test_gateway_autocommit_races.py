"""Conditional writes under ``limno serve --s3-autocommit`` lose no update: two boto3
clients A and B name the same committed version (If-Match) or no version (If-None-Match: *)
of a key; B's condition is judged, then A stages, commits and unstages, then B stages.
Exactly one gets 200 and the other 412 PreconditionFailed, the key holds the winner's
bytes, nothing is left staged and ``limno verify`` is clean.

B's stage is held back: the served lake delays the first creation of a staging entry
(``LIMNO_FAULTS``); A starts once B's bytes are written (a new blob in the pool), by
which time B has judged its condition. Without the commit's check B's create-only stage
finds nothing staged (A unstaged) and B's commit overwrote A's.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from bounded import join_all, wait_until
from gateway.gateway_app_support import Gateway, running_gateway

#: the first staging entry created (B's, the one held back) waits this long first
HELD_STAGE = "put_if_absent:1:delay=4@*/staging/*"

Write = Callable[[Any, bytes], Any]


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[Gateway]:
    env = {"LIMNO_FAULTS": HELD_STAGE}
    with running_gateway(tmp_path, "--s3-autocommit", env=env) as made:
        yield made


def outcome(write: Callable[[], Any]) -> str:
    """The write's outcome: "ok", or the S3 error code it got with its HTTP status."""
    try:
        write()
    except ClientError as e:
        return f"{e.response['Error']['Code']} {e.response['ResponseMetadata']['HTTPStatusCode']}"
    return "ok"


def blobs(gateway: Gateway, bucket: str) -> int:
    pool_id = gateway.lake().file_pool(bucket).id
    return sum(p.is_file() for p in Path(gateway.served.lake, pool_id, "data").rglob("*"))


def race(gateway: Gateway, bucket: str, write: Write) -> bytes:
    """B writes (held at its stage); once its bytes are in, A writes; exactly one of
    them wins. The key's bytes after, committed."""
    a, b = gateway.client(), gateway.client()
    before = blobs(gateway, bucket)
    results: dict[str, str] = {}
    b_thread = threading.Thread(target=lambda: results.update(b=outcome(lambda: write(b, b"B"))))
    b_thread.start()
    wait_until(lambda: blobs(gateway, bucket) > before, "B's bytes written")
    results["a"] = outcome(lambda: write(a, b"A"))
    join_all([b_thread])
    assert sorted(results.values()) == ["PreconditionFailed 412", "ok"], results
    winner = b"A" if results["a"] == "ok" else b"B"
    pool = gateway.lake().file_pool(bucket)
    assert not pool.uncommitted("main"), pool.uncommitted("main")
    held = b"".join(pool.read("target", "main"))
    assert held == winner, (held, results)
    verified = subprocess.run(
        [sys.executable, "-m", "limno", "--lake", gateway.served.lake, "verify"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    return held


def committed_target(gateway: Gateway) -> tuple[str, str]:
    """A new bucket with ``main/target`` committed (autocommit); its name and ETag."""
    bucket = gateway.pool("auto")
    etag = gateway.client().put_object(Bucket=bucket, Key="main/target", Body=b"original")
    return bucket, etag["ETag"]


def test_racing_puts_with_if_match_lose_no_update(gateway: Gateway) -> None:
    bucket, etag = committed_target(gateway)
    race(
        gateway,
        bucket,
        lambda s3, data: s3.put_object(Bucket=bucket, Key="main/target", Body=data, IfMatch=etag),
    )


def test_racing_creates_with_if_none_match_lose_no_update(gateway: Gateway) -> None:
    bucket = gateway.pool("auto")
    race(
        gateway,
        bucket,
        lambda s3, data: s3.put_object(
            Bucket=bucket, Key="main/target", Body=data, IfNoneMatch="*"
        ),
    )


def test_racing_copies_with_if_match_lose_no_update(gateway: Gateway) -> None:
    bucket, etag = committed_target(gateway)
    source = gateway.pool("src")  # another pool's bytes are copied: a blob B writes
    s3 = gateway.client()
    for name in ("A", "B"):
        s3.put_object(Bucket=source, Key=f"main/{name}", Body=name.encode())

    def copy(client: Any, data: bytes) -> Any:
        return client.copy_object(
            Bucket=bucket,
            Key="main/target",
            CopySource={"Bucket": source, "Key": f"main/{data.decode()}"},
            IfMatch=etag,
        )

    race(gateway, bucket, copy)


def test_racing_completions_with_if_match_lose_no_update(gateway: Gateway) -> None:
    bucket, etag = committed_target(gateway)
    s3 = gateway.client()
    uploads: dict[bytes, tuple[str, str]] = {}
    for data in (b"A", b"B"):
        upload = s3.create_multipart_upload(Bucket=bucket, Key="main/target")["UploadId"]
        part = s3.upload_part(
            Bucket=bucket, Key="main/target", UploadId=upload, PartNumber=1, Body=data
        )
        uploads[data] = (upload, part["ETag"])

    def complete(client: Any, data: bytes) -> Any:
        upload, part = uploads[data]
        return client.complete_multipart_upload(
            Bucket=bucket,
            Key="main/target",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part}]},
            IfMatch=etag,
        )

    race(gateway, bucket, complete)
