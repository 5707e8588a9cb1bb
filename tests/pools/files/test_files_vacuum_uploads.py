"""A file pool's vacuum and multipart uploads: an abandoned upload is freed past the
grace period (and reported by a dry run), a completed upload's blob is an ordinary
referenced blob, and a completion whose staging fails leaves its blob to vacuum."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from limno.errors import LimnoError, MultipartError
from limno.lake import Lake
from limno.pools.files import multipart as mp
from limno.pools.files.blobs import BLOB_DIR
from limno.pools.files.multipart import Multipart
from limno.pools.files.pool import FilePool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage, Rule

SMALL = 1024
HOUR = dt.timedelta(hours=1)
NOW = dt.timedelta(0)


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mp, "MIN_PART_SIZE", SMALL)


def blobs_of(pool: FilePool) -> set[str]:
    return {o.path.rsplit("/", 1)[-1] for o in pool.storage.walk(f"{pool.id}/{BLOB_DIR}")}


def upload_files(pool: FilePool) -> list[str]:
    return [o.path for o in pool.storage.walk(f"{pool.id}/{mp.UPLOAD_DIR}")]


def test_an_abandoned_upload_is_freed_past_the_grace_period(pool: FilePool) -> None:
    m = Multipart(pool)
    uid = m.create("main", "big.bin")
    m.upload_part(uid, 1, b"x" * SMALL)
    m.upload_part(uid, 2, b"tail")

    kept = pool.vacuum(grace=HOUR)
    assert kept.removed == []
    assert m.upload(uid).path == "big.bin"

    dry = pool.vacuum(grace=NOW, dry_run=True)
    assert dry.removed == [(f"{pool.id}/{mp.UPLOAD_DIR}/{uid}/", dry.bytes)]
    assert dry.bytes > SMALL + 4  # the parts, their records and the upload's record
    assert m.upload(uid).path == "big.bin" and upload_files(pool)

    done = pool.vacuum(grace=NOW)
    assert done.removed == dry.removed
    with pytest.raises(MultipartError) as err:
        m.upload(uid)
    assert err.value.reason == "no-upload"
    assert upload_files(pool) == []
    assert pool.vacuum(grace=NOW).removed == []


def test_a_completed_upload_is_never_freed(pool: FilePool) -> None:
    m = Multipart(pool)
    uid = m.create("main", "big.bin")
    parts = [(n, m.upload_part(uid, n, data).etag) for n, data in ((1, b"a" * SMALL), (2, b"b"))]
    entry = m.complete(uid, parts)
    body = b"a" * SMALL + b"b"
    assert pool.vacuum(grace=NOW).removed == []  # staged: referenced
    assert b"".join(pool.read("big.bin")) == body
    pool.commit("main")
    assert pool.vacuum(grace=NOW, retention=NOW).removed == []
    assert b"".join(pool.read("big.bin")) == body
    assert blobs_of(pool) == {entry.object} and upload_files(pool) == []
    assert list(pool.verify()) == []


def test_a_failed_stage_leaves_the_blob_to_vacuum(tmp_path: Path) -> None:
    """Completing writes the object's blob, then its staging entry fails: the blob is
    not deleted by the completion (the stage may have landed, or a reader may hold
    the entry), the upload stays whole, and vacuum frees the blob past the grace."""
    uri = str(tmp_path / "lake")
    Lake.init(uri)
    store = FaultyStorage(open_storage(uri))
    pool = Lake(store).create_pool("p", kind="files")
    m = Multipart(pool)
    uid = m.create("main", "obj")
    parts = [(1, m.upload_part(uid, 1, b"only part").etag)]
    store.rules = [Rule("write", 1, "fail", glob=f"{pool.id}/staging/*")]
    with pytest.raises(LimnoError):
        m.complete(uid, parts)
    store.rules = []
    (orphan,) = blobs_of(pool)
    assert m.upload(uid).path == "obj"
    assert pool.vacuum(grace=HOUR).removed == []
    assert blobs_of(pool) == {orphan}
    entry = m.complete(uid, parts)  # the upload is still whole: it completes now
    assert blobs_of(pool) == {entry.object, orphan}
    freed = pool.vacuum(grace=NOW)
    assert [path for path, _ in freed.removed] == [f"{pool.id}/{BLOB_DIR}/{orphan}"]
    assert blobs_of(pool) == {entry.object}
    assert b"".join(pool.read("obj")) == b"only part"
