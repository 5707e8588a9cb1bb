"""A commit's checks hold for the snapshot it lands on, also after a rebase.

A load checks that its keys sort with the pool's (no text keys into an integer
pool) against the head it started from; if the branch moves before the commit
lands, the commit is rebased, and the check must run again against the new
parent, or two first loads of different key types could both land.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from bounded import join_all
from limno.api.local import LocalLake as Lake
from limno.errors import InvalidInputError
from limno.storage import open_storage
from limno.storage._faults import FaultyStorage

WAIT = 60.0


def test_a_rebased_load_rechecks_key_types(tmp_path: Path) -> None:
    Lake.init(str(tmp_path / "lake"))
    store = FaultyStorage(open_storage(str(tmp_path / "lake")))
    lake = Lake(store)
    pool = lake.create_pool("p", key="k")
    at_append, go = threading.Event(), threading.Event()

    def pause_before_landing(op: str, path: str) -> None:
        on_branches = op == "put_if_absent" and "/branches/" in path
        if threading.current_thread().name == "ints" and on_branches and not go.is_set():
            at_append.set()
            assert go.wait(WAIT)

    store.observer = pause_before_landing
    errors: list[BaseException] = []

    def load_ints() -> None:
        try:
            pool.load([pa.table({"k": [1, 2, 3]})])
        except BaseException as e:  # noqa: BLE001 - checked below
            errors.append(e)

    ints = threading.Thread(target=load_ints, name="ints")
    ints.start()
    assert at_append.wait(WAIT)  # checked against the empty pool, about to land
    pool.load([pa.table({"k": ["a", "b"]})])  # lands first, with text keys
    go.set()
    join_all([ints], WAIT)
    assert len(errors) == 1 and isinstance(errors[0], InvalidInputError), errors
    assert "no common order" in str(errors[0])
    assert pool.scan().column("k").to_pylist() == ["a", "b"]
    assert list(lake.verify()) == []


RACER = textwrap.dedent(
    """
    import os, sys, time
    import pyarrow as pa
    from limno import Lake
    from limno.errors import InvalidInputError
    pool = Lake.open(sys.argv[1]).pool("p")
    keys = [1, 2] if sys.argv[2] == "int" else ["x", "y"]
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[3]):
        assert time.monotonic() < deadline, "no go file"
        time.sleep(0.001)
    try:
        pool.load([pa.table({"k": keys})])
        print("landed", flush=True)
    except InvalidInputError:
        print("refused", flush=True)
    """
)


@pytest.mark.slow
def test_racing_first_loads_of_two_key_types_land_one(tmp_path: Path) -> None:
    for trial in range(3):
        lake_dir = str(tmp_path / f"lake{trial}")
        Lake.init(lake_dir).create_pool("p", key="k")
        go = tmp_path / f"go{trial}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, lake_dir, kind, str(go)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for kind in ("int", "text")
        ]
        go.touch()
        outs = [p.communicate(timeout=120)[0].split() for p in procs]
        assert all(p.returncode == 0 for p in procs)
        assert sorted(o[-1] for o in outs) == ["landed", "refused"], outs
        lake = Lake.open(lake_dir)
        assert list(lake.verify()) == []
        assert os.path.exists(go)
