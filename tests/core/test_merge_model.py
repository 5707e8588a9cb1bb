"""Three-way merge against set algebra (Hypothesis).

Each example builds a base snapshot, changes it independently on two branches
(adds, plain deletes, rewrites that replace an entry by new ones, value changes)
and merges. The reference model computes the expected result from the three
entry maps alone: clean merges are (base - deleted) | added on both sides; a
conflict is a key both sides changed to different outcomes; strategies resolve
whole groups (conflicting keys plus everything linked to them by replacements).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from limno.core.commits import Action, Commit
from limno.core.merge import merge_base, plan_merge
from limno.core.versioning import Versioned
from limno.errors import ConflictError
from limno.storage._obstore import memory_storage

Entries = dict[str, dict[str, Any]]
OPS = ("keep", "delete", "rewrite", "modify-x", "modify-y")
_names = itertools.count()


def _apply_side(
    base: Entries, ops: dict[int, str], adds: int, side: str
) -> tuple[list[Action], Entries]:
    """Actions for one side and the resulting entry map."""
    keys = sorted(base)
    out = dict(base)
    actions: list[Action] = []
    touched: set[str] = set()
    for i, op in sorted(ops.items()):
        key = keys[i % len(keys)]
        if op == "keep" or key in touched:
            continue
        touched.add(key)
        if op == "delete":
            actions.append(Action("delete", key, out.pop(key)))
        elif op == "rewrite":
            actions.append(Action("delete", key, out.pop(key)))
            new = f"{side}-r{next(_names)}"
            out[new] = {"v": new, "replaces": [key]}
            actions.append(Action("add", new, out[new]))
        else:
            out[key] = {"v": op}
            actions.append(Action("add", key, out[key]))
    for _ in range(adds):
        new = f"{side}-a{next(_names)}"
        out[new] = {"v": new}
        actions.append(Action("add", new, out[new]))
    return actions, out


def _changes(base: Entries, side: Entries) -> dict[str, tuple[Any, Any]]:
    return {
        k: (base.get(k), side.get(k))
        for k in base.keys() | side.keys()
        if base.get(k) != side.get(k)
    }


def _expected(base: Entries, src: Entries, dst: Entries, strategy: str) -> Entries | None:
    """The reference merge; None when strategy ``fail`` meets a conflict."""
    s_ch, d_ch = _changes(base, src), _changes(base, dst)

    def replaced_by(side: Entries, key: str) -> set[str]:
        return {k for k, v in side.items() if k not in base and key in v.get("replaces", [])}

    conflicts = {
        k
        for k in s_ch.keys() & d_ch.keys()
        if src.get(k) != dst.get(k) or replaced_by(src, k) != replaced_by(dst, k)
    }
    if conflicts and strategy == "fail":
        return None
    # connected components of base keys <-> replacing additions
    group_base: set[str] = set(conflicts)
    group_s: set[str] = set()
    group_d: set[str] = set()
    grew = True
    while grew:
        grew = False
        for side, group in ((src, group_s), (dst, group_d)):
            for k, v in side.items():
                if k in base or k in group:
                    continue
                if set(v.get("replaces", [])) & group_base:
                    group.add(k)
                    group_base |= set(v.get("replaces", []))
                    grew = True
    result = dict(dst)
    for k, (_, new) in s_ch.items():
        if k in group_base or k in group_s:
            continue
        if new is None:
            result.pop(k, None)
        else:
            result[k] = new
    if strategy == "source-wins":
        for k in group_base:
            if k in src:
                result[k] = src[k]
            else:
                result.pop(k, None)
        for k in group_s:
            result[k] = src[k]
        for k in group_d:
            result.pop(k, None)
    return result


side_ops = st.dictionaries(st.integers(0, 11), st.sampled_from(OPS), max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_base=st.integers(1, 12),
    s_ops=side_ops,
    d_ops=side_ops,
    s_adds=st.integers(0, 3),
    d_adds=st.integers(0, 3),
    strategy=st.sampled_from(["fail", "source-wins", "dest-wins"]),
)
def test_merge_equals_set_algebra(
    n_base: int,
    s_ops: dict[int, str],
    d_ops: dict[int, str],
    s_adds: int,
    d_adds: int,
    strategy: str,
) -> None:
    v = Versioned(memory_storage(f"merge-model-{next(_names)}"), "pool")
    v.initialize("test")
    base = {f"b{i:02d}": {"v": f"b{i}"} for i in range(n_base)}
    v.commit("main", [Action("add", k, val) for k, val in base.items()], "base")
    v.refs.create_branch("dev", v.head("main"))
    s_actions, src = _apply_side(base, s_ops, s_adds, "s")
    d_actions, dst = _apply_side(base, d_ops, d_adds, "d")
    if s_actions:
        v.commit("dev", s_actions, "source side")
    if d_actions:
        v.commit("main", d_actions, "dest side")
    before = v.head("main")
    expected = _expected(base, src, dst, strategy)
    if expected is None:
        with pytest.raises(ConflictError):
            v.merge("dev", "main", strategy)
        assert v.head("main") == before
        return
    result = v.merge("dev", "main", strategy)
    assert v.entries_at(v.head("main")) == expected
    if result.kind == "merge":
        merged = v.commits.get(result.commit)
        assert merged.parents == (before, v.head("dev"))
        assert merged.meta["merge"]["strategy"] == strategy
        # the merge commit's actions are exactly its first parent's snapshot -> its own
        parent = v.entries_at(before)
        for a in merged.actions:
            if a.op == "add":
                parent[a.key] = dict(a.value)
            else:
                parent.pop(a.key)
        assert parent == expected


def test_plan_reports_every_conflict() -> None:
    base = {"a": {"v": 1}, "b": {"v": 2}, "c": {"v": 3}}
    src = {"a": (base["a"], None), "b": (base["b"], {"v": 20}), "n1": (None, {"replaces": ["a"]})}
    dst = {"a": (base["a"], None), "b": (base["b"], {"v": 21}), "c": (base["c"], None)}
    plan = plan_merge(src, dst, "fail")
    assert plan.conflicts == ("a", "b")
    assert plan.changes == {}


def test_merge_base_walks_only_since_divergence(monkeypatch: pytest.MonkeyPatch) -> None:
    v = Versioned(memory_storage(f"merge-base-{next(_names)}"), "pool")
    v.initialize("test")
    for i in range(30):
        v.commit("main", [Action("add", f"k{i}", {"v": i})], f"c{i}")
    fork = v.head("main")
    v.refs.create_branch("dev", fork)
    v.commit("dev", [Action("add", "dev1", {"v": 1})], "dev")
    v.commit("main", [Action("add", "main1", {"v": 1})], "main")
    reads: list[str] = []
    get = v.commits.get

    def counting(cid: str) -> Commit:
        reads.append(cid)
        return get(cid)

    monkeypatch.setattr(v.commits, "get", counting)
    assert merge_base(v.commits, v.head("main"), v.head("dev")) == fork
    assert len(set(reads)) <= 6  # the two tips, the fork and its parent: not 30 commits
    # criss-cross: each branch merged the other; a best base is still found
    monkeypatch.undo()
    v.merge("dev", "main")
    v.merge("main", "dev")
    assert v.head("dev") == v.head("main")
