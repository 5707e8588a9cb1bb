"""A multipart completion faulted at each of its storage calls: it leaves the upload as
it was or the completed entry, never a partial object; vacuum and expiry reclaim what
the cut-short completion wrote.

Like tests/faultsuite.py for record pools: the completion runs once through a
recording :class:`~limno.storage._faults.FaultyStorage` to count its calls N; then
for each k in 1..N and each fault (fail, crash-before, crash-after) a fresh copy of
the same lake runs it with the fault at call k, and is reopened on a clean store (a
crashed writer's leases dropped, as after a restart) to check what it holds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
from functools import partial
from pathlib import Path

import pytest

from faultsuite import faulted_outcome
from limno.errors import NotFoundError
from limno.lake import Lake
from limno.pools.files import multipart as mp
from limno.pools.files.blobs import BLOB_DIR
from limno.pools.files.multipart import Multipart, expire_uploads
from limno.pools.files.pool import FilePool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage, Rule

SMALL = 1024
NEVER = 10**9
PATH = "dir/object.bin"
PARTS = [b"a" * SMALL, b"b" * (SMALL + 1), b"tail"]


def reference_etag() -> str:
    joined = b"".join(hashlib.md5(p).digest() for p in PARTS)
    return f"{hashlib.md5(joined).hexdigest()}-{len(PARTS)}"


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mp, "MIN_PART_SIZE", SMALL)


def not_heartbeats(thread: str) -> bool:
    return thread != "limno-leases"


def make_template(root: Path) -> tuple[str, str, list[tuple[int, str]]]:
    """A lake with a committed file and an upload whose parts are all up."""
    lake = Lake.init(str(root))
    lake.create_pool("files", kind="files")
    pool = lake.file_pool("files")
    pool.put("main", "other", b"committed before")
    pool.commit("main", "before")
    m = Multipart(pool)
    uid = m.create("main", PATH, metadata={"k": "v"})
    listed = [(n, m.upload_part(uid, n, data).etag) for n, data in enumerate(PARTS, 1)]
    return str(root), uid, listed


def open_pool(uri: str, crashed: bool) -> FilePool:
    store = open_storage(uri)
    pool = Lake(store).file_pool("files")
    if crashed:
        for info in list(store.walk(f"{pool.id}/leases")):
            store.delete(info.path)
    return pool


def test_complete_faulted_at_every_call(tmp_path: Path) -> None:
    template, uid, listed = make_template(tmp_path / "template")

    probe = tmp_path / "probe"
    shutil.copytree(template, probe)
    counting = FaultyStorage(open_storage(str(probe)), threads=not_heartbeats)
    counting.rules = [Rule("any", NEVER, "fail")]
    counted = Multipart(Lake(counting).file_pool("files"))
    counting.calls.clear()  # the completion's calls only, as the faulted runs count them
    counted.complete(uid, listed)
    calls = list(counting.calls)
    assert len(calls) > 5

    seen = {"before": 0, "after": 0}
    for fault in ("fail", "crash-before", "crash-after"):
        for k in range(1, len(calls) + 1):
            where = f"{fault} at call {k} {calls[k - 1]}"
            uri = str(tmp_path / f"{fault}-{k}")
            shutil.copytree(template, uri)
            store = FaultyStorage(open_storage(uri), threads=not_heartbeats)
            m = Multipart(Lake(store).file_pool("files"))
            store.rules = [Rule("any", k, fault)]
            result = faulted_outcome(partial(m.complete, uid, listed), fault, where)
            reached = store.counts.get((0, "n"), 0) >= k
            assert result != "ok" or fault == "fail" or not reached, f"{where}: survived"
            seen[check(uri, uid, listed, result, where)] += 1
    assert seen["before"] and seen["after"], seen


def check(uri: str, uid: str, listed: list[tuple[int, str]], result: str, where: str) -> str:
    """What the lake holds after the faulted completion: "before" or "after"."""
    pool = open_pool(uri, result == "crashed")
    m = Multipart(pool)
    assert b"".join(pool.read("other", "main")) == b"committed before", where
    try:
        entry = pool.stat(PATH, "main")
    except NotFoundError:
        entry = None
    assert result != "ok" or entry is not None, f"{where}: succeeded, but nothing staged"
    state = "before" if entry is None else "after"
    if entry is None:
        # the old state: the upload is whole and completes now
        assert m.upload(uid).path == PATH, where
        m.complete(uid, listed)
        entry = pool.stat(PATH, "main")
    assert entry.etag == reference_etag(), where
    assert dict(entry.metadata) == {"k": "v"}, where
    assert b"".join(pool.read(PATH, "main")) == b"".join(PARTS), where
    # what the cut-short completion left, expiry and vacuum take back
    expire_uploads(pool, dt.timedelta(0))
    pool.vacuum(grace=dt.timedelta(0))
    store = pool.storage
    assert [o.path for o in store.walk(f"{pool.id}/multipart")] == [], where
    assert list(store.list_partial(pool.id)) == [], where
    blobs = {o.path.rsplit("/", 1)[-1] for o in store.walk(f"{pool.id}/{BLOB_DIR}")}
    assert blobs == {entry.object, pool.stat("other", "main").object}, where
    assert list(pool.verify()) == [], where
    return state
