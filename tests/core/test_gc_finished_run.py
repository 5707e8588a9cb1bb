"""A writer that sees a vacuum run registered, which then finishes before the writer
reads the run's candidate list.

A run is unregistered (a CAS on the ``gc`` entry) and then its candidate list is
deleted. A writer landing a ref move reads the branch store, then the candidate
list of each registered run; if the run finishes in between, the list is gone
though the writer's (now stale) view still shows the run. That is not corruption:
the writer must look again, not fail with "candidate list ... is missing". This
was a flaky failure of ``test_gc_interleavings.py`` (the window is a few storage
calls wide); here the interleaving is injected at the exact call, so the test
fails on every run without the fix.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from limno.api.local import LocalLake as Lake
from limno.errors import CorruptError
from limno.pools.records.pool import RecordPool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage


def _table(keys: list[int]) -> pa.Table:
    return pa.table({"k": keys, "v": [f"v{k}" for k in keys]})


def _lake(tmp_path: Path) -> tuple[Lake, FaultyStorage, RecordPool, str]:
    """A pool whose deleted branch ``gone`` left commit (returned) with row 9's object."""
    Lake.init(str(tmp_path / "lake"))
    store = FaultyStorage(open_storage(str(tmp_path / "lake")))
    lake = Lake(store)
    pool = lake.create_pool("p", key="k")
    pool.load([_table([1, 2])])
    pool.branch("gone")
    head = pool.load([_table([9])], branch="gone")
    pool.delete_branch("gone")
    assert head.id
    return lake, store, pool, head.id


def test_run_finishing_before_writer_reads_its_list(tmp_path: Path) -> None:
    lake, store, pool, head = _lake(tmp_path)
    v = pool.versioned
    gc = v.gc
    with gc.leases.hold("vacuum") as lease:
        # a vacuum run whose candidates are exactly what the writer will reference
        run = gc.begin(v.snapshot_keys(head), lease.id, trimmed=False)
        finished = []

        def finish_first(op: str, path: str) -> None:
            # the writer is about to read the run's list: the run finishes first
            if op == "get" and path == gc.run_path(run):
                store.observer = None
                gc.finish(run)
                finished.append(path)

        store.observer = finish_first
        try:
            pool.branch("back", from_ref=head)
        finally:
            store.observer = None
    assert finished == [gc.run_path(run)]  # the interleaving really happened
    assert not gc.registered(run)
    assert set(pool.scan("back").column("k").to_pylist()) == {1, 2, 9}
    assert [str(f) for f in lake.verify()] == []


def test_list_missing_while_run_registered_is_corrupt(tmp_path: Path) -> None:
    _, store, pool, head = _lake(tmp_path)
    gc = pool.versioned.gc
    with gc.leases.hold("vacuum") as lease:
        run = gc.begin(pool.versioned.snapshot_keys(head), lease.id, trimmed=False)
        store.inner.delete(gc.run_path(run))  # lost, yet the run is still registered
        with pytest.raises(CorruptError, match="candidate list of vacuum run .* is missing"):
            pool.branch("back", from_ref=head)
        gc.finish(run)
    assert "back" not in pool.branches()
