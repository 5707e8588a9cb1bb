"""What reading a large file pool costs, counted in storage requests (no timing): a page
of a prefix, a page after a marker and a stat read a few snapshot ranges of a 20,000-path
branch, not all of them. And paths with any characters S3 allows commit and read back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from limno.core import committed
from limno.core.commits import Action
from limno.lake import Lake
from limno.pools.files import blobs
from limno.pools.files.entries import FileEntry, now_mtime
from limno.pools.files.pool import FilePool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage

DIRS, PER_DIR = 200, 100  # 20,000 paths: "d000/f000" ... "d199/f099"


@pytest.fixture(scope="module")
def big_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A lake whose file pool's main holds 20,000 paths naming one blob (made through the
    core: one commit, no 20,000 uploads)."""
    root = str(tmp_path_factory.mktemp("big") / "lake")
    lake = Lake.init(root)
    pool = lake.create_pool("big", kind="files")
    blob = blobs.write_blob(pool.storage, pool.id, b"shared bytes")
    mtime = now_mtime()
    actions = []
    for d in range(DIRS):
        for f in range(PER_DIR):
            path = f"d{d:03}/f{f:03}"
            entry = FileEntry(path, blob.size, blob.md5, "text/plain", mtime, object=blob.id)
            actions.append(Action("add", path, entry.to_value()))
    pool.versioned.commit("main", actions, message="20k paths")
    return root


@pytest.fixture
def counted(
    big_lake: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FilePool, FaultyStorage]]:
    """The big pool over a store that records every call, with cold snapshot caches."""
    monkeypatch.setattr(committed, "_ranges", committed._LRU(8192))
    monkeypatch.setattr(committed, "_metaranges", committed._LRU(256))
    monkeypatch.setattr(committed, "_seek_index", committed._LRU(256))
    store = FaultyStorage(open_storage(big_lake))
    yield Lake(store).file_pool("big"), store


def _ranges_read(store: FaultyStorage) -> int:
    return sum(1 for op, path in store.calls if op == "get" and "/meta/ranges/" in path)


def test_the_snapshot_has_hundreds_of_ranges(counted: tuple[FilePool, FaultyStorage]) -> None:
    pool, store = counted
    snapshot = pool.versioned.commits.get(pool.resolve("main")).snapshot
    assert len(pool.versioned.snapshots.ranges(snapshot)) > 150
    assert sum(1 for _ in pool.iter_list("main")) == DIRS * PER_DIR
    assert _ranges_read(store) > 150  # a full listing reads them all


def test_a_prefix_page_reads_few_ranges(counted: tuple[FilePool, FaultyStorage]) -> None:
    pool, store = counted
    page = pool.list("main", prefix="d150/", limit=50)
    assert [e.path for e in page.entries] == [f"d150/f{f:03}" for f in range(50)]
    assert page.truncated and page.next_after == "d150/f049"
    first = _ranges_read(store)
    assert 1 <= first <= 4
    nxt = pool.list("main", prefix="d150/", start_after=page.next_after, limit=50)
    assert [e.path for e in nxt.entries] == [f"d150/f{f:03}" for f in range(50, 100)]
    assert not nxt.truncated
    assert _ranges_read(store) - first <= 4


def test_a_page_of_common_prefixes_skips_what_is_under_them(
    counted: tuple[FilePool, FaultyStorage],
) -> None:
    pool, store = counted
    page = pool.list("main", delimiter="/", limit=10)
    assert page.prefixes == [f"d{d:03}/" for d in range(10)] and page.entries == []
    assert _ranges_read(store) <= 12  # one seek per prefix at most, not the whole snapshot


def test_stat_and_read_of_one_path_read_one_range(counted: tuple[FilePool, FaultyStorage]) -> None:
    pool, store = counted
    assert pool.stat("d123/f045").size == 12
    assert b"".join(pool.read("d199/f099")) == b"shared bytes"
    assert _ranges_read(store) == 2


SPECIAL = [
    "with space.txt",
    " leading and trailing ",
    "unicode/ünïcødé/日本語/😀.bin",
    "a/../b",
    "./dot",
    "//double//slash",
    "dir/",
    "percent%20and+plus&amp?query#frag",
    "back\\slash",
    "tab\tnew\nline",
    "~tilde",
    "x" * 1024,
    "é" * 512,  # 1,024 bytes of two-byte characters
    "deep/" * 100 + "end",
]


def test_special_paths_commit_and_read_back(pool: FilePool, lake: Lake) -> None:
    for i, path in enumerate(SPECIAL):
        pool.put("main", path, f"content {i}".encode())
    assert [e.path for e in pool.iter_list("main")] == sorted(SPECIAL)
    commit = pool.commit("main", "special")
    assert sorted(a.key for a in commit.actions) == sorted(SPECIAL)
    assert pool.uncommitted() == []
    assert list(pool.storage.walk(f"{pool.id}/staging")) == []
    for i, path in enumerate(SPECIAL):
        assert b"".join(pool.read(path, commit.id)) == f"content {i}".encode()
    assert [e.path for e in pool.list(commit.id, prefix="unicode/", delimiter="/").entries] == []
    assert pool.list(commit.id, prefix="unicode/", delimiter="/").prefixes == ["unicode/ünïcødé/"]
    assert pool.remove("main", SPECIAL) == SPECIAL
    pool.commit("main")
    assert list(pool.iter_list("main")) == []
    assert list(lake.verify()) == []


def test_record_pools_keep_their_staging_names(lake: Lake, tmp_path: Path) -> None:
    """A record pool's staged object is still ``<object id>.json``: lakes staged before
    file pools existed read the same."""
    import pyarrow as pa

    records = lake.create_pool("recs", key="k")
    (obj,) = records.add([pa.table({"k": [1, 2]})])
    names = [i.path.rsplit("/", 1)[-1] for i in lake.storage.walk(f"{records.id}/staging")]
    assert names == [f"{obj.id}.json"]
    records.commit()
    assert records.scan().num_rows == 2


@pytest.mark.s3
def test_a_large_staging_area_on_s3_commits_and_discards(s3_uri: str) -> None:
    """Past 64 staged paths a remote staging area is read and cleared by several threads."""
    lake = Lake.init(s3_uri)
    pool = lake.create_pool("s3files", kind="files")
    blob = pool.put("main", "first", b"one blob for all")
    paths = [f"many/{i:03}" for i in range(150)]
    for path in paths:
        pool.stage_entry(
            "main", FileEntry(path, blob.size, blob.etag, "t/t", now_mtime(), object=blob.object)
        )
    assert len(pool.uncommitted()) == 151
    commit = pool.commit("main", prefix="many/")
    assert sorted(a.key for a in commit.actions) == paths
    assert [c.path for c in pool.uncommitted()] == ["first"]
    pool.remove_prefix("main", "many/")
    assert pool.discard("main") == 151
    assert [e.path for e in pool.list("main", prefix="many/", limit=3).entries] == paths[:3]
