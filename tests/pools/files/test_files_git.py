"""Git operations on file pools: merges per path (conflicts, strategies), revert,
cherry-pick, reset, branches and tags, hooks, transactions; and the lake's side: creating,
opening, listing, verifying and maintaining file pools."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from limno.core.hooks import HookSpec
from limno.errors import ConflictError, HookVetoError, InvalidInputError, NotFoundError
from limno.lake import Lake
from limno.pools.files.pool import FilePool


def _read(pool: FilePool, path: str, ref: str | None = None) -> bytes:
    return b"".join(pool.read(path, ref))


def _tree(pool: FilePool, ref: str | None = None) -> dict[str, bytes]:
    return {e.path: _read(pool, e.path, ref) for e in pool.iter_list(ref)}


def _commit(pool: FilePool, branch: str, files: dict[str, bytes | None]) -> str:
    for path, data in files.items():
        if data is None:
            pool.remove(branch, [path])
        else:
            pool.put(branch, path, data)
    return pool.commit(branch, f"change {sorted(files)}").id


@pytest.fixture
def forked(pool: FilePool) -> FilePool:
    _commit(pool, "main", {"shared": b"0", "both": b"0", "mine": b"0", "theirs": b"0"})
    pool.branch("dev")
    return pool


def test_merge_combines_changes_to_different_paths(forked: FilePool) -> None:
    pool = forked
    _commit(pool, "dev", {"theirs": b"dev", "dev-new": b"n", "shared": None})
    _commit(pool, "main", {"mine": b"main"})
    result = pool.merge("dev", "main")
    assert result.kind == "merge"
    assert _tree(pool) == {"both": b"0", "dev-new": b"n", "mine": b"main", "theirs": b"dev"}
    assert pool.merge("dev", "main").kind == "up-to-date"
    pool.branch("later", "main")
    _commit(pool, "later", {"x": b"x"})
    assert pool.merge("later", "main").kind == "fast-forward"


def test_merge_conflicts_name_the_paths_and_strategies_resolve(forked: FilePool) -> None:
    pool = forked
    _commit(pool, "dev", {"both": b"dev", "theirs": b"dev"})
    _commit(pool, "main", {"both": b"main", "mine": None})
    with pytest.raises(ConflictError, match="both") as caught:
        pool.merge("dev", "main")
    assert "theirs" not in str(caught.value)
    pool.branch("try-dest", "main")
    pool.merge("dev", "try-dest", strategy="dest-wins")
    assert _read(pool, "both", "try-dest") == b"main"
    assert _read(pool, "theirs", "try-dest") == b"dev"
    result = pool.merge("dev", "main", strategy="source-wins")
    assert result.resolved == ("both",)
    assert _tree(pool) == {"both": b"dev", "shared": b"0", "theirs": b"dev"}


def test_delete_against_change_conflicts(forked: FilePool) -> None:
    pool = forked
    _commit(pool, "dev", {"shared": None})
    _commit(pool, "main", {"shared": b"changed"})
    with pytest.raises(ConflictError, match="shared"):
        pool.merge("dev", "main")


def test_the_same_change_on_both_sides_merges_cleanly(forked: FilePool) -> None:
    pool = forked
    _commit(pool, "dev", {"shared": None})
    _commit(pool, "main", {"shared": None, "mine": b"1"})
    pool.merge("dev", "main")
    assert "shared" not in _tree(pool)


def test_revert_restores_paths_as_they_were(forked: FilePool) -> None:
    pool = forked
    before = _tree(pool)
    target = _commit(pool, "main", {"shared": b"new", "mine": None, "added": b"a"})
    _commit(pool, "main", {"unrelated": b"u"})
    commit = pool.revert(target)
    assert commit.meta["reverts"] == target
    assert _tree(pool) == {**before, "unrelated": b"u"}
    again = _commit(pool, "main", {"x": b"1"})
    _commit(pool, "main", {"x": b"2"})
    with pytest.raises(ConflictError, match="x"):
        pool.revert(again)
    with pytest.raises(InvalidInputError):
        pool.revert(pool.resolve("main"), branch="dev")  # not on dev


def test_cherry_pick_applies_one_commit(forked: FilePool) -> None:
    pool = forked
    picked = _commit(pool, "dev", {"theirs": b"picked", "more": b"m"})
    _commit(pool, "dev", {"later": b"l"})
    commit = pool.cherry_pick(picked, "main")
    assert commit.meta["cherry_pick"] == picked
    tree = _tree(pool)
    assert tree["theirs"] == b"picked" and tree["more"] == b"m" and "later" not in tree


def test_reset_moves_the_branch_and_drops_its_staging(forked: FilePool) -> None:
    pool = forked
    first = pool.resolve("main")
    _commit(pool, "main", {"x": b"1"})
    pool.put("main", "staged", b"s")
    old, new = pool.reset("main", first)
    assert new == first and old != first
    assert "x" not in _tree(pool) and pool.uncommitted() == []


def test_branches_tags_and_deleting_a_branch(forked: FilePool) -> None:
    pool = forked
    pool.put("dev", "wip", b"w")
    pool.tag("v1", "main")
    _commit(pool, "main", {"shared": b"after"})
    assert _read(pool, "shared", "v1") == b"0"
    assert set(pool.branches()) == {"main", "dev"} and set(pool.tags()) == {"v1"}
    pool.delete_branch("dev")
    assert list(pool.storage.walk(f"{pool.id}/staging/dev")) == []
    with pytest.raises(NotFoundError):
        pool.stat("wip", "dev")
    assert len(pool.log("main")) == 3 and len(pool.log("main", limit=1)) == 1


def test_hooks_see_file_commits_and_can_veto(pool: FilePool) -> None:
    seen: list[dict[str, Any]] = []
    pool.hooks.register("post-commit", seen.append)

    def veto(event: dict[str, Any]) -> None:
        if event["branch"] == "locked":
            raise ValueError("no commits here")

    pool.hooks.register("pre-commit", veto)
    _commit(pool, "main", {"a": b"1"})
    assert seen[-1]["action_counts"] == {"add": 1}
    pool.branch("locked")
    pool.put("locked", "b", b"2")
    with pytest.raises(HookVetoError, match="no commits here"):
        pool.commit("locked")
    assert [c.path for c in pool.uncommitted("locked")] == ["b"]  # still staged


def test_configured_hooks_persist(lake: Lake, pool: FilePool) -> None:
    pool.add_hook(HookSpec("guard", "pre-commit", run="exit 1"))
    again = lake.file_pool("files")
    again.put("main", "a", b"1")
    with pytest.raises(HookVetoError):
        again.commit("main")


def test_a_transaction_commits_what_it_staged_and_merges_it(pool: FilePool) -> None:
    _commit(pool, "main", {"a": b"1"})
    with pool.transaction("main", "tx") as view:
        view.put(path="b", data=b"2")
        view.remove(paths=["a"])
    assert _tree(pool) == {"b": b"2"}
    assert [b for b in pool.branches() if b.startswith("_tx-")] == []
    with pytest.raises(RuntimeError), pool.transaction("main") as view:
        view.put(path="c", data=b"3")
        raise RuntimeError("abort")
    assert _tree(pool) == {"b": b"2"}


def test_vacuum_keeps_history_and_frees_what_retention_drops(pool: FilePool) -> None:
    _commit(pool, "main", {"p": b"old"})
    _commit(pool, "main", {"p": b"new"})
    pool.put("main", "discarded", b"d")
    pool.discard("main")
    report = pool.vacuum(grace=dt.timedelta(0))
    assert len(report.removed) == 1  # only the discarded blob: history is kept
    assert _read(pool, "p", "main~1") == b"old"
    report = pool.vacuum(grace=dt.timedelta(0), retention=dt.timedelta(0))
    assert len(report.removed) == 1
    assert _read(pool, "p") == b"new"
    with pytest.raises(NotFoundError, match="removed by vacuum"):
        _read(pool, "p", "main~1")
    assert list(Lake(pool.storage).verify()) == []


# -- the lake's side ---------------------------------------------------------------------


def test_creating_file_pools(lake: Lake) -> None:
    pool = lake.create_pool("f2", kind="files", retention={"main": dt.timedelta(days=1)})
    assert pool.config.kind == "files" and pool.config.key is None
    assert pool.retention() == {"main": dt.timedelta(days=1)}
    for bad in ({"key": "ts"}, {"iterators": ["dedup"]}, {"target_size": 5}):
        with pytest.raises(InvalidInputError, match="file pool has no"):
            lake.create_pool("f3", kind="files", **bad)
    with pytest.raises(InvalidInputError, match="unknown pool kind"):
        lake.create_pool("f3", kind="tables")
    assert "f3" not in [c.name for c in lake.list_pools()]


def test_opening_a_pool_of_the_other_kind_says_so(lake: Lake, pool: FilePool) -> None:
    lake.create_pool("recs", key="ts")
    with pytest.raises(InvalidInputError, match="'files' is a file pool"):
        lake.pool("files")
    with pytest.raises(InvalidInputError, match="'recs' is a record pool"):
        lake.file_pool("recs")
    assert lake.file_pool(pool.id).name == "files"
    kinds = dict(zip(*lake.meta_table("", "pools").select(["name", "kind"]).columns, strict=True))
    assert {str(k): str(v) for k, v in kinds.items()} == {"files": "files", "recs": "records"}


def test_verify_finds_missing_and_resized_blobs(lake: Lake, pool: FilePool) -> None:
    a = pool.put("main", "a", b"aaa")
    b = pool.put("main", "b", b"bbb")
    pool.commit("main")
    c = pool.put("main", "c", b"staged")
    assert list(lake.verify()) == []
    assert a.object and b.object and c.object
    pool.storage.delete(f"{pool.id}/data/{a.object}")
    pool.storage.put(f"{pool.id}/data/{b.object}", b"longer")
    pool.storage.delete(f"{pool.id}/data/{c.object}")
    faults = [str(f) for f in lake.verify("files")]
    assert len(faults) == 3, faults
    assert any(a.object in f and "missing" in f for f in faults)
    assert any(b.object in f and "size 6" in f for f in faults)
    assert any(c.object in f and "staging area" in f for f in faults)


def test_manage_vacuums_file_pools(lake: Lake, pool: FilePool) -> None:
    pool.put("main", "a", b"a")
    pool.discard("main")
    lines: list[str] = []
    assert lake.manage(once=True, grace=dt.timedelta(0), log=lines.append) == 1
    assert list(pool.storage.walk(f"{pool.id}/data")) == []
    assert any("files: vacuum: removed 1" in line for line in lines)
