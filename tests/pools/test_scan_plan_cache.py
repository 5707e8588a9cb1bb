"""Scan planning made once per snapshot (data/scan.py ``Plan``, pools/records/
snapshot_cache.py ``ScanView``, data/objects.py ``schema_from_b64``): a cut plan
reads what the plain planner does, views are never shared between snapshots and
are bounded in number, and a limited scan of a pool of many objects decodes each
distinct schema once and opens only the objects its rows are in; ``status(rows=N)``
is status's first rows (what the web UI shows)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from bench.ui import POOL, prepare

from limno.api.remote import RemoteLake
from limno.data import objects as data_objects
from limno.data import scan
from limno.data.keys import PoolKey
from limno.data.objects import DataObject
from limno.lake import Lake
from limno.pools import inspect
from limno.pools.records import snapshot_cache
from limno.server.run import serving


def _objects(rng: random.Random, n: int) -> list[DataObject]:
    out = []
    for i in range(n):
        lo = rng.randrange(0, 1000)
        hi = lo + rng.randrange(0, 40)
        keyless = i % 17 == 0
        out.append(
            DataObject(
                id=f"o{i:04d}",
                rows=10,
                size=100,
                min_key=None if keyless and i % 2 else (lo,),
                max_key=None if keyless and i % 2 else (hi,),
                keyless=3 if keyless else 0,
            )
        )
    return out


def test_a_plan_cut_to_bounds_reads_what_planning_them_reads() -> None:
    """Each cluster of a cut Plan, planned alone, gives plan()'s clusters of the same
    bounds in the same order (a cut cluster may be coarser: equal rows, equal order),
    backwards too; a full Plan is plan() itself."""
    key = PoolKey.parse("k")
    rng = random.Random(7)
    for _ in range(20):
        objs = _objects(rng, 200)
        planned = scan.Plan(objs, key)
        assert list(planned.clusters(None, None)) == scan.plan(objs, key, None, None)
        for _ in range(20):
            lo = rng.choice([None, (rng.randrange(-10, 1050),)])
            hi = rng.choice([None, (rng.randrange(-10, 1050),)])
            want = scan.plan(objs, key, lo, hi)
            cut = list(planned.clusters(lo, hi))
            assert [c for part in cut for c in scan.plan(part, key, lo, hi)] == want
            backwards = list(planned.clusters(lo, hi, reverse=True))
            assert backwards == cut[::-1]
        wanted = sorted({key.sort_key((rng.randrange(-10, 1050),)) for _ in range(5)})
        near = planned.covering(wanted)
        assert [i for i, _ in near] == sorted({i for i, _ in near})
        assert all(objs[i] is o for i, o in near)
        holding = {
            i
            for i, o in enumerate(objs)
            for k in wanted
            if o.min_key is not None and not k < key.sort_key(o.min_key)
            if not key.sort_key(o.max_key) < k
        }
        assert holding <= {i for i, _ in near}


def _rows(start: int, n: int = 10) -> pa.Table:
    keys = list(range(start, start + n))
    return pa.table({"k": keys, "v": [f"v{k}" for k in keys]})


def test_two_snapshots_never_share_a_view_and_views_are_bounded(tmp_path: Path) -> None:
    pool = Lake.init(str(tmp_path / "lake")).create_pool("p", key="k")
    pool.load([_rows(0)])
    first = pool.log()[0].id
    pool.load([pa.table({"k": [100], "w": [1.5]})])  # another schema
    again = pool.scan_view(first)
    assert pool.scan_view(first) is again  # one snapshot: made once
    latest = pool.scan_view()
    assert latest is not again
    assert latest.objects == tuple(pool.objects()) and again.objects == tuple(pool.objects(first))
    assert again.schema.names == ["k", "v"] and latest.schema.names == ["k", "v", "w"]
    assert pool.scan(limit=1).schema.names == ["k", "v", "w"]  # the snapshot's, whatever the rows
    for i in range(snapshot_cache.VIEWS + 3):
        pool.load([_rows(1000 + i * 10)])
        pool.scan_view()
    assert len(snapshot_cache._views._data) <= snapshot_cache.VIEWS
    assert pool.scan_view(first).objects == again.objects  # made again, the same
    assert data_objects.schema_from_b64.cache_info().maxsize == data_objects.SCHEMAS_KEPT


def _method(spy: mock.MagicMock) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return spy(self, *args, **kwargs)

    return call


def test_a_limited_scan_of_many_objects_decodes_and_opens_a_bounded_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench.ui's pool (2,000 objects without files after a first real commit): a
    scan of 10 rows, from the start, from a bound and backwards to a bound, and a get,
    open one object and decode the one schema once, first time included."""
    root = str(tmp_path / "lake")
    prepare(root, 2000, 200)
    pool = Lake.open(root).pool(POOL)
    opened = mock.MagicMock(side_effect=scan._Reader._open)
    monkeypatch.setattr(scan._Reader, "_open", _method(opened))
    data_objects.schema_from_b64.cache_clear()
    monkeypatch.setattr(snapshot_cache, "_views", snapshot_cache._LRU(snapshot_cache.VIEWS))
    first = pool.scan(limit=10)
    assert first.column("k").to_pylist() == list(range(10))
    assert data_objects.schema_from_b64.cache_info().misses == 1
    assert opened.call_count <= 2  # the real commit's object (its footer, then rows)
    opened.reset_mock()
    assert pool.scan(start=500, limit=3).column("k").to_pylist() == [500, 501, 502]
    assert pool.scan(end=500, order="desc", limit=2).column("k").to_pylist() == [499, 498]
    assert opened.call_count <= 4
    opened.reset_mock()
    assert pool.get([7, 900]).column("k").to_pylist() == [7, 900]  # one object opened
    assert opened.call_count <= 2
    assert data_objects.schema_from_b64.cache_info().misses == 1


def test_a_bounded_status_holds_the_first_rows_and_counts_all(tmp_path: Path) -> None:
    """``status(rows=N)``, in process and through a server: partitions and files cut to
    their first N rows of the full reports, ``total_rows`` the full reports' counts;
    the other reports unchanged."""
    root = str(tmp_path / "lake")
    local = Lake.init(root).create_pool("p", key="k")
    for i in range(5):
        local.load([_rows(i * 10)])
    local.split(local.status()["partitions"].column("id")[0].as_py(), at=25)
    with serving(root) as url:
        for pool in (local, RemoteLake.open(url).pool("p")):
            full = pool.status()
            cut = pool.status(rows=2)
            assert full["files"].num_rows == 5 and full["partitions"].num_rows == 3
            for name in ("partitions", "files"):
                assert cut[name].to_pylist() == full[name].slice(0, 2).to_pylist()
                assert inspect.total_rows(cut[name]) == full[name].num_rows
                assert inspect.total_rows(full[name]) == full[name].num_rows
            assert inspect.total_rows(pool.status(rows=0)["files"]) == 5
            assert cut["ingest_jobs"].equals(full["ingest_jobs"])
