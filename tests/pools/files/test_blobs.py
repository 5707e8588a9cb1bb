"""Blobs of file pools: streamed, hashed, published atomically, read back by ranges.

Every test runs on a local directory, a memory store and the loopback S3 server (the
``store`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from limno.errors import CorruptError, InvalidInputError, NotFoundError
from limno.pools.files import blobs
from limno.pools.files.blobs import (
    Blob,
    BlobWriter,
    blob_path,
    read_blob,
    write_blob,
    write_blob_file,
)
from limno.pools.files.entries import FileEntry
from limno.storage import Storage, open_storage

POOL = "pool1"


def _entry(blob: Blob, path: str = "a/b.bin") -> FileEntry:
    return FileEntry(path, blob.size, blob.md5, "application/octet-stream", "", object=blob.id)


def _read(
    store: Storage, entry: FileEntry, start: int = 0, end: int | None = None, chunk: int = 1 << 20
) -> bytes:
    return b"".join(read_blob(store, POOL, entry, start, end, chunk=chunk))


def _all_paths(store: Storage) -> list[str]:
    return [o.path for o in store.walk("")] + [o.path for o in store.list_partial("")]


def _payload(n: int) -> bytes:
    return (hashlib.sha256(str(n).encode()).digest() * (n // 32 + 1))[:n]


@pytest.mark.parametrize("size", [0, 1, 4096, 9 * 1024 * 1024 + 3])
def test_write_bytes_roundtrip(store: Storage, size: int) -> None:
    data = _payload(size)
    blob = write_blob(store, POOL, data)
    assert blob.size == size
    assert blob.md5 == hashlib.md5(data).hexdigest()
    assert store.get(blob_path(POOL, blob.id)) == data
    assert _read(store, _entry(blob)) == data
    assert _all_paths(store) == [blob_path(POOL, blob.id)]


def test_sources_file_object_and_chunks(store: Storage) -> None:
    data = _payload(3 * 1024 * 1024 + 11)
    from_file = write_blob(store, POOL, io.BytesIO(data))
    chunks = (data[i : i + 77777] for i in range(0, len(data), 77777))
    from_iter = write_blob(store, POOL, chunks)
    assert from_file.md5 == from_iter.md5 == hashlib.md5(data).hexdigest()
    assert from_file.id != from_iter.id
    assert store.get(blob_path(POOL, from_iter.id)) == data


def test_ids_sort_by_time_and_are_unique(store: Storage) -> None:
    ids = [write_blob(store, POOL, b"x").id for _ in range(5)]
    assert len(set(ids)) == 5


@pytest.mark.parametrize("size", [100, 9 * 1024 * 1024])
def test_max_size_overflow_leaves_nothing(store: Storage, size: int) -> None:
    with pytest.raises(InvalidInputError, match="too large"):
        write_blob(store, POOL, _payload(size + 1), max_size=size)
    assert _all_paths(store) == []
    exact = write_blob(store, POOL, _payload(size), max_size=size)
    assert exact.size == size


def test_failing_source_leaves_nothing(store: Storage) -> None:
    def source() -> Iterator[bytes]:
        yield _payload(5 * 1024 * 1024)
        yield _payload(5 * 1024 * 1024)
        raise OSError("the client went away")

    with pytest.raises(OSError, match="went away"):
        write_blob(store, POOL, source())
    assert _all_paths(store) == []


def test_temporary_files_are_removed(
    store: Storage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remote stores spill big blobs to a temporary file: it is gone after, either way."""
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spill))
    write_blob(store, POOL, _payload(9 * 1024 * 1024))
    with pytest.raises(InvalidInputError):
        write_blob(store, POOL, _payload(9 * 1024 * 1024), max_size=8 * 1024 * 1024 + 5)
    assert os.listdir(spill) == []


def test_publish_failure_leaves_nothing(store: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    from limno.errors import StorageError
    from limno.storage._faults import FaultyStorage, parse_rules

    faulty = FaultyStorage(store, parse_rules("write:*:fail"))
    for size in (10, 9 * 1024 * 1024):
        with pytest.raises(StorageError):
            write_blob(faulty, POOL, _payload(size))
    assert _all_paths(store) == []


def test_write_blob_file(store: Storage, tmp_path: Path) -> None:
    data = _payload(2 * 1024 * 1024 + 5)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    blob = write_blob_file(store, POOL, str(src))
    assert (blob.size, blob.md5) == (len(data), hashlib.md5(data).hexdigest())
    assert _read(store, _entry(blob)) == data
    assert src.read_bytes() == data  # the caller's file stays


@pytest.mark.parametrize(
    ("start", "end"),
    [(0, None), (0, 1), (999, 1001), (5000, 5000), (4095, None), (100, 10**9), (4096, None)],
)
def test_read_ranges(store: Storage, start: int, end: int | None) -> None:
    data = _payload(4096)
    entry = _entry(write_blob(store, POOL, data))
    assert _read(store, entry, start, end, chunk=1000) == data[start:end]


def test_read_chunks_are_bounded(store: Storage) -> None:
    data = _payload(10_000)
    entry = _entry(write_blob(store, POOL, data))
    pieces = list(read_blob(store, POOL, entry, 10, 9_990, chunk=1024))
    assert max(len(p) for p in pieces) <= 1024
    assert b"".join(pieces) == data[10:9_990]


def test_read_invalid_range(store: Storage) -> None:
    entry = _entry(write_blob(store, POOL, b"abc"))
    with pytest.raises(InvalidInputError):
        list(read_blob(store, POOL, entry, -1))
    with pytest.raises(InvalidInputError):
        list(read_blob(store, POOL, entry, 2, 1))


def test_read_gone_and_short(store: Storage) -> None:
    blob = write_blob(store, POOL, b"hello world")
    entry = _entry(blob)
    store.put(blob_path(POOL, blob.id), b"hello")
    with pytest.raises(CorruptError, match="shorter"):
        _read(store, entry)
    blobs.delete_blob(store, POOL, blob.id)
    with pytest.raises(NotFoundError, match="gone"):
        _read(store, entry)


def test_read_imported_local_file(store: Storage, tmp_path: Path) -> None:
    data = _payload(3000)
    outside = tmp_path / "outside dir" / "na me%.bin"
    outside.parent.mkdir()
    outside.write_bytes(data)
    entry = FileEntry("x", len(data), "e", "text/plain", "", uri=outside.as_uri())
    assert _read(store, entry) == data
    assert _read(store, entry, 10, 20) == data[10:20]
    outside.unlink()
    with pytest.raises(NotFoundError):
        _read(store, entry)
    outside.parent.rmdir()
    with pytest.raises(NotFoundError, match="gone"):
        _read(store, entry)


#: a memory store is no import source (each name is another store): not parametrized
@pytest.mark.parametrize(
    "store_uri", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
)
def test_read_imported_from_store(store: Storage, store_uri: str) -> None:
    """An imported object is read from its own store (here: the same backend)."""
    data = _payload(2500)
    store.put("elsewhere/dir/obj.bin", data)
    base = store_uri if "://" in store_uri else Path(store_uri).as_uri()
    entry = FileEntry("x", len(data), "e", "text/plain", "", uri=f"{base}/elsewhere/dir/obj.bin")
    assert _read(store, entry, 7, 2007) == data[7:2007]


def test_not_an_object_uri(store: Storage) -> None:
    entry = FileEntry("x", 3, "e", "text/plain", "", uri="nonsense")
    with pytest.raises(CorruptError):
        _read(store, entry)


def test_writer_append_file_unhashed_local(tmp_path: Path) -> None:
    """A local store concatenates files in the kernel when no md5 is asked for."""
    store = open_storage(str(tmp_path / "lake"), create=True)
    parts = [_payload(n) for n in (70_000, 1, 123_456)]
    files = []
    for i, part in enumerate(parts):
        f = tmp_path / f"p{i}"
        f.write_bytes(part)
        files.append(f)
    with BlobWriter(store, POOL, hashed=False) as w:
        for f in files:
            w.append_file(str(f))
        w.append_file(str(files[0]), 5, 105)
        blob = w.publish()
    want = b"".join(parts) + parts[0][5:105]
    assert blob.md5 == "" and blob.size == len(want)
    assert store.get(blob_path(POOL, blob.id)) == want


def test_writer_append_file_hashed(store: Storage, tmp_path: Path) -> None:
    f = tmp_path / "p"
    f.write_bytes(_payload(5000))
    with BlobWriter(store, POOL) as w:
        w.write(b"head")
        w.append_file(str(f), 100)
        blob = w.publish()
    want = b"head" + _payload(5000)[100:]
    assert blob.md5 == hashlib.md5(want).hexdigest()
    assert store.get(blob_path(POOL, blob.id)) == want


def test_writer_discarded_without_publish(store: Storage) -> None:
    with BlobWriter(store, POOL) as w:
        w.write(_payload(9 * 1024 * 1024))
    assert _all_paths(store) == []
    with pytest.raises(InvalidInputError):
        w.publish()
