"""The benchmark suite's smoke run, and the fast paths that benchmarks drove into the writer.

``test_quick_suite`` runs ``python -m bench --quick`` as CI would, so the suite never
rots: it checks the shape of the results file, never a timing. The other tests hold
the write path's fast paths (numpy sort of a single integer-like key, publishing a
local object by rename) to the slow, obvious reference.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from limno.data import sort as _sort
from limno.data import writer as _writer
from limno.data.keys import PoolKey
from limno.storage import open_storage
from limno.storage._obstore import ObStorage

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_suite(tmp_path: Path) -> None:
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--repeat", "1", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "latest.json").read_text())
    assert isinstance(results, list) and results
    names = {r["benchmark"] for r in results}
    assert {"ingest_sorted", "small_commits", "point_lookup_p50", "range_scan"} <= names
    for r in results:
        assert set(r) - {"note"} == {
            "benchmark",
            "metric",
            "unit",
            "limno",
            "peers",
            "higher_is_better",
        }, r
        assert isinstance(r["benchmark"], str) and r["benchmark"]
        assert isinstance(r["metric"], str) and r["metric"]
        assert isinstance(r["unit"], str) and r["unit"]
        assert isinstance(r["higher_is_better"], bool)
        assert isinstance(r["peers"], dict)
        for value in [r["limno"], *r["peers"].values()]:
            assert isinstance(value, float | int) and not isinstance(value, bool), r
            assert math.isfinite(value) and value > 0, r
    ingest = next(r for r in results if r["benchmark"] == "ingest_sorted")
    assert ingest["peers"], "ingest_sorted ran without any peer"
    machine = json.loads((out / "machine.json").read_text())
    assert machine["cores"] >= 1 and machine["memory_bytes"] > 0
    assert machine["versions"]["pyarrow"]
    # the table on stdout names every benchmark
    for name in names:
        assert name in proc.stdout


# -- the numpy sort of one integer-like key equals Arrow's stable sort ---------------------

INT_TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint8(), pa.uint64()]


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**64 - 1)), max_size=60),
    small=st.booleans(),
    typ=st.sampled_from(INT_TYPES),
    descending=st.booleans(),
)
def test_numpy_sort_order_equals_arrow(
    values: list[int | None], small: bool, typ: pa.DataType, descending: bool
) -> None:
    bits = typ.bit_width
    lo, hi = (
        (0, 2**bits - 1)
        if pa.types.is_unsigned_integer(typ)
        else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    )
    if small:  # many ties
        values = [None if v is None else v % 5 for v in values]
    values = [None if v is None else min(max(v, lo), hi) for v in values]
    table = pa.table({"k": pa.array(values, typ), "id": pa.array(range(len(values)), pa.int64())})
    key = PoolKey.parse("k:desc" if descending else "k")
    _check_same_order(table, key)


@pytest.mark.parametrize(
    "column",
    [
        pa.array([3, 1, None, 2, 1, None, 0], pa.timestamp("us", tz="UTC")),
        pa.array([3, 1, None, 2, 1], pa.timestamp("ns")),
        pa.array([5, -1, 5, 2], pa.date32()),
        pa.array([5, -1, 5, 2], pa.date64()),
        pa.array([5, 1, 5, 2], pa.time64("us")),
        pa.array([5, 1, 5, 2], pa.time32("s")),
        pa.array([5, -1, 5, 2], pa.duration("ms")),
        pa.array([1, 2, 2, 3, None, None], pa.int64()),  # already sorted
        pa.array([None, None], pa.int64()),
    ],
)
@pytest.mark.parametrize("descending", [False, True])
def test_numpy_sort_order_temporal_and_sorted(column: pa.Array, descending: bool) -> None:
    table = pa.table({"k": column, "id": pa.array(range(len(column)), pa.int64())})
    _check_same_order(table, PoolKey.parse("k:desc" if descending else "k"))


def test_numpy_sort_order_large_and_nested() -> None:
    rng = np.random.default_rng(5)
    n = 1_200_000  # packed parallel sort (more than one part)
    k = rng.integers(-50, 50, n)
    table = pa.table({"k": k, "id": np.arange(n)})
    _check_same_order(table, PoolKey.parse("k"))
    # a span too wide to pack with the row number: stable argsort
    wide = pa.table({"k": rng.integers(-(2**62), 2**62, 1000), "id": np.arange(1000)})
    _check_same_order(wide, PoolKey.parse("k"))
    nested = pa.table(
        {"g": pa.array([{"x": 3}, None, {"x": 1}, {"x": None}, {"x": 1}]), "id": range(5)}
    )
    _check_same_order(nested, PoolKey.parse("g.x:desc"))


def _check_same_order(table: pa.Table, key: PoolKey) -> None:
    expected = key.sort(table).column("id").to_pylist()
    for runs in (False, True):  # the run-aware sort of merge rounds gives the same order
        order = _sort.sort_order(table, key, runs=runs)
        got = table if order is None else table.take(order)
        assert got.column("id").to_pylist() == expected


# -- publishing a local object by rename -----------------------------------------------------


def test_local_move_file_is_a_rename_and_staging_files_are_invisible(tmp_path: Path) -> None:
    store = open_storage(str(tmp_path / "lake"), create=True)
    assert isinstance(store, ObStorage)
    staging = store.staging_file("p/data/x.parquet")
    assert staging is not None and os.path.dirname(staging).endswith(os.path.join("p", "data"))
    Path(staging).write_bytes(b"object bytes")
    assert store.list("p/data").objects == []  # listings skip staging names
    assert not store.exists("p/data/x.parquet")
    inode = os.stat(staging).st_ino
    info = store.move_file("p/data/x.parquet", staging)
    assert info.size == len(b"object bytes")
    assert store.get("p/data/x.parquet") == b"object bytes"
    local = store.local_path("p/data/x.parquet")
    assert local is not None and os.stat(local).st_ino == inode  # renamed, not copied
    assert not os.path.exists(staging)
    assert [o.path for o in store.list("p/data").objects] == ["p/data/x.parquet"]


def test_move_file_from_elsewhere_and_to_memory(tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"abc")
    store = open_storage(str(tmp_path / "lake"), create=True)
    assert isinstance(store, ObStorage)
    store.move_file("a/b.bin", str(outside))
    assert store.get("a/b.bin") == b"abc" and not outside.exists()
    memory = open_storage("memory://bench-move-file")
    assert isinstance(memory, ObStorage)
    assert memory.staging_file("a/b.bin") is None
    outside.write_bytes(b"xyz")
    memory.move_file("a/b.bin", str(outside))
    assert memory.get("a/b.bin") == b"xyz" and not outside.exists()


def test_write_sorted_leaves_no_staging_files(tmp_path: Path) -> None:
    store = open_storage(str(tmp_path / "lake"), create=True)
    key = PoolKey.parse("k")
    table = pa.table(
        {"k": np.arange(300_000)[::-1].copy(), "s": [f"v{i % 7}" for i in range(300_000)]}
    )
    objs = _writer.sort_and_write(store, "pool", [table], key, target_size=10**9)
    assert [o.rows for o in objs] == [300_000]
    names = sorted(os.listdir(tmp_path / "lake" / "pool" / "data"))
    assert names == [f"{objs[0].id}.parquet", f"{objs[0].id}.sketch"]


def test_prefetched_yields_in_order_raises_and_stops_early() -> None:
    assert list(_sort.prefetched(iter(range(100)))) == list(range(100))

    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("boom")

    got = []
    with pytest.raises(ValueError, match="boom"):
        for x in _sort.prefetched(failing()):
            got.append(x)
    assert got == [1]
    closed = []

    def endless() -> Iterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            closed.append(True)

    it = _sort.prefetched(endless())
    assert [next(it) for _ in range(5)] == [0, 1, 2, 3, 4]
    it.close()  # the producer stops and closes its source
    assert closed == [True]
