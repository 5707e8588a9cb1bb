"""The Python API of file pools, the same on a lake in this process and on one behind a
server (``Lake.open(URL)``: :mod:`limno.api.remote_files`): puts from bytes, files and
chunk iterables, reads of byte ranges, listings paged lazily, copies, removes, commits,
discards, diffs, git operations and transactions, and errors raised alike."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

import limno
from limno import FileChange, FileEntry, FilePool, Lake, Listing, VersionedPool
from limno.api import remote_files
from server_support import served


@pytest.fixture(params=["local", "served"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lake]:
    where = str(tmp_path / "lake")
    Lake.init(where)
    if request.param == "local":
        yield Lake.open(where)
        return
    with served(where) as url:
        remote = Lake.open(url)
        try:
            yield remote
        finally:
            remote.close()  # type: ignore[attr-defined]


@pytest.fixture
def pool(lake: Lake) -> FilePool:
    made = lake.create_pool("imgs", kind="files")
    assert isinstance(made, FilePool) and made.kind == "files"
    return made


def test_puts_reads_and_ranges(pool: FilePool, tmp_path: Path) -> None:
    data = bytes(range(256)) * 100
    e = pool.put("main", "a.bin", data, metadata={"Who": "me"}, content_type="x/y")
    assert isinstance(e, FileEntry) and (e.size, e.content_type) == (len(data), "x/y")
    assert e.metadata == {"who": "me"}
    pool.put("main", "b.bin", io.BytesIO(data))
    pool.put("main", "c.bin", iter([data[:10], b"", data[10:]]))
    local = tmp_path / "d.bin"
    local.write_bytes(data)
    pool.put_file("main", "d.bin", str(local))
    for path in ("a.bin", "b.bin", "c.bin", "d.bin"):
        assert b"".join(pool.read(path)) == data, path
        assert pool.stat(path).etag == e.etag
    assert b"".join(pool.read("a.bin", start=100, end=110)) == data[100:110]
    assert b"".join(pool.read("a.bin", start=25_000)) == data[25_000:]
    assert b"".join(pool.read("a.bin", start=99_999)) == b""  # clipped, as S3 would not
    assert b"".join(pool.read("a.bin", start=5, end=5)) == b""
    with pytest.raises(limno.NotFoundError, match="no file 'nope'"):
        b"".join(pool.read("nope"))
    with pytest.raises(limno.PreconditionFailedError):
        pool.put("main", "a.bin", b"x", if_none_match=True)
    with pytest.raises(limno.InvalidInputError):
        pool.put("main", "big", b"x" * 100, max_size=10)
    with pytest.raises(limno.InvalidInputError, match=r"^max_size must be 0 or more .*not -1$"):
        pool.put("main", "big", b"x", max_size=-1)  # was "too large: more than -1 bytes"
    with pytest.raises(limno.NotFoundError):
        pool.stat("big")


def test_listings_copies_removes_and_commits(
    pool: FilePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_files, "PAGE", 2)  # iter_list pages lazily through a server
    for path in ("d/1", "d/2", "d/e/3", "top", "ü/4"):
        pool.put("main", path, path.encode())
    page = pool.list(delimiter="/")
    assert isinstance(page, Listing)
    assert [e.path for e in page.entries] == ["top"] and page.prefixes == ["d/", "ü/"]
    first = pool.list(prefix="d/", limit=2)
    assert [e.path for e in first.entries] == ["d/1", "d/2"] and first.truncated
    rest = pool.list(prefix="d/", start_after=first.next_after or "")
    assert [e.path for e in rest.entries] == ["d/e/3"] and not rest.truncated
    assert [e.path for e in pool.iter_list()] == ["d/1", "d/2", "d/e/3", "top", "ü/4"]

    pool.commit("main", "five")
    copied = pool.copy("main", "top", "main", "copy-of-top", metadata={"k": "v"})
    assert copied.etag == pool.stat("top").etag and copied.metadata == {"k": "v"}
    assert pool.remove("main", ["d/1", "missing"]) == ["d/1"]
    assert pool.remove_prefix("main", "d/e/") == ["d/e/3"]
    changes = pool.uncommitted()
    assert all(isinstance(c, FileChange) for c in changes)
    assert [(c.change, c.path) for c in changes] == [
        ("added", "copy-of-top"),
        ("removed", "d/1"),
        ("removed", "d/e/3"),
    ]
    assert pool.diff_paths("main") == changes
    assert pool.discard("main", "d/e/") == 1
    made = pool.commit("main", "edit", prefix="d/")
    assert [(a.op, a.key) for a in made.actions] == [("delete", "d/1")]
    assert [(c.change, c.path) for c in pool.diff_paths("main~1", "main")] == [("removed", "d/1")]
    with pytest.raises(limno.InvalidInputError, match="nothing staged"):
        pool.commit("main", prefix="zzz/")


def test_git_operations_and_transactions(lake: Lake, pool: FilePool) -> None:
    pool.put("main", "f", b"1")
    pool.commit()
    pool.branch("dev")
    with pool.transaction("dev", "tx") as view:
        view.put(path="g", data=b"2")  # branch= filled in by the view
    assert b"".join(pool.read("g", "dev")) == b"2"
    assert pool.merge("dev").kind == "fast-forward"
    assert [e.path for e in pool.iter_list("main")] == ["f", "g"]
    again = lake.versioned_pool("imgs")
    assert isinstance(again, VersionedPool) and isinstance(again, FilePool)
    assert lake.file_pool(pool.id).name == "imgs"
    assert [c.message for c in again.log(limit=1)] == ["tx"]
    with pytest.raises(limno.InvalidInputError, match="is a file pool"):
        lake.pool("imgs")
    lake.create_pool("logs", key="ts")
    with pytest.raises(limno.InvalidInputError, match="is a record pool"):
        lake.file_pool("logs")
    assert lake.versioned_pool("logs").kind == "records"
