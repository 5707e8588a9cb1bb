"""Writers on two branches and a merger running at once, in separate processes, lose nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.compute as pc
import pytest

from bounded import stop as stop_all
from limno.api.local import LocalLake as Lake

WORKER = textwrap.dedent(
    """
    import sys, time
    import pyarrow as pa
    from limno import Lake
    lake_uri, role, branch = sys.argv[1:4]
    loads = int(sys.argv[4])
    pool = Lake.open(lake_uri).pool("p")
    if role == "writer":
        for i in range(loads):
            tag = f"{branch}-{sys.argv[5]}-{i}"
            pool.load([pa.table({"ts": [i], "tag": [tag]})], branch=branch, message=tag)
    else:
        # merge until told to stop (the file sys.argv[5] exists), then once more
        import os
        kinds = []
        while not os.path.exists(sys.argv[5]):
            kinds.append(pool.merge(branch, "main").kind)
            time.sleep(0.05)  # pace the merges (the writers need the cores too)
        kinds.append(pool.merge(branch, "main").kind)
        print(" ".join(kinds))
    """
)


def _spawn(lake: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, lake, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_writers_on_two_branches_and_a_merger_lose_nothing(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    pool = Lake.init(lake_dir).create_pool("p", key="ts")
    pool.branch("dev")
    stop = tmp_path / "stop"
    writers = [
        _spawn(lake_dir, "writer", "main", "12", "a"),
        _spawn(lake_dir, "writer", "main", "12", "b"),
        _spawn(lake_dir, "writer", "dev", "12", "a"),
        _spawn(lake_dir, "writer", "dev", "12", "b"),
    ]
    merger = _spawn(lake_dir, "merger", "dev", "0", str(stop))
    try:
        for proc in writers:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
        stop.touch()
        out, err = merger.communicate(timeout=300)
        assert merger.returncode == 0, err
    finally:
        stop_all([*writers, merger])
    kinds = out.split()
    assert kinds[-1] in ("merge", "fast-forward", "up-to-date")
    assert {"merge", "fast-forward"} & set(kinds), kinds
    pool = Lake.open(lake_dir).pool("p")
    tags = pc.value_counts(pool.table().column("tag")).to_pylist()
    expected = {f"{b}-{w}-{i}" for b in ("main", "dev") for w in "ab" for i in range(12)}
    assert {t["values"] for t in tags} == expected
    assert {t["counts"] for t in tags} == {1}
    dev_tags = pool.table("dev").column("tag").to_pylist()
    assert sorted(dev_tags) == sorted(t for t in expected if t.startswith("dev"))
    assert list(Lake.open(lake_dir).verify()) == []
