"""The core's support for keys that are paths: staging names for any key, staged
tombstones, seeking into a snapshot, and object keys that are not entry keys (the gc hook)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from limno.core.commits import Action
from limno.core.committed import Snapshots
from limno.core.staging import TOMBSTONE, staging_name
from limno.core.versioning import Versioned
from limno.errors import ConflictError, InvalidInputError
from limno.storage import open_storage


def _versioned() -> Versioned:
    v = Versioned(open_storage(f"memory://{uuid.uuid4().hex}"), "pool")
    v.initialize("test")
    return v


def test_staging_names() -> None:
    assert staging_name("3McJZseSr9qo2wpwaTQrplH5Izu") == "3McJZseSr9qo2wpwaTQrplH5Izu.json"
    assert staging_name("x" * 64) == "x" * 64 + ".json"
    for key in ("x" * 65, "a/b", "..", "a b", "ü", "~x", "a.json", "x" * 1024):
        name = staging_name(key)
        assert name.startswith("~") and name.endswith(".json") and len(name) == 70
    assert staging_name("a/b") != staging_name("a/c")


def test_any_key_stages_commits_and_unstages() -> None:
    v = _versioned()
    v.object_keys = _object_keys  # vacuum names objects, not these keys
    keys = ["a/../b", "//x", " sp ", "日本/語", "x" * 1024, "plainId42"]
    for i, key in enumerate(keys):
        v.stage("main", key, {"n": i}, since=None)
    assert v.staged("main") == {k: {"n": i} for i, k in enumerate(keys)}
    assert v.staged_doc("main", "//x") == ({"n": 1}, None)
    assert v.staged_doc("main", "nope") is None
    v.commit_staged("main")
    assert v.entries_at(v.head("main")) == {k: {"n": i} for i, k in enumerate(keys)}
    assert v.staged("main") == {}


def test_a_staged_tombstone_commits_as_a_delete_of_the_committed_value() -> None:
    v = _versioned()
    v.commit("main", [Action("add", "p/q", {"v": 1}), Action("add", "r", {"v": 2})])
    v.stage("main", "p/q", TOMBSTONE, since=None)
    commit = v.commit_staged("main")
    assert [(a.op, a.key, dict(a.value)) for a in commit.actions] == [("delete", "p/q", {"v": 1})]
    assert v.entries_at(commit.id) == {"r": {"v": 2}}
    v.stage("main", "r", TOMBSTONE, since=None)  # then another commit deletes it first
    v.commit("main", [Action("delete", "r", {"v": 2})])
    assert v.staged("main") == {}  # landed: nothing left to delete
    with pytest.raises(InvalidInputError, match="nothing staged"):
        v.commit_staged("main")


def test_a_tombstone_of_a_value_changed_meanwhile_conflicts() -> None:
    v = _versioned()
    v.commit("main", [Action("add", "k", {"v": 1})])
    actions = v.staged_actions("main", {"k": (dict(TOMBSTONE), None)})
    v.commit("main", [Action("add", "k", {"v": 2})])
    with pytest.raises(ConflictError, match="k"):
        v.commit("main", actions)


@settings(max_examples=60, deadline=None)
@given(
    keys=st.sets(st.text("ab/é", min_size=1, max_size=6), max_size=400),
    start=st.text("ab/é", max_size=4),
)
def test_entries_from_equals_filtering_all_entries(keys: set[str], start: str) -> None:
    snaps = Snapshots(open_storage(f"memory://{uuid.uuid4().hex}"), "p")
    snapshot = snaps.write({k: {"k": k} for k in keys})
    expected = [(k, {"k": k}) for k in sorted(keys) if k >= start]
    assert list(snaps.entries_from(snapshot, start)) == expected
    for k in list(keys)[:20]:
        assert snaps.get(snapshot, k) == {"k": k}
    assert snaps.get(snapshot, start + "zz") is None


def test_entries_from_reads_only_ranges_from_the_start() -> None:
    store = open_storage(f"memory://{uuid.uuid4().hex}")
    writer = Snapshots(store, "p")
    snapshot = writer.write({f"{i:05}": {} for i in range(5000)})
    from limno.core import committed

    committed._ranges = committed._LRU(8192)  # cold: every range read is a get
    reads: list[str] = []
    original = store.get

    def counting(path: str) -> bytes:
        reads.append(path)
        return original(path)

    store.get = counting  # type: ignore[method-assign]
    it = Snapshots(store, "p").entries_from(snapshot, "04990")
    assert [k for k, _ in it] == [f"{i:05}" for i in range(4990, 5000)]
    assert sum("/ranges/" in p for p in reads) <= 2


def _object_keys(key: str, value: Mapping[str, Any]) -> Iterable[str]:
    obj = value.get("object")
    return [obj] if isinstance(obj, str) else []


def test_object_keys_hook_names_what_gc_protects() -> None:
    v = _versioned()
    v.object_keys = _object_keys
    root = v.head("main")
    first = v.commit(
        "main", [Action("add", "a", {"object": "O1"}), Action("add", "b", {"uri": "x"})]
    )
    assert v.snapshot_keys(first.id) == {"O1"}
    assert v.added_keys(root, first.id) == {"O1"}
    parent = v.commits.get(first.id).snapshot
    rewrite = [Action("add", "a", {"object": "O1"}), Action("add", "c", {"object": "O1"})]
    assert v._new_keys(parent, rewrite) == {"O1"}  # c names it anew (more checks, not fewer)
    assert v._new_keys(parent, [Action("add", "a", {"object": "O1"})]) == set()
    second = v.commit("main", [Action("add", "a", {"object": "O2"})])
    assert v.added_keys(first.id, second.id) == {"O2"}
    assert v.added_keys(second.id, first.id) == {"O1"}
