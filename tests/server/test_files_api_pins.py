"""File pools through the Python API, in this process and behind a server alike (the
``lake`` and ``pool`` fixtures of test_files_api.py): the pages of a listing never mix
two commits (a page's ``next_token`` pins the commit; a branch that moved fails the
next page clearly; staged changes are read-after-write), and transactions commit what
their block staged before the merge, succeed or leave nothing."""

from __future__ import annotations

import pytest

import limno
from limno import FilePool
from server.test_files_api import lake, pool

__all__ = ["lake", "pool"]

PATHS = ["a", "b", "c", "d", "e"]


def seeded(pool: FilePool) -> str:
    for path in PATHS:
        pool.put("main", path, path.encode())
    return pool.commit("main", "five").id


def pages(pool: FilePool, ref: str, limit: int = 2) -> list[list[str]]:
    out = []
    token = None
    while True:
        page = pool.list(ref, limit=limit, token=token)
        out.append([e.path for e in page.entries])
        if not page.truncated:
            return out
        token = page.next_token


def test_a_listing_of_a_commit_goes_on_at_its_commit(pool: FilePool) -> None:
    first = seeded(pool)
    pool.put("main", "z", b"z")
    pool.commit("main", "sixth")
    page = pool.list("main~1", limit=2)
    assert page.commit == first and page.truncated and page.next_token
    assert [e.path for e in page.entries] == ["a", "b"]
    pool.remove("main", ["c", "d"])
    pool.put("main", "bb", b"new")
    pool.commit("main", "moved")
    assert pool.resolve("main~1") != first
    # "main~1" names another commit now: the token's pages stay at the first one
    rest = pool.list("main~1", limit=10, token=page.next_token)
    assert [e.path for e in rest.entries] == ["c", "d", "e"] and rest.commit == first
    assert pages(pool, "main~1") == [["a", "b"], ["c", "d"], ["e", "z"]]
    assert pages(pool, first, 3) == [["a", "b", "c"], ["d", "e"]]


def test_a_branch_that_moved_fails_the_next_page(pool: FilePool) -> None:
    first = seeded(pool)
    page = pool.list("main", limit=2)
    assert page.commit == first
    pool.put("main", "f", b"f")
    pool.commit("main", "sixth")
    with pytest.raises(limno.ConflictError, match="moved from commit") as err:
        pool.list("main", limit=2, token=page.next_token)
    assert first in str(err.value) and "list it again" in str(err.value)
    assert pages(pool, "main", 4) == [["a", "b", "c", "d"], ["e", "f"]]


def test_staged_changes_are_read_after_write_between_pages(pool: FilePool) -> None:
    seeded(pool)
    page = pool.list("main", limit=2)
    assert [e.path for e in page.entries] == ["a", "b"]
    pool.put("main", "aa", b"before the marker")  # sorts before "b": not in a later page
    pool.put("main", "cc", b"after the marker")
    pool.remove("main", ["d"])
    rest = pool.list("main", limit=10, token=page.next_token)
    assert [e.path for e in rest.entries] == ["c", "cc", "e"]
    assert rest.commit == page.commit and not rest.truncated and rest.next_token is None


def test_tokens_belong_to_their_listing(pool: FilePool) -> None:
    seeded(pool)
    page = pool.list("main", limit=1)
    assert page.next_token
    with pytest.raises(limno.InvalidInputError, match="another listing"):
        pool.list("main", prefix="x", token=page.next_token)
    with pytest.raises(limno.InvalidInputError, match="another listing"):
        pool.list("main", delimiter="/", token=page.next_token)
    with pytest.raises(limno.InvalidInputError, match="not a listing token"):
        pool.list("main", token="garbage")
    assert [e.path for e in pool.list("main", token=page.next_token).entries] == PATHS[1:]


def test_transactions_commit_their_staged_changes_then_merge(pool: FilePool) -> None:
    seeded(pool)
    with pool.transaction("main", "tidy") as view:
        view.put(path="new", data=b"n")
        view.remove(paths=["a"])
    assert [c.message for c in pool.log(limit=1)] == ["tidy"]
    assert [e.path for e in pool.iter_list()] == ["b", "c", "d", "e", "new"]
    assert pool.uncommitted("main") == []
    assert not [b for b in pool.branches() if b != "main"]  # the throw-away branch went

    head = pool.resolve("main")
    with pytest.raises(RuntimeError, match="stop"), pool.transaction("main") as view:
        view.put(path="never", data=b"x")
        raise RuntimeError("stop")
    assert pool.resolve("main") == head and not [b for b in pool.branches() if b != "main"]

    with pytest.raises(limno.ConflictError), pool.transaction("main") as view:
        view.put(path="b", data=b"theirs")
        pool.put("main", "b", b"ours")
        pool.commit("main", "meanwhile")
    assert b"".join(pool.read("b")) == b"ours"


def test_a_long_listing_of_a_moving_branch_still_finishes(
    pool: FilePool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``iter_list`` of a branch that commits between two of its pages does not fail (a
    busy branch would never let a long listing finish): in process it streams the view
    it began with; through a server it goes on after the last path, at the branch as it
    is then. Either way every path that did not change is listed once, in order."""
    monkeypatch.setattr("limno.api.remote_files.PAGE", 2)
    seeded(pool)
    listed = []
    for entry in pool.iter_list("main"):
        listed.append(entry.path)
        if len(listed) == 2:
            pool.remove("main", ["d"])
            pool.put("main", "aa", b"new")
            pool.put("main", "f", b"f")
            pool.commit("main", "moved")
    assert listed == sorted(set(listed))
    assert {"a", "b", "c", "e"} <= set(listed)
    assert "aa" not in listed  # it sorts before where the listing was


def test_pages_of_a_moving_branch_go_on_after_the_last_path(pool: FilePool) -> None:
    """``pages`` (what ``limno fs ls`` and ``download -r`` walk): pinned while the branch
    stays; once it moves, the next page starts after the last path at its new state,
    folders rolled up by ``/`` included."""
    for path in ["a/1", "b/1", "c", "d/1", "e"]:
        pool.put("main", path, b"x")
    pool.commit("main", "five")
    walk = pool.pages("main", delimiter="/", limit=2)
    first = next(walk)
    assert first.prefixes == ["a/", "b/"] and first.next_token
    pool.remove("main", ["c"])
    pool.put("main", "a/2", b"new")
    pool.put("main", "f", b"f")
    pool.commit("main", "moved")
    rest = list(walk)
    assert [e.path for p in rest for e in p.entries] == ["e", "f"]
    assert [x for p in rest for x in p.prefixes] == ["d/"]
