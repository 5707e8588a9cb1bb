"""Faults at every storage call of the writes that add or remove rows: load (an NDJSON
file and an Arrow table), add, commit of staged objects, delete --where, revert.

The walk and what it asserts after each fault are in ``tests/faultsuite.py``. The
tests after the walks pin what the walks found: a staged commit whose unstaging
failed or never ran, and two copies of one lake in one process.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from faultsuite import FAULTS, SCENARIOS, Place, rows, walk
from limno.api.local import LocalLake as Lake
from limno.errors import InvalidInputError
from limno.storage import open_storage
from limno.storage._faults import Crash, FaultyStorage, Rule

WRITES = ["load-ndjson", "load-arrow", "add", "commit", "delete-where", "revert"]


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    return Place(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", WRITES)
def test_a_fault_at_any_call_of_a_write(place: Place, name: str, fault: str) -> None:
    outcomes = walk(place, SCENARIOS[name], fault)
    assert len(outcomes) >= 10


def _staged_lake(tmp_path: Path) -> str:
    uri = str(tmp_path / "lake")
    pool = Lake.init(uri).create_pool("p", key="k")
    pool.load([rows([1, 2])])
    pool.add([rows([3])])
    return uri


def _staging_files(uri: str) -> list[str]:
    store = open_storage(uri)
    pool = Lake(store).pool("p")
    return [i.path for i in store.walk(f"{pool.id}/staging")]


def test_a_commit_that_landed_but_failed_to_unstage_reports_success(tmp_path: Path) -> None:
    uri = _staged_lake(tmp_path)
    store = FaultyStorage(open_storage(uri), [Rule("delete", 1, "fail", glob="*/staging/*")])
    pool = Lake(store).pool("p")
    commit = pool.commit()  # landed: reporting a failure would invite a second commit
    assert pool.resolve() == commit.id
    assert _staging_files(uri), "the injected failure did keep the staging entry"
    assert pool.staged() == []  # it is on main already: not shown as staged
    assert _staging_files(uri) == []  # and dropped on that read
    with pytest.raises(InvalidInputError, match="nothing staged"):
        pool.commit()
    assert sorted(pool.scan().column("k").to_pylist()) == [1, 2, 3]


def test_a_crash_between_commit_and_unstaging_leaves_nothing_staged(tmp_path: Path) -> None:
    uri = _staged_lake(tmp_path)
    store = FaultyStorage(open_storage(uri), [Rule("delete", 1, "crash-before")])
    with pytest.raises(Crash):
        Lake(store).pool("p").commit()
    pool = Lake(open_storage(uri)).pool("p")
    assert sorted(pool.scan().column("k").to_pylist()) == [1, 2, 3]
    first = pool.log()[-2].id
    assert len(_staging_files(uri)) == 1
    assert pool.staged() == []
    # once dropped it cannot come back as "staged" when main no longer holds it
    pool.reset("main", first)
    assert pool.staged() == [] and _staging_files(uri) == []
    assert [str(f) for f in Lake.open(uri).verify(deep=True)] == []


def test_copies_of_a_lake_in_one_process_each_store_their_snapshots(tmp_path: Path) -> None:
    """Snapshot ranges are named by their content, and a cache of the ones stored made
    a copy of a lake (same pool ids) skip writing what the original had written."""
    uri = _staged_lake(tmp_path)
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    Lake.open(uri).pool("p").commit()
    Lake.open(copy).pool("p").commit()  # the very same snapshot as the original's
    assert [str(f) for f in Lake.open(copy).verify()] == []
    assert sorted(Lake.open(copy).pool("p").scan().column("k").to_pylist()) == [1, 2, 3]
