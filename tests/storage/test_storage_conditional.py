"""Storage conformance of ``delete_if_equal`` (every backend), and its atomicity on a
local store against a racing write (which must never be lost)."""

from __future__ import annotations

import threading
from pathlib import Path

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
