"""A child snapshot's scan plan derived from its parent's (data/plan_derive.py,
pools/records/snapshot_index.py) is exactly the plan of the child planned whole:
random sequences of commits adding and removing overlapping, keyless, clipped and
unread objects (a Hypothesis test of the derivation alone), and real pools (loads,
deletes, compaction, a partition split, schema widening) on local and memory stores,
S3 in one example, whose first reader of each new snapshot derives its plan."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fresh_process import forget_decoded
from limno.data import plan_derive
from limno.data.keys import PoolKey
from limno.data.objects import DataObject
from limno.data.plan_index import StoredPlan, plan_ipc, plan_table
from limno.data.scan_plan import Plan
from limno.errors import InvalidInputError
from limno.lake import Lake
from limno.pools.records import pool as pool_module
from limno.pools.records import snapshot_cache, snapshot_index
from limno.pools.records.compaction import CompactionJob, run_jobs
from limno.pools.records.pool import RecordPool

KEY = PoolKey.parse("k")
SCHEMAS = ["c2NoZW1hQQ==", "c2NoZW1hQg==", ""]  # texts only: never decoded here
Runs = list[tuple[Any, Any]] | None  # how an object is read: whole, clipped runs, not at all


@st.composite
def _object(draw: st.DrawFn, n: int) -> tuple[DataObject, Runs]:
    keyless = draw(st.sampled_from([0, 0, 0, 3]))
    if keyless and draw(st.booleans()):
        low = high = None
    else:
        lo = draw(st.integers(0, 60))
        low, high = (lo,), (lo + draw(st.integers(0, 12)),)
    created = f"2026-11-{draw(st.integers(10, 20))}"  # later objects may sort earlier
    schema = draw(st.sampled_from(SCHEMAS))
    obj = DataObject(f"o{n:03d}", 10, 100, low, high, keyless, schema, created=created)
    point = st.none() | st.integers(0, 70).map(lambda v: (v,))
    runs = draw(st.none() | st.lists(st.tuples(point, point), max_size=2))
    return obj, runs


def _read(obj: DataObject, runs: Runs) -> list[DataObject]:
    return [obj] if runs is None else [dataclasses.replace(obj, clip=r) for r in runs]


def _whole(snapshot: dict[str, tuple[DataObject, Runs]]) -> pa.Table:
    """The plan table of a snapshot planned whole, as its first reader stores it."""
    objects = sorted((o for o, _ in snapshot.values()), key=snapshot_cache.write_order)
    read = [r for o in objects for r in _read(o, snapshot[o.id][1])]
    ids = {o.id for o in read}
    meta = {"key": str(KEY), "stored_objects": str(len(objects))}
    stored = {o.id: i for i, o in enumerate(objects)}
    return plan_table(Plan(read, KEY), stored, [o for o in objects if o.id not in ids], meta)


def _inverted(snapshot: dict[str, tuple[DataObject, Runs]]) -> bool:
    for obj, runs in snapshot.values():
        for o in _read(obj, runs):
            first, last = o.first_key(KEY), o.last_key(KEY)
            if first is not None and last is not None and last < first:
                return True
    return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_derived_plan_is_the_whole_plan(data: st.DataObject) -> None:
    made = 0

    def new(count: int) -> list[tuple[DataObject, Runs]]:
        nonlocal made
        out = [data.draw(_object(made + i)) for i in range(count)]
        made += count
        return out

    snapshot = {o.id: (o, r) for o, r in new(data.draw(st.integers(0, 30)))}
    parent = StoredPlan(plan_ipc(_whole(snapshot), batch_rows=7), KEY)
    for _ in range(data.draw(st.integers(1, 5))):
        ids = sorted(snapshot)
        removed = data.draw(st.lists(st.sampled_from(ids), max_size=5, unique=True)) if ids else []
        added = new(data.draw(st.integers(0, 5)))
        before = dict(snapshot)
        for oid in removed:
            del snapshot[oid]
        snapshot.update((o.id, (o, r)) for o, r in added)
        want = _whole(snapshot)
        meta = {"key": str(KEY), "stored_objects": str(len(snapshot))}
        pairs = [(o, _read(o, r)) for o, r in added]
        got = plan_derive.derive(parent, removed, pairs, snapshot_cache.write_order, meta)
        if got is None:  # refused only where an interval is inverted
            assert _inverted(before) or _inverted(snapshot)
            parent = StoredPlan(plan_ipc(want, batch_rows=7), KEY)
            continue
        assert got.equals(want, check_metadata=True)
        assert plan_ipc(got, batch_rows=7) == plan_ipc(want, batch_rows=7)
        parent = StoredPlan(plan_ipc(got, batch_rows=7), KEY)  # the next from the derived


def _rows(start: int, n: int, extra: bool = False) -> pa.Table:
    keys = list(range(start, start + n))
    cols: dict[str, Any] = {"k": keys, "v": [f"v{k}" for k in keys]}
    if extra:
        cols["w"] = [float(k) for k in keys]  # schema widening: a new column
    return pa.table(cols)


def _sidecar(pool: RecordPool, kind: str) -> bytes:
    snapshot = pool.versioned.commits.get(pool.resolve()).snapshot
    data = pool.storage.get(snapshot_index.sidecar_path(pool.id, snapshot, kind))
    return bytes(data[32:])  # after its SHA-256


def _check_head(pool: RecordPool, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, bool]:
    """The head's plan and partitions report as a new process's first reader stores
    them (derived from an ancestor's when they can be) equal those made whole; whether
    each was derived."""
    forget_decoded(monkeypatch)
    commit = pool.versioned.commits.get(pool.resolve())
    parent = list(snapshot_index.ancestors(pool.versioned, commit))
    clipped = snapshot_cache_clipped()
    derived = snapshot_index.derived_table(
        pool.versioned, pool.key, parent, commit.snapshot, clipped
    )
    report = snapshot_index.derived_partitions(pool.versioned, parent, commit.snapshot)
    pool.status(rows=1)  # the first reader (the operations page): stores both sidecars
    stored, stored_report = _sidecar(pool, "plan"), _sidecar(pool, "partitions")
    forget_decoded(monkeypatch)
    objs, tree = pool.snapshot()
    made = snapshot_cache.ScanView(clipped(objs, tree), pool.key, pool.key_types)
    whole = snapshot_index.whole_table(pool.key, made, objs)
    assert stored == plan_ipc(whole)
    if derived is not None:
        assert derived.equals(whole, check_metadata=True)
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 10**9)  # none stored: made whole
    whole_report = pool.status()["partitions"]
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 3)
    assert pa.ipc.open_file(pa.py_buffer(stored_report)).read_all().equals(whole_report)
    if report is not None:
        assert report.equals(whole_report)
    return derived is not None, report is not None


def snapshot_cache_clipped() -> Any:
    """How a pool reads objects under a partition tree (``RecordPool.scan_view``'s)."""
    return pool_module._clipped


def _commits(pool: RecordPool, steps: Sequence[tuple[str, int]]) -> None:
    for kind, n in steps:
        if kind == "load":
            pool.load([_rows(n, 15, extra=n % 2 == 1)])
        elif kind == "delete":
            with contextlib.suppress(InvalidInputError):  # (no rows there: no commit)
                pool.delete_where(f"k >= {n} AND k < {n + 3}")  # rewrites the objects
        elif kind == "drop":  # whole objects removed
            objs = pool.snapshot()[0]
            pool.delete_objects([objs[n % len(objs)].id])
        elif kind == "compact":
            objs = pool.snapshot()[0]
            leaf = pool.partitions().leaves()[-1]
            picked = tuple(o.id for o in objs if leaf in pool.partitions().leaves_of(o))[:3]
            if len(picked) >= 2:
                run_jobs(pool, "main", [CompactionJob(uuid.uuid4().hex, leaf.id, picked)])


STEP = st.tuples(st.sampled_from(["load", "load", "delete", "drop", "compact"]), st.integers(0, 80))


@pytest.mark.parametrize("kind", ["local", "memory"])
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(STEP, min_size=2, max_size=5))
def test_a_pool_first_reader_derives_the_whole_plan(
    kind: str, steps: list[tuple[str, int]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 3)
        uri = (
            str(tmp_path_factory.mktemp("lake"))
            if kind == "local"
            else f"memory://{uuid.uuid4().hex}"
        )
        pool = _pool(uri)
        _check_head(pool, monkeypatch)
        for step in steps:
            head = pool.resolve()
            _commits(pool, [step])
            derived = _check_head(pool, monkeypatch)[0]
            # each new commit's plan is derived (its parent's is stored): nothing here
            # is read for a partition past its keys
            assert derived or pool.resolve() == head


def _pool(uri: str, split: bool = True) -> RecordPool:
    """A pool of overlapping loads; ``split``: split in two (objects straddling the
    split are read clipped), then loaded across the split (an object each side)."""
    made = Lake.init(uri).create_pool("p", key="k")
    for i in range(6):
        made.load([_rows(i * 9, 25)])
    if split:
        made.split(made.status()["partitions"].column("id")[0].as_py(), at=40)
        made.load([_rows(30, 20)])
    return made


@pytest.mark.parametrize("split", [pytest.param(True, marks=pytest.mark.s3), False])
def test_each_commit_derives_its_plan_and_report(
    split: bool, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each commit's plan derived, and without partitions its report too (S3 when split,
    memory without)."""
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 3)
    uri = request.getfixturevalue("s3_uri") if split else f"memory://{uuid.uuid4().hex}"
    pool = _pool(uri, split)
    _check_head(pool, monkeypatch)
    derived = []
    for step in [("load", 5), ("delete", 30), ("drop", 3), ("load", 33), ("compact", 1)]:
        _commits(pool, [step])
        derived.append(_check_head(pool, monkeypatch))
    assert derived == [(True, not split)] * len(derived)
    for n in range(3):  # commits no one reads: the next reader derives from 3 back
        _commits(pool, [("load", 60 + n)])
    assert _check_head(pool, monkeypatch) == (True, not split)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 30).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.sets(st.integers(0, max(n - 1, 0))),
            st.lists(st.integers(0, n), max_size=6),
        )
    )
)
def test_clusters_renumbered_as_sorting_their_places_does(
    case: tuple[int, set[int], list[int]],
) -> None:
    """The numpy renumbering of clusters (a pool may have a cluster an object) is what
    sorting every cluster's place gives: a replanned cluster before the parent's
    cluster it was placed at, untouched ones in their order, the dirty ones gone."""
    count, dirty, at = case
    dirty = {d for d in dirty if d < count}
    at = sorted(at)
    mapping, replanned = plan_derive._renumbered(count, dirty, np.array(at, np.int64))
    places = sorted(
        [(i, -1, c) for c, i in enumerate(at)] + [(i, 0, i) for i in range(count) if i not in dirty]
    )
    number = {(kind, c): n for n, (_, kind, c) in enumerate(places)}
    assert mapping.tolist() == [number.get((0, c), -1) for c in range(count)]
    assert replanned.tolist() == [number[(-1, c)] for c in range(len(at))]
