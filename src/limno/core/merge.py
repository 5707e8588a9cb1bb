"""Three-way merge of entry maps, and the merge base of two commits.

The merge is computed from two diffs against the merge base, so its cost grows
with the size of the changes, not of the snapshots (diffs skip shared ranges).

What counts as a conflict. Entries are compared by key. A key changed on both
sides to different values conflicts (for file pools: one path written
differently). Record pools never change an entry's value — objects are
immutable — they *rewrite* objects: a commit deletes an object and adds new ones
whose value lists the deleted key under ``"replaces"``. So a key deleted on both
sides conflicts when the two sides replaced it differently: deleted on one side
and rewritten on the other, or rewritten differently on both. A plain delete on
both sides is the same change and merges cleanly.

Conflicts are resolved per *group*: the conflicting base keys, the entries each
side added to replace them, and (transitively) every other base key those
additions replace. ``source-wins`` gives the group the source's state (the
destination's replacements are removed and base entries only they replaced come
back); ``dest-wins`` keeps the destination's state; ``fail`` reports every
conflicting key.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limno.errors import InvalidInputError

if TYPE_CHECKING:
    from limno.core.commits import CommitStore
    from limno.core.committed import Snapshots

__all__ = ["STRATEGIES", "MergePlan", "MergePreview", "merge_base", "plan_merge", "preview"]

STRATEGIES = ("fail", "source-wins", "dest-wins")

Value = dict[str, Any]
#: key -> (value at base, value on the side); None means absent
Changes = Mapping[str, tuple[Value | None, Value | None]]


@dataclass(frozen=True)
class MergePlan:
    """What a merge does to the destination: ``changes`` (None = delete)."""

    changes: dict[str, Value | None] = field(default_factory=dict)
    conflicts: tuple[str, ...] = ()
    resolved: tuple[str, ...] = ()


@dataclass(frozen=True)
class MergePreview:
    """What merging commit ``src`` into a branch at ``head`` would meet, computed without
    writing anything: ``kind`` (``up-to-date``, ``fast-forward`` or ``merge``), the merge
    ``base``, and the ``conflicts`` a three-way merge would stop at with strategy
    ``fail`` (which ``source-wins``/``dest-wins`` would resolve)."""

    kind: str
    base: str | None
    conflicts: tuple[str, ...] = ()


def preview(commits: CommitStore, snapshots: Snapshots, src: str, head: str) -> MergePreview:
    """A dry run of the merge of ``src`` into ``head`` (a merge request's compare page):
    the same base and plan a merge computes, and no commit, no ref move."""
    from limno.core.committed import EMPTY

    base = merge_base(commits, src, head)
    if base == src:
        return MergePreview("up-to-date", base)
    if base == head:
        return MergePreview("fast-forward", base)
    base_snap = EMPTY if base is None else commits.get(base).snapshot
    sides = []
    for tip in (src, head):
        snap = commits.get(tip).snapshot
        sides.append({k: (va, vb) for k, va, vb in snapshots.diff(base_snap, snap)})
    return MergePreview("merge", base, plan_merge(sides[0], sides[1]).conflicts)


def _replaces(value: Value | None) -> list[str]:
    if not value:
        return []
    found = value.get("replaces") or []
    return [str(k) for k in found]


def _replacements(side: Changes) -> dict[str, set[str]]:
    """base key -> the keys a side added to replace it."""
    out: dict[str, set[str]] = {}
    for key, (old, new) in side.items():
        if old is None and new is not None:
            for replaced in _replaces(new):
                out.setdefault(replaced, set()).add(key)
    return out


def _conflicting(source: Changes, dest: Changes) -> list[str]:
    rep_s, rep_d = _replacements(source), _replacements(dest)
    out = []
    for key in sorted(source.keys() & dest.keys()):
        s_new, d_new = source[key][1], dest[key][1]
        if s_new != d_new or (s_new is None and rep_s.get(key, set()) != rep_d.get(key, set())):
            out.append(key)
    return out


def plan_merge(source: Changes, dest: Changes, strategy: str = "fail") -> MergePlan:
    """The changes that bring ``source``'s changes into the destination.

    ``source`` and ``dest`` are each side's diff against the merge base. With
    strategy ``fail`` and conflicts, the plan has ``conflicts`` and no changes.
    """
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"unknown merge strategy {strategy!r} (one of {STRATEGIES})")
    conflicts = _conflicting(source, dest)
    if conflicts and strategy == "fail":
        return MergePlan(conflicts=tuple(conflicts))
    base_keys, added_s, added_d = _groups(conflicts, source, dest)
    changes: dict[str, Value | None] = {}
    for key, (_, s_new) in source.items():
        if key in base_keys or key in added_s:
            continue
        d_now = dest[key][1] if key in dest else source[key][0]
        if d_now != s_new:
            changes[key] = s_new
    if strategy == "source-wins":
        for key in base_keys:
            base_value = (source.get(key) or dest.get(key) or (None, None))[0]
            want = source[key][1] if key in source else base_value
            have = dest[key][1] if key in dest else base_value
            if want != have:
                changes[key] = want
        for key in added_s:
            changes[key] = source[key][1]
        for key in added_d - added_s:
            changes[key] = None
    return MergePlan(changes=changes, resolved=tuple(conflicts))


def _groups(
    conflicts: list[str], source: Changes, dest: Changes
) -> tuple[set[str], set[str], set[str]]:
    """Close the conflicting keys over replacement links: (base keys, adds S, adds D)."""
    rep_s, rep_d = _replacements(source), _replacements(dest)
    base_keys: set[str] = set()
    added_s: set[str] = set()
    added_d: set[str] = set()
    todo = list(conflicts)
    while todo:
        key = todo.pop()
        if key in base_keys:
            continue
        base_keys.add(key)
        for side, reps, added in ((source, rep_s, added_s), (dest, rep_d, added_d)):
            for new_key in reps.get(key, ()):
                if new_key not in added:
                    added.add(new_key)
                    todo.extend(_replaces(side[new_key][1]))
    return base_keys, added_s, added_d


def merge_base(commits: CommitStore, a: str, b: str) -> str | None:
    """The best common ancestor of commits ``a`` and ``b`` (None if unrelated).

    Walks both histories at once, newest first, painting each commit with the
    side(s) that reach it; the first commit reached from both sides is a common
    ancestor, and the walk stops once every commit still queued descends from one
    (so it visits only the commits since the histories diverged). Among several
    candidates (criss-cross merges) one that is not an ancestor of another wins.
    """
    if a == b:
        return a
    side_a, side_b, stale = 1, 2, 4
    flags: dict[str, int] = {a: side_a, b: side_b}
    heap: list[tuple[str, str]] = []
    for cid in (a, b):
        heapq.heappush(heap, (_neg_date(commits, cid), cid))
    found: list[str] = []
    while heap and any(not flags[c] & stale for _, c in heap):
        _, cid = heapq.heappop(heap)
        f = flags[cid]
        if f & (side_a | side_b) == side_a | side_b and not f & stale:
            found.append(cid)
            f |= stale
            flags[cid] = f
        for p in commits.get(cid).parents:
            before = flags.get(p, 0)
            after = before | f
            if after != before:
                flags[p] = after
                heapq.heappush(heap, (_neg_date(commits, p), p))
    if len(found) <= 1:
        return found[0] if found else None
    best = [c for c in found if not any(c != o and _reaches(commits, o, c) for o in found)]
    return best[0]


def _reaches(commits: CommitStore, start: str, target: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        cid = todo.pop()
        if cid == target:
            return True
        for p in commits.get(cid).parents:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return False


def _neg_date(commits: CommitStore, cid: str) -> str:
    date = commits.get(cid).date
    return "".join(chr(0x10FFFF - ord(ch)) for ch in date) + cid
