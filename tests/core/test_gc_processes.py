"""Vacuum against writers in other processes: leases, crashed writers and vacuums, races.

The real ``limno`` command and real child processes; crashes come from the
fault-injection layer (``LIMNO_FAULTS``: the child exits at once at the chosen
storage call) or from SIGKILL. Waits are on conditions (whole output lines), bounded.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from bounded import read_line, stop
from limno.api.local import LocalLake as Lake

LIMNO = shutil.which("limno", path=os.path.dirname(sys.executable)) or "limno"
TIMEOUT = 120


def limno(lake: str, *args: str, faults: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("LIMNO_FAULTS", None)
    if faults:
        env["LIMNO_FAULTS"] = faults
    return subprocess.run(
        [LIMNO, "--lake", lake, *args], capture_output=True, text=True, env=env, timeout=TIMEOUT
    )


def _lake(tmp_path: Path) -> tuple[str, Lake]:
    where = str(tmp_path / "lake")
    lake = Lake.init(where)
    lake.create_pool("p", key="k").load([pa.table({"k": [1, 2], "v": ["a", "b"]})])
    return where, lake


def _data_files(lake: Lake, partial: bool = False) -> list[str]:
    pool = lake.pool("p")
    prefix = f"{pool.id}/data"
    if partial:
        return [i.path for i in lake.storage.list_partial(prefix)]
    return [i.path for i in lake.storage.walk(prefix)]


def _leases(lake: Lake) -> list[str]:
    return [i.path for i in lake.storage.walk(f"{lake.pool('p').id}/leases")]


# -- a write that is still running is never vacuumed ---------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from limno import Lake
    from limno.core.commits import Action
    pool = Lake.open(sys.argv[1]).pool("p")
    with pool.versioned.writing("load") as since:
        objs = pool.write([pa.table({"k": [10, 11], "v": ["x", "y"]})])
        print("written", flush=True)
        sys.stdin.readline()  # the parent says go (or kills us)
        commit = pool.versioned.commit(
            "main", [Action("add", o.id, o.to_json()) for o in objs], since=since
        )
    print("committed", commit.id, flush=True)
    """
)


def _holder(lake_dir: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, lake_dir],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_live_writers_objects_outlive_any_grace(tmp_path: Path) -> None:
    lake_dir, lake = _lake(tmp_path)
    proc = _holder(lake_dir)
    try:
        assert read_line(proc.stdout) == "written"  # type: ignore[arg-type]
        before = set(_data_files(lake))
        report = lake.pool("p").vacuum(grace=dt.timedelta(0))
        assert report.removed == [] and report.leased >= 1
        assert set(_data_files(lake)) == before
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert read_line(proc.stdout).startswith("committed")  # type: ignore[arg-type]
        assert proc.wait(TIMEOUT) == 0
    finally:
        stop([proc])
    assert sorted(lake.pool("p").scan().column("k").to_pylist()) == [1, 2, 10, 11]
    assert _leases(lake) == []
    assert list(lake.verify(deep=True)) == []


def test_a_killed_writers_lease_and_objects_are_reclaimed(tmp_path: Path) -> None:
    lake_dir, lake = _lake(tmp_path)
    proc = _holder(lake_dir)
    try:
        assert read_line(proc.stdout) == "written"  # type: ignore[arg-type]
        assert len(_leases(lake)) == 1
    finally:
        stop([proc])  # SIGKILL: the lease stays behind, its process is gone
    report = lake.pool("p").vacuum(grace=dt.timedelta(0))
    assert len(report.removed) == 1 and report.leased == 0
    assert _leases(lake) == []
    assert sorted(lake.pool("p").scan().column("k").to_pylist()) == [1, 2]
    assert list(lake.verify()) == []


# -- crashes: partial files of a killed load, a vacuum that died mid-run ---------------------


def test_a_crashed_loads_partial_file_is_reclaimed(tmp_path: Path) -> None:
    lake_dir, lake = _lake(tmp_path)
    src = tmp_path / "in.ndjson"
    src.write_text("".join(f'{{"k": {i}, "v": "{"x" * 50}"}}\n' for i in range(1000)))
    r = limno(lake_dir, "load", "-p", "p", str(src), faults="move_file:1:crash-before")
    assert r.returncode == 137, r.stderr
    partial = _data_files(lake, partial=True)
    assert len(partial) == 1 and "#" in partial[0]
    assert limno(lake_dir, "vacuum", "-p", "p", "--grace", "1h").returncode == 0
    assert _data_files(lake, partial=True) == partial  # younger than the grace: kept
    r = limno(lake_dir, "vacuum", "-p", "p", "--grace", "0s")
    assert r.returncode == 0, r.stderr
    assert _data_files(lake, partial=True) == []
    assert _leases(lake) == []
    assert limno(lake_dir, "verify").returncode == 0


def test_a_vacuum_that_died_mid_run_is_cleared_by_the_next(tmp_path: Path) -> None:
    lake_dir, lake = _lake(tmp_path)
    pool = lake.pool("p")
    pool.branch("scratch")
    pool.load([pa.table({"k": [5], "v": ["garbage"]})], branch="scratch")
    pool.delete_branch("scratch")
    r = limno(lake_dir, "vacuum", "-p", "p", "--grace", "0s", faults="delete:1:crash-before")
    assert r.returncode == 137, r.stderr
    assert len(pool.versioned.gc.state().runs) == 1  # registered, never finished
    # a writer can still land anything the dead run did not condemn
    pool.load([pa.table({"k": [3], "v": ["c"]})])
    report = pool.vacuum(grace=dt.timedelta(0))
    assert pool.versioned.gc.state().runs == {}
    assert len(report.removed) == 1
    assert sorted(pool.scan().column("k").to_pylist()) == [1, 2, 3]
    assert list(lake.verify()) == []


# -- the race the issue reported: add, then commit while vacuum runs ------------------------


@pytest.mark.slow
def test_commit_racing_vacuum_never_loses_the_commit(tmp_path: Path) -> None:
    lake_dir, lake = _lake(tmp_path)
    landed = 0
    for i in range(4):
        src = tmp_path / f"in-{i}.ndjson"
        src.write_text(f'{{"k": {100 + i}, "v": "r{i}"}}\n')
        assert limno(lake_dir, "add", "-p", "p", str(src)).returncode == 0
        env = {k: v for k, v in os.environ.items() if k != "LIMNO_FAULTS"}
        procs = [
            subprocess.Popen(
                [LIMNO, "--lake", lake_dir, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for args in (["commit", "-p", "p"], ["vacuum", "-p", "p", "--grace", "0s"])
        ]
        try:
            (c_out, c_err), (_, v_err) = (p.communicate(timeout=TIMEOUT) for p in procs)
        finally:
            stop(procs)
        assert procs[1].returncode == 0, v_err
        assert procs[0].returncode == 0, c_err  # staged objects are never taken
        landed += 1
        assert list(lake.verify()) == []
        keys = lake.pool("p").scan().column("k").to_pylist()
        assert 100 + i in keys
    assert landed == 4
