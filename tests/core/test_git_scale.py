"""The scale design, checked by counting reads rather than timing them.

Opening a branch head must not depend on the history's length; a diff or merge of
two branches that differ by a few entries must read only the ranges that differ.
"""

from __future__ import annotations

from collections import Counter

import pytest

from limno.core import commits as commits_mod
from limno.core import committed
from limno.core.commits import Action
from limno.core.versioning import Versioned
from limno.storage._obstore import ObStorage, memory_storage


def _cold() -> None:
    for cache in (committed._ranges, committed._metaranges, commits_mod._commits):
        cache._data.clear()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    seen: Counter[str] = Counter()
    get = ObStorage.get

    def counting(self: ObStorage, path: str) -> bytes:
        seen[path.split("/")[1] if "/" in path else path] += 1
        return get(self, path)

    monkeypatch.setattr(ObStorage, "get", counting)
    return seen


def _grow(v: Versioned, commits: int, start: int = 0) -> None:
    for i in range(start, start + commits):
        v.commit("main", [Action("add", f"e{i:06d}", {"n": i})], f"c{i}")


def test_opening_a_head_reads_the_same_whatever_the_history(reads: Counter[str]) -> None:
    store = memory_storage("scale-head")
    v = Versioned(store, "pool")
    v.initialize("test")
    counts = []
    done = 0
    for size in (150, 450):
        _grow(v, size - done, start=done)
        done = size
        _cold()
        reads.clear()
        head = Versioned(store, "pool").head("main")
        assert head == v.head("main")
        counts.append(sum(reads.values()))
    # a snapshot of the branch journal plus fewer than 100 entries, both times
    assert counts[0] <= 110 and counts[1] <= 110


def test_diff_and_merge_read_only_changed_ranges(reads: Counter[str]) -> None:
    store = memory_storage("scale-diff")
    v = Versioned(store, "pool")
    v.initialize("test")
    v.commit("main", [Action("add", f"e{i:06d}", {"n": i}) for i in range(20_000)], "bulk")
    v.refs.create_branch("dev", v.head("main"))
    v.commit("dev", [Action("add", "zz-dev", {"n": -1})], "dev")
    v.commit("main", [Action("add", "zz-main", {"n": -2})], "main")
    total_ranges = len(v.snapshots.ranges(v.commits.get(v.head("main")).snapshot))
    assert total_ranges > 100
    _cold()
    reads.clear()
    diff = v.diff(v.head("main"), v.head("dev"))
    assert [(d.change, d.key) for d in diff] == [("added", "zz-dev"), ("removed", "zz-main")]
    assert reads["meta"] <= 6  # two metaranges and the few ranges holding the changes
    _cold()
    reads.clear()
    result = v.merge("dev", "main")
    assert result.kind == "merge"
    assert reads["meta"] <= 12
    assert "zz-dev" in v.entries_at(v.head("main"))
