"""Storage conformance of the conditional operations (every backend): ``delete_if_equal``
and its atomicity on a local store against a racing write (which must never be lost);
``replace_if_equal``, a compare-and-swap: of writers racing with one expected version
exactly one wins, a racing plain write is never lost, and readers never see no object."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from bounded import join_all
from limno.errors import NotFoundError
from limno.storage import Storage, open_storage

#: rounds of the race; each is one write against one conditional delete
ROUNDS = 200


def test_delete_if_equal_deletes_only_those_bytes(store: Storage) -> None:
    store.put("a/x", b"old")
    assert store.delete_if_equal("a/x", b"other") is False
    assert store.get("a/x") == b"old"
    assert store.delete_if_equal("a/x", b"old") is True
    assert not store.exists("a/x")
    assert store.delete_if_equal("a/x", b"old") is False  # missing: nothing to do
    assert store.delete_if_equal("never", b"") is False
    store.put("a/x", b"new")
    assert [o.path for o in store.walk("a")] == ["a/x"]  # nothing hidden left listed


def _race(store: Storage, new: bytes) -> list[bool]:
    """One write of ``new`` and one conditional delete of ``b"old"``, released at once."""
    start = threading.Barrier(2)
    deleted: list[bool] = []

    def write() -> None:
        start.wait(10)
        store.put("k", new)

    def delete() -> None:
        start.wait(10)
        deleted.append(store.delete_if_equal("k", b"old"))

    threads = [threading.Thread(target=write), threading.Thread(target=delete)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    return deleted


def test_a_local_write_racing_a_conditional_delete_is_never_lost(tmp_path: Path) -> None:
    """The delete may act before the write (then the write's bytes are there after) or
    after it (then it must refuse: other bytes): either way the new bytes remain."""
    store = open_storage(str(tmp_path / "store"), create=True)
    for i in range(ROUNDS):
        store.put("k", b"old")
        new = f"new {i}".encode()
        deleted = _race(store, new)
        assert store.get("k") == new, (i, deleted)
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["k"]


def test_replace_if_equal_replaces_only_those_bytes(store: Storage) -> None:
    store.put("a/x", b"old")
    assert store.replace_if_equal("a/x", b"new", b"other") is False
    assert store.get("a/x") == b"old"
    assert store.replace_if_equal("a/x", b"new", b"old") is True
    assert store.get("a/x") == b"new"
    assert store.replace_if_equal("a/x", b"newer", b"old") is False  # old is gone
    assert store.get("a/x") == b"new"
    assert store.replace_if_equal("never", b"x", b"") is False  # missing: nothing made
    assert not store.exists("never")
    assert [o.path for o in store.walk("")] == ["a/x"]  # nothing hidden left listed


#: rounds of the races below (a few: on S3 every request is a round trip to the loopback
#: server); four writers race in each
RACE_ROUNDS = 12


def _released(*targets: Callable[[], object]) -> None:
    """Run ``targets`` in threads released at once; every one must finish, and the
    first error any raised is raised here."""
    start = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def run(fn: Callable[[], object]) -> Callable[[], None]:
        def go() -> None:
            try:
                start.wait(10)
                fn()
            except BaseException as e:
                errors.append(e)

        return go

    threads = [threading.Thread(target=run(fn)) for fn in targets]
    for t in threads:
        t.start()
    join_all(threads)
    if errors:
        raise errors[0]


def test_racing_conditional_replaces_exactly_one_wins(store: Storage) -> None:
    """The lost-update race: every writer read the same version and replaces it; one
    wins, the others are told so, and the object holds the winner's bytes. A reader
    polling meanwhile sees the old bytes or the winner's, never a loser's or none."""
    for i in range(RACE_ROUNDS):
        store.put("k", b"old")
        won, seen = _replace_race(store, [f"round {i} writer {n}".encode() for n in range(4)])
        assert len(won) == 1, (i, won)
        assert store.get("k") == won[0]
        assert seen <= {b"old", won[0]}, (i, seen)


def _replace_race(store: Storage, writes: list[bytes]) -> tuple[list[bytes], set[bytes]]:
    """Each of ``writes`` replacing ``b"old"`` at once, a reader polling meanwhile: the
    writes that won, and what the reader saw (``b"<none>"``: no object)."""
    won: list[bytes] = []
    seen: set[bytes] = set()
    done = threading.Event()

    def writer(mine: bytes) -> Callable[[], None]:
        def go() -> None:
            if store.replace_if_equal("k", mine, b"old"):
                won.append(mine)

        return go

    def read() -> None:
        while not done.is_set():
            try:
                seen.add(store.get("k"))
            except NotFoundError:
                seen.add(b"<none>")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        _released(*(writer(w) for w in writes))
    finally:
        done.set()
        join_all([reader])
    return won, seen


def test_a_plain_write_racing_a_conditional_replace_is_never_lost(store: Storage) -> None:
    """The replace acts before the write (which then replaces it) or after it (then it
    must refuse: other bytes): either way the written bytes remain."""
    for i in range(RACE_ROUNDS):
        store.put("k", b"old")
        new = f"plain {i}".encode()
        _released(
            partial(store.put, "k", new), partial(store.replace_if_equal, "k", b"cas", b"old")
        )
        assert store.get("k") == new, i


def test_a_local_conditional_replace_leaves_no_file_behind(tmp_path: Path) -> None:
    """The local compare-and-swap's staging files are gone after wins and losses, and a
    replace of a path that is a directory (no object) refuses."""
    store = open_storage(str(tmp_path / "store"), create=True)
    store.put("k", b"old")
    _released(*(partial(store.replace_if_equal, "k", bytes([n]), b"old") for n in range(4)))
    store.put("d/inner", b"x")
    assert store.replace_if_equal("d", b"y", b"") is False
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["d", "k"]
    assert store.list_partial() == []


def test_a_put_whose_object_is_deleted_at_once_succeeds(
    store: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer deleting the object between the write and the put's own look at
    it (a multipart completion removing a part record being uploaded): the put still
    succeeds, saying what it wrote (it raised 'object not found' on memory and S3)."""
    real_head = store.head

    def deleted_first(path: str) -> object:
        store.delete(path)
        return real_head(path)

    for put in (store.put, store.put_if_absent):
        monkeypatch.setattr(store, "head", deleted_first)
        info = put("gone", b"12345")
        monkeypatch.undo()
        assert (info.path, info.size) == ("gone", 5)
        assert not store.exists("gone")
