"""Snapshot sidecars (pools/records/snapshot_index.py, data/plan_index.py): a stored
scan plan plans what planning the objects does (random overlapping, keyless and
clipped objects, any bounds, both directions, lookups); a pool read through its
stored plans (a new process: caches dropped) scans, looks up and reports what it does
without them, on local, memory and S3 stores, through partition splits and schema
evolution; a damaged sidecar is ignored and replaced; vacuum keeps the sidecars of
heads and tags and young ones, and removes the rest."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fresh_process import forget_decoded
from limno.data import scan
from limno.data.keys import PoolKey
from limno.data.objects import DataObject
from limno.data.plan_index import StoredPlan, plan_ipc, plan_table
from limno.lake import Lake
from limno.pools.records import snapshot_index
from limno.pools.records.compaction import CompactionJob, run_jobs
from limno.pools.records.pool import RecordPool

KEY = PoolKey.parse("k")
SCHEMAS = ["c2NoZW1hQQ==", "c2NoZW1hQg==", ""]  # texts only: never decoded here


@st.composite
def _objects(draw: st.DrawFn) -> list[DataObject]:
    out = []
    for i in range(draw(st.integers(0, 40))):
        keyless = draw(st.sampled_from([0, 0, 0, 3]))
        if keyless and draw(st.booleans()):
            low = high = None  # keyless rows only
        else:
            lo = draw(st.integers(0, 60))
            low, high = (lo,), (lo + draw(st.integers(0, 12)),)
        obj = DataObject(f"o{i:03d}", 10, 100, low, high, keyless, draw(st.sampled_from(SCHEMAS)))
        if draw(st.integers(0, 4)) == 0:  # read only in part: a clip range
            a = draw(st.none() | st.integers(0, 70).map(lambda v: (v,)))
            b = draw(st.none() | st.integers(0, 70).map(lambda v: (v,)))
            obj = dataclasses.replace(obj, clip=(a, b))
        out.append(obj)
    return out


def _same(a: list[DataObject], b: list[DataObject]) -> bool:
    """Equal objects with equal clips (a clip does not take part in ``==``)."""
    return [(o, o.clip) for o in a] == [(o, o.clip) for o in b]


def _stored(plan: scan.Plan, unread: Sequence[DataObject] = ()) -> StoredPlan:
    ids = list(dict.fromkeys([*(o.id for o in plan.objects), *(o.id for o in unread)]))
    table = plan_table(plan, {oid: i for i, oid in enumerate(ids)}, unread)
    return StoredPlan(plan_ipc(table, batch_rows=7), KEY)  # as stored: several batches


bounds = st.none() | st.integers(-5, 75).map(lambda v: (v,))


@settings(max_examples=60, deadline=None)
@given(_objects(), st.lists(st.tuples(bounds, bounds), max_size=6), st.lists(st.integers(-5, 75)))
def test_a_stored_plan_plans_what_planning_does(
    objs: list[DataObject], cuts: list[tuple[Any, Any]], keys: list[int]
) -> None:
    planned = scan.Plan(objs, KEY)
    gone = DataObject("unread", 1, 1, (5,), (5,))  # in the snapshot, not read (no leaf)
    stored = _stored(planned, [gone])
    assert _same(list(stored.objects), objs)
    assert _same(stored.tails, planned.tails)
    for lo, hi in [(None, None), *cuts]:
        for reverse in (False, True):
            want = list(planned.clusters(lo, hi, reverse))
            got = list(stored.clusters(lo, hi, reverse))
            assert len(got) == len(want)
            assert all(_same(g, w) for g, w in zip(got, want, strict=True))
    wanted = sorted({KEY.sort_key((k,)) for k in keys})
    near, found = planned.covering(wanted), stored.covering(wanted)
    assert [i for i, _ in found] == [i for i, _ in near]
    assert _same([o for _, o in found], [o for _, o in near])
    seen = [o.schema_b64 for o in objs if o.schema_b64]
    assert stored.schemas == list(dict.fromkeys(seen))
    # the snapshot's own order (here the objects', then the unread one), whole, each once
    whole = [*{o.id: dataclasses.replace(o, clip=None) for o in objs}.values(), gone]
    assert stored.stored_first(7) == whole[:7]
    assert stored.stored_first(len(whole) + 1) == whole


def test_a_scan_of_a_stored_plan_reads_the_same_rows(tmp_path: Path) -> None:
    """Rows through scan.scan: a stored plan and the objects planned give equal tables."""
    pool = Lake.init(str(tmp_path / "lake")).create_pool("p", key="k")
    for i in range(6):  # overlapping loads
        pool.load([_rows(i * 7, 20)])
    objs = pool.objects()
    stored = _stored(scan.Plan(objs, pool.key))
    for lo, hi, order, limit in [(None, None, "asc", None), ((10,), (30,), "desc", 7)]:
        want = pa.concat_tables(
            scan.scan(pool.storage, pool.id, objs, pool.key, lo, hi, order, limit)
        )
        got = pa.concat_tables(
            scan.scan(pool.storage, pool.id, stored, pool.key, lo, hi, order, limit)
        )
        assert got.equals(want)


def _rows(start: int, n: int, extra: bool = False) -> pa.Table:
    keys = list(range(start, start + n))
    cols: dict[str, Any] = {"k": keys, "v": [f"v{k}" for k in keys]}
    if extra:
        cols["w"] = [float(k) for k in keys]  # schema evolution: a new column
    return pa.table(cols)


@pytest.fixture
def pool(store_uri: str) -> Iterator[RecordPool]:
    """A pool on each store kind (local, memory, S3: conftest's ``store_uri``)."""
    made = Lake.init(store_uri).create_pool("p", key="k")
    for i in range(8):  # overlapping objects, some splitting at the partition bound
        made.load([_rows(i * 9, 25, extra=i >= 5)])
    made.split(made.status()["partitions"].column("id")[0].as_py(), at=40)
    # compact the left leaf's share of two objects straddling the split: they stay,
    # read clipped to the right leaf
    left = made.partitions().leaves()[0]
    straddling = tuple(o.id for o in made.snapshot()[0] if o.min_key == (27,) or o.min_key == (36,))
    run_jobs(made, "main", [CompactionJob("j1", left.id, straddling)])
    made.load([_rows(30, 20)])  # cut at the split: an object in each leaf
    yield made


def _reads(pool: RecordPool, ref: str | None = None) -> list[Any]:
    out: list[Any] = [
        pool.scan(ref),
        pool.scan(ref, limit=5),
        pool.scan(ref, start=33, limit=12),
        pool.scan(ref, start=20, end=50, order="desc", limit=9),
        pool.get([0, 39, 40, 41, 77, 1000], ref),
        pool.scan(ref, ranges=[(3, 9), (38, 44)]),
    ]
    status = pool.status(ref, rows=3)
    out += [status["partitions"], status["files"], pool.status(ref)["partitions"]]
    return out


def test_a_pool_read_through_stored_plans_reads_the_same(
    pool: RecordPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = pool.log()[-1].id
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 10**9)  # none stored: the reference
    want = {ref: _reads(pool, ref) for ref in ("main", first)}
    assert not list(pool.storage.walk(f"{pool.id}/{snapshot_index.SIDECARS}"))
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 3)
    forget_decoded(monkeypatch)
    assert _reads(pool, "main") == want["main"]  # the first reader stores the plan
    forget_decoded(monkeypatch)
    view = pool.scan_view("main")
    assert view.stored_plan is not None  # a new process reads it...
    assert [(o, o.clip) for o in view.objects] == [(o, o.clip) for o in pool.objects()]
    assert any(o.clip is not None for o in view.objects)  # (split: some read in part)
    assert _reads(pool, "main") == want["main"]  # ...and reads the same
    assert _reads(pool, first) == want[first]
    assert pool.scan(limit=1).schema.names == ["k", "v", "w"]  # the snapshot's schema


def test_a_damaged_sidecar_is_ignored_and_replaced(
    pool: RecordPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 3)
    want = pool.scan(start=10, limit=20)
    snapshot = pool.versioned.commits.get(pool.resolve()).snapshot
    path = snapshot_index.sidecar_path(pool.id, snapshot, "plan")
    good = pool.storage.get(path)
    pool.storage.put(path, good[:-10] + b"0123456789")
    forget_decoded(monkeypatch)
    assert pool.scan_view().stored_plan is None  # not trusted: planned again...
    assert pool.scan(start=10, limit=20).equals(want)
    assert pool.storage.get(path) == good  # ...and stored again


def test_vacuum_keeps_the_sidecars_of_heads_tags_and_young_ones(
    pool: RecordPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_index, "MIN_OBJECTS", 3)
    old = pool.log()[1].id
    tagged = pool.log()[2].id
    pool.tag("t", tagged)
    for ref in ("main", old, tagged):
        pool.scan(ref, limit=1)
        pool.status(ref, rows=1)
    folder = f"{pool.id}/{snapshot_index.SIDECARS}"
    listed = {i.path for i in pool.storage.walk(folder)}
    snapshots = {
        ref: pool.versioned.commits.get(pool.resolve(ref)).snapshot for ref in ("main", old, "t")
    }
    assert {p.rsplit("/", 1)[-1].split(".")[0] for p in listed} == set(snapshots.values())
    assert len(listed) == 6  # a plan and a partitions report each
    young = pool.vacuum(grace=dt.timedelta(hours=1), dry_run=True)
    assert not [p for p, _ in young.removed if folder in p]  # all younger than the grace
    report = pool.vacuum(grace=dt.timedelta(0))
    gone = {p for p, _ in report.removed if folder in p}
    assert gone == {p for p in listed if snapshots[old] in p}
    assert {i.path for i in pool.storage.walk(folder)} == listed - gone
    assert pool.scan(old, limit=3).num_rows == 3  # a cache: the old commit still reads
