"""Expiring an idle multipart upload against a part upload or a completion of it,
one side paused before each of its storage calls (the pattern of
tests/core/test_gc_interleavings.py): the writer either lands (the upload stays, its
parts complete into the right bytes) or is refused with no-upload (and the upload
is gone without a trace); never a part accepted into an upload that is then freed."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from interleaving_support import WAIT, Actor, Pause, either
from limno.api.base_files import FilePool
from limno.api.local import LocalLake
from limno.errors import MultipartError
from limno.lake import Lake
from limno.pools.files import multipart as mp
from limno.pools.files.multipart import Multipart
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage

SMALL = 1024
GRACE = dt.timedelta(minutes=10)
FIRST, SECOND = b"a" * SMALL, b"tail"


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mp, "MIN_PART_SIZE", SMALL)


@dataclass
class Setup:
    store: FaultyStorage
    pool: FilePool
    m: Multipart
    uid: str
    first: str  # part 1's ETag


def _setup(root: Path) -> Setup:
    Lake.init(str(root))
    store = FaultyStorage(open_storage(str(root)))
    pool = LocalLake(store).create_pool("files", kind="files")
    assert isinstance(pool, FilePool)
    m = Multipart(pool)
    uid = m.create("main", "big.bin")
    first = m.upload_part(uid, 1, FIRST).etag
    # the upload has been idle for an hour: what is written from now on is fresh
    hour_ago = time.time() - 3600
    for path in (root / pool.id / mp.UPLOAD_DIR).rglob("*"):
        os.utime(path, (hour_ago, hour_ago))
    return Setup(store, pool, m, uid, first)


def _expire(s: Setup) -> None:
    mp.expire_uploads(s.m.pool, GRACE)


def _part(s: Setup) -> Any:
    return s.m.upload_part(s.uid, 2, SECOND)


def _complete(s: Setup) -> Any:
    return s.m.complete(s.uid, [(1, s.first)])


def _check(s: Setup, act: Callable[[Setup], Any], error: BaseException | None) -> str:
    leftovers = [o.path for o in s.store.walk(f"{s.m.pool.id}/{mp.UPLOAD_DIR}")]
    if error is not None:
        assert isinstance(error, MultipartError) and error.reason == "no-upload", repr(error)
        assert leftovers == [], leftovers
        return "refused"
    if act is _part:  # the upload must still take a completion with both parts
        part = s.m.list_parts(s.uid)[0][-1]
        s.m.complete(s.uid, [(1, s.first), (2, part.etag)])
        assert b"".join(s.pool.read("big.bin", "main")) == FIRST + SECOND
    else:
        assert b"".join(s.pool.read("big.bin", "main")) == FIRST
    return "landed"


def _writer(name: str) -> bool:
    return name == "writer" or (name.startswith("limno-") and name != "limno-leases")


@pytest.mark.parametrize("act", [_part, _complete], ids=["part", "complete"])
def test_a_writer_runs_between_any_two_expiry_calls(tmp_path: Path, act: Any) -> None:
    outcomes = []
    for k in range(1, 100):
        s = _setup(tmp_path / f"{k}")
        pause = Pause(k, lambda name: name == "expiry")
        s.store.observer = pause
        expiry = Actor(partial(_expire, s), "expiry")
        expiry.start()
        assert either(pause.paused, expiry.done)
        if not pause.paused.is_set():  # fewer than k calls: every point was tried
            assert expiry.error is None, repr(expiry.error)
            break
        writer = Actor(partial(act, s), "writer")
        writer.start()
        assert writer.done.wait(WAIT)
        pause.resume.set()
        assert expiry.done.wait(WAIT) and expiry.error is None, repr(expiry.error)
        s.store.observer = None
        outcomes.append(_check(s, act, writer.error))
    assert len(outcomes) >= 5 and set(outcomes) == {"landed", "refused"}


@pytest.mark.parametrize("act", [_part, _complete], ids=["part", "complete"])
def test_expiry_runs_between_any_two_writer_calls(tmp_path: Path, act: Any) -> None:
    outcomes = []
    for k in range(1, 200):
        s = _setup(tmp_path / f"{k}")
        pause = Pause(k, _writer)
        s.store.observer = pause
        writer = Actor(partial(act, s), "writer")
        writer.start()
        assert either(pause.paused, writer.done)
        if not pause.paused.is_set():
            assert writer.error is None, repr(writer.error)
            break
        _expire(s)  # in this (main) thread: not paused
        pause.resume.set()
        assert writer.done.wait(WAIT)
        s.store.observer = None
        outcomes.append(_check(s, act, writer.error))
    assert len(outcomes) >= 5 and "landed" in outcomes
