"""Faults at every storage call of maintenance: compaction (the strategy's jobs over
overlapping objects), a split of a leaf past the threshold, and vacuum (of a deleted
branch's objects, and with a retention window trimming history).

The walk and what it asserts after each fault are in ``tests/faultsuite.py``. The
tests after the walks pin what the walks found: a lease whose release failed, and
a vacuum that failed to register its run.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from faultsuite import FAULTS, SCENARIOS, Place, data_keys, referenced_keys, rows, walk
from limno.api.local import LocalLake as Lake
from limno.errors import StorageError
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage, Rule

MAINTENANCE = ["compact", "split", "vacuum-dropped-branch", "vacuum-retention"]


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    return Place(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", MAINTENANCE)
def test_a_fault_at_any_call_of_maintenance(place: Place, name: str, fault: str) -> None:
    outcomes = walk(place, SCENARIOS[name], fault)
    assert len(outcomes) >= 10


def test_a_lease_left_by_a_failed_release_protects_nothing(tmp_path: Path) -> None:
    """A lease of this very process is live only while held: a release whose delete
    failed left the file, which must not keep vacuum off objects for as long as the
    process runs (a server, a notebook)."""
    uri = str(tmp_path / "lake")
    Lake.init(uri).create_pool("p", key="k").load([rows([1])])
    store = FaultyStorage(
        open_storage(uri),
        [
            Rule("put_if_absent", 1, "fail", glob="*/branches/[0-9]*"),
            Rule("delete", 1, "fail", glob="*/leases/*"),
        ],
    )
    pool = Lake(store).pool("p")
    with pytest.raises(StorageError):
        pool.load([rows([2, 3])])  # objects written, the commit failed
    clean = Lake.open(uri).pool("p")
    (lease,) = clean.versioned.gc.leases.scan()
    assert not lease.live
    assert data_keys(clean.storage, clean.id) != referenced_keys(clean)
    clean.vacuum(grace=dt.timedelta(0))
    assert clean.versioned.gc.leases.scan() == []
    assert data_keys(clean.storage, clean.id) == referenced_keys(clean)
    assert sorted(clean.scan().column("k").to_pylist()) == [1]


def test_a_vacuum_that_fails_to_register_its_run_leaves_no_list(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    pool = Lake.init(uri).create_pool("p", key="k")
    pool.load([rows([1])])
    pool.branch("dev")
    pool.load([rows([2])], branch="dev")
    pool.delete_branch("dev")
    store = FaultyStorage(
        open_storage(uri), [Rule("put_if_absent", 1, "fail", glob="*/branches/[0-9]*")]
    )
    with pytest.raises(StorageError):
        Lake(store).pool("p").vacuum(grace=dt.timedelta(0))
    clean = Lake.open(uri).pool("p")
    assert list(clean.storage.walk(f"{clean.id}/gc")) == []
    assert clean.versioned.gc.state().runs == {}
    assert clean.vacuum(grace=dt.timedelta(0)).removed
    assert data_keys(clean.storage, clean.id) == referenced_keys(clean)
