"""Taking back a write whose autocommit failed (the S3 gateway's rollback:
``FilePool.take_back``) against a newer write of the same path, the rollback paused
before each of its storage calls: the newer write always stays staged."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from interleaving_support import WAIT, Actor, Pause, either
from limno.lake import Lake
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage


def test_a_newer_write_survives_the_rollback_at_every_point(tmp_path: Path) -> None:
    outcomes = []
    for k in range(1, 50):
        root = str(tmp_path / f"{k}")
        Lake.init(root)
        store = FaultyStorage(open_storage(root))
        pool = Lake(store).create_pool("p", kind="files")
        pool.put("main", "doc", b"failed write")
        staged = pool.versioned.staged("main")
        pause = Pause(k, lambda name: name == "actor")
        store.observer = pause
        rollback = Actor(partial(pool.take_back, "main", staged))
        rollback.start()
        assert either(pause.paused, rollback.done)
        if not pause.paused.is_set():  # fewer than k calls: every point was tried
            assert rollback.error is None, repr(rollback.error)
            break
        pool.put("main", "doc", b"newer write")
        pause.resume.set()
        assert rollback.done.wait(WAIT) and rollback.error is None, repr(rollback.error)
        store.observer = None
        assert b"".join(pool.read("doc", "main")) == b"newer write", k
        outcomes.append(k)
    assert len(outcomes) >= 2
    # and with no newer write, the rollback takes the failed write back
    pool.take_back("main", pool.versioned.staged("main"))
    assert pool.uncommitted("main") == []
