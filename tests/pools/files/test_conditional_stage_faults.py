"""A conditional write over a staged entry (If-Match on a staged path), faulted at each of
its storage calls: the path afterwards holds the old staged entry or the new one, never
the committed file (the staged entry lost) and never nothing.

Like tests/pools/files/test_multipart_faults.py: the write runs once through a recording
:class:`~limno.storage._faults.FaultyStorage` to count its calls N; then for each k in
1..N and each fault a fresh copy of the same lake runs it with the fault at call k and is
reopened on a clean store, as after a restart.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

from faultsuite import faulted_outcome
from limno.lake import Lake
from limno.pools.files.pool import FilePool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage, Rule

NEVER = 10**9
COMMITTED, STAGED, NEW = b"committed", b"staged one", b"staged two"


def not_heartbeats(thread: str) -> bool:
    return thread != "limno-leases"


def make_template(root: Path) -> str:
    """A lake whose path ``p`` is committed, then staged again with other bytes; the
    ETag of the staged version."""
    lake = Lake.init(str(root))
    pool = lake.create_pool("files", kind="files")
    pool.put("main", "p", COMMITTED)
    pool.commit("main", "before")
    return pool.put("main", "p", STAGED).etag


def faulted_pool(uri: str, rules: list[Rule]) -> tuple[FaultyStorage, FilePool]:
    store = FaultyStorage(open_storage(uri), threads=not_heartbeats)
    pool = Lake(store).file_pool("files")
    store.calls.clear()
    store.rules = rules
    return store, pool


def test_conditional_restage_faulted_at_every_call(tmp_path: Path) -> None:
    template = tmp_path / "template"
    etag = make_template(template)
    probe = tmp_path / "probe"
    shutil.copytree(template, probe)
    counting, pool = faulted_pool(str(probe), [Rule("any", NEVER, "fail")])
    pool.put("main", "p", NEW, if_match=etag)
    calls = list(counting.calls)
    assert any(op == "replace_if_equal" for op, _ in calls), calls

    seen: dict[bytes, int] = {STAGED: 0, NEW: 0}
    for fault in ("fail", "crash-before", "crash-after"):
        for k in range(1, len(calls) + 1):
            where = f"{fault} at call {k} {calls[k - 1]}"
            uri = str(tmp_path / f"{fault}-{k}")
            shutil.copytree(template, uri)
            _, pool = faulted_pool(uri, [Rule("any", k, fault)])
            put = partial(pool.put, "main", "p", NEW, if_match=etag)
            result = faulted_outcome(put, fault, where)
            after = Lake(open_storage(uri)).file_pool("files")
            held = b"".join(after.read("p", "main"))
            assert held in (STAGED, NEW), f"{where}: {held!r}"
            assert result != "ok" or held == NEW, where
            seen[held] += 1
    assert seen[STAGED] and seen[NEW], seen
