"""LSM maintenance: Sleeper's partition-splitting and compaction scenarios, GC, kills.

The scenarios are written from Sleeper's descriptions: 100 rows ``row-00``..``row-99``
with a split threshold of 20 end in leaves of 12-13 rows; compaction works on files
referenced by several partitions; many ingests are compacted and then collected.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bounded import read_line
from clirunner import fail, ok
from limno.api.local import LocalLake as Lake
from limno.pools.records.splitting import leaf_rows

ROWS = [f"row-{i:02d}" for i in range(100)]


def _sleeper_pool(lake_dir: str) -> Lake:
    lake = Lake.init(lake_dir)
    pool = lake.create_pool("s", key="key", split_threshold=20)
    shuffled = ROWS[37:] + ROWS[:37]
    pool.load([pa.table({"key": shuffled, "value": [int(r[4:]) for r in shuffled]})])
    return lake


def test_sleeper_split_into_leaves_of_12_or_13_rows(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    _sleeper_pool(lake_dir)
    out = ok("--lake", lake_dir, "manage", "--once", "--grace", "0")
    assert "split" in out.err
    parts = ok(
        "--lake",
        lake_dir,
        "query",
        'SELECT * FROM "s:partitions" WHERE leaf ORDER BY lo NULLS FIRST',
    ).rows()
    assert len(parts) == 8
    assert sorted(p["rows"] for p in parts) == [12, 12, 12, 12, 13, 13, 13, 13]
    # the leaves tile the key space: each starts where the previous ends
    assert parts[0]["lo"] is None and parts[-1]["hi"] is None
    assert all(a["hi"] == b["lo"] for a, b in zip(parts, parts[1:], strict=False))
    # every row is still there, once, in order, through scan, get and SQL
    scanned = ok("--lake", lake_dir, "scan", "-p", "s").rows()
    assert [r["key"] for r in scanned] == ROWS
    got = ok("--lake", lake_dir, "get", "-p", "s", "row-49", "row-50").rows()
    assert [r["value"] for r in got] == [49, 50]
    count = ok("--lake", lake_dir, "query", "SELECT count(*) AS n FROM s").rows()
    assert count == [{"n": 100}]
    # the one object is now referenced by all eight leaves, not rewritten
    objs = ok("--lake", lake_dir, "query", 'SELECT * FROM "s:objects"').rows()
    assert len(objs) == 1 and len(objs[0]["partitions"]) == 8
    ok("--lake", lake_dir, "verify")


def test_compaction_of_files_referenced_by_several_partitions(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    lake = _sleeper_pool(lake_dir)
    pool = lake.pool("s")
    # objects loaded before the split straddle it
    pool.load([pa.table({"key": ["row-10", "row-60"], "value": [1000, 1001]})])
    pool.load([pa.table({"key": ["row-20", "row-70"], "value": [1, 2]})])
    pool.load([pa.table({"key": ["row-21", "row-71"], "value": [3, 4]})])
    small = [o.id for o in pool.snapshot()[0] if o.rows == 2]
    assert pool.split("root", at="row-50") is not None
    left, right = pool.partitions().leaves()
    objs, tree = pool.snapshot()
    assert all(tree.leaves_of(o) == [left, right] for o in objs)
    # compact one leaf's share of two straddling objects: the objects stay, clipped
    before = pool.scan()
    from limno.pools.records.compaction import CompactionJob, run_jobs

    run_jobs(pool, "main", [CompactionJob("j1", left.id, tuple(small[1:]))])
    objs, tree = pool.snapshot()
    clipped = [o for o in objs if o.id in small[1:]]
    assert len(clipped) == 2 and all(tree.leaves_of(o) == [right] for o in clipped)
    assert pool.scan().equals(before)
    assert pool.get(["row-20"]).column("value").to_pylist() == [20, 1]
    assert pool.get(["row-70"]).column("value").to_pylist() == [70, 2]
    # compact everything: jobs in both leaves, outputs referenced by their own leaf only
    commit, results = pool.compact([o.id for o in objs])
    assert commit is not None
    assert {r.job.partition for r in results} == {left.id, right.id}
    assert pool.scan().equals(before)
    objs, tree = pool.snapshot()
    assert sorted(tuple(p.id for p in tree.leaves_of(o)) for o in objs) == sorted(
        [(left.id,), (right.id,)]
    )
    assert list(lake.verify()) == []


def test_loads_write_one_object_per_leaf_partition(tmp_path: Path) -> None:
    lake = _sleeper_pool(str(tmp_path / "lake"))
    pool = lake.pool("s")
    pool.split("root", at="row-50")
    left, right = pool.partitions().leaves()
    pool.split(right.id, at="row-75")
    leaves = pool.partitions().leaves()
    assert len(leaves) == 3
    keys = ["row-99", "row-05", "row-75", "row-50", "row-49", "row-74"]
    commit = pool.load([pa.table({"key": keys, "value": list(range(6))})])
    added = [a.key for a in commit.actions if a.op == "add"]
    objs, tree = pool.snapshot()
    new = sorted((o for o in objs if o.id in added), key=lambda o: o.min_key or ())
    # one object per leaf, cut exactly at the leaves' bounds, each referencing its leaf
    assert [(o.min_key, o.max_key) for o in new] == [
        (("row-05",), ("row-49",)),
        (("row-50",), ("row-74",)),
        (("row-75",), ("row-99",)),
    ]
    assert [tree.leaves_of(o) for o in new] == [[leaf] for leaf in leaves]
    assert [o.partitions for o in new] == [(leaf.id,) for leaf in leaves]
    # a staged add is cut the same way; keyless rows go to the last leaf
    staged = pool.add([pa.table({"key": ["row-00", None, "row-60"], "value": [7, 8, 9]})])
    assert [(o.min_key, o.keyless) for o in staged] == [
        (("row-00",), 0),
        (("row-60",), 0),
        (None, 1),
    ]
    assert [o.partitions for o in staged] == [(leaf.id,) for leaf in leaves]
    pool.commit()
    assert pool.scan().num_rows == 100 + 6 + 3
    assert list(lake.verify()) == []


def test_many_ingests_then_compaction_and_gc(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    lake = Lake.init(lake_dir)
    pool = lake.create_pool("p", key="k", compaction={"strategy": "basic", "batch": 4})
    for i in range(16):
        pool.load([pa.table({"k": list(range(i, 200, 16)), "batch": [i] * len(range(i, 200, 16))})])
    before = pool.scan()
    ok("--lake", lake_dir, "manage", "--once", "-p", "p")
    assert len(pool.snapshot()[0]) == 4
    assert pool.scan().equals(before)
    jobs = [
        json.loads(line)
        for line in ok("--lake", lake_dir, "-f", "ndjson", "status", "p").text.splitlines()
    ]
    compactions = [j for j in jobs if j["report"] == "compaction_jobs"]
    assert len(compactions) == 4 and {j["state"] for j in compactions} == {"committed"}
    assert sum(j["rows_in"] for j in compactions) == 200
    ingests = [j for j in jobs if j["report"] == "ingest_jobs"]
    assert len(ingests) == 16
    # GC: with no retention window, the 16 compacted inputs are unreachable garbage
    vac = ok("--lake", lake_dir, "vacuum", "-p", "p", "--grace", "0", "--retention", "0")
    assert "removed 16" in vac.err
    assert pool.scan().equals(before)
    assert list(lake.verify()) == []


def test_compact_cli_and_errors(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    lake = Lake.init(lake_dir)
    pool = lake.create_pool("p", key="k")
    for i in range(3):
        pool.load([pa.table({"k": [i, i + 10, i + 20]})])
    ids = [o.id for o in pool.snapshot()[0]]
    out = ok("--lake", lake_dir, "compact", "-p", "p", *ids)
    assert len(out.text.split()) == 1 and "compacted 3 object(s) into 1" in out.err
    log = ok("--lake", lake_dir, "log", "-p", "p", "-n", "1").rows()[0]
    assert {a["op"] for a in log["actions"]} == {"add", "delete"}
    assert "no such object" in fail("--lake", lake_dir, "compact", "-p", "p", ids[0]).err
    assert "nothing to compact" in ok("--lake", lake_dir, "compact", "-p", "p").err
    bad = fail("--lake", lake_dir, "create", "q", "-k", "k", "--compaction", "magic")
    assert "unknown compaction strategy" in bad.err
    assert [r["k"] for r in ok("--lake", lake_dir, "scan", "-p", "p").rows()] == sorted(
        [i + d for i in range(3) for d in (0, 10, 20)]
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    loads=st.lists(st.lists(st.integers(0, 60), min_size=1, max_size=30), min_size=2, max_size=6),
    # Distinct points: a second split at an existing boundary lies inside no leaf.
    splits=st.lists(st.integers(1, 59), max_size=3, unique=True),
    strategy=st.sampled_from(["size-ratio", "basic", "overlap"]),
)
def test_scans_identical_before_and_after_compaction_and_splits(
    tmp_path_factory: pytest.TempPathFactory,
    loads: list[list[int]],
    splits: list[int],
    strategy: str,
) -> None:
    lake = Lake.init(str(tmp_path_factory.mktemp("lake")))
    pool = lake.create_pool("p", key="k", compaction={"strategy": strategy, "batch": 2})
    for n, keys in enumerate(loads):
        pool.load([pa.table({"k": keys, "n": [n] * len(keys)})])
    reference = sorted((k, n) for n, keys in enumerate(loads) for k in keys)

    def rows() -> list[tuple[int, int]]:
        t = pool.scan()
        return sorted(zip(t.column("k").to_pylist(), t.column("n").to_pylist(), strict=True))

    assert rows() == reference
    for at in splits:
        leaf = next(
            p
            for p in pool.partitions().leaves()
            if (p.lo is None or p.lo[0] < at) and (p.hi is None or at < p.hi[0])
        )
        pool.split(leaf.id, at=at)
        assert rows() == reference
    pool.compact()
    assert rows() == reference
    pool.compact([o.id for o in pool.snapshot()[0]])
    assert rows() == reference
    asc = pool.scan().column("k").to_pylist()
    assert asc == sorted(asc)
    desc = pool.scan(order="desc").column("k").to_pylist()
    assert desc == sorted(asc, reverse=True)
    objs, tree = pool.snapshot()
    total = sum(leaf_rows(pool, tree, objs).values())
    assert round(total) == len(reference)
    assert list(lake.verify()) == []


KILLED = textwrap.dedent(
    """
    import sys, time
    from limno import Lake
    from limno.core.versioning import Versioned
    def stall(self, *args, **kwargs):
        print("outputs written", flush=True)
        time.sleep(60)
    Versioned.commit = stall
    pool = Lake.open(sys.argv[1]).pool("p")
    pool.compact([o.id for o in pool.snapshot()[0]])
    """
)


@pytest.mark.slow
def test_compaction_killed_midway_leaves_lake_consistent(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    lake = Lake.init(lake_dir)
    pool = lake.create_pool("p", key="k")
    for i in range(4):
        pool.load([pa.table({"k": list(range(i, 4000, 4))})])
    head, before = pool.resolve(), pool.scan()
    data_files = {p.name for p in (tmp_path / "lake" / pool.id / "data").iterdir()}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, lake_dir], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        assert read_line(proc.stdout) == "outputs written"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert pool.resolve() == head and pool.scan().equals(before)
    assert list(Lake.open(lake_dir).verify()) == []
    orphans = {p.name for p in (tmp_path / "lake" / pool.id / "data").iterdir()} - data_files
    assert orphans, "the killed compaction should have written its output"
    report = pool.vacuum(grace=dt.timedelta(0))
    assert len(report.removed) == len({n.split(".")[0] for n in orphans})
    assert pool.scan().equals(before)


def test_per_branch_retention_windows(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    Lake.init(lake_dir)
    ok("--lake", lake_dir, "create", "p", "-k", "k", "--retention", "main=0s")
    lake = Lake.open(lake_dir)
    pool = lake.pool("p")
    pool.load([pa.table({"k": [1, 2]})])
    pool.branch("dev")
    pool.load([pa.table({"k": [3]})], branch="dev")
    pool.load([pa.table({"k": [4]})])
    main_only, dev_only = pool.snapshot("main")[0][-1], pool.snapshot("dev")[0][-1]
    pool.delete_where("k >= 3")
    pool.delete_where("k >= 3", branch="dev")
    report = pool.vacuum(grace=dt.timedelta(0))
    removed = {path.rsplit("/", 1)[-1].split(".")[0] for path, _ in report.removed}
    # main keeps no history (window 0): its deleted object goes; dev has no window:
    # everything its history ever held stays readable
    assert main_only.id in removed and dev_only.id not in removed
    assert pool.scan("dev~1").column("k").to_pylist() == [1, 2, 3]
    assert "removed by vacuum" in fail("--lake", lake_dir, "scan", "-p", "p@main~1").err
    assert list(lake.verify()) == []
    assert "BRANCH_GLOB=DURATION" in fail("--lake", lake_dir, "create", "q", "--retention", "x").err


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    loads=st.lists(
        st.lists(st.tuples(st.integers(0, 30), st.integers(-5, 5)), min_size=1, max_size=25),
        min_size=2,
        max_size=5,
    ),
    iterator=st.sampled_from(["dedup", "sum(n),max(m)"]),
    split_at=st.integers(1, 29),
)
def test_iterators_agree_at_query_time_and_after_compaction(
    tmp_path_factory: pytest.TempPathFactory,
    loads: list[list[tuple[int, int]]],
    iterator: str,
    split_at: int,
) -> None:
    lake = Lake.init(str(tmp_path_factory.mktemp("lake")))
    pool = lake.create_pool(
        "p", key="k", iterators=[iterator], compaction={"strategy": "basic", "batch": 2}
    )
    model: dict[int, tuple[int, int]] = {}
    for load in loads:
        pool.load(
            [
                pa.table(
                    {
                        "k": [k for k, _ in load],
                        "n": [n for _, n in load],
                        "m": [n * 10 for _, n in load],
                    }
                )
            ]
        )
        for k, n in load:
            if iterator == "dedup" or k not in model:
                model[k] = (n, n * 10)
            else:
                model[k] = (model[k][0] + n, max(model[k][1], n * 10))
    expected = [(k, *model[k]) for k in sorted(model)]

    def answers() -> tuple[list[tuple[int, int, int]], ...]:
        t = pool.scan()
        scanned = list(zip(*(t.column(c).to_pylist() for c in ("k", "n", "m")), strict=True))
        d = pool.scan(order="desc")
        desc = list(zip(*(d.column(c).to_pylist() for c in ("k", "n", "m")), strict=True))
        from limno.engines.local import query

        q = query(lake, "SELECT k, n, m FROM p ORDER BY k")
        queried = list(zip(*(q.column(c).to_pylist() for c in ("k", "n", "m")), strict=True))
        one = pool.get([expected[0][0]])
        got = list(zip(*(one.column(c).to_pylist() for c in ("k", "n", "m")), strict=True))
        return scanned, desc[::-1], queried, got

    scanned, desc, queried, got = answers()
    assert scanned == desc == queried == expected
    assert got == expected[:1]
    pool.split("root", at=split_at)
    assert answers()[0] == expected
    pool.compact()
    pool.compact([o.id for o in pool.snapshot()[0]])
    scanned, desc, queried, got = answers()
    assert scanned == desc == queried == expected and got == expected[:1]
    # compaction really applied the iterator: one row per key is stored
    assert sum(o.rows for o in pool.snapshot()[0]) == len(expected)
