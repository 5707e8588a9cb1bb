"""Import by reference: objects of a local directory or an S3 prefix become a branch's
files in one commit, their bytes read in place, never copied and never vacuumed."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest

from limno.errors import InvalidInputError, NotFoundError
from limno.lake import Lake
from limno.pools.files.pool import FilePool
from limno.storage import open_storage


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


FILES = {
    "top.csv": b"a,b\n1,2\n",
    "nested/deeper/image.png": b"\x89PNG....",
    "nested/with space & 100%.txt": b"odd name",
}


def test_import_a_local_directory_in_one_commit(pool: FilePool, tmp_path: Path) -> None:
    source = _tree(tmp_path / "src", FILES)
    pool.put("main", "before", b"b")
    pool.commit("main")
    commit = pool.import_from(str(source), "main", prefix="imported/", message="bring in")
    assert commit.message == "bring in" and commit.meta["import"]["objects"] == 3
    assert sorted(a.key for a in commit.actions) == sorted(f"imported/{k}" for k in FILES)
    for rel, data in FILES.items():
        entry = pool.stat(f"imported/{rel}", commit.id)
        assert entry.object is None and entry.uri is not None and entry.uri.startswith("file://")
        assert entry.size == len(data) and entry.etag and '"' not in entry.etag
        assert entry.mtime.endswith("Z")
        assert b"".join(pool.read(f"imported/{rel}", commit.id)) == data
        assert b"".join(pool.read(f"imported/{rel}", start=1, end=3)) == data[1:3]
    assert pool.stat("imported/top.csv").content_type == "text/csv"
    assert pool.stat("imported/nested/deeper/image.png").content_type == "image/png"
    assert list(pool.storage.walk(f"{pool.id}/data"))[0].size == 1  # only "before"'s blob
    listing = pool.list("main", prefix="imported/", delimiter="/")
    assert listing.prefixes == ["imported/nested/"]
    assert [e.path for e in listing.entries] == ["imported/top.csv"]


def test_imported_files_branch_merge_and_copy_like_any(pool: FilePool, tmp_path: Path) -> None:
    source = _tree(tmp_path / "src", {"x.bin": b"x"})
    pool.branch("ingest")
    pool.import_from(f"file://{source}", "ingest")
    pool.copy("ingest", "x.bin", "ingest", "x-copy.bin")
    pool.commit("ingest")
    pool.merge("ingest", "main")
    assert b"".join(pool.read("x-copy.bin")) == b"x"
    pool.remove("main", ["x.bin", "x-copy.bin"])
    pool.commit("main")
    pool.vacuum(grace=dt.timedelta(0), retention=dt.timedelta(0))
    assert (source / "x.bin").read_bytes() == b"x"


def test_import_refusals_change_nothing(lake: Lake, pool: FilePool, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    head = pool.resolve("main")
    with pytest.raises(InvalidInputError, match="nothing to import"):
        pool.import_from(str(empty))
    with pytest.raises(NotFoundError):
        pool.import_from(str(tmp_path / "missing"))
    with pytest.raises(InvalidInputError, match="overlaps the lake"):
        pool.import_from(lake.storage.uri + f"/{pool.id}/commits")
    with pytest.raises(InvalidInputError, match="overlaps the lake"):
        pool.import_from(str(tmp_path))  # the lake is inside it
    long_name = _tree(tmp_path / "long", {"n" * 200: b"1"})
    with pytest.raises(InvalidInputError, match="1024"):
        pool.import_from(str(long_name), prefix="p" * 900)
    assert pool.resolve("main") == head


def test_a_changed_source_file_reads_what_is_there_now(pool: FilePool, tmp_path: Path) -> None:
    """limno does not own imported bytes: it records what the listing said, reads in place."""
    source = _tree(tmp_path / "src", {"f": b"12345"})
    pool.import_from(str(source))
    (source / "f").unlink()
    with pytest.raises(NotFoundError):
        b"".join(pool.read("f"))


@pytest.mark.s3
def test_import_an_s3_prefix(pool: FilePool, s3_uri: str) -> None:
    bucket = open_storage(s3_uri)
    objects = {"raw/2024/a.json": b'{"a":1}', "raw/2024/b.json": b'{"b":2}', "other/c": b"c"}
    for path, data in objects.items():
        bucket.put(path, data)
    commit = pool.import_from(f"{s3_uri}/raw/", prefix="events/")
    assert sorted(a.key for a in commit.actions) == ["events/2024/a.json", "events/2024/b.json"]
    entry = pool.stat("events/2024/a.json")
    assert entry.uri == f"{s3_uri}/raw/2024/a.json"
    assert entry.etag == hashlib.md5(b'{"a":1}').hexdigest()  # S3's ETag, without quotes
    assert entry.content_type == "application/json"
    assert b"".join(pool.read("events/2024/b.json")) == b'{"b":2}'
