"""Protected branches in process: only merges (and maintenance) move one.

Each refused write raises ProtectedBranchError with one line naming the way out, and
leaves the lake's files exactly as they were; merges, compaction, splits, vacuum and
tags keep working; a protect that lands while a commit is on its way refuses that
commit at the branch's compare-and-swap (limno.core.protection).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import limno
from bounded import join_all
from limno.api.local import LocalLake as Lake
from limno.api.local_pool import LocalPool
from limno.errors import ForbiddenError, NotFoundError, ProtectedBranchError, http_status
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage

WAIT = 60.0
REFUSED = (
    "branch 'main' of pool 'logs' is protected: only merges may move it"
    " (limno branch unprotect -p logs main)"
)


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.init(str(tmp_path / "lake"))


@pytest.fixture
def pool(lake: Lake) -> LocalPool:
    """Pool ``logs`` (key ts): [1, 2] then [3] on main, branch ``dev`` at main."""
    p = lake.create_pool("logs", key="ts")
    p.load([pa.table({"ts": [1, 2]})])
    p.load([pa.table({"ts": [3]})])
    p.branch("dev")
    return p


def ts(pool: LocalPool, ref: str = "main") -> list[int]:
    return [int(v) for v in pool.scan(ref).column("ts").to_pylist()]


def files(root: Path) -> dict[str, int]:
    """Every file of the lake with its size: what a refused write must not change."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def verified(lake: Lake) -> None:
    faults = list(lake.verify())
    assert faults == [], faults


def test_the_error_is_a_403_exported_from_limno() -> None:
    assert issubclass(ProtectedBranchError, ForbiddenError)
    assert http_status(ProtectedBranchError("x")) == 403
    assert limno.ProtectedBranchError is ProtectedBranchError


def test_protect_unprotect_and_list(pool: LocalPool, lake: Lake) -> None:
    assert pool.protected() == []
    assert pool.protect("main") is True
    assert pool.protect("main") is False  # already: nothing appended
    assert pool.protect("dev") is True
    assert pool.protected() == ["dev", "main"]
    # a fresh handle reads the rules from the lake
    assert lake.pool("logs").protected() == ["dev", "main"]
    table = pool.meta_table("branches").to_pylist()
    assert {(r["kind"], r["name"], r["protected"]) for r in table} == {
        ("branch", "dev", True),
        ("branch", "main", True),
    }
    assert pool.unprotect("dev") is True
    assert pool.unprotect("dev") is False
    assert pool.protected() == ["main"]
    with pytest.raises(NotFoundError, match="branch 'nope' not found"):
        pool.protect("nope")
    with pytest.raises(NotFoundError, match="branch 'nope' not found"):
        pool.unprotect("nope")
    pool.tag("v1")
    sql = lake.query('SELECT name FROM "logs:branches" WHERE protected').to_pylist()
    assert sql == [{"name": "main"}]
    verified(lake)


def _stage_one(pool: LocalPool) -> None:
    pool.add([pa.table({"ts": [9]})])


#: each direct write of main, with what it needs done before main is protected
DIRECT: dict[str, tuple[Callable[[LocalPool], Any], Callable[[LocalPool], Any]]] = {
    "load": (lambda p: None, lambda p: p.load([pa.table({"ts": [4]})])),
    "add": (lambda p: None, lambda p: p.add([pa.table({"ts": [4]})])),
    "commit": (_stage_one, lambda p: p.commit()),
    "delete objects": (lambda p: None, lambda p: p.delete_objects([p.objects()[0].id])),
    "delete where": (lambda p: None, lambda p: p.delete_where("ts = 1")),
    "revert": (lambda p: None, lambda p: p.revert(p.resolve("main"))),
    "cherry-pick": (
        lambda p: p.load([pa.table({"ts": [7]})], branch="dev"),
        lambda p: p.cherry_pick("dev"),
    ),
    "reset": (lambda p: None, lambda p: p.reset("main", "main~1")),
    "transaction": (lambda p: None, lambda p: _in_transaction(p)),
}


def _in_transaction(pool: LocalPool) -> None:
    with pool.transaction("main") as tx:
        tx.load([pa.table({"ts": [5]})])


@pytest.mark.parametrize("op", list(DIRECT))
def test_a_direct_write_is_refused_and_changes_nothing(
    pool: LocalPool, lake: Lake, tmp_path: Path, op: str
) -> None:
    prepare, write = DIRECT[op]
    prepare(pool)
    pool.protect("main")
    head, rows, staged = pool.resolve("main"), ts(pool), pool.staged()
    before = files(tmp_path / "lake")
    with pytest.raises(ProtectedBranchError) as refused:
        write(pool)
    assert str(refused.value) == REFUSED
    assert files(tmp_path / "lake") == before
    assert (pool.resolve("main"), ts(pool), pool.staged()) == (head, rows, staged)
    verified(lake)
    # unprotected, the same write goes through
    pool.unprotect("main")
    write(pool)
    assert pool.resolve("main") != head or op == "add"
    verified(lake)


def test_a_protected_branch_cannot_be_deleted(pool: LocalPool, lake: Lake) -> None:
    pool.protect("dev")
    with pytest.raises(ProtectedBranchError) as refused:
        pool.delete_branch("dev")
    assert str(refused.value) == (
        "branch 'dev' of pool 'logs' is protected: it cannot be deleted"
        " (limno branch unprotect -p logs dev)"
    )
    assert "dev" in pool.branches() and pool.protected() == ["dev"]
    pool.unprotect("dev")
    pool.delete_branch("dev")
    assert "dev" not in pool.branches()
    verified(lake)


def test_merges_move_a_protected_branch(pool: LocalPool, lake: Lake) -> None:
    pool.protect("main")
    pool.load([pa.table({"ts": [10]})], branch="dev")
    ff = pool.merge("dev", "main")
    assert ff.kind == "fast-forward" and pool.resolve("main") == pool.resolve("dev")
    pool.branch("other")
    pool.load([pa.table({"ts": [20]})], branch="other")
    pool.load([pa.table({"ts": [30]})], branch="dev")
    pool.merge("other", "dev")  # dev moves on too: main is behind both
    pool.unprotect("main")
    pool.load([pa.table({"ts": [40]})])  # main moves on its own: no fast-forward now
    pool.protect("main")
    merged = pool.merge("dev", "main")
    assert merged.kind == "merge"
    assert ts(pool) == [1, 2, 3, 10, 20, 30, 40]
    forced = pool.merge("dev", "main", fast_forward=False)
    assert forced.kind == "up-to-date"
    verified(lake)


def test_maintenance_vacuum_and_tags_work_on_a_protected_branch(
    pool: LocalPool, lake: Lake
) -> None:
    pool.protect("main")
    rows = ts(pool)
    commit, results = pool.compact([o.id for o in pool.objects()])
    assert commit is not None and results and len(pool.objects()) == 1
    assert pool.split("root", at=2) is not None
    assert ts(pool) == rows
    assert lake.manage(["logs"], once=True) >= 1
    pool.vacuum()
    assert pool.tag("v1") == pool.resolve("main")
    assert ts(pool, "v1") == rows and pool.protected() == ["main"]
    verified(lake)


def test_a_refused_commit_runs_no_hook(pool: LocalPool) -> None:
    heard: list[str] = []
    pool.hooks.register("pre-commit", lambda e: heard.append(e["branch"]))
    pool.protect("main")
    with pytest.raises(ProtectedBranchError):
        pool.load([pa.table({"ts": [4]})])
    pool.load([pa.table({"ts": [4]})], branch="dev")
    assert heard == ["dev"]


def test_the_ingest_batcher_is_refused_before_it_writes(
    pool: LocalPool, lake: Lake, tmp_path: Path
) -> None:
    """A queued file could only be committed directly: submit refuses as add does, and a
    job queued before the rule fails with the refusal before writing any object."""
    early, late = tmp_path / "early.ndjson", tmp_path / "late.ndjson"
    early.write_text('{"ts": 4}\n')
    late.write_text('{"ts": 5}\n')
    pool.ingest_submit([str(early)])
    pool.protect("main")
    before = files(tmp_path / "lake")
    with pytest.raises(ProtectedBranchError) as refused:
        pool.ingest_submit([str(late)])
    assert str(refused.value) == REFUSED
    assert files(tmp_path / "lake") == before
    head, rows = pool.resolve("main"), ts(pool)
    (job,) = pool.ingest_run()
    assert job.state == "failed" and job.error == f"ProtectedBranchError: {REFUSED}"
    assert (pool.resolve("main"), ts(pool)) == (head, rows)
    data = {k: v for k, v in files(tmp_path / "lake").items() if "/data/" in k}
    assert data == {k: v for k, v in before.items() if "/data/" in k}  # no object written
    pool.unprotect("main")
    pool.ingest_retry([job.id])
    assert [j.state for j in pool.ingest_run()] == ["done"]
    assert ts(pool) == [*rows, 4]
    verified(lake)


@pytest.fixture
def paused(tmp_path: Path) -> Iterator[tuple[LocalPool, threading.Event, threading.Event]]:
    """Pool ``logs`` whose thread named ``writer`` pauses right before it appends to the
    branch journal (after its early checks): (pool, paused, go)."""
    Lake.init(str(tmp_path / "lake"))
    store = FaultyStorage(open_storage(str(tmp_path / "lake")))
    pool = Lake(store).create_pool("logs", key="ts")
    pool.load([pa.table({"ts": [1]})])
    at_append, go = threading.Event(), threading.Event()

    def pause(op: str, path: str) -> None:
        landing = op == "put_if_absent" and "/branches/" in path
        if threading.current_thread().name == "writer" and landing and not go.is_set():
            at_append.set()
            assert go.wait(WAIT)

    store.observer = pause
    yield pool, at_append, go
    go.set()


def _race(pool: LocalPool, at_append: threading.Event, go: threading.Event, write: Any) -> Any:
    """Run ``write`` in a thread, protect main while it is about to land; its error."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as e:  # noqa: BLE001 - checked by the caller
            errors.append(e)

    writer = threading.Thread(target=run, name="writer")
    writer.start()
    assert at_append.wait(WAIT)  # past every early check, about to append
    pool.protect("main")
    go.set()
    join_all([writer], WAIT)
    assert len(errors) == 1, errors
    return errors[0]


def test_a_protect_landing_before_a_commit_refuses_it(
    paused: tuple[LocalPool, threading.Event, threading.Event],
) -> None:
    pool, at_append, go = paused
    head = pool.resolve("main")
    error = _race(pool, at_append, go, lambda: pool.load([pa.table({"ts": [2]})]))
    assert isinstance(error, ProtectedBranchError) and str(error) == REFUSED
    assert pool.resolve("main") == head and ts(pool) == [1]
    assert list(Lake(pool.storage).verify()) == []


def test_a_protect_landing_before_a_transaction_merges_refuses_it(
    paused: tuple[LocalPool, threading.Event, threading.Event],
) -> None:
    pool, at_append, go = paused
    head = pool.resolve("main")

    def transaction() -> None:
        with pool.transaction("main") as tx:
            tx.load([pa.table({"ts": [2]})])
            go.clear()  # pause again at the merge's append
            at_append.clear()

    go.set()
    error = _race(pool, at_append, go, transaction)
    assert isinstance(error, ProtectedBranchError), error
    assert pool.resolve("main") == head and ts(pool) == [1]
    assert not [b for b in pool.branches() if b.startswith("_tx-")]
