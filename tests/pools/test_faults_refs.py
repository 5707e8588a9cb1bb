"""Faults at every storage call of the ref operations: branch and tag creation, merge
(fast-forward and a three-way merge commit); and slow stores racing other writers.

The walk and what it asserts after each fault are in ``tests/faultsuite.py``. The
delay tests slow one writer down at a chosen call while another writes, and assert
that both land with nothing lost.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from faultsuite import FAULTS, SCENARIOS, Place, rows, walk
from limno.api.local import LocalLake as Lake
from limno.core.commits import Commit
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage, Rule

REFS = ["branch", "tag", "merge-ff", "merge-commit"]
WAIT = 60.0  # seconds: a bound on every wait below, never reached when all is well


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    return Place(tmp_path_factory.mktemp("faults"))


@pytest.mark.slow
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("name", REFS)
def test_a_fault_at_any_call_of_a_ref_operation(place: Place, name: str, fault: str) -> None:
    outcomes = walk(place, SCENARIOS[name], fault)
    assert len(outcomes) >= 7  # a branch or tag creation makes 7 storage calls, merges more


class Writer(threading.Thread):
    """Runs a callable in a thread, keeping its result or error."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e


def _lake(tmp_path: Path) -> str:
    uri = str(tmp_path / "lake")
    Lake.init(uri).create_pool("p", key="k").load([rows([1])])
    return uri


def _keys(uri: str, ref: str = "main") -> list[int]:
    return sorted(Lake.open(uri).pool("p").scan(ref).column("k").to_pylist())


def test_a_commit_delayed_at_its_branch_append_rebases_over_another(tmp_path: Path) -> None:
    uri = _lake(tmp_path)
    at_append, other_done = threading.Event(), threading.Event()

    def hold_append(op: str, path: str) -> None:
        if op == "put_if_absent" and "/branches/" in path and not at_append.is_set():
            at_append.set()
            assert other_done.wait(WAIT)

    slow = FaultyStorage(
        open_storage(uri),
        [Rule("put_if_absent", 1, "delay", 0.2, glob="*/branches/[0-9]*")],
        observer=hold_append,
    )
    writer = Writer(lambda: Lake(slow).pool("p").load([rows([2])]))
    writer.start()
    assert at_append.wait(WAIT)
    other = Lake.open(uri).pool("p").load([rows([3])])
    other_done.set()
    writer.join(WAIT)
    assert writer.error is None, repr(writer.error)
    landed: Commit = writer.result
    assert landed.retries >= 1  # its first append found the other commit's entry
    pool = Lake.open(uri).pool("p")
    assert {c.id for c in pool.log()} >= {landed.id, other.id}
    assert _keys(uri) == [1, 2, 3]
    assert [str(f) for f in Lake.open(uri).verify(deep=True)] == []


def test_a_slow_loader_keeps_its_objects_from_a_vacuum_running_meanwhile(tmp_path: Path) -> None:
    """Every read of the loader is slowed down, so vacuums (grace 0) run while its
    objects are written and not yet committed: its lease must protect them."""
    uri = _lake(tmp_path)
    slow = FaultyStorage(open_storage(uri), [Rule("read", None, "delay", 0.02)])
    writer = Writer(lambda: Lake(slow).pool("p").load([rows(range(10, 20))]))
    writer.start()
    vacuums = 0
    while writer.is_alive() or vacuums == 0:
        Lake.open(uri).pool("p").vacuum(grace=dt.timedelta(0))
        vacuums += 1
    writer.join(WAIT)
    assert writer.error is None, repr(writer.error)
    assert vacuums >= 2
    assert _keys(uri) == [1, *range(10, 20)]
    assert [str(f) for f in Lake.open(uri).verify(deep=True)] == []


def test_a_compaction_delayed_at_its_outputs_lands_after_a_concurrent_load(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "lake")
    pool = Lake.init(uri).create_pool("p", key="k", compaction={"strategy": "overlap"})
    for keys in ([1, 2], [2, 3], [3, 4]):
        pool.load([rows(keys, "c")])
    before = sorted(pool.scan().to_pylist(), key=repr)
    outputs_written = threading.Event()

    def seen(op: str, path: str) -> None:
        if op in ("move_file", "put_file", "put") and "/data/" in path:
            outputs_written.set()

    slow = FaultyStorage(
        open_storage(uri),
        [Rule("get", None, "delay", 0.05, glob="*/branches/*")],
        observer=seen,
    )
    compactor = Writer(lambda: Lake(slow).pool("p").compact())
    compactor.start()
    assert outputs_written.wait(WAIT)
    Lake.open(uri).pool("p").load([rows([9], "late")])
    compactor.join(WAIT)
    assert compactor.error is None, repr(compactor.error)
    commit, results = compactor.result
    assert commit is not None and results
    after = sorted(Lake.open(uri).pool("p").scan().to_pylist(), key=repr)
    assert after == sorted([*before, {"k": 9, "v": "late9"}], key=repr)
    assert [str(f) for f in Lake.open(uri).verify(deep=True)] == []
