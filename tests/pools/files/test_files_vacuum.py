"""Vacuum of file pools against writers, the real code, one side paused before each of its
storage calls (the pattern of tests/core/test_gc_interleavings.py): a put whose blob is
written while vacuum runs is never lost, a copy of a blob only history holds lands with
its bytes or is refused, and bytes limno did not write (imports) are never deleted."""

from __future__ import annotations

import datetime as dt
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interleaving_support import WAIT, Actor, Pause, either
from limno.errors import ConflictError
from limno.lake import Lake
from limno.pools.files.pool import FilePool
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage


@dataclass
class Setup:
    lake: Lake
    store: FaultyStorage
    pool: FilePool
    act: Callable[[], Any]
    expect: dict[str, bytes]  # main's files if the writer lands
    before: dict[str, bytes]
    must_land: bool


def _files(pool: FilePool, ref: str = "main") -> dict[str, bytes]:
    return {e.path: b"".join(pool.read(e.path, ref)) for e in pool.iter_list(ref)}


def _put_commit(pool: FilePool) -> None:
    pool.put("main", "new file", b"fresh bytes")
    pool.commit("main")


def _copy_commit(pool: FilePool, ref: str) -> None:
    pool.copy(ref, "old", "main", "revived")
    pool.commit("main")


def _setup(tmp_path: Path, kind: str) -> Setup:
    Lake.init(str(tmp_path / "lake"))
    store = FaultyStorage(open_storage(str(tmp_path / "lake")))
    lake = Lake(store)
    pool = lake.create_pool("p", kind="files")
    pool.put("main", "kept", b"k")
    pool.commit("main")
    before = {"kept": b"k"}
    act: Callable[[], Any]
    if kind == "put":
        act = functools.partial(_put_commit, pool)
        return Setup(lake, store, pool, act, {**before, "new file": b"fresh bytes"}, before, True)
    if kind == "commit":
        pool.put("main", "staged", b"s")
        act = functools.partial(pool.commit, "main")
        return Setup(lake, store, pool, act, {**before, "staged": b"s"}, before, True)
    if kind == "copy":  # the source's blob is held by history only, which vacuum trims
        pool.put("main", "old", b"history")
        old = pool.commit("main").id
        pool.remove("main", ["old"])
        pool.commit("main")
        act = functools.partial(_copy_commit, pool, old)
        return Setup(lake, store, pool, act, {**before, "revived": b"history"}, before, False)
    raise AssertionError(kind)


def _check(s: Setup, error: BaseException | None) -> str:
    faults = [str(f) for f in s.lake.verify()]
    assert faults == [], faults
    files = _files(s.pool)
    if error is not None:
        assert isinstance(error, ConflictError), repr(error)
        assert "removed by vacuum" in str(error), str(error)
        assert not s.must_land, f"a live writer was refused: {error}"
        assert files == s.before
        return "refused"
    assert files == s.expect, files
    return "landed"


def _vacuum(s: Setup) -> None:
    s.pool.vacuum(grace=dt.timedelta(0), retention=dt.timedelta(0))


def _writer_threads(name: str) -> bool:
    return name == "actor" or (name.startswith("limno-") and name != "limno-leases")


KINDS = ["put", "commit", "copy"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_vacuum_runs_between_any_two_writer_calls(tmp_path: Path, kind: str) -> None:
    outcomes = []
    for k in range(1, 200):
        s = _setup(tmp_path / f"{k}", kind)
        pause = Pause(k, _writer_threads)
        s.store.observer = pause
        actor = Actor(s.act, "actor")
        actor.start()
        assert either(pause.paused, actor.done)
        if not pause.paused.is_set():  # the writer made fewer than k calls: all tried
            assert actor.error is None, repr(actor.error)
            break
        _vacuum(s)  # in this (main) thread: not paused
        pause.resume.set()
        assert actor.done.wait(WAIT)
        s.store.observer = None
        outcomes.append(_check(s, actor.error))
    assert len(outcomes) >= 5  # the writer really was interrupted at several points
    if kind != "copy":
        assert set(outcomes) == {"landed"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_writer_runs_between_any_two_vacuum_calls(tmp_path: Path, kind: str) -> None:
    outcomes = []
    for k in range(1, 200):
        s = _setup(tmp_path / f"{k}", kind)
        pause = Pause(k, lambda name: name == "vacuum")
        s.store.observer = pause
        vacuum = Actor(functools.partial(_vacuum, s), "vacuum")
        vacuum.start()
        assert either(pause.paused, vacuum.done)
        if not pause.paused.is_set():
            assert vacuum.error is None, repr(vacuum.error)
            break
        waiting = threading.Event()
        s.pool.versioned.gc.on_wait = lambda run, keys, ev=waiting: ev.set()
        writer = Actor(s.act, "writer")
        writer.start()
        assert either(writer.done, waiting)  # it lands, or waits for the paused run
        pause.resume.set()
        assert vacuum.done.wait(WAIT) and writer.done.wait(WAIT)
        assert vacuum.error is None, repr(vacuum.error)
        s.store.observer = None
        outcomes.append(_check(s, writer.error))
    assert len(outcomes) >= 5
    if kind != "copy":
        assert set(outcomes) == {"landed"}


def test_vacuum_never_deletes_imported_bytes(tmp_path: Path) -> None:
    source = tmp_path / "outside"
    (source / "dir").mkdir(parents=True)
    (source / "dir" / "one.csv").write_bytes(b"1,2\n")
    (source / "two.bin").write_bytes(b"\x00" * 10)
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("imp", kind="files")
    pool.import_from(str(source), prefix="in/")
    pool.put("main", "own", b"mine")
    pool.commit("main")
    pool.remove_prefix("main", "")
    pool.commit("main", "drop everything")
    report = pool.vacuum(grace=dt.timedelta(0), retention=dt.timedelta(0))
    assert len(report.removed) == 1  # the own blob; imported objects are not candidates
    assert (source / "dir" / "one.csv").read_bytes() == b"1,2\n"
    assert (source / "two.bin").read_bytes() == b"\x00" * 10
    assert list(pool.storage.walk(f"{pool.id}/data")) == []
    assert list(lake.verify()) == []


def test_vacuum_frees_blobs_past_grace_only(pool: FilePool) -> None:
    pool.put("main", "a", b"1")
    pool.discard("main")
    report = pool.vacuum()  # default grace: 15 minutes
    assert report.removed == [] and report.too_young == 1
    dry = pool.vacuum(grace=dt.timedelta(0), dry_run=True)
    assert len(dry.removed) == 1 and len(list(pool.storage.walk(f"{pool.id}/data"))) == 1
    pool.vacuum(grace=dt.timedelta(0))
    assert list(pool.storage.walk(f"{pool.id}/data")) == []


def test_a_blob_two_paths_share_stays_while_one_holds_it(pool: FilePool) -> None:
    pool.put("main", "a", b"shared")
    pool.copy("main", "a", "main", "b")
    pool.commit("main")
    pool.remove("main", ["a"])
    pool.commit("main")
    pool.vacuum(grace=dt.timedelta(0), retention=dt.timedelta(0))
    assert b"".join(pool.read("b")) == b"shared"
