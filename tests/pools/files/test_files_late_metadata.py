"""Metadata known only once the bytes are in: staged with the entry, in ONE stage.

The S3 gateway learns a checksum sent in an aws-chunked trailer only after the body,
and a multipart object's part sizes at completion. Staging the entry a second time
with them (check "still ours", then stage) could overwrite a newer write of the same
path that landed between the check and the stage: the store has no compare-and-swap
for a staging entry. So the pool takes them before its one stage.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from limno.lake import Lake
from limno.pools.files import multipart as mp
from limno.pools.files.multipart import Multipart
from limno.pools.files.pool import FilePool


@pytest.fixture
def pool(store_uri: str) -> FilePool:
    lake = Lake.init(store_uri)
    lake.create_pool("files", kind="files")
    return lake.file_pool("files")


def test_late_metadata_is_read_after_the_body_and_staged_once(pool: FilePool) -> None:
    ended: list[bool] = []

    def body() -> Iterator[bytes]:
        yield b"hello "
        yield b"world"
        ended.append(True)  # as the gateway's decoder learns a trailer here

    def late() -> dict[str, str]:
        assert ended, "late metadata asked for before the body ended"
        return {":x-amz-checksum-crc32": "abc="}

    entry = pool.put("main", "a.txt", body(), metadata={"k": "v"}, late_metadata=late)
    assert entry.metadata == {"k": "v", ":x-amz-checksum-crc32": "abc="}
    assert pool.stat("a.txt", "main").metadata == entry.metadata
    staged = pool.versioned.staged("main")
    assert staged["a.txt"] == entry.to_value()


def test_a_newer_write_made_while_the_late_metadata_is_computed_is_not_undone(
    pool: FilePool,
) -> None:
    """The other write finishes first, ours last: ours is the path's value, and it is
    consistent (bytes and metadata of the same write)."""

    def late() -> dict[str, str]:
        pool.put("main", "a.txt", b"other")
        return {":x-amz-checksum-crc32": "mine"}

    entry = pool.put("main", "a.txt", b"mine", late_metadata=late)
    got = pool.stat("a.txt", "main")
    assert got == entry
    assert b"".join(pool.read("a.txt", "main")) == b"mine"


def test_complete_stages_extra_metadata_with_the_object(
    pool: FilePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mp, "MIN_PART_SIZE", 4)
    m = Multipart(pool)
    uid = m.create("main", "big", metadata={"owner": "me"})
    one = m.upload_part(uid, 1, b"12345")
    two = m.upload_part(uid, 2, b"67")
    entry = m.complete(uid, [(1, one.etag), (2, two.etag)], metadata={":parts": "5,2"})
    assert entry.metadata == {"owner": "me", ":parts": "5,2"}
    assert pool.stat("big", "main").metadata == entry.metadata
    assert b"".join(pool.read("big", "main")) == b"1234567"
