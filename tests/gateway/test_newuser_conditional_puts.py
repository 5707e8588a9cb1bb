"""A conditional write must have exactly one winner however two writers of the same
path interleave: a create-only one (``If-None-Match: *``, S3's conditional put, which
delta-rs uses to commit each table version and obstore's ``mode="create"`` sends), and an
``If-Match`` one (obstore's ``mode="update"``). The gateway's PutObject calls
``FilePool.put(..., if_none_match=True / if_match=ETAG)`` (CopyObject ``copy`` and
CompleteMultipartUpload ``Multipart.complete`` take the same flags), so the pool is paused
before each of one writer's storage calls while a second writer writes the same path on
the same condition, then resumed. Before, both could be told "written" (the check and the
stage were two steps) and one write was lost: a Delta commit silently overwritten."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interleaving_support import WAIT, Actor, Pause, either
from limno.errors import PreconditionFailedError
from limno.lake import Lake
from limno.pools.files.multipart import Multipart
from limno.pools.files.pool import FilePool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage


def _pool(root: Path) -> tuple[FaultyStorage, FilePool]:
    Lake.init(str(root))
    store = FaultyStorage(open_storage(str(root)))
    pool = Lake(store).create_pool("p", kind="files")
    assert isinstance(pool, FilePool)
    pool.put("main", "gone", b"committed, then removed")
    pool.put("main", "src", b"first")
    pool.put("main", "upd", b"original")
    pool.commit("main")
    pool.remove("main", ["gone"])  # a staged tombstone: the path is absent on main
    return store, pool


def _writer(name: str) -> bool:
    return name == "actor" or (name.startswith("limno-") and name != "limno-leases")


def _created(write: Callable[[], object]) -> bool:
    try:
        write()
    except PreconditionFailedError:
        return False
    return True


def _etag(pool: FilePool, path: str) -> str:
    return pool.stat(path, "main").etag


def _first(pool: FilePool, op: str, path: str) -> Callable[[], object]:
    """The paused writer's conditional write of ``path`` (its bytes: b"first")."""
    if op == "put":
        return functools.partial(pool.put, "main", path, b"first", if_none_match=True)
    if op == "update":  # If-Match: the ETag read before (obstore's mode="update")
        etag = _etag(pool, path)
        return functools.partial(pool.put, "main", path, b"first", if_match=etag)
    condition: dict[str, Any] = {"if_none_match": True}
    if op.endswith("-update"):  # the same with If-Match: the ETag read before
        condition = {"if_match": _etag(pool, path)}
    if op.startswith("copy"):  # CopyObject
        return functools.partial(pool.copy, "main", "src", "main", path, **condition)
    multipart = Multipart(pool)  # CompleteMultipartUpload
    upload = multipart.create("main", path)
    etag = multipart.upload_part(upload, 1, b"first").etag
    return functools.partial(multipart.complete, upload, [(1, etag)], **condition)


@pytest.mark.parametrize(
    ("op", "path"),
    [
        ("put", "new"),
        ("put", "gone"),
        ("copy", "new"),
        ("complete", "gone"),
        ("update", "upd"),
        ("update", "staged"),
        ("copy-update", "upd"),
        ("copy-update", "staged"),
        ("complete-update", "staged"),
    ],
)
def test_create_only_writes_of_one_path_have_one_winner(tmp_path: Path, op: str, path: str) -> None:
    interleavings = 0
    for k in range(1, 100):
        store, pool = _pool(tmp_path / str(k))
        if op.endswith("update") and path == "staged":
            pool.put("main", path, b"staged before")
        etag_before = _etag(pool, path) if op.endswith("update") else ""
        write = _first(pool, op, path)
        pause = Pause(k, _writer)
        store.observer = pause
        actor = Actor(functools.partial(_created, write), "actor")
        actor.start()
        assert either(pause.paused, actor.done)
        if not pause.paused.is_set():  # fewer than k calls: every point was tried
            assert actor.error is None, repr(actor.error)
            break
        # this (main) thread is never paused; it writes on the same condition
        condition: dict[str, Any] = {"if_none_match": True}
        if op.endswith("update"):
            condition = {"if_match": etag_before}
        second = _created(functools.partial(pool.put, "main", path, b"second", **condition))
        pause.resume.set()
        assert actor.done.wait(WAIT)
        store.observer = None
        assert actor.error is None, repr(actor.error)
        first = bool(actor.result)
        assert first != second, f"paused at call {k}: first {first}, second {second}"
        want = b"first" if first else b"second"
        assert b"".join(pool.read(path, "main")) == want
        interleavings += 1
    assert interleavings >= 3  # the writer really was interrupted at several points
