"""A dropped pool takes its merge requests (``<pool-id>/reviews/``) with it, even when a
request is being opened while the pool is dropped; a renamed pool keeps them."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa

from interleaving_support import WAIT, Actor
from limno.api.local import LocalLake as Lake
from limno.errors import NotFoundError
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage


def _files_under(root: Path, pool_id: str) -> list[str]:
    return sorted(p.name for p in (root / pool_id).rglob("*") if p.is_file())


def test_drop_removes_requests_and_rename_keeps_them(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    logs = lake.create_pool("logs", key="ts")
    logs.load([pa.table({"ts": [1]})])
    logs.branch("dev")
    docs = lake.create_pool("docs", kind="files")
    docs.put("main", "a.txt", b"a")
    docs.commit("main", "first")
    docs.branch("dev")
    for name in ("logs", "docs"):
        lake.versioned_pool(name).open_merge_request("dev", title=f"into {name}")
    lake.rename_pool("logs", "events")
    (kept,) = lake.versioned_pool("events").merge_requests()
    assert (kept.pool, kept.title) == ("events", "into logs")
    ids = [logs.id, docs.id]
    assert all((tmp_path / "lake" / i / "reviews").is_dir() for i in ids)
    lake.drop_pool("events")
    lake.drop_pool("docs")
    assert [_files_under(tmp_path / "lake", i) for i in ids] == [[], []]
    # a new pool of the old name starts with none
    again = lake.create_pool("logs", key="ts")
    again.load([pa.table({"ts": [1]})])
    assert lake.versioned_pool("logs").merge_requests("all") == []


def test_a_request_opened_while_its_pool_is_dropped_leaves_nothing(tmp_path: Path) -> None:
    """The opener (a pool object from before the drop) is paused just before it writes
    the review journal; the pool is dropped; the opener resumes and is refused."""
    root = tmp_path / "lake"
    Lake.init(str(root))
    paused, resume = threading.Event(), threading.Event()

    def observe(op: str, path: str) -> None:
        writing = op in ("put", "put_if_absent") and "/reviews/" in path
        if writing and threading.current_thread().name == "actor" and not paused.is_set():
            paused.set()
            assert resume.wait(WAIT)

    lake = Lake(FaultyStorage(open_storage(str(root)), observer=observe))
    pool = lake.create_pool("logs", key="ts")
    pool.load([pa.table({"ts": [1]})])
    pool.branch("dev")
    opener = Actor(lambda: pool.open_merge_request("dev", title="late"))
    opener.start()
    assert paused.wait(WAIT)
    Lake.open(str(root)).drop_pool("logs")
    resume.set()
    assert opener.done.wait(WAIT)
    opener.join(WAIT)
    assert isinstance(opener.error, NotFoundError), opener.error
    assert _files_under(root, pool.id) == []
