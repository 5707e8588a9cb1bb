"""Property test: any sequence of loads, deletes and reverts scans like a reference model.

The model keeps each data object as the frozenset of row ids it holds (row ids are
unique, so a set identifies an object) and each commit as the sets it added and
removed. That is enough to predict the rows of every scan, and which reverts must
fail with a conflict (the objects a commit added were rewritten since).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from limno import ConflictError, InvalidInputError
from limno.api.local import LocalLake as Lake

# An object is its rows plus a serial number: a rewrite that happens to keep the same
# rows as an earlier one is still a different object (a revert of the earlier
# rewrite must then conflict).
Obj = tuple[int, frozenset[int]]


@dataclass
class Model:
    rows: dict[int, int] = field(default_factory=dict)  # row id -> ts
    objects: set[Obj] = field(default_factory=set)
    commits: dict[str, tuple[set[Obj], set[Obj]]] = field(default_factory=dict)

    def apply(self, cid: str, added: set[Obj], removed: set[Obj]) -> None:
        self.objects -= removed
        self.objects |= added
        self.commits[cid] = (added, removed)

    def live(self) -> list[tuple[int, int]]:
        """(ts, row id) of visible rows, sorted."""
        return sorted((self.rows[r], r) for _, rows in self.objects for r in rows)


op = st.one_of(
    st.tuples(st.just("load"), st.lists(st.integers(0, 50), min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 50), st.integers(0, 12)),
    st.tuples(st.just("revert"), st.integers(0, 1000)),
)
bounds = st.tuples(st.none() | st.integers(-1, 52), st.none() | st.integers(-1, 52))


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(ops=st.lists(op, min_size=1, max_size=10), ranges=st.lists(bounds, max_size=4))
# a second delete leaves the same rows as a reverted first one: reverting the first
# again must conflict (its output is not the object that is live now)
@example(
    ops=[
        ("load", [0]),
        ("load", [0, 1]),
        ("delete", 1, 1),
        ("revert", 20),
        ("load", [0]),
        ("delete", 1, 1),
        ("revert", 146),
    ],
    ranges=[],
)
def test_loads_deletes_reverts_match_model(
    ops: list[tuple[object, ...]], ranges: list[tuple[int | None, int | None]]
) -> None:
    lake = Lake.init(f"memory://{uuid.uuid4().hex}")
    pool = lake.create_pool("p", key="ts")
    model = Model()
    next_id = 0
    for step in ops:
        if step[0] == "load":
            ts_values = list(step[1])  # type: ignore[call-overload]
            ids = list(range(next_id, next_id + len(ts_values)))
            next_id += len(ids)
            model.rows.update(zip(ids, ts_values, strict=True))
            commit = pool.load([pa.table({"ts": ts_values, "id": ids})])
            model.apply(commit.id, {(len(model.commits), frozenset(ids))}, set())
        elif step[0] == "delete":
            lo, width = int(step[1]), int(step[2])  # type: ignore[call-overload]
            pred = f"ts >= {lo} AND ts < {lo + width}"
            hit = {o for o in model.objects if any(lo <= model.rows[r] < lo + width for r in o[1])}
            if not hit:
                try:
                    pool.delete_where(pred)
                except InvalidInputError as e:
                    assert "no rows match" in str(e)
                else:
                    raise AssertionError("delete matching nothing must fail")
                continue
            commit = pool.delete_where(pred)
            kept = {
                (
                    len(model.commits),
                    frozenset(r for r in o[1] if not lo <= model.rows[r] < lo + width),
                )
                for o in hit
            }
            model.apply(commit.id, {o for o in kept if o[1]}, hit)
        else:
            revertible = list(model.commits)
            if not revertible:
                continue
            cid = revertible[int(step[1]) % len(revertible)]  # type: ignore[call-overload]
            added, removed = model.commits[cid]
            if added <= model.objects:
                commit = pool.revert(cid)
                model.apply(commit.id, set(removed), set(added))
            else:
                try:
                    pool.revert(cid)
                except ConflictError:
                    pass
                else:
                    raise AssertionError("revert of rewritten objects must conflict")
    live = model.live()
    full = pool.scan()
    got = []
    if full.num_rows:
        got = list(zip(full.column("ts").to_pylist(), full.column("id").to_pylist(), strict=True))
    assert [t for t, _ in got] == [t for t, _ in live]
    assert sorted(got) == live
    for lo_b, hi_b in ranges:
        for order in ("asc", "desc"):
            t = pool.scan(start=lo_b, end=hi_b, order=order)
            want = [
                ts for ts, _ in live if (lo_b is None or ts >= lo_b) and (hi_b is None or ts < hi_b)
            ]
            if order == "desc":
                want.reverse()
            assert (t.column("ts").to_pylist() if t.num_rows else []) == want
    assert list(lake.verify()) == []
