"""Multipart uploads through the S3 gateway: boto3's managed transfers (upload_file of
20 MB: multipart above 8 MB; download_file back in ranged parts), and each operation
with S3's rules and error codes (EntityTooSmall, InvalidPart, InvalidPartOrder,
NoSuchUpload), upload part copy, list parts and list uploads."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from gateway.gateway_app_support import Gateway, gateway, s3

__all__ = ["gateway", "s3"]  # fixtures

MIB = 1 << 20


def code(e: pytest.ExceptionInfo[ClientError]) -> str:
    return str(e.value.response["Error"]["Code"])


def multipart_etag(*parts: bytes) -> str:
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def test_upload_file_and_download_file(gateway: Gateway, s3: Any, tmp_path: Path) -> None:
    bucket = gateway.pool()
    source = tmp_path / "big.bin"
    data = os.urandom(20 * MIB)
    source.write_bytes(data)
    s3.upload_file(str(source), bucket, "main/models/big.bin")
    head = s3.head_object(Bucket=bucket, Key="main/models/big.bin")
    assert head["ContentLength"] == len(data)
    eight = 8 * MIB  # boto3's default part size
    assert head["ETag"] == multipart_etag(data[:eight], data[eight : 2 * eight], data[2 * eight :])
    target = tmp_path / "back.bin"
    s3.download_file(bucket, "main/models/big.bin", str(target))
    assert target.read_bytes() == data
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads") is None


def test_parts_listing_and_completion(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    made = s3.create_multipart_upload(
        Bucket=bucket, Key="main/m.bin", ContentType="video/mp4", Metadata={"camera": "x"}
    )
    upload = made["UploadId"]
    assert (made["Bucket"], made["Key"]) == (bucket, "main/m.bin")
    one, two = os.urandom(5 * MIB), b"tail"
    etags = [
        s3.upload_part(Bucket=bucket, Key="main/m.bin", UploadId=upload, PartNumber=n, Body=b)[
            "ETag"
        ]
        for n, b in ((1, one), (2, two))
    ]
    assert etags == [f'"{hashlib.md5(b).hexdigest()}"' for b in (one, two)]
    parts = s3.list_parts(Bucket=bucket, Key="main/m.bin", UploadId=upload)
    assert [(p["PartNumber"], p["Size"]) for p in parts["Parts"]] == [(1, 5 * MIB), (2, 4)]
    first = s3.list_parts(Bucket=bucket, Key="main/m.bin", UploadId=upload, MaxParts=1)
    assert first["IsTruncated"] and first["NextPartNumberMarker"] == 1
    uploads = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [("main/m.bin", upload)]
    assert s3.list_multipart_uploads(Bucket=bucket, Prefix="dev/").get("Uploads") is None
    with pytest.raises(ClientError):  # not visible before completion
        s3.head_object(Bucket=bucket, Key="main/m.bin")
    done = s3.complete_multipart_upload(
        Bucket=bucket,
        Key="main/m.bin",
        UploadId=upload,
        MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": e} for n, e in ((1, etags[0]), (2, etags[1]))]
        },
    )
    assert done["ETag"] == multipart_etag(one, two) and done["Key"] == "main/m.bin"
    got = s3.get_object(Bucket=bucket, Key="main/m.bin")
    assert got["Body"].read() == one + two
    assert (got["ContentType"], got["Metadata"]) == ("video/mp4", {"camera": "x"})
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads") is None


def test_multipart_errors(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    key = "main/e.bin"
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    small = [
        s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n, Body=b"x" * 10)[
            "ETag"
        ]
        for n in (1, 2)
    ]

    def complete(parts: list[dict[str, Any]], upload_id: str = upload, to: str = key) -> Any:
        return s3.complete_multipart_upload(
            Bucket=bucket, Key=to, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )

    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 1, "ETag": small[0]}, {"PartNumber": 2, "ETag": small[1]}])
    assert code(e) == "EntityTooSmall"
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}])
    assert code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 3, "ETag": small[0]}])
    assert code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        complete([{"PartNumber": 2, "ETag": small[1]}, {"PartNumber": 1, "ETag": small[0]}])
    assert code(e) == "InvalidPartOrder"
    with pytest.raises(ClientError) as e:  # an upload of another key
        complete([{"PartNumber": 1, "ETag": small[0]}], to="main/other")
    assert code(e) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=10001, Body=b"x")
    assert code(e) == "InvalidArgument"
    # one part alone may be small
    assert complete([{"PartNumber": 2, "ETag": small[1]}])["ETag"] == multipart_etag(b"x" * 10)
    with pytest.raises(ClientError) as e:  # completed: gone
        complete([{"PartNumber": 1, "ETag": small[0]}])
    assert code(e) == "NoSuchUpload"
    aborted = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=aborted)
    for call in (
        lambda: s3.upload_part(Bucket=bucket, Key=key, UploadId=aborted, PartNumber=1, Body=b"x"),
        lambda: s3.list_parts(Bucket=bucket, Key=key, UploadId=aborted),
        lambda: s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=aborted),
        lambda: s3.list_parts(Bucket=bucket, Key=key, UploadId="not-an-upload"),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert code(e) == "NoSuchUpload"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404


def test_upload_part_copy(gateway: Gateway, s3: Any) -> None:
    bucket = gateway.pool()
    gateway.lake().file_pool(bucket).branch("dev")
    data = os.urandom(6 * MIB)
    s3.put_object(Bucket=bucket, Key="main/src", Body=data)
    key = "dev/assembled"
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    source = {"Bucket": bucket, "Key": "main/src"}
    first = s3.upload_part_copy(
        Bucket=bucket,
        Key=key,
        UploadId=upload,
        PartNumber=1,
        CopySource=source,
        CopySourceRange=f"bytes=0-{5 * MIB - 1}",
    )
    second = s3.upload_part_copy(
        Bucket=bucket,
        Key=key,
        UploadId=upload,
        PartNumber=2,
        CopySource=source,
        CopySourceRange=f"bytes={5 * MIB}-{6 * MIB - 1}",
    )
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(
            Bucket=bucket,
            Key=key,
            UploadId=upload,
            PartNumber=3,
            CopySource=source,
            CopySourceRange=f"bytes=0-{6 * MIB}",
        )
    assert code(e) == "InvalidRange"
    parts = [
        {"PartNumber": 1, "ETag": first["CopyPartResult"]["ETag"]},
        {"PartNumber": 2, "ETag": second["CopyPartResult"]["ETag"]},
    ]
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert done["ETag"] == multipart_etag(data[: 5 * MIB], data[5 * MIB :])
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    # boto3's managed copy of a large object: UploadPartCopy (multipart above 8 MB)
    big = os.urandom(9 * MIB)
    s3.put_object(Bucket=bucket, Key="main/big", Body=big)
    s3.copy({"Bucket": bucket, "Key": "main/big"}, bucket, "dev/big")
    assert s3.get_object(Bucket=bucket, Key="dev/big")["Body"].read() == big
    assert s3.head_object(Bucket=bucket, Key="dev/big")["ETag"].endswith('-2"')
