"""If-Match on CopyObject and CompleteMultipartUpload is one atomic step, like
PutObject's: two clients racing to replace the same version of a key, through boto3
against a real ``limno serve``, see exactly one 200 and one 412 PreconditionFailed,
and the key holds the winner's bytes.

The served lake's staging writes are slowed down (``LIMNO_FAULTS`` delays each write
under ``staging/``), so that both requests have judged their condition before either
stages its entry: the window in which a check-then-write gateway let both win (the
second overwriting the first) is always open, and only an atomic stage closes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from bounded import join_all
from gateway.gateway_app_support import Gateway
from limno import Lake
from server_support import start_server

#: every write of a staging entry waits this long first: the race window, held open
SLOW_STAGING = "write:*:delay=0.4@*/staging/*"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    lake = str(tmp_path_factory.mktemp("races") / "lake")
    Lake.init(lake)
    served = start_server(lake, "--s3-port", "0", env={"LIMNO_FAULTS": SLOW_STAGING})
    made = Gateway(served)
    try:
        yield made
    finally:
        made.close()
        assert served.stop() == 0, served.lines
        assert not [line for line in served.lines if "Traceback" in line], served.lines


def race(*writes: Callable[[], Any]) -> list[str]:
    """Run ``writes`` at once, each in its thread; each one's outcome: "ok" or the S3
    error code it got (with its HTTP status)."""
    start = threading.Barrier(len(writes))
    outcomes: dict[int, str] = {}

    def run(n: int, write: Callable[[], Any]) -> None:
        start.wait(30)
        try:
            write()
            outcomes[n] = "ok"
        except ClientError as e:
            status = e.response["ResponseMetadata"]["HTTPStatusCode"]
            outcomes[n] = f"{e.response['Error']['Code']} {status}"

    threads = [threading.Thread(target=run, args=(n, w)) for n, w in enumerate(writes)]
    for t in threads:
        t.start()
    join_all(threads)
    return [outcomes.get(n, "no outcome") for n in range(len(writes))]


def one_winner(outcomes: list[str]) -> int:
    """The index of the one writer that won; the other got 412."""
    assert sorted(outcomes) == ["PreconditionFailed 412", "ok"], outcomes
    return outcomes.index("ok")


def target(gateway: Gateway, committed: bool) -> tuple[str, str]:
    """A new pool with ``main/target`` written (and committed, or only staged); the
    bucket and the target's ETag, which both racers name in If-Match."""
    bucket = gateway.pool("race")
    s3 = gateway.client()
    etag = s3.put_object(Bucket=bucket, Key="main/target", Body=b"original")["ETag"]
    if committed:
        gateway.lake().file_pool(bucket).commit("main", "the target")
    return bucket, etag


def body(s3: Any, bucket: str, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return data


@pytest.mark.parametrize("committed", [False, True], ids=["staged", "committed"])
@pytest.mark.parametrize("across", [False, True], ids=["same-pool", "other-pool"])
def test_racing_copies_with_if_match_have_one_winner(
    gateway: Gateway, committed: bool, across: bool
) -> None:
    bucket, etag = target(gateway, committed)
    source = gateway.pool("src") if across else bucket
    clients = [gateway.client(), gateway.client()]
    for n, s3 in enumerate(clients):
        s3.put_object(Bucket=source, Key=f"main/src{n}", Body=f"copy {n}".encode())

    def copy(n: int) -> Callable[[], Any]:
        return lambda: clients[n].copy_object(
            Bucket=bucket,
            Key="main/target",
            CopySource={"Bucket": source, "Key": f"main/src{n}"},
            IfMatch=etag,
        )

    won = one_winner(race(copy(0), copy(1)))
    assert body(clients[0], bucket, "main/target") == f"copy {won}".encode()


@pytest.mark.parametrize("committed", [False, True], ids=["staged", "committed"])
def test_racing_multipart_completions_with_if_match_have_one_winner(
    gateway: Gateway, committed: bool
) -> None:
    bucket, etag = target(gateway, committed)
    clients = [gateway.client(), gateway.client()]
    uploads = []
    for n, s3 in enumerate(clients):
        upload = s3.create_multipart_upload(Bucket=bucket, Key="main/target")["UploadId"]
        part = s3.upload_part(
            Bucket=bucket, Key="main/target", UploadId=upload, PartNumber=1, Body=f"mp {n}".encode()
        )
        uploads.append((upload, part["ETag"]))

    def complete(n: int) -> Callable[[], Any]:
        upload, part = uploads[n]
        return lambda: clients[n].complete_multipart_upload(
            Bucket=bucket,
            Key="main/target",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part}]},
            IfMatch=etag,
        )

    won = one_winner(race(complete(0), complete(1)))
    assert body(clients[0], bucket, "main/target") == f"mp {won}".encode()
    # the loser's upload stays, as S3 keeps it after a failed condition
    left = clients[0].list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["UploadId"] for u in left] == [uploads[1 - won][0]]
