"""Vacuum against writers, the real code, one side paused before each of its storage calls.

The fault-injection store (``limno.storage._faults``) lets a test see every call a
thread makes. For each k, one side (the *actor*) runs in a thread and is stopped
just before its k-th storage call; the other side then runs to completion (or, a
writer, until it waits for the paused vacuum), and the actor resumes. Every k
from the first call to the last is tried, both ways round, for writers of each
kind (a load, a staged commit, a revert that re-adds trimmed history, a branch
from a deleted branch's commit), with the writer's lease alive or lost. After
each schedule the lake must verify clean (no branch holds a removed object), and
a writer must have either landed with all its rows readable or been refused with
nothing changed. ``tests/core/test_gc_model.py`` checks the same protocol on a model,
over every interleaving.
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from interleaving_support import WAIT, Actor, Pause, either
from limno.api.local import LocalLake as Lake
from limno.errors import ConflictError
from limno.pools.records.pool import RecordPool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage

pytestmark = pytest.mark.slow


def _writer_threads(name: str) -> bool:
    return name == "actor" or (name.startswith("limno-") and name != "limno-leases")


@dataclass
class Setup:
    lake: Lake
    store: FaultyStorage
    pool: RecordPool
    act: Callable[[], Any]
    expect: set[int]  # the keys main holds if the writer lands
    must_land: bool  # a live writer of fresh data is never refused
    retention: dt.timedelta | None = None
    before: set[int] = field(default_factory=set)


def _table(keys: list[int]) -> pa.Table:
    return pa.table({"k": keys, "v": [f"v{k}" for k in keys]})


def _setup(tmp_path: Path, kind: str) -> Setup:
    Lake.init(str(tmp_path / "lake"))
    store = FaultyStorage(open_storage(str(tmp_path / "lake")))
    lake = Lake(store)
    pool = lake.create_pool("p", key="k")
    pool.load([_table([1, 2])])
    s = _scenario(lake, store, pool, kind)
    s.before = set(pool.scan().column("k").to_pylist())
    return s


def _scenario(lake: Lake, store: FaultyStorage, pool: RecordPool, kind: str) -> Setup:
    if kind == "load":
        return Setup(lake, store, pool, lambda: pool.load([_table([3, 4])]), {1, 2, 3, 4}, True)
    if kind == "commit":
        pool.add([_table([5])])
        return Setup(lake, store, pool, lambda: pool.commit(), {1, 2, 5}, True)
    if kind == "revert":
        extra = pool.load([_table([7])])
        (obj,) = [o for o in pool.snapshot()[0] if o.min_key == (7,)]
        dropped = pool.delete_objects([obj.id])
        assert extra.id
        return Setup(
            lake,
            store,
            pool,
            lambda: pool.revert(dropped.id),
            {1, 2, 7},
            False,
            dt.timedelta(0),
        )
    if kind == "branch":
        pool.branch("gone")
        head = pool.load([_table([9])], branch="gone")
        pool.delete_branch("gone")
        return Setup(
            lake, store, pool, lambda: pool.branch("back", from_ref=head.id), {1, 2}, False
        )
    raise AssertionError(kind)


def _check(s: Setup, error: BaseException | None, kind: str) -> str:
    """Verify the lake and the writer's outcome; 'landed' or 'refused'."""
    faults = [str(f) for f in s.lake.verify()]
    assert faults == [], faults
    main = set(s.pool.scan().column("k").to_pylist())
    if error is not None:
        assert isinstance(error, ConflictError), repr(error)
        assert "removed by vacuum" in str(error) or "deciding" in str(error), str(error)
        assert not s.must_land, f"a live {kind} was refused: {error}"
        assert main == s.before, main
        assert "back" not in s.pool.branches()
        return "refused"
    if kind == "branch":
        assert set(s.pool.scan("back").column("k").to_pylist()) == {1, 2, 9}
    else:
        assert main == s.expect, main
    return "landed"


def _vacuum(s: Setup) -> None:
    s.pool.vacuum(grace=dt.timedelta(0), retention=s.retention)


def _kill_leases(s: Setup) -> None:
    """What a vacuum does to the lease of a writer stalled past the TTL: drop it."""
    for info in s.store.inner.walk(f"{s.pool.id}/leases"):
        s.store.inner.delete(info.path)


KINDS = ["load", "commit", "revert", "branch"]


@pytest.mark.parametrize("lease", ["alive", "lost"])
@pytest.mark.parametrize("kind", KINDS)
def test_vacuum_runs_between_any_two_writer_calls(tmp_path: Path, kind: str, lease: str) -> None:
    outcomes = []
    for k in range(1, 200):
        s = _setup(tmp_path / f"{k}", kind)
        pause = Pause(k, _writer_threads)
        s.store.observer = pause
        actor = Actor(s.act)
        actor.start()
        assert either(pause.paused, actor.done)
        if not pause.paused.is_set():  # the writer made fewer than k calls: all tried
            assert actor.error is None, repr(actor.error)
            break
        if lease == "lost":
            _kill_leases(s)
            s.must_land = False
        _vacuum(s)  # in this (main) thread: not paused
        pause.resume.set()
        assert actor.done.wait(WAIT)
        s.store.observer = None
        outcomes.append(_check(s, actor.error, kind))
    assert len(outcomes) >= 3  # the writer really was interrupted at several points
    if lease == "alive" and kind in ("load", "commit"):
        assert set(outcomes) == {"landed"}


@pytest.mark.parametrize("kind", KINDS)
def test_writer_runs_between_any_two_vacuum_calls(tmp_path: Path, kind: str) -> None:
    outcomes = []
    for k in range(1, 200):
        s = _setup(tmp_path / f"{k}", kind)
        pause = Pause(k, lambda name: name == "actor")
        s.store.observer = pause
        vacuum = Actor(functools.partial(_vacuum, s))
        vacuum.start()
        assert either(pause.paused, vacuum.done)
        if not pause.paused.is_set():
            assert vacuum.error is None, repr(vacuum.error)
            break
        waiting = threading.Event()
        s.pool.versioned.gc.on_wait = _setter(waiting)
        writer = Actor(s.act)
        writer.name = "writer"
        writer.start()
        assert either(writer.done, waiting)  # it lands, or waits for the paused run
        pause.resume.set()
        assert vacuum.done.wait(WAIT) and writer.done.wait(WAIT)
        assert vacuum.error is None, repr(vacuum.error)
        s.store.observer = None
        outcomes.append(_check(s, writer.error, kind))
    assert len(outcomes) >= 3
    if kind in ("load", "commit"):
        assert set(outcomes) == {"landed"}


def _setter(event: threading.Event) -> Callable[[str, Sequence[str]], None]:
    return lambda run, keys: event.set()
