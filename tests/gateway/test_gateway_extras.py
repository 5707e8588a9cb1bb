"""The gateway's answers beyond plain reads and writes, with boto3 against a real
``limno serve --s3-port``: writes to refs other than branches (AccessDenied),
checksums stored and returned (``x-amz-checksum-mode``), GET/HEAD ``?partNumber``
of multipart objects, and ``--s3-autocommit`` all or nothing when the commit fails."""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, gateway, new_gateway, s3
from limno.core.hooks import HookSpec

__all__ = ["gateway", "s3"]

MIB = 1 << 20


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def test_writes_to_a_tag_or_a_commit_are_access_denied(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    s3.put_object(Bucket=bucket, Key="main/a.txt", Body=b"one")
    pool = gateway.lake().file_pool(bucket)
    commit = pool.commit("main", "first").id
    pool.tag("v1", "main")
    for ref in ("v1", commit):
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key=f"{ref}/a.txt", Body=b"two")
        assert code(e) == "AccessDenied"
        assert "read-only" in e.value.response["Error"]["Message"]
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        with pytest.raises(ClientError) as e:
            s3.delete_object(Bucket=bucket, Key=f"{ref}/a.txt")
        assert code(e) == "AccessDenied"
        with pytest.raises(ClientError) as e:
            s3.create_multipart_upload(Bucket=bucket, Key=f"{ref}/big.bin")
        assert code(e) == "AccessDenied"
        with pytest.raises(ClientError) as e:
            s3.copy_object(
                Bucket=bucket,
                Key=f"{ref}/b.txt",
                CopySource={"Bucket": bucket, "Key": "main/a.txt"},
            )
        assert code(e) == "AccessDenied"
        out = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"{ref}/a.txt"}]})
        assert [x["Code"] for x in out["Errors"]] == ["AccessDenied"]
        # reads of the ref are fine, and nothing changed
        assert s3.get_object(Bucket=bucket, Key=f"{ref}/a.txt")["Body"].read() == b"one"
    assert pool.uncommitted("main") == []
    # a ref that does not exist at all is no key
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="nosuchbranch/a.txt", Body=b"x")
    assert code(e) == "NoSuchKey"


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def test_checksums_are_stored_and_returned(gateway: Gateway, s3: Any) -> None:
    """Over TLS boto3 sends the checksum in an aws-chunked trailer: known only after
    the body, stored all the same."""
    bucket = gateway.pool()
    body = os.urandom(300_000)
    expected = {
        "CRC32": _b64(zlib.crc32(body).to_bytes(4, "big")),
        "SHA1": _b64(hashlib.sha1(body).digest()),
        "SHA256": _b64(hashlib.sha256(body).digest()),
    }
    for algorithm in ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"):
        key = f"main/{algorithm}.bin"
        put = s3.put_object(Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm=algorithm)
        sent = put[f"Checksum{algorithm}"]
        if algorithm in expected:
            assert sent == expected[algorithm]
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert head[f"Checksum{algorithm}"] == sent
        assert head["ChecksumType"] == "FULL_OBJECT"
        got = s3.get_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
        assert got[f"Checksum{algorithm}"] == sent
        assert got["Body"].read() == body  # boto3 validates the checksum as it reads
        # not asked for: none sent; a range: none (the checksum is of the whole object)
        assert f"Checksum{algorithm}" not in s3.head_object(Bucket=bucket, Key=key)
        ranged = s3.get_object(Bucket=bucket, Key=key, Range="bytes=0-9", ChecksumMode="ENABLED")
        assert f"Checksum{algorithm}" not in ranged
        assert ranged["Body"].read() == body[:10]
    # a copy keeps the checksum of its bytes, also when it replaces the metadata
    s3.copy_object(
        Bucket=bucket,
        Key="main/copy.bin",
        CopySource={"Bucket": bucket, "Key": "main/SHA1.bin"},
        MetadataDirective="REPLACE",
        Metadata={"k": "v"},
    )
    head = s3.head_object(Bucket=bucket, Key="main/copy.bin", ChecksumMode="ENABLED")
    assert head["ChecksumSHA1"] == expected["SHA1"]
    assert head["Metadata"] == {"k": "v"}
    # the reserved names never come back as user metadata
    assert s3.head_object(Bucket=bucket, Key="main/CRC32.bin")["Metadata"] == {}


def test_part_number_reads_one_part(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(1000)]
    up = s3.create_multipart_upload(Bucket=bucket, Key="main/big.bin")["UploadId"]
    done = []
    for n, data in enumerate(parts, 1):
        etag = s3.upload_part(
            Bucket=bucket, Key="main/big.bin", UploadId=up, PartNumber=n, Body=data
        )["ETag"]
        done.append({"PartNumber": n, "ETag": etag})
    s3.complete_multipart_upload(
        Bucket=bucket, Key="main/big.bin", UploadId=up, MultipartUpload={"Parts": done}
    )
    for n, data in enumerate(parts, 1):
        got = s3.get_object(Bucket=bucket, Key="main/big.bin", PartNumber=n)
        assert got["Body"].read() == data
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["PartsCount"] == 3
        start = sum(len(p) for p in parts[: n - 1])
        assert got["ContentRange"] == f"bytes {start}-{start + len(data) - 1}/{10 * MIB + 1000}"
    head = s3.head_object(Bucket=bucket, Key="main/big.bin", PartNumber=3)
    assert (head["ContentLength"], head["PartsCount"]) == (1000, 3)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/big.bin", PartNumber=4)
    assert code(e) == "InvalidPartNumber"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="main/big.bin", PartNumber=1, Range="bytes=0-1")
    assert code(e) == "InvalidRequest"
    # committed and read from a tag: the part sizes went with the entry
    pool = gateway.lake().file_pool(bucket)
    pool.commit("main", "big")
    pool.tag("v1", "main")
    got = s3.get_object(Bucket=bucket, Key="v1/big.bin", PartNumber=2)
    assert got["Body"].read() == parts[1]
    # an object written in one piece is its own part 1
    s3.put_object(Bucket=bucket, Key="main/small.txt", Body=b"small")
    got = s3.get_object(Bucket=bucket, Key="main/small.txt", PartNumber=1)
    assert got["Body"].read() == b"small"
    assert "PartsCount" not in got
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="main/small.txt", PartNumber=2)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 416


@pytest.fixture(scope="module")
def autocommitting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A plain-HTTP gateway with ``--s3-autocommit`` (boto3 sends checksums as headers)."""
    made = new_gateway(tmp_path_factory.mktemp("autocommit"), "--s3-autocommit")
    try:
        yield made
    finally:
        made.close()
        assert made.served.stop() == 0, made.served.lines


def test_autocommit_is_all_or_nothing(autocommitting: Gateway) -> None:
    s3 = autocommitting.client()
    bucket = autocommitting.pool()
    pool = autocommitting.lake().file_pool(bucket)
    put = s3.put_object(Bucket=bucket, Key="main/kept.txt", Body=b"kept")
    assert [c.message for c in pool.log("main")][0] == "S3 PutObject main/kept.txt"
    # a checksum sent as a header is stored too
    head = s3.head_object(Bucket=bucket, Key="main/kept.txt", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == put["ChecksumCRC32"]
    commits = len(pool.log("main"))
    pool.add_hook(HookSpec(name="veto", event="pre-commit", run="false"))
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/new.txt", Body=b"new")
    assert code(e) == "PreconditionFailed"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="main/new.txt")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="main/kept.txt", Body=b"replaced")
    assert s3.get_object(Bucket=bucket, Key="main/kept.txt")["Body"].read() == b"kept"
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=bucket, Key="main/kept.txt")
    assert code(e) == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="main/kept.txt")["Body"].read() == b"kept"
    with pytest.raises(ClientError) as e:
        s3.copy_object(
            Bucket=bucket,
            Key="main/copy.txt",
            CopySource={"Bucket": bucket, "Key": "main/kept.txt"},
        )
    out = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/kept.txt"}]})
    assert [x["Code"] for x in out["Errors"]] == ["PreconditionFailed"]
    assert pool.uncommitted("main") == []
    assert len(pool.log("main")) == commits
    pool.remove_hook("veto")
    s3.delete_object(Bucket=bucket, Key="main/kept.txt")
    assert pool.uncommitted("main") == []
    assert len(pool.log("main")) == commits + 1
