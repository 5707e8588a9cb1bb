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


def test_a_listless_run_holds_writers_only_while_its_vacuum_lives(tmp_path: Path) -> None:
    """A run registered without its list (its vacuum's ``begin`` dropped the list, then
    the mark landed late): a writer waits while the vacuum's lease is live, and goes
    on once it is gone (such a run deletes nothing); the next vacuum clears it."""
    lake, store, pool, head = _lake(tmp_path)
    gc = pool.versioned.gc
    waits: list[str] = []
    with gc.leases.hold("vacuum") as lease:
        run = gc.begin(pool.versioned.snapshot_keys(head), lease.id, trimmed=False)
        store.inner.delete(gc.run_path(run))  # gone, yet the run is still registered

        def vacuum_gives_up(waited_for: str, keys: object) -> None:
            waits.append(waited_for)
            gc.leases.release(lease.path)  # its process ends: the lease is dead

        gc.on_wait = vacuum_gives_up
        pool.branch("back", from_ref=head)
    assert waits == [run]  # it waited while the lease was live, once
    assert gc.registered(run)
    assert set(pool.scan("back").column("k").to_pylist()) == {1, 2, 9}
    pool.vacuum()
    assert not gc.registered(run)
    assert [str(f) for f in lake.verify()] == []


def test_a_listless_run_of_a_dead_vacuum_holds_nobody(tmp_path: Path) -> None:
    _, store, pool, head = _lake(tmp_path)
    gc = pool.versioned.gc
    with gc.leases.hold("vacuum") as lease:
        run = gc.begin(pool.versioned.snapshot_keys(head), lease.id, trimmed=False)
    store.inner.delete(gc.run_path(run))
    gc.on_wait = lambda run, keys: pytest.fail(f"waited for {run}")
    pool.branch("back", from_ref=head)
    assert set(pool.scan("back").column("k").to_pylist()) == {1, 2, 9}
