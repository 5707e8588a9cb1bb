"""A Spark bulk import whose driver is killed mid-write leaves no visible change:
the branch has not moved, ``verify`` is clean, and vacuum reclaims what the job had
uploaded."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from limno.api.local import LocalLake as Lake

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = textwrap.dedent(
    """
    import sys, time
    from limno import Lake
    from limno.engines import spark as ls

    def slow(obj):  # every task pauses after uploading its object
        time.sleep(120)

    lake = Lake.open(sys.argv[1])
    spark = ls.session("local[2]", {"spark.ui.enabled": "false"})
    df = spark.range(0, 50000).selectExpr("id AS k", "id % 7 AS v")
    ls.write(df, lake.pool("p"), partitions=2, spark=spark, _hook=slow)
    print("committed", flush=True)
    """
)


def test_killed_driver_leaves_no_visible_change(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", key="k")
    pool.load([pa.table({"k": [1, 2, 3], "v": [0, 0, 0]})])
    head = pool.resolve()
    before = pool.scan()
    data = Path(lake.storage.local_path(f"{pool.id}/data") or "")
    existing = set(data.iterdir())
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.Popen(
        [sys.executable, str(script), lake.uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            new = [p for p in data.iterdir() if p not in existing and p.suffix == ".parquet"]
            if new:
                break
            assert proc.poll() is None, "the driver ended before writing anything"
            time.sleep(0.2)
        else:
            pytest.fail("the job wrote no object in time")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            assert b"committed" not in proc.stdout.read()
            proc.stdout.close()
    lake = Lake.open(lake.uri)
    pool = lake.pool("p")
    assert pool.resolve() == head
    assert pool.scan().equals(before)
    assert list(lake.verify()) == []
    # what the killed job uploaded is unreferenced: vacuum reclaims it
    report = pool.vacuum(grace=dt.timedelta(0))
    removed = {Path(p).name for p, _ in report.removed}
    assert {p.name for p in new} <= removed
    assert pool.scan().equals(before) and list(lake.verify()) == []
