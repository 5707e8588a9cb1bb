"""Multipart uploads of file pools follow S3's rules (the CreateMultipartUpload,
UploadPart, UploadPartCopy, ListParts, ListMultipartUploads, CompleteMultipartUpload
and AbortMultipartUpload pages of the S3 API reference), on a real file pool of a
lake on each backend: a local directory, a memory store and the loopback S3 server.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator

import pytest

from limno.errors import (
    InvalidInputError,
    MultipartError,
    NotFoundError,
    ProtectedBranchError,
    http_status,
)
from limno.lake import Lake
from limno.pools.files import multipart as mp
from limno.pools.files.multipart import MIN_PART_SIZE, Multipart, expire_uploads
from limno.pools.files.pool import FilePool

BIG = MIN_PART_SIZE  # the smallest part that may come before another


def payload(n: int, seed: str = "") -> bytes:
    block = hashlib.sha256(f"{seed}:{n}".encode()).digest()
    return (block * (n // 32 + 1))[:n]


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def reference_etag(parts: list[bytes]) -> str:
    """S3's multipart ETag, computed here from the parts' bytes."""
    joined = b"".join(hashlib.md5(p).digest() for p in parts)
    return f"{hashlib.md5(joined).hexdigest()}-{len(parts)}"


@pytest.fixture
def pool(store_uri: str) -> FilePool:
    lake = Lake.init(store_uri)
    lake.create_pool("files", kind="files")
    return lake.file_pool("files")


@pytest.fixture
def m(pool: FilePool) -> Multipart:
    return Multipart(pool)


def read(pool: FilePool, path: str, ref: str = "main") -> bytes:
    return b"".join(pool.read(path, ref))


def upload_files(pool: FilePool) -> list[str]:
    return [o.path for o in pool.storage.walk(f"{pool.id}/multipart")]


def reason(err: pytest.ExceptionInfo[MultipartError]) -> str:
    return err.value.reason


# -- the life of an upload ------------------------------------------------------------
def test_complete_stages_the_concatenation(pool: FilePool, m: Multipart) -> None:
    parts = [payload(BIG, "a"), payload(BIG + 3, "b"), payload(1000, "c")]
    uid = m.create("main", "dir/big.bin", content_type="text/csv", metadata={"Owner": "me"})
    assert m.upload(uid).path == "dir/big.bin"
    got = {n: m.upload_part(uid, n, parts[n - 1]) for n in (3, 1, 2)}  # any order
    assert [got[n].etag for n in (1, 2, 3)] == [md5(p) for p in parts]
    entry = m.complete(uid, [(n, got[n].etag) for n in (1, 2, 3)])
    want = b"".join(parts)
    assert entry.etag == reference_etag(parts)
    assert (entry.size, entry.content_type, dict(entry.metadata)) == (
        len(want),
        "text/csv",
        {"owner": "me"},
    )
    assert pool.stat("dir/big.bin", "main") == entry  # staged: read-after-write
    assert read(pool, "dir/big.bin") == want
    assert [c.path for c in pool.uncommitted("main")] == ["dir/big.bin"]
    assert upload_files(pool) == []  # the upload's parts are gone
    commit = pool.commit("main", "upload")
    assert read(pool, "dir/big.bin", commit.id) == want


def test_completed_upload_is_gone(m: Multipart) -> None:
    uid = m.create("main", "x")
    part = m.upload_part(uid, 1, b"small is fine when alone")
    m.complete(uid, [(1, part.etag)])
    for call in (
        lambda: m.upload(uid),
        lambda: m.complete(uid, [(1, part.etag)]),
        lambda: m.upload_part(uid, 2, b"late"),
        lambda: m.list_parts(uid),
        lambda: m.abort(uid),
    ):
        with pytest.raises(MultipartError) as err:
            call()
        assert reason(err) == "no-upload"
        assert http_status(err.value) == 404


def test_single_empty_part(pool: FilePool, m: Multipart) -> None:
    uid = m.create("main", "empty")
    part = m.upload_part(uid, 1, b"")
    entry = m.complete(uid, [(1, part.etag)])
    assert entry.size == 0 and entry.etag == reference_etag([b""])
    assert read(pool, "empty") == b""


def test_streamed_part_sources(pool: FilePool, m: Multipart) -> None:
    import io

    data = payload(BIG + 10)
    uid = m.create("main", "s")
    a = m.upload_part(uid, 1, io.BytesIO(data[:BIG]))
    b = m.upload_part(uid, 2, iter([data[BIG : BIG + 4], data[BIG + 4 :]]))
    m.complete(uid, [(1, a.etag), (2, b.etag)])
    assert read(pool, "s") == data


# -- S3's rules -------------------------------------------------------------------------
@pytest.mark.parametrize("number", [0, -1, 10_001, True])
def test_part_number_bounds(m: Multipart, number: int) -> None:
    uid = m.create("main", "x")
    with pytest.raises(InvalidInputError, match="between 1 and 10000") as err:
        m.upload_part(uid, number, b"x")
    assert not isinstance(err.value, MultipartError)
    assert m.list_parts(uid) == ([], False)


def test_part_number_extremes(pool: FilePool, m: Multipart) -> None:
    uid = m.create("main", "x")
    a = m.upload_part(uid, 1, payload(BIG))
    b = m.upload_part(uid, 10_000, b"end")
    m.complete(uid, [(1, a.etag), (10_000, b.etag)])
    assert read(pool, "x") == payload(BIG) + b"end"


def test_too_small(m: Multipart) -> None:
    uid = m.create("main", "x")
    a = m.upload_part(uid, 1, payload(BIG - 1))
    b = m.upload_part(uid, 2, b"last")
    with pytest.raises(MultipartError) as err:
        m.complete(uid, [(1, a.etag), (2, b.etag)])
    assert reason(err) == "too-small"
    assert http_status(err.value) == 400
    assert m.upload(uid).path == "x"  # a refused completion leaves the upload


@pytest.mark.parametrize("order", [[2, 1], [1, 1], [1, 3, 2]])
def test_part_order(m: Multipart, order: list[int]) -> None:
    uid = m.create("main", "x")
    tags = {n: m.upload_part(uid, n, payload(BIG, str(n))).etag for n in (1, 2, 3)}
    with pytest.raises(MultipartError) as err:
        m.complete(uid, [(n, tags[n]) for n in order])
    assert reason(err) == "part-order"


def test_invalid_parts(m: Multipart) -> None:
    uid = m.create("main", "x")
    a = m.upload_part(uid, 1, payload(BIG))
    for listed in ([(1, a.etag), (2, a.etag)], [(1, "0" * 32)], [(0, a.etag)], [(10_001, "e")]):
        with pytest.raises(MultipartError) as err:
            m.complete(uid, listed)
        assert reason(err) == "invalid-part", listed
    with pytest.raises(InvalidInputError):
        m.complete(uid, [])


def test_etags_compare_quoted_or_not(pool: FilePool, m: Multipart) -> None:
    uid = m.create("main", "x")
    a = m.upload_part(uid, 1, payload(BIG))
    b = m.upload_part(uid, 2, b"z")
    m.complete(uid, [(1, f'"{a.etag}"'), (2, b.etag.upper())])
    assert read(pool, "x") == payload(BIG) + b"z"


def test_replaced_part(pool: FilePool, m: Multipart) -> None:
    uid = m.create("main", "x")
    old = m.upload_part(uid, 1, payload(BIG, "old"))
    new = m.upload_part(uid, 1, payload(BIG, "new"))
    last = m.upload_part(uid, 2, b"!")
    assert old.etag != new.etag
    parts, truncated = m.list_parts(uid)
    assert [(p.number, p.etag, p.size) for p in parts] == [(1, new.etag, BIG), (2, last.etag, 1)]
    assert not truncated
    with pytest.raises(MultipartError) as err:
        m.complete(uid, [(1, old.etag), (2, last.etag)])
    assert reason(err) == "invalid-part"
    m.complete(uid, [(1, new.etag), (2, last.etag)])
    assert read(pool, "x") == payload(BIG, "new") + b"!"
    assert upload_files(pool) == []  # the replaced bytes too


def test_unlisted_parts_are_dropped(pool: FilePool, m: Multipart) -> None:
    uid = m.create("main", "x")
    tags = {n: m.upload_part(uid, n, payload(BIG, str(n))).etag for n in (1, 2, 3)}
    entry = m.complete(uid, [(1, tags[1]), (3, tags[3])])
    assert read(pool, "x") == payload(BIG, "1") + payload(BIG, "3")
    assert entry.etag == reference_etag([payload(BIG, "1"), payload(BIG, "3")])
    assert upload_files(pool) == []


def test_abort(pool: FilePool, m: Multipart) -> None:
    uid = m.create("main", "x")
    m.upload_part(uid, 1, payload(1000))
    assert upload_files(pool)
    m.abort(uid)
    assert upload_files(pool) == []
    with pytest.raises(MultipartError) as err:
        m.upload_part(uid, 2, b"late")
    assert reason(err) == "no-upload"
    with pytest.raises(NotFoundError):
        pool.stat("x", "main")


def test_part_size_limit(m: Multipart, pool: FilePool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mp, "MAX_PART_SIZE", 1000)  # S3's 5 GiB, scaled down
    uid = m.create("main", "x")
    with pytest.raises(InvalidInputError, match="too large"):
        m.upload_part(uid, 1, payload(1001))
    assert m.list_parts(uid) == ([], False)
    assert [p for p in upload_files(pool) if "/blobs/" in p] == []


@pytest.mark.parametrize("bad", ["", "../x", "3McHdpvfsZWx8KOM9cMKGujdqkA", "a/b"])
def test_unknown_upload_ids(m: Multipart, bad: str) -> None:
    with pytest.raises(MultipartError) as err:
        m.upload(bad)
    assert reason(err) == "no-upload"


def test_create_checks_branch_and_path(pool: FilePool, m: Multipart) -> None:
    with pytest.raises(NotFoundError):
        m.create("nosuch", "x")
    with pytest.raises(InvalidInputError):
        m.create("main", "")
    pool.branch("dev")
    pool.protect("dev")
    with pytest.raises(ProtectedBranchError):
        m.create("dev", "x")
    assert m.uploads() == ([], False)


def test_upload_on_another_branch(pool: FilePool, m: Multipart) -> None:
    pool.branch("dev")
    uid = m.create("dev", "only/dev")
    part = m.upload_part(uid, 1, b"dev bytes")
    m.complete(uid, [(1, part.etag)])
    assert read(pool, "only/dev", "dev") == b"dev bytes"
    with pytest.raises(NotFoundError):
        pool.stat("only/dev", "main")


# -- listings ---------------------------------------------------------------------------
def test_list_parts_pages(m: Multipart) -> None:
    uid = m.create("main", "x")
    for n in (5, 1, 9, 3, 7):
        m.upload_part(uid, n, str(n).encode())
    first, more = m.list_parts(uid, limit=2)
    assert [p.number for p in first] == [1, 3] and more
    second, more = m.list_parts(uid, after=first[-1].number, limit=2)
    assert [p.number for p in second] == [5, 7] and more
    third, more = m.list_parts(uid, after=7, limit=2)
    assert [(p.number, p.etag, p.size) for p in third] == [(9, md5(b"9"), 1)] and not more
    assert m.list_parts(uid, after=9) == ([], False)


def test_uploads_order_and_pages(pool: FilePool, m: Multipart) -> None:
    pool.branch("dev")
    b = m.create("main", "b")
    a1 = m.create("main", "a")
    a2 = m.create("main", "a")
    c = m.create("dev", "c")
    d = m.create("main", "d/e", metadata={"k": "v"})
    a1, a2 = sorted([a1, a2])
    every, more = m.uploads()
    assert [(u.path, u.id) for u in every] == [
        ("a", a1),
        ("a", a2),
        ("b", b),
        ("c", c),
        ("d/e", d),
    ]
    assert not more
    assert every[-1].metadata == {"k": "v"} and every[3].branch == "dev"
    page, more = m.uploads(limit=2)
    assert [u.id for u in page] == [a1, a2] and more
    page, more = m.uploads(after_path="a", after_id=a1, limit=2)
    assert [u.id for u in page] == [a2, b] and more
    page, more = m.uploads(after_path="a")
    assert [u.id for u in page] == [b, c, d] and not more
    assert [u.id for u in m.uploads(prefix="d/")[0]] == [d]
    assert [u.id for u in m.uploads(branch="dev")[0]] == [c]
    m.abort(b)
    assert b not in [u.id for u in m.uploads()[0]]


# -- upload part copy -------------------------------------------------------------------
def test_upload_part_copy(pool: FilePool, m: Multipart) -> None:
    src = payload(BIG + 500, "src")
    pool.put("main", "src.bin", src)
    pool.commit("main", "source")
    pool.tag("v1", "main")
    pool.put("main", "src.bin", b"changed since")  # staged; the tag keeps the old bytes
    uid = m.create("main", "copy.bin")
    a = m.upload_part_copy(uid, 1, "v1", "src.bin")
    b = m.upload_part_copy(uid, 2, "v1", "src.bin", 400, 400 + BIG)
    c = m.upload_part_copy(uid, 3, "main", "src.bin", 0, 7)  # a branch: its staged state
    assert (a.etag, a.size) == (md5(src), len(src))
    assert (b.etag, b.size) == (md5(src[400 : 400 + BIG]), BIG)
    m.complete(uid, [(1, a.etag), (2, b.etag), (3, c.etag)])
    assert read(pool, "copy.bin") == src + src[400 : 400 + BIG] + b"changed"


def test_upload_part_copy_ranges(pool: FilePool, m: Multipart) -> None:
    pool.put("main", "src", b"0123456789")
    uid = m.create("main", "x")
    for start, end in [(0, 11), (10, 10), (-1, 3), (5, 4)]:
        with pytest.raises(InvalidInputError, match="not within"):
            m.upload_part_copy(uid, 1, "main", "src", start, end)
    with pytest.raises(NotFoundError):
        m.upload_part_copy(uid, 1, "main", "missing")
    part = m.upload_part_copy(uid, 1, "main", "src", 9, 10)
    assert (part.etag, part.size) == (md5(b"9"), 1)


# -- abandoned uploads ----------------------------------------------------------------------
def test_expire_uploads(pool: FilePool, m: Multipart) -> None:
    """Uploads idle for longer than the expiry go (an upload's age is its newest file's),
    with the leftovers of a completion cut short after it removed the upload's record."""
    first = m.create("main", "first")
    m.upload_part(first, 1, b"first part")
    second = m.create("main", "second")
    m.upload_part(second, 1, b"second part")
    done = m.create("main", "done")
    m.upload_part(done, 1, b"left over")
    pool.storage.delete(f"{pool.id}/multipart/{done}/upload.json")

    assert expire_uploads(pool) == []  # none idle for 7 days
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    assert expire_uploads(pool, dt.timedelta(days=2), now=later) == []
    assert sorted(expire_uploads(pool, dt.timedelta(hours=1), now=later)) == sorted(
        [first, second, done]
    )
    assert upload_files(pool) == []
    assert m.uploads() == ([], False)
    assert expire_uploads(pool, dt.timedelta(0)) == []


def test_an_upload_in_use_is_not_idle(pool: FilePool, m: Multipart) -> None:
    """A part uploaded makes the upload young again, and a part still arriving (its
    lease) keeps it however idle its files look."""
    uid = m.create("main", "x")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    record = f"{pool.id}/multipart/{uid}/upload.json"
    assert pool.storage.exists(record)

    def parts() -> Iterator[bytes]:
        yield b"first half, "
        # the part is arriving: an expiry now, however late, keeps the upload
        assert mp.expired_uploads(pool, dt.timedelta(hours=1), now=later) == []
        yield b"second half"

    part = m.upload_part(uid, 1, parts())
    assert m.list_parts(uid)[0] == [part]
    assert [e.id for e in mp.expired_uploads(pool, dt.timedelta(hours=1), now=later)] == [uid]


def test_expire_keeps_recent_uploads(pool: FilePool, m: Multipart) -> None:
    uid = m.create("main", "x")
    m.upload_part(uid, 1, b"part")
    assert expire_uploads(pool) == []
    assert m.list_parts(uid)[0][0].etag == md5(b"part")
