"""obstore (Rust's ``object_store``), unchanged, against the S3 gateway: put, get,
ranges, head, listings (flat and by delimiter, paged), copies, renames, conditional
puts (``mode="create"``: If-None-Match, and ``PutMode`` update: If-Match), deletes,
and a 24 MB ``put`` that goes up as a multipart upload, then committed and read at
the commit."""

from __future__ import annotations

import os

import obstore
import pytest
from obstore.exceptions import (
    AlreadyExistsError,
    NotModifiedError,
    PreconditionError,
)
from obstore.store import S3Store

from gateway.clients_support import REGION, Gateway, limno, plain

__all__ = ["plain"]  # fixtures

MIB = 1 << 20


def store(gateway: Gateway, bucket: str, prefix: str | None = None) -> S3Store:
    key_id, secret = gateway.key
    return S3Store(
        bucket,
        prefix=prefix,
        endpoint=gateway.url,
        access_key_id=key_id,
        secret_access_key=secret,
        region=REGION,
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )


def paths(s: S3Store, prefix: str | None = None) -> list[str]:
    return sorted(str(o["path"]) for batch in obstore.list(s, prefix=prefix) for o in batch)


def test_objects(plain: Gateway) -> None:
    bucket = plain.pool("obj")
    s = store(plain, bucket)
    put = obstore.put(s, "main/a/x.txt", b"hello, world\n")
    assert put["e_tag"] == '"22c3683b094136c3398391ae71b20f04"'  # md5 of the bytes
    got = obstore.get(s, "main/a/x.txt")
    assert bytes(got.bytes()) == b"hello, world\n"
    assert got.meta["size"] == 13 and got.meta["e_tag"] == put["e_tag"]
    assert bytes(obstore.get_range(s, "main/a/x.txt", start=7, end=12)) == b"world"
    ranges = obstore.get_ranges(s, "main/a/x.txt", starts=[0, 7], ends=[5, 12])
    assert [bytes(r) for r in ranges] == [b"hello", b"world"]
    assert obstore.head(s, "main/a/x.txt")["size"] == 13
    with pytest.raises(FileNotFoundError):
        obstore.get(s, "main/a/missing.txt")

    for name in ("a/y.txt", "a/sub/z.txt", "b.txt"):
        obstore.put(s, f"main/{name}", name.encode())
    assert paths(s, "main") == [
        "main/a/sub/z.txt",
        "main/a/x.txt",
        "main/a/y.txt",
        "main/b.txt",
    ]
    top = obstore.list_with_delimiter(s, prefix="main")
    assert top["common_prefixes"] == ["main/a"]
    assert [o["path"] for o in top["objects"]] == ["main/b.txt"]
    # the store rooted at a branch: paths are the branch's own
    on_main = store(plain, bucket, prefix="main")
    assert paths(on_main, "a") == ["a/sub/z.txt", "a/x.txt", "a/y.txt"]

    obstore.copy(s, "main/a/x.txt", "main/c/x.txt")
    obstore.rename(s, "main/c/x.txt", "main/d/x.txt")
    assert bytes(obstore.get(s, "main/d/x.txt").bytes()) == b"hello, world\n"
    assert "main/c/x.txt" not in paths(s, "main")

    obstore.delete(s, "main/d/x.txt")
    obstore.delete(s, ["main/a/y.txt", "main/a/sub/z.txt"])
    assert paths(s, "main") == ["main/a/x.txt", "main/b.txt"]


def test_conditional_puts(plain: Gateway) -> None:
    bucket = plain.pool("cond")
    s = store(plain, bucket)
    first = obstore.put(s, "main/lock", b"one", mode="create")
    with pytest.raises(AlreadyExistsError):
        obstore.put(s, "main/lock", b"two", mode="create")
    # update only from the version read (If-Match)
    second = obstore.put(s, "main/lock", b"two", mode={"e_tag": first["e_tag"]})
    with pytest.raises(PreconditionError):
        obstore.put(s, "main/lock", b"three", mode={"e_tag": first["e_tag"]})
    assert bytes(obstore.get(s, "main/lock").bytes()) == b"two"
    # conditional gets
    with pytest.raises(NotModifiedError):
        obstore.get(s, "main/lock", options={"if_none_match": second["e_tag"]})
    with pytest.raises(PreconditionError):
        obstore.get(s, "main/lock", options={"if_match": first["e_tag"]})


def test_multipart_then_commit(plain: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = plain.pool("multi")
    s = store(plain, bucket)
    payload = os.urandom(24 * MIB + 17)
    put = obstore.put(s, "main/model.bin", payload, chunk_size=6 * MIB)
    assert str(put["e_tag"]).endswith('-5"')  # 4 parts of 6 MiB, one of the rest
    pool = plain.lake().file_pool(bucket)
    assert pool.stat("model.bin", "main").size == len(payload)
    assert bytes(obstore.get(s, "main/model.bin").bytes()) == payload
    # a streamed put (an iterator of chunks) goes up in parts as well
    obstore.put(s, "main/streamed.bin", iter([payload[: 7 * MIB], payload[7 * MIB :]]))
    assert bytes(obstore.get(s, "main/streamed.bin").bytes()) == payload
    assert pool.stat("streamed.bin", "main").etag.endswith("-5")

    commit = limno(plain, monkeypatch, "commit", "-p", bucket, "-m", "model").text.split()[0]
    assert pool.uncommitted("main") == []
    at = store(plain, bucket, prefix=commit)
    assert (
        bytes(obstore.get_range(at, "model.bin", start=MIB, length=10)) == payload[MIB : MIB + 10]
    )
    obstore.delete(s, "main/model.bin")
    with pytest.raises(FileNotFoundError):
        obstore.head(s, "main/model.bin")
    assert obstore.head(at, "model.bin")["size"] == len(payload)
