"""Transactions of the Python API (``pool.transaction``): atomic, rolled back on an
exception or a conflict; the lake is inspected through the CLI. Served, the
transaction runs through the server too (``Lake.open`` of its URL).

Every scenario ends with ``limno verify`` passing (the ``lake`` fixture checks it on
teardown).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from git_scenarios import Lk
from limno import ConflictError, Lake
from limno.pools.branching import TX_PREFIX

pytestmark = pytest.mark.usefixtures("isolated_home")


def _tx_branches(lake: str) -> list[str]:
    return [b for b in Lake.open(lake).pool("logs").branches() if b.startswith(TX_PREFIX)]


def test_transaction_commits_atomically(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    before = lk.head("main")
    with pool.transaction("main", message="tx") as tx:
        tx.load([pa.table({"ts": [40, 41], "tag": ["a", "b"]})])
        tx.delete_where("ts = 1")
        inside = _tx_branches(lk.lake)
        assert len(inside) == 1 and tx.branch == inside[0]
        assert lk.ts("logs") == [1, 2, 3]  # invisible from main
        assert lk.head("main") == before
        assert lk.ts(f"logs@{tx.branch}") == [2, 3, 40, 41]
        assert tx.scan().column("ts").to_pylist() == [2, 3, 40, 41]
    assert lk.ts("logs") == [2, 3, 40, 41]
    assert _tx_branches(lk.lake) == []
    assert all(not b[1].startswith(TX_PREFIX) for b in lk.refs())
    log = lk.log("logs")
    assert log[2]["id"] == before  # fast-forward: the two tx commits, then main's old head
    # main moved meanwhile: a merge commit
    with pool.transaction("main") as tx:
        tx.load([pa.table({"ts": [50]})])
        lk.load("logs", [60])
    assert lk.ts("logs") == [2, 3, 40, 41, 50, 60]
    top = lk.log("logs")[0]
    assert len(top["parents"]) == 2 and top["message"].startswith("transaction _tx-")
    assert _tx_branches(lk.lake) == []


def test_transaction_rolls_back_on_exception(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    before = lk.refs()
    with pytest.raises(RuntimeError, match="boom"), pool.transaction("main") as tx:
        tx.load([pa.table({"ts": [40]})])
        tx.delete_where("ts = 2")
        assert tx.scan().column("ts").to_pylist() == [1, 3, 40]
        raise RuntimeError("boom")
    assert lk.refs() == before
    assert lk.ts("logs") == [1, 2, 3]
    assert _tx_branches(lk.lake) == []


def test_transaction_conflict_leaves_nothing(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    with pytest.raises(ConflictError) as caught, pool.transaction("main") as tx:
        tx.delete_where("ts = 1")
        tx.load([pa.table({"ts": [40]})])
        pool.delete_where("ts = 2", branch="main")  # someone else rewrites it
    assert "conflicting" in str(caught.value)
    assert lk.ts("logs") == [1, 3]  # only the other writer's change
    assert _tx_branches(lk.lake) == []
    assert len(lk.log("logs")) == 3


def test_empty_transaction_changes_nothing(forked: Lk) -> None:
    lk = forked
    pool = Lake.open(lk.lake).pool("logs")
    before = lk.refs()
    with pool.transaction("main") as tx:
        assert tx.scan().column("ts").to_pylist() == [1, 2, 3]
    assert lk.refs() == before
    assert _tx_branches(lk.lake) == []


def test_transaction_on_a_missing_branch(forked: Lk) -> None:
    pool = Lake.open(forked.lake).pool("logs")
    with pytest.raises(Exception, match="not found"), pool.transaction("nope"):
        pass
    assert _tx_branches(forked.lake) == []
